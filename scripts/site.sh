#!/usr/bin/env bash
# site.sh — assemble the page as plain files for any static host (no special headers needed):
#   scripts/site.sh [OUT]   (default build-site/; run scripts/build.sh first)
# The layout is the one web/serve.mjs serves: OUT/ = web/, OUT/wasm/ = the wasm module,
# OUT/models/ = the shipped model and its gallery.
set -euo pipefail
cd "$(dirname "$0")/.."
out="${1:-build-site}"
wasm="${VITLENS_WASM_DIR:-build-wasm/wasm}"
for f in "$wasm/vitlens.js" "$wasm/vitlens.wasm"; do
  [ -f "$f" ] || { echo "missing $f: run scripts/build.sh first" >&2; exit 1; }
done
rm -rf "$out"
mkdir -p "$out/wasm" "$out/models"
cp web/*.html web/*.js web/*.css "$out/"
cp -r web/views "$out/"
cp "$wasm/vitlens.js" "$wasm/vitlens.wasm" "$out/wasm/"
# The pthreads build: used only where the host sends COOP/COEP (cross-origin isolation). The
# relaxed-SIMD builds: used where the browser supports relaxed SIMD (web/simd.js).
for f in vitlens-mt.js vitlens-mt.wasm vitlens-mt.worker.js vitlens-relaxed.js vitlens-relaxed.wasm \
  vitlens-mt-relaxed.js vitlens-mt-relaxed.wasm vitlens-mt-relaxed.worker.js; do
  if [ -f "$wasm/$f" ]; then cp "$wasm/$f" "$out/wasm/"; fi
done
if [ -f models/vitlens-scenes.vitl ]; then cp models/vitlens-scenes.vitl "$out/models/"; fi
if [ -d models/gallery ]; then cp -r models/gallery "$out/models/"; fi
echo "wrote $out/ ($(du -sh "$out" | cut -f1)); serve it with any static server, e.g. python3 -m http.server -d $out"
