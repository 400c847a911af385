#!/usr/bin/env bash
# start.sh — set up, build, and run the shipped model on a bundled sample.
# (The static page is not built yet; until it is, this shows the CLI on the shipped model.)
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
scripts/build.sh
model=models/vitlens-scenes.vitl
sample=$(ls models/gallery/*.png 2> /dev/null | grep -v _mask_ | head -n 1 || true)
if [ -f "$model" ] && [ -n "$sample" ]; then
  ./build/vitlens info "$model"
  echo
  echo "prediction for $sample:"
  ./build/vitlens predict "$model" "$sample" --top 3
else
  echo "the shipped model is not in this checkout yet; the random DeiT-tiny-shaped model instead:"
  ./build/vitlens bench deit-tiny --iters 10
fi
