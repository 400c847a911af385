#!/usr/bin/env bash
# test.sh — install what is missing, build everything, and run every test:
# the native Catch2 suite, the same suite under AddressSanitizer + UndefinedBehaviorSanitizer,
# the suite compiled to wasm under node, the node tests of the wasm module, and the page's
# browser tests (playwright-core driving Debian's chromium).
set -euo pipefail
cd "$(dirname "$0")/.."
# Each phase's start, so that a slow run (CI allows 90 minutes) shows where its time went.
phase() { echo "== test.sh: $* ($(date -u +%T), ${SECONDS} s in)"; }
phase install; scripts/install-deps.sh --test
phase build; scripts/build.sh
phase native tests; ctest --test-dir build --output-on-failure -j "$(nproc)"

phase sanitizer build and tests
# clang-14 (Emscripten's own clang, with its sanitizer runtimes) at -O1 -g1 (line tables for the
# reports' stack traces) with -march=native (the code paths the native tests run). The same ASan +
# UBSan checks as GCC 12's, at less cost: on one 2-core machine the build took 322 s against GCC's
# 425 and the tests 201 s against 379, most of which is Eigen's GEMM kernel, checked at every load
# (docs/performance.md, 2026-12-04, second session).
CC=clang-14 CXX=clang++-14 cmake -S . -B build-asan -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DVITLENS_SANITIZE=ON \
  -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O1 -g1 -DNDEBUG" -DCMAKE_C_FLAGS_RELWITHDEBINFO="-O1 -g1 -DNDEBUG" \
  > /dev/null
cmake --build build-asan -j "$(nproc)"
ctest --test-dir build-asan --output-on-failure -j "$(nproc)"

# The five wasm suites are independent processes (their scratch files are tagged per process).
phase wasm tests; ctest --test-dir build-wasm --output-on-failure -j "$(nproc)"

phase browser tests
(cd tests/browser && npm ci --no-audit --no-fund --loglevel=error)
node --test tests/browser/
phase done
