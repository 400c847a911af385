#!/usr/bin/env bash
# start.sh — set up, build, and serve the page on http://127.0.0.1:PORT/ (default 8080).
#   scripts/start.sh [--port P] [--plain]
# The page is served cross-origin isolated (COOP/COEP headers), so its worker runs the pthreads
# engine vitlens-mt.js; --plain serves it as a static host without those headers would
# (one thread, vitlens.js).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
scripts/build.sh
model=models/vitlens-scenes.vitl
if [ -f "$model" ]; then
  ./build/vitlens info "$model"
else
  echo "note: $model is not in this checkout; the page will say so and offer to load your own model."
fi
echo
args=(--isolate)
for a in "$@"; do
  if [ "$a" = --plain ]; then args=(); fi
done
for a in "$@"; do
  if [ "$a" != --plain ]; then args+=("$a"); fi
done
exec node web/serve.mjs "${args[@]}"
