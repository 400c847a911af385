#!/usr/bin/env bash
# install-deps.sh — the Debian 12 packages vitlens builds and tests with (idempotent).
set -euo pipefail
SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi

packages=(
  cmake ninja-build g++ pkg-config
  libeigen3-dev libstb-dev catch2 nlohmann-json3-dev   # header-only C++ dependencies
  emscripten                                          # the wasm toolchain (3.1.6, clang-14)
  dataset-fashion-mnist                               # training/test data for the scenes
)
if ! command -v node > /dev/null; then packages+=(nodejs); fi

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2> /dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ "${#missing[@]}" -gt 0 ]; then
  echo "installing: ${missing[*]}"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi
