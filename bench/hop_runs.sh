#!/bin/bash
# Where a release's time goes, real node agents against psync-bench's simulated nodes: each run
# with --hop_times (the coordinator's release events split the latency into the way up, last
# check-in sent -> release decided, and the way down, -> first and last rank or node). K=2, C=8,
# lazy acks, 20 steps of 300 ms, nothing pinned, two runs each, alternated:
#   paced: RANKS_PACED ranks (default 256), arrivals over 200 ms (simulated nodes: 20 ms tick);
#   burst: RANKS_BURST ranks (default 1024), arrivals within 1 ms (simulated nodes: 1 ms tick).
# Real agents of 8 ranks, --flush_window default. With 16 or more CPUs also "agents-pinned": the
# coordinator on CPUs 0-1, the agents on 2-9, the benchmark's ranks on the rest, so that the
# agents' figures are not the load generator's. Appends to OUT_DIR/hops.jsonl and prints the
# medians.
#   bench/hop_runs.sh BIN_DIR [OUT_DIR]
set -u
if [ $# -lt 1 ]; then sed -n 2,10p "$0" >&2; exit 2; fi
bin=$(cd "$1" && pwd)
out=${2:-${OUT:-/tmp}}
mkdir -p "$out"
run() {  # LABEL RANKS psync-bench flags... (BENCH_CPUS: a taskset -c list for psync-bench)
  local label=$1 ranks=$2 pin=()
  shift 2
  [ -n "${BENCH_CPUS:-}" ] && pin=(taskset -c "$BENCH_CPUS")
  LD_LIBRARY_PATH=$bin:${LD_LIBRARY_PATH:-} timeout 240 "${pin[@]}" "$bin/psync-bench" \
    --coordinator="$bin/psync-coordinator" --ranks="$ranks" --optimizers=2 --chunks=8 \
    --lazy_acks=true --floor=false --steps=20 --step_period_ms=300 --hop_times \
    --label="$label" --json "$@" >>"$out/hops.jsonl" 2>>"$out/hops.err"
  echo "$label ranks $ranks rc=$?"
}
agents() { echo "--agent_binary=$bin/psync-agent --agents=$(($1 / 8))"; }
paced=${RANKS_PACED:-256}
burst=${RANKS_BURST:-1024}
for _ in 1 2; do
  # shellcheck disable=SC2046
  run agents "$paced" --spread_us=200000 $(agents "$paced")
  run nodes "$paced" --spread_us=200000 --simulated_nodes=8 --node_tick_us=20000
  # shellcheck disable=SC2046
  run agents "$burst" --spread_us=1000 $(agents "$burst")
  run nodes "$burst" --spread_us=1000 --simulated_nodes=8 --node_tick_us=1000
  if [ "$(nproc)" -ge 16 ]; then
    # shellcheck disable=SC2046
    BENCH_CPUS=10-$(($(nproc) - 1)) run agents-pinned "$paced" --spread_us=200000 \
      $(agents "$paced") --server_taskset=0-1 --agent_taskset=2-9
    # shellcheck disable=SC2046
    BENCH_CPUS=10-$(($(nproc) - 1)) run agents-pinned "$burst" --spread_us=1000 \
      $(agents "$burst") --server_taskset=0-1 --agent_taskset=2-9
  fi
done
python3 - "$out/hops.jsonl" <<'PY'
import collections, json, statistics, sys
runs = collections.defaultdict(list)
for line in open(sys.argv[1]):
    r = json.loads(line)
    runs[(r["ranks"], r["system"])].append(r)
print("%-6s %-7s %2s %14s %14s %14s %14s %s" % ("ranks", "layout", "n", "total p50/p99",
      "up p50/p99", "down first p50", "down last p50/p99", "exactly once"))
for (ranks, label), rs in sorted(runs.items()):
    med = lambda f: statistics.median(f(r) for r in rs) / 1e3
    print("%-6d %-7s %2d %6.1f/%6.1fms %6.1f/%6.1fms %12.1fms %6.1f/%6.1fms %s" % (
        ranks, label, len(rs), med(lambda r: r["release_latency"]["p50_us"]),
        med(lambda r: r["release_latency"]["p99_us"]), med(lambda r: r["hops"]["up"]["p50_us"]),
        med(lambda r: r["hops"]["up"]["p99_us"]), med(lambda r: r["hops"]["down_first"]["p50_us"]),
        med(lambda r: r["hops"]["down_last"]["p50_us"]),
        med(lambda r: r["hops"]["down_last"]["p99_us"]),
        all(r["ok"] and r["duplicate_directives"] == 0 for r in rs)))
PY
