#!/usr/bin/env bash
# cli_eval.sh VITLENS SOURCE_DIR [serial|parallel] — `vitlens eval` through its command line on a
# tiny labelled image folder made from 10 test scenes (`vitlens scenes`) and the shipped model:
# class folders by name and index, labels.csv, masks, an undecodable image (skipped and listed),
# three shards (one after another, or through GNU parallel as the README shows) merged into
# reports equal byte for byte to the unsharded run's, and the errors of foreign, missing,
# repeated, unfinished and overlapping shards, an unknown class folder and a missing mask; the
# metrics of issue 16 (ROAD, SRG, mass/rank accuracy, the randomisation check) in the reports and
# the merge, and a folder of a run before them resumed into the same reports. The parallel mode
# stops after the merge.
# Exit 77 (CTest: skipped) without Fashion-MNIST, the shipped model or, for `parallel`, GNU parallel.
set -euo pipefail
V=$1
SRC=$2
MODE=${3:-serial}
MODEL=$SRC/models/vitlens-scenes.vitl
if [ ! -f "$MODEL" ] || [ ! -f /usr/share/datasets/fashion-mnist/t10k-images-idx3-ubyte.gz ]; then
  echo "skipped: needs models/vitlens-scenes.vitl and dataset-fashion-mnist"
  exit 77
fi
if [ "$MODE" = parallel ] && ! command -v parallel > /dev/null; then
  echo "skipped: GNU parallel is not installed (scripts/install-deps.sh --test)"
  exit 77
fi
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT

fail() {
  echo "FAILED: $*" >&2
  exit 1
}
# expect_error TEXT ARGS...: vitlens ARGS must fail with TEXT in its message.
expect_error() {
  local text=$1
  shift
  if "$V" "$@" > "$T/out.log" 2> "$T/err.log"; then fail "accepted: vitlens $*"; fi
  grep -qF -- "$text" "$T/err.log" || fail "vitlens $*: expected '$text', got: $(cat "$T/err.log")"
}

# The folder: scenes 0…9 under class folders Trouser (by name), 3 (by index) and Bag, each with
# its first item's mask; labels.csv lists the same files and classes.
"$V" scenes --split test --n 10 --seed 5 --out "$T/raw" > /dev/null
echo "file,class" > "$T/labels.csv"
i=0
for f in "$T"/raw/scene_????.png; do
  b=$(basename "$f" .png)
  case $((i % 3)) in 0) cls=Trouser ;; 1) cls=3 ;; *) cls=Bag ;; esac
  mkdir -p "$T/images/$cls" "$T/masks/$cls"
  cp "$f" "$T/images/$cls/$b.png"
  cp "$T/raw/${b}_mask_0.png" "$T/masks/$cls/$b.png"
  echo "$cls/$b.png,$cls" >> "$T/labels.csv"
  i=$((i + 1))
done
printf 'not a PNG' > "$T/images/Bag/broken.png"
cp "$T/raw/scene_0000_mask_0.png" "$T/masks/Bag/broken.png"
echo "Bag/broken.png,Bag" >> "$T/labels.csv"

METHODS="transformer-attribution,rollout:head-fusion=max:discard-ratio=0.9,random,oracle"
# ROAD and the randomisation check on the first samples only: the script runs the benchmark about
# ten times, and under ASan each full run took half a minute.
base=(eval "$MODEL" --no-compare --images "$T/images" --masks "$T/masks" --methods "$METHODS" --no-timings --threads 1)
# (samples 0…4 in sorted order hold the broken image: the randomisation covers 4)
common=("${base[@]}" --road 6 --randomisation 5)
"$V" "${common[@]}" --out "$T/full" > /dev/null 2>&1
grep -qF "11 labelled images: 10 for the perturbation tests, 10 with a mask for the segmentation test, 1 skipped" \
  "$T/full/results.md" || fail "results.md does not count the skipped image: $(head -5 "$T/full/results.md")"
grep -qF "Bag/broken.png" "$T/full/results.md" || fail "results.md does not name the skipped image"
grep -qF "| rollout:discard-ratio=0.9:head-fusion=max |" "$T/full/results.md" || fail "no canonical spec row"
for text in "| ROAD LeRF ↑ | ROAD MoRF ↓ |" "| SRG black ↑ | SRG ROAD ↑ | Mass acc. ↑ | Rank acc. ↑ |" \
  "**Model randomisation** (Adebayo et al. 2018) on 4 samples" "[road_morf.svg](road_morf.svg)"; do
  grep -qF "$text" "$T/full/results.md" || fail "results.md lacks '$text'"
done
[ -f "$T/full/road_lerf.svg" ] || fail "no road_lerf.svg"
[ "$(wc -l < "$T/full/scenes.jsonl")" = 44 ] || fail "expected 11 × 4 records"

# Three shards, then merged: the same reports byte for byte.
if [ "$MODE" = parallel ]; then
  parallel --halt now,fail=1 "$V" "${common[@]}" --shard {}/3 --out "$T/shard{}" ::: 0 1 2 > /dev/null 2>&1
else
  for s in 0 1 2; do "$V" "${common[@]}" --shard $s/3 --out "$T/shard$s" > /dev/null 2>&1; done
fi
"$V" eval merge "$T/merged" "$T/shard0" "$T/shard1" "$T/shard2" --no-timings > /dev/null
for f in results.md results.csv perturbation_{positive,negative}_{predicted,target}.svg road_{morf,lerf}.svg; do
  cmp "$T/full/$f" "$T/merged/$f" || fail "merged $f differs from the unsharded run's"
done
if [ "$MODE" = parallel ]; then
  echo "ok: parallel"
  exit 0
fi
# The merged folder is an unsharded run's: resuming it computes nothing.
"$V" "${common[@]}" --out "$T/merged" > "$T/resume.log" 2>&1
grep -qF "44 results already there" "$T/resume.log" || fail "merged folder does not resume: $(cat "$T/resume.log")"
[ "$(wc -l < "$T/merged/scenes.jsonl")" = 44 ] || fail "resuming the merged folder added records"

# A folder of a run before ROAD and the randomisation check (records without them, run.json
# without their limits) resumes: its 40 records are recomputed, the reports are a new run's.
cp -r "$T/full" "$T/older"
sed -i -E 's/,"road_top":\[\[[0-9,]*\],\[[0-9,]*\]\]//; s/,"randomisation":\{[^}]*\}//; s/,"scores":\{[^}]*\}//' \
  "$T/older/scenes.jsonl"
sed -i -E '/"(road|randomisation)":/d' "$T/older/run.json"
! grep -qE 'road_top|randomisation|scores' "$T/older/scenes.jsonl" || fail "the older records still hold new metrics"
"$V" eval merge "$T/older-merged" "$T/older" --no-timings > /dev/null || fail "an older folder does not merge"
grep -qF "ROAD" "$T/older-merged/results.md" && fail "an older folder's report shows ROAD"
"$V" "${common[@]}" --out "$T/older" > "$T/older.log" 2>&1 || fail "an older folder does not resume: $(cat "$T/older.log")"
[ "$(wc -l < "$T/older/scenes.jsonl")" = 84 ] || fail "expected 44 old + 40 recomputed records"
cmp "$T/full/results.csv" "$T/older/results.csv" || fail "the resumed older folder gives other figures"

# labels.csv naming the same files and classes: the same figures.
"$V" eval "$MODEL" --no-compare --images "$T/images" --labels "$T/labels.csv" --masks "$T/masks" \
  --methods "$METHODS" --no-timings --road 6 --randomisation 5 --out "$T/csv" > /dev/null 2>&1
cmp "$T/full/results.csv" "$T/csv/results.csv" || fail "labels.csv gives other figures than the folders"

# Merge errors.
expect_error "shard 2/3 is missing" eval merge "$T/m1" "$T/shard0" "$T/shard1"
expect_error "is given twice" eval merge "$T/m2" "$T/shard0" "$T/shard1" "$T/shard1" "$T/shard2"
expect_error "already holds benchmark results" eval merge "$T/merged" "$T/shard0" "$T/shard1" "$T/shard2"
"$V" eval "$MODEL" --no-compare --images "$T/images" --masks "$T/masks" --methods rollout --no-timings \
  --road 6 --randomisation 5 --shard 2/3 --out "$T/other" > /dev/null 2>&1
expect_error "other --methods, --n" eval merge "$T/m3" "$T/shard0" "$T/shard1" "$T/other"
"$V" "${base[@]}" --road 6 --randomisation 3 --shard 2/3 --out "$T/fewer" > /dev/null 2>&1
expect_error "--randomisation: rerun the shards" eval merge "$T/m8" "$T/shard0" "$T/shard1" "$T/fewer"
"$V" eval "$MODEL" --no-compare --images "$T/images" --methods rollout --no-timings --road 6 --randomisation 5 \
  --shard 2/3 --out "$T/nomask" \
  > /dev/null 2>&1
expect_error "not shards of one benchmark" eval merge "$T/m4" "$T/shard0" "$T/shard1" "$T/nomask"
cp -r "$T/shard0" "$T/over0"
cat "$T/shard1/scenes.jsonl" >> "$T/over0/scenes.jsonl"
expect_error "the shards overlap" eval merge "$T/m5" "$T/over0" "$T/shard1" "$T/shard2"
cp -r "$T/shard1" "$T/short1"
sed -i '$d' "$T/short1/scenes.jsonl"
expect_error "has no result for sample" eval merge "$T/m6" "$T/shard0" "$T/short1" "$T/shard2"
expect_error "not a folder written by vitlens eval" eval merge "$T/m7" "$T/shard0" "$T/raw"

# Run errors.
expect_error "holds results of another" "${common[@]}" --shard 1/3 --out "$T/shard0"
expect_error "--shard takes I/N" "${common[@]}" --shard 3/3 --out "$T/bad"
expect_error "take a sample count" "${base[@]}" --randomisation -1 --out "$T/bad"
mkdir "$T/images/Cow"
expect_error "Cow names no class" "${common[@]}" --out "$T/bad"
rmdir "$T/images/Cow"
rm "$T/masks/3/scene_0001.png"
expect_error "no mask" "${common[@]}" --out "$T/bad"
expect_error "needs object masks" eval "$MODEL" --no-compare --images "$T/images" --methods oracle --out "$T/bad"
expect_error "do not apply to --images" eval "$MODEL" --images "$T/images" --seed 3 --out "$T/bad"
echo "ok: $MODE"
