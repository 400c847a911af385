#!/usr/bin/env bash
# start.sh — set up, build, and serve the page on http://127.0.0.1:PORT/ (default 8080).
#   scripts/start.sh [--port P] [--isolate]     (--isolate: COOP/COEP headers, cross-origin isolated)
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
exec node web/serve.mjs "$@"
