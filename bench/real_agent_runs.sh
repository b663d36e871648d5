#!/bin/bash
# Real psync-agent processes of 8 ranks each, two arms alternated in one session on one host (A, B,
# B, A per workload), nothing pinned. K=2 optimizers, C=8 chunks, lazy acks, 20 steps of 300 ms:
#   paced: RANKS_PACED ranks (default 256), arrivals over 200 ms;
#   burst: RANKS_BURST ranks (default 1024), arrivals within 1 ms.
# An arm is LABEL=BIN_DIR or LABEL=BIN_DIR,AGENT_FLAGS (extra psync-agent flags, space-separated);
# BIN_DIR holds psync-bench, psync-coordinator and psync-agent (their shared libraries in BIN_DIR
# or on LD_LIBRARY_PATH). Appends psync-bench's JSON lines (labelled with the arm) to
# OUT_DIR/real-agents.jsonl and prints, per workload and arm, the medians over its runs.
#   bench/real_agent_runs.sh ARM_A ARM_B [OUT_DIR]
# e.g. bench/real_agent_runs.sh before=/tmp/before after=/tmp/after
#      bench/real_agent_runs.sh "window-0=$B,--flush_window=0" "window-20ms=$B,--flush_window=20ms"
set -u
if [ $# -lt 2 ]; then sed -n 2,13p "$0" >&2; exit 2; fi
out=${3:-${OUT:-/tmp}}
mkdir -p "$out"
run() {  # ARM RANKS psync-bench flags...
  local arm=$1 ranks=$2
  shift 2
  local label=${arm%%=*} spec=${arm#*=}
  local dir=${spec%%,*} extra=
  [ "$dir" != "$spec" ] && extra=${spec#*,}
  local bin
  bin=$(cd "$dir" && pwd)
  LD_LIBRARY_PATH=$bin:${LD_LIBRARY_PATH:-} timeout 240 "$bin/psync-bench" \
    --coordinator="$bin/psync-coordinator" --agent_binary="$bin/psync-agent" \
    --agents=$((ranks / 8)) --ranks="$ranks" \
    --agent_args="--target={coordinator} --listen=127.0.0.1:0 --port_file={port_file} $extra" \
    --optimizers=2 --chunks=8 --lazy_acks=true --floor=false --steps=20 --step_period_ms=300 \
    --label="$label" --json "$@" >>"$out/real-agents.jsonl" 2>>"$out/real-agents.err"
  echo "$label ranks $ranks $* rc=$?"
}
for workload in "${RANKS_PACED:-256} --spread_us=200000" "${RANKS_BURST:-1024} --spread_us=1000"; do
  # shellcheck disable=SC2086
  for arm in "$1" "$2" "$2" "$1"; do run "$arm" $workload; done
done
python3 - "$out/real-agents.jsonl" <<'PY'
import collections, json, statistics, sys
runs = collections.defaultdict(list)
for line in open(sys.argv[1]):
    r = json.loads(line)
    runs[(r["ranks"], r["system"])].append(r)
print("%-6s %-14s %2s %10s %10s %10s %12s %12s %s" % (
    "ranks", "arm", "n", "last p50", "last p99", "first p50", "coord us/ci", "agents us/ci",
    "exactly once"))
for (ranks, label), rs in sorted(runs.items()):
    med = lambda f: statistics.median(f(r) for r in rs)
    print("%-6d %-14s %2d %8.2fms %8.2fms %8.2fms %12.1f %12.1f %s" % (
        ranks, label, len(rs), med(lambda r: r["release_latency"]["p50_us"]) / 1e3,
        med(lambda r: r["release_latency"]["p99_us"]) / 1e3,
        med(lambda r: r["release_first_latency"]["p50_us"]) / 1e3,
        med(lambda r: r["coordinator"]["cpu_s_per_1m_checkins"]),
        med(lambda r: r["agents_total"]["cpu_s_per_1m_checkins"]),
        all(r["ok"] and r["duplicate_directives"] == 0 for r in rs)))
PY
