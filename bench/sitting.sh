#!/bin/bash
# sitting.sh — every benchmark figure the README reports, measured in one sitting on this machine
# (12–15 minutes on 2 cores, up to 20 on a slower VM; leave the machine otherwise idle).
#
#   bench/sitting.sh OUT_DIR
#
# Needs the native build in build/, the wasm build in build-wasm/ (scripts/build.sh), and
# `npm ci` in tests/browser/ and bench/ (scripts/test.sh and the README's anchors paragraph).
# Each benchmark writes OUT_DIR/NN_name.txt; OUT_DIR/00_env.txt records the commit, the CPU and
# the load average between the steps (the machine's own load shows there).
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:?usage: bench/sitting.sh OUT_DIR}
mkdir -p "$out"
env_log() { { date -u '+%F %T UTC'; uptime; } >> "$out/00_env.txt"; }
{
  git log --oneline -1
  lscpu | grep -E 'Model name|CPU family|^Model:'
  echo "cores: $(nproc)"
  echo "chromium: $(/usr/bin/chromium --version 2>/dev/null || echo none)"
  echo "node: $(node --version)"
} > "$out/00_env.txt"
env_log
relaxed=(env VITLENS_WASM_VARIANT=relaxed node --no-experimental-fetch --experimental-wasm-relaxed-simd)
single='transformer-attribution,raw-attention,rollout,attn-gradcam,grad-rollout,partial-lrp,lrp,attnlrp,saliency,grad-x-input'

./build/vitlens bench models/vitlens-scenes.vitl --methods --iters 30 > "$out/01_native_shipped.txt" 2>&1
./build/vitlens bench deit-tiny --methods --iters 3 > "$out/02_native_deit.txt" 2>&1
"${relaxed[@]}" bench/node_bench.mjs models/vitlens-scenes.vitl --methods --iters 15 > "$out/03_node_shipped.txt" 2>&1
"${relaxed[@]}" bench/node_bench.mjs deit-tiny --iters 5 --methods="$single" > "$out/04_node_deit.txt" 2>&1
env_log
node tests/browser/measure.mjs --runs 9 --rounds 15 > "$out/05_page_plain.txt" 2>&1
node tests/browser/measure.mjs --isolate --runs 9 --rounds 15 > "$out/06_page_isolated.txt" 2>&1
env_log
node --no-experimental-fetch bench/threads_bench.mjs models/vitlens-scenes.vitl --rounds 9 > "$out/07_threads_shipped.txt" 2>&1
node --no-experimental-fetch bench/threads_bench.mjs deit-tiny --rounds 3 > "$out/08_threads_deit.txt" 2>&1
node --no-experimental-fetch --experimental-wasm-relaxed-simd build-wasm/tests/vitlens_tests_relaxed.js '[gemm-bench]' \
  > "$out/09_gemm.txt" 2>&1
env_log
node bench/anchors.mjs --rounds 3 > "$out/10_anchors.txt" 2>&1
env_log
node bench/vitb_chromium.mjs --rounds 2 > "$out/11_vitb.txt" 2>&1
node bench/vitb_chromium.mjs --isolate --rounds 1 > "$out/12_vitb_isolated.txt" 2>&1
env_log
node bench/switch_ab.mjs --pages 4 --clicks 8 > "$out/13_switch_plain.txt" 2>&1
node bench/switch_ab.mjs --isolate --pages 4 --clicks 8 > "$out/14_switch_isolated.txt" 2>&1
env_log
