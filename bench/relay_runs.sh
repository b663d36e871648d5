#!/bin/bash
# The relay tier against node streams straight to the coordinator, alternated (A B A B), nothing
# pinned, K=2, C=8, lazy acks:
#   paced: RANKS_PACED ranks (default 16384) in simulated nodes of 8, 1 step/s, arrivals over
#     100 ms, sync groups of 8, 10 steps (the scale issue's paced row): direct, and through
#     RELAYS relays (default 16; each carries RANKS_PACED / 8 / RELAYS node streams);
#   agents: RANKS_AGENTS ranks (default 1024) behind real psync-agent processes of 8, in a burst
#     (arrivals within 1 ms, 300 ms steps): direct, and through 4 relays (SKIP_AGENTS=1: not run);
#   with RANKS_BIG set, one paced run of that many ranks through RELAYS_BIG relays (default 32).
# Appends to OUT_DIR/relays.jsonl and prints the medians: release latency, the coordinator's CPU,
# the busiest relay's CPU and the load generator's.
#   bench/relay_runs.sh BIN_DIR [OUT_DIR]
set -u
if [ $# -lt 1 ]; then sed -n 2,12p "$0" >&2; exit 2; fi
bin=$(cd "$1" && pwd)
out=${2:-${OUT:-/tmp}}
mkdir -p "$out"
run() {  # LABEL psync-bench flags...
  local label=$1
  shift
  LD_LIBRARY_PATH=$bin:${LD_LIBRARY_PATH:-} timeout 300 "$bin/psync-bench" \
    --coordinator="$bin/psync-coordinator" --agent_binary="$bin/psync-agent" --optimizers=2 \
    --chunks=8 --lazy_acks=true --floor=false --label="$label" --json "$@" \
    >>"$out/relays.jsonl" 2>>"$out/relays.err"
  echo "$label rc=$?"
}
paced=${RANKS_PACED:-16384}
relays=${RELAYS:-16}
burst=${RANKS_AGENTS:-1024}
paced_flags=(--ranks="$paced" --group_size=8 --steps=10 --warmup_steps=1 --step_period_ms=1000
  --spread_us=100000 --simulated_nodes=8 --node_tick_us=20000
  --coordinator_args=--history_steps=2)
agent_flags=(--ranks="$burst" --agents=$((burst / 8)) --steps=20 --step_period_ms=300
  --spread_us=1000)
for _ in 1 2; do
  run nodes "${paced_flags[@]}"
  run nodes+relays "${paced_flags[@]}" --relays="$relays"
  [ "${SKIP_AGENTS:-0}" = 1 ] && continue
  run agents "${agent_flags[@]}"
  run agents+relays "${agent_flags[@]}" --relays=4
done
if [ -n "${RANKS_BIG:-}" ]; then
  # One paced run at a larger size through RELAYS_BIG relays (default 32), nodes as above.
  big_flags=("${paced_flags[@]}")
  big_flags[0]=--ranks=$RANKS_BIG
  run nodes+relays "${big_flags[@]}" --relays="${RELAYS_BIG:-32}" --timeout_s=240
fi
python3 - "$out/relays.jsonl" <<'PY'
import collections, json, statistics, sys
runs = collections.defaultdict(list)
for line in open(sys.argv[1]):
    r = json.loads(line)
    runs[(r["ranks"], r["system"], r.get("relays", {}).get("count", 0))].append(r)
print("%-6s %-14s %6s %2s %18s %18s %16s %14s %10s %s" % (
    "ranks", "layout", "relays", "n", "first p50 ms", "last p50/p99 ms", "coord cores, us/ci",
    "relay max cores", "bench cores", "exactly once"))
for (ranks, label, count), rs in sorted(runs.items()):
    med = lambda f: statistics.median(f(r) for r in rs)
    print("%-6d %-14s %6d %2d %18.1f %8.1f/%8.1f %8.2f, %5.1f %14.2f %10.2f %s" % (
        ranks, label, count, len(rs), med(lambda r: r["release_first_latency"]["p50_us"]) / 1e3,
        med(lambda r: r["release_latency"]["p50_us"]) / 1e3,
        med(lambda r: r["release_latency"]["p99_us"]) / 1e3,
        med(lambda r: r["coordinator"]["cpu_fraction"]),
        med(lambda r: r["coordinator"]["cpu_s_per_1m_checkins"]),
        med(lambda r: r.get("relays", {}).get("cpu_fraction_max", 0)),
        med(lambda r: r["bench_cpu_s"] / r["measured_s"]),
        all(r["ok"] for r in rs)))
PY
