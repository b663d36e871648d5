#!/bin/bash
# Two builds alternated in the layouts of bench/tier_share_runs.sh, on one 16-CPU host: for each
# size, each build's run of the layouts in ORDER (before, after, after, before by default), so that
# a drift of the host shows as a spread within a build rather than a difference between builds.
#   SIZES (default "16384 131072"): the sizes, as tier_share_runs.sh's SIZE.
#   LAYOUTS (default "coordinator"): the layouts, as tier_share_runs.sh's ONLY.
# Appends to OUT_DIR/before/cpu-layouts.jsonl and OUT_DIR/after/cpu-layouts.jsonl and prints each
# build's medians per layout.
#   [SIZES=...] [LAYOUTS=...] [ORDER=...] bench/tier_share_alternation.sh BEFORE_DIR AFTER_DIR [OUT_DIR]
# Each DIR holds psync-bench, psync-coordinator and psync-agent (their shared libraries in
# DIR/../lib or on LD_LIBRARY_PATH).
set -u
if [ $# -lt 2 ]; then sed -n 2,12p "$0" >&2; exit 2; fi
here=$(cd "$(dirname "$0")" && pwd)
out=${3:-${OUT:-/tmp}}
for size in ${SIZES:-16384 131072}; do
  for build in ${ORDER:-before after after before}; do
    case "$build" in
      before) dir=$1 ;;
      after) dir=$2 ;;
      *) echo "ORDER: no build '$build'" >&2; exit 2 ;;
    esac
    SIZE=$size ONLY="${LAYOUTS:-coordinator}" ROUNDS=1 "$here/tier_share_runs.sh" "$dir" \
      "$out/$build" | grep ' rc=' | sed "s/^/$build: /"
  done
done
for build in before after; do
  echo "== $build"
  python3 "$here/cpu_layout_summary.py" "$out/$build/cpu-layouts.jsonl"
done
