#!/usr/bin/env bash
# build.sh — build the native core, CLI and tests (build/) and the wasm module and tests
# (build-wasm/) from the same sources.
set -euo pipefail
cd "$(dirname "$0")/.."
jobs="$(nproc)"
# ccache, when installed, shares compiled objects between build trees (e.g. git worktrees).
launcher=()
if command -v ccache > /dev/null; then
  launcher=(-DCMAKE_C_COMPILER_LAUNCHER=ccache -DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
  export CCACHE_BASEDIR="${CCACHE_BASEDIR:-$(dirname "$PWD")}"
fi

cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release "${launcher[@]}" > /dev/null
cmake --build build -j "$jobs"

# Every emcc link needs Debian's node modules (acorn) on NODE_PATH; CTest must run node 20 with
# --no-experimental-fetch (see ../shared/TOOLCHAIN.md).
export NODE_PATH=/usr/share/nodejs
emcmake cmake -S . -B build-wasm -G Ninja -DCMAKE_BUILD_TYPE=Release "${launcher[@]}" \
  -DCMAKE_CROSSCOMPILING_EMULATOR="$(command -v node);--no-experimental-fetch" \
  -DVITLENS_NATIVE_BUILD_DIR="$PWD/build" > /dev/null
cmake --build build-wasm -j "$jobs"
