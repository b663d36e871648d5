#!/bin/bash
# Two builds of psync-bench and psync-coordinator (before and after a change) alternated on one host
# (before, after, after, before per workload), nothing pinned, as a user runs them; K=2, C=8, lazy
# acks, simulated nodes of 8 ranks:
#   n256:  256 ranks, 20 steps of 300 ms, arrivals over 200 ms, node tick 20 ms;
#   burst: 4,096 ranks, 20 steps of 300 ms, every check-in of a step within 1 ms, node tick 1 ms;
#   n16k:  16,384 ranks in groups of 8, 10 steps of 1 s, arrivals over 100 ms, node tick 20 ms,
#          --history_steps=2;
#   n16k_relays: n16k through 16 relays (psync-agent, from the same DIR) of 128 node streams each.
# Appends psync-bench's JSON lines (labelled "before WORKLOAD" / "after WORKLOAD") to
# OUT_DIR/alternate.jsonl and prints, per workload and build, the median over its runs of the
# release latency to the last rank (p50, p99), to the first rank (p50) and the coordinator's CPU.
#   [WORKLOADS="n256 burst n16k n16k_relays"] [ROUNDS=1] bench/alternate_builds.sh BEFORE_DIR AFTER_DIR [OUT_DIR]
# (ROUNDS: how many times each workload's before, after, after, before is run).
# Each DIR holds psync-bench, psync-coordinator and psync-agent (their shared libraries in
# DIR/../lib when bundled for another host).
set -u
if [ $# -lt 2 ]; then sed -n 2,16p "$0" >&2; exit 2; fi
before=$(cd "$1" && pwd)
after=$(cd "$2" && pwd)
out=${3:-${OUT:-/tmp}}
run() {  # BUILD WORKLOAD psync-bench flags...
  local build=$1 workload=$2 bin=$before
  shift 2
  [ "$build" = after ] && bin=$after
  LD_LIBRARY_PATH=$bin/../lib timeout 240 "$bin/psync-bench" \
    --coordinator="$bin/psync-coordinator" --agent_binary="$bin/psync-agent" --optimizers=2 --chunks=8 --lazy_acks=true \
    --floor=false --simulated_nodes=8 --label="$build $workload" --json "$@" \
    >>"$out/alternate.jsonl" 2>>"$out/alternate.err"
  echo "$build $workload rc=$?"
}
declare -A flags=(
  [n256]="--ranks=256 --steps=20 --step_period_ms=300 --spread_us=200000 --node_tick_us=20000"
  [burst]="--ranks=4096 --steps=20 --step_period_ms=300 --spread_us=1000 --node_tick_us=1000"
  [n16k]="--ranks=16384 --group_size=8 --steps=10 --warmup_steps=1 --step_period_ms=1000
    --spread_us=100000 --node_tick_us=20000 --coordinator_args=--history_steps=2"
)
flags[n16k_relays]="${flags[n16k]} --relays=16"
for workload in ${WORKLOADS:-n256 burst n16k n16k_relays}; do
  for _ in $(seq "${ROUNDS:-1}"); do
    for build in before after after before; do
      # shellcheck disable=SC2086
      run "$build" "$workload" ${flags[$workload]}
    done
  done
done
python3 - "$out/alternate.jsonl" <<'PY'
import collections, json, statistics, sys
runs = collections.defaultdict(list)
for line in open(sys.argv[1]):
    r = json.loads(line)
    runs[r["system"]].append(r)
print("%-20s %4s %10s %10s %10s %8s %8s %s" % ("run", "n", "last p50", "last p99", "first p50",
                                                   "cores", "us/ci", "exactly once"))
for label, rs in sorted(runs.items(), key=lambda kv: (kv[0].split()[1], kv[0])):
    med = lambda f: statistics.median(f(r) for r in rs)
    print("%-20s %4d %8.2fms %8.2fms %8.2fms %8.2f %8.2f %s" % (
        label, len(rs), med(lambda r: r["release_latency"]["p50_us"]) / 1e3,
        med(lambda r: r["release_latency"]["p99_us"]) / 1e3,
        med(lambda r: r["release_first_latency"]["p50_us"]) / 1e3,
        med(lambda r: r["coordinator"]["cpu_fraction"]),
        med(lambda r: r["coordinator"]["cpu_s_per_1m_checkins"]),
        all(r["ok"] and r["duplicate_directives"] == 0 for r in rs)))
PY
