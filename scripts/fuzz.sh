#!/usr/bin/env bash
# fuzz.sh — build the libFuzzer targets (clang-14, ASan + UBSan) and fuzz each parser, one target
# at a time, on a corpus that persists between sessions; each run is logged in fuzz/runs.md.
#
#   usage: scripts/fuzz.sh [options] [TARGET...]        targets: model safetensors npy image
#     -t, --seconds S   fuzz each target for S seconds (default 60)
#     -n, --runs N      fuzz each target for N runs instead (libFuzzer -runs=N)
#     -c, --corpus DIR  the persistent corpus, one directory per target (DIR/<target>/); default
#                       $VITLENS_FUZZ_CORPUS, else fuzz-corpus/ beside the repository (for a
#                       worktree /work/wt-x that is /work/fuzz-corpus)
#     --merge           after fuzzing, minimise each target's corpus (libFuzzer -merge=1)
#     --no-build        use the fuzz targets and the CLI as they are
#     --no-log          do not append the runs to fuzz/runs.md
#     --totals          print the runs so far per target (from fuzz/runs.md) and exit
#
# The corpus is not in the repository (it grows to megabytes); the seeds are rebuilt every time
# from the test fixtures in build-fuzz/seeds/<target>/ (read, never written, by libFuzzer): every
# variant family of tests/fixtures/variants/ (config.json + '\0' + model.safetensors for
# safetensors; for model, the version-1 files of tests/fixtures/model_file/ and version-2 files
# imported here by build/vitlens, f32 and int8), the .npy files and images of the fixtures. Each target gets a dictionary
# (build-fuzz/dict/<target>.dict): fuzz/<target>.dict plus, for model and safetensors, every
# string literal of the reader (model_file.cpp, import.cpp): the keys and tensor names.
# Findings (crash-*, leak-*, oom-*, timeout-*) land in build-fuzz/findings/.
set -euo pipefail
cd "$(dirname "$0")/.."
repo="$PWD"

seconds=60
runs=""
corpus="${VITLENS_FUZZ_CORPUS:-$(dirname "$repo")/fuzz-corpus}"
merge=0
build=1
log=1
targets=()
while [ $# -gt 0 ]; do
  case "$1" in
    -t|--seconds) seconds="$2"; shift 2 ;;
    -n|--runs) runs="$2"; shift 2 ;;
    -c|--corpus) corpus="$2"; shift 2 ;;
    --merge) merge=1; shift ;;
    --no-build) build=0; shift ;;
    --no-log) log=0; shift ;;
    --totals) sed -n '/^<!-- totals/,/^<!-- \/totals/p' fuzz/runs.md | grep '^|'; exit 0 ;;
    -h|--help) sed -n '2,24p' "$0"; exit 0 ;;
    [0-9]*) seconds="$1"; shift ;;  # the old form: scripts/fuzz.sh SECONDS [TARGET...]
    *) targets+=("$1"); shift ;;
  esac
done
[ "${#targets[@]}" -gt 0 ] || targets=(model safetensors npy image)

# fuzz/runs.md: the totals block (between its two marker lines) recomputed from the log rows
# "| date | target | runs | seconds | exec/s | CPU | new findings | commit |".
write_totals() {
  awk -F' [|] ' '
    NR == FNR { if ($0 ~ /^[|] 20[0-9][0-9]-/) { t = $2; if (!(t in runs)) order[++n] = t;
                  runs[t] += $3; sessions[t] += 1; rate[t] = $5; date[t] = substr($1, 3); cpu[t] = $6; found[t] += $7 }
                next }
    /^<!-- totals/ { print; skip = 1; next }
    /^<!-- [/]totals/ { print "| target | runs so far | sessions | exec/s (last) | last run | CPU (last) | findings |";
                        print "|---|---|---|---|---|---|---|";
                        for (i = 1; i <= n; ++i) { t = order[i];
                          printf "| %s | %d | %d | %s | %s | %s | %d |\n", t, runs[t], sessions[t], rate[t], date[t], cpu[t], found[t] }
                        skip = 0 }
    !skip { print }' fuzz/runs.md fuzz/runs.md > fuzz/runs.md.new
  mv fuzz/runs.md.new fuzz/runs.md
}

# fuzz/runs.md: a new row goes right after the last row of the log table (not at the end of the
# file, where the findings section is).
append_log_row() {
  awk -v row="$1" '
    NR == FNR { if ($0 ~ /^[|] 20[0-9][0-9]-/) last = FNR; next }
    { print } FNR == last { print row }
    END { if (!last) print row }' fuzz/runs.md fuzz/runs.md > fuzz/runs.md.new
  mv fuzz/runs.md.new fuzz/runs.md
}

if [ "$build" = 1 ]; then
  launcher=()
  if command -v ccache > /dev/null; then
    launcher=(-DCMAKE_C_COMPILER_LAUNCHER=ccache -DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
    export CCACHE_BASEDIR="${CCACHE_BASEDIR:-$(dirname "$repo")}"
  fi
  CC=clang-14 CXX=clang++-14 cmake -S . -B build-fuzz -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DVITLENS_FUZZ=ON -DVITLENS_TESTS=OFF -DVITLENS_NATIVE_ARCH=OFF "${launcher[@]}" > /dev/null
  cmake --build build-fuzz --target fuzz
  cmake -S . -B build -G Ninja "${launcher[@]}" > /dev/null && cmake --build build --target vitlens > /dev/null
fi

# ---- seeds (rebuilt from the fixtures every time) ----------------------------------------------
seeds=build-fuzz/seeds
rm -rf "$seeds" && mkdir -p "$seeds"/{model,safetensors,npy,image} build-fuzz/findings build-fuzz/dict
# The variant fixtures cover every family (and non-square, 1-channel and resized models) in
# 20–55 kB each; the engine fixtures' checkpoints (135–175 kB) are left out: libFuzzer never grows
# an input past the largest seed, and inputs above 128 kB cost an mmap and page faults per run
# under ASan (677 against 391 exec/s for the safetensors target, and no less coverage).
for dir in tests/fixtures/variants/*/; do
  case=$(basename "$dir")
  { cat "$dir/config.json"; printf '\0'; cat "$dir/model.safetensors"; } > "$seeds/safetensors/variant-$case"
  ./build/vitlens import "$dir/model.safetensors" --config "$dir/config.json" -o "$seeds/model/variant-$case.vitl" > /dev/null
  ./build/vitlens import "$dir/model.safetensors" --config "$dir/config.json" -o "$seeds/model/variant-$case-int8.vitl" --quant int8 > /dev/null
done
cp tests/fixtures/model_file/*.vitl "$seeds/model/"
find tests/fixtures -name '*.npy' -size -64k -exec cp {} "$seeds/npy/" \;
find tests/fixtures models -type f \( -name '*.png' -o -name '*.jpg' -o -name '*.bmp' \) -size -64k -exec cp {} "$seeds/image/" \; 2> /dev/null || true

# ---- dictionaries -------------------------------------------------------------------------------
literals() {  # every "identifier-like" string literal of a source file, as a quoted JSON string
  grep -oh '"[A-Za-z_][A-Za-z0-9_.+]*"' "$@" | sort -u | sed 's/^"\(.*\)"$/"\\"\1\\""/'
}
for t in model safetensors npy image; do
  dict=build-fuzz/dict/$t.dict
  grep -v '^#' "fuzz/$t.dict" > "$dict"
  case $t in
    model) literals core/src/io/model_file.cpp core/src/model/config.cpp core/src/model/model.cpp >> "$dict" ;;
    safetensors) literals core/src/io/import.cpp core/src/io/safetensors.cpp >> "$dict" ;;
  esac
done

# ---- fuzzing, one target at a time --------------------------------------------------------------
# ASan holds freed memory in a quarantine (256 MB by default) to catch uses after free; a run that
# allocates and frees a few hundred kilobytes then gets fresh pages (a page fault each) on every
# run. 16 MB still catches a use of memory freed within the same run, and is ~15 % faster.
export ASAN_OPTIONS="${ASAN_OPTIONS:-quarantine_size_mb=16}"
cpu=$(lscpu | sed -n 's/^Model name: *//p' | head -1)
commit=$(git rev-parse --short HEAD)
for t in "${targets[@]}"; do
  mkdir -p "$corpus/$t"
  if [ -n "$runs" ]; then limit=(-runs="$runs"); what="$runs runs"; else limit=(-max_total_time="$seconds"); what="${seconds}s"; fi
  echo "== fuzz_$t for $what, corpus $corpus/$t ($(ls "$corpus/$t" | wc -l) inputs)"
  # findings are counted per target (their names start with "$t-"): another target fuzzing at the
  # same time writes into the same folder
  before=$(ls build-fuzz/findings | grep -c "^$t-" || true)
  out=build-fuzz/fuzz_$t.log
  start=$(date +%s)
  status=0
  ./build-fuzz/fuzz/fuzz_"$t" "$corpus/$t" "$seeds/$t" "${limit[@]}" -dict="build-fuzz/dict/$t.dict" -timeout=25 \
    -artifact_prefix="build-fuzz/findings/$t-" -print_final_stats=1 > "$out" 2>&1 || status=$?
  elapsed=$(( $(date +%s) - start ))
  done_runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$out")
  done_runs=${done_runs:-0}
  rate=$(( done_runs / (elapsed > 0 ? elapsed : 1) ))
  found=$(( $(ls build-fuzz/findings | grep -c "^$t-" || true) - before ))
  grep -E "^#[0-9]+[[:space:]]+DONE|ERROR|SUMMARY|stat::peak_rss_mb" "$out" || true
  echo "   $done_runs runs in $elapsed s: $rate exec/s, exit $status, $found new finding(s)"
  if [ "$log" = 1 ]; then
    row=$(printf '| %s | %s | %s | %s | %s | %s | %s | %s |' "$(date -u +%Y-%m-%d)" "$t" "$done_runs" "$elapsed" \
      "$rate" "$cpu" "$found" "$commit")
    append_log_row "$row"
    write_totals
  fi
  if [ "$merge" = 1 ]; then
    merged="$corpus/$t.merged"
    rm -rf "$merged" && mkdir -p "$merged"
    ./build-fuzz/fuzz/fuzz_"$t" -merge=1 "$merged" "$corpus/$t" -timeout=25 > "build-fuzz/merge_$t.log" 2>&1
    echo "   merged: $(ls "$corpus/$t" | wc -l) → $(ls "$merged" | wc -l) inputs, $(du -sh "$merged" | cut -f1)"
    rm -rf "$corpus/$t" && mv "$merged" "$corpus/$t"
  fi
done
ls build-fuzz/findings
