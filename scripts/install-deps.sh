#!/usr/bin/env bash
# install-deps.sh — the Debian 12 packages vitlens builds and tests with (idempotent).
# --test adds what only the tests need: chromium for the browser tests (driven by playwright-core
# from npm; no browser is ever downloaded), npm, GNU parallel (the sharded-benchmark test), and
# clang-14 with its sanitizer runtimes (the ASan + UBSan build).
set -euo pipefail
for_tests=0
if [ "${1:-}" = "--test" ]; then for_tests=1; fi
SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi

packages=(
  cmake ninja-build g++ pkg-config
  libeigen3-dev libstb-dev catch2 nlohmann-json3-dev   # header-only C++ dependencies
  emscripten                                          # the wasm toolchain (3.1.6, clang-14)
  clang-16                                            # the relaxed-SIMD GEMM; the threaded modules (wasm exceptions)
  dataset-fashion-mnist                               # training/test data for the scenes
)
if ! command -v node > /dev/null; then packages+=(nodejs); fi
if [ "$for_tests" = 1 ]; then
  packages+=(chromium parallel)  # parallel: the README's sharded benchmark, run by a ctest
  packages+=(clang-14 libclang-rt-14-dev)  # the ASan + UBSan build (and libFuzzer's, fuzz.sh)
  if ! command -v npm > /dev/null; then packages+=(npm); fi
fi

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2> /dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ "${#missing[@]}" -gt 0 ]; then
  echo "installing: ${missing[*]}"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi
