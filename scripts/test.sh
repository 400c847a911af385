#!/usr/bin/env bash
# test.sh — install what is missing, build everything, and run every test:
# the native Catch2 suite, the same suite compiled to wasm under node, and the node API tests.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
scripts/build.sh
ctest --test-dir build --output-on-failure -j "$(nproc)"
ctest --test-dir build-wasm --output-on-failure
