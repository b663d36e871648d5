#!/usr/bin/env bash
# Alternates two builds of release_path_bench (before and after a change) ROUNDS times and prints
# each benchmark's median and minimum per build: on a shared machine whose speed drifts, only
# alternated runs compare.
#   bench/alternate_release_path.sh FILTER ROUNDS BEFORE_BINARY AFTER_BINARY
# e.g. bench/alternate_release_path.sh 'BM_ReleasingBatch/(256|1024)/0' 4 /tmp/old/release_path_bench \
#        bazel-bin/bench/release_path_bench
set -euo pipefail
if [ $# -ne 4 ]; then sed -n 2,7p "$0" >&2; exit 2; fi
filter=$1 rounds=$2 before=$3 after=$4
raw=$(mktemp)
trap 'rm -f "$raw"' EXIT
for _ in $(seq "$rounds"); do
  for bin in "$before" "$after"; do
    "$bin" --benchmark_filter="$filter" 2>/dev/null | awk -v bin="$bin" '/^BM_/ {print bin, $1, $2, $3}'
  done
done | tee "$raw"
python3 - "$raw" <<'PY'
import collections, statistics, sys
runs = collections.defaultdict(list)
for line in open(sys.argv[1]):
    binary, name, value, unit = line.split()
    runs[(name, binary)].append((float(value), unit))
for (name, binary), values in sorted(runs.items()):
    v = [x for x, _ in values]
    print("%-40s %-40s median %10.1f min %10.1f %s n=%d" % (
        name, binary[-40:], statistics.median(v), min(v), values[0][1], len(v)))
PY
