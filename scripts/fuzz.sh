#!/usr/bin/env bash
# fuzz.sh — build the libFuzzer targets (clang-14, ASan + UBSan) and run each for SECONDS
# (default 60) on seed corpora made from the test fixtures. Findings land in build-fuzz/findings/.
#   usage: scripts/fuzz.sh [SECONDS] [TARGET...]     targets: model safetensors npy image
set -euo pipefail
cd "$(dirname "$0")/.."
seconds="${1:-60}"
shift || true
targets=("$@")
[ "${#targets[@]}" -gt 0 ] || targets=(model safetensors npy image)

CC=clang-14 CXX=clang++-14 cmake -S . -B build-fuzz -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DVITLENS_FUZZ=ON -DVITLENS_TESTS=OFF -DVITLENS_NATIVE_ARCH=OFF > /dev/null
cmake --build build-fuzz --target fuzz
cmake -S . -B build -G Ninja > /dev/null && cmake --build build --target vitlens > /dev/null

seeds=build-fuzz/seeds
rm -rf "$seeds" && mkdir -p "$seeds"/{model,safetensors,npy,image} build-fuzz/findings
fx=tests/fixtures/engine
for shape in nonsquare gray; do
  ./build/vitlens import "$fx/$shape/model_timm.safetensors" --config "$fx/$shape/config.json" -o "$seeds/model/$shape.vitl" > /dev/null
  ./build/vitlens import "$fx/$shape/model_timm.safetensors" --config "$fx/$shape/config.json" -o "$seeds/model/$shape-int8.vitl" --quant int8 > /dev/null
  for naming in timm hf; do
    { cat "$fx/$shape/config.json"; printf '\0'; cat "$fx/$shape/model_$naming.safetensors"; } > "$seeds/safetensors/$shape-$naming"
  done
  cp "$fx/$shape"/*.npy "$seeds/npy/" 2> /dev/null || true
done
find tests/fixtures -name '*.npy' -size -64k -exec cp {} "$seeds/npy/" \;
find tests/fixtures models -type f \( -name '*.png' -o -name '*.jpg' -o -name '*.bmp' \) -size -64k -exec cp {} "$seeds/image/" \; 2> /dev/null || true

for t in "${targets[@]}"; do
  echo "== fuzz_$t for ${seconds}s"
  mkdir -p "build-fuzz/corpus/$t"
  ./build-fuzz/fuzz/fuzz_"$t" "build-fuzz/corpus/$t" "$seeds/$t" -max_total_time="$seconds" -rss_limit_mb=4096 \
    -max_len=1048576 -artifact_prefix="build-fuzz/findings/$t-" -print_final_stats=1 2>&1 |
    grep -E "stat::number_of_executed_units|stat::peak_rss_mb|ERROR|SUMMARY|Done" || true
done
ls build-fuzz/findings
