#!/bin/bash
# Every hop of a release's way down, timed by the processes themselves (psync-bench
# --agent_metrics --hop_times; agent/README.md, "Metrics"): real psync-agent processes of 8 ranks
# (RANKS_PACED ranks over 200 ms of 300 ms steps, default 256; RANKS_BURST ranks in a burst,
# default 1024), then relays in front of simulated nodes of 8 (RELAY_RUNS, default
# "16384:16:1000 131072:64:4000 131072:256:4000": ranks, relays, step period in ms). One run
# each; appends to OUT_DIR/hops-all.jsonl and prints each run's hops: the coordinator's delivery
# of each decision and its queue, the agents' or relays' fan-out and queues, the way up.
#   bench/way_down_runs.sh BIN_DIR [OUT_DIR]
set -u
if [ $# -lt 1 ]; then sed -n 2,9p "$0" >&2; exit 2; fi
bin=$(cd "$1" && pwd)
out=${2:-${OUT:-/tmp}}
mkdir -p "$out"
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=bench/relay_workload.sh
. "$here/relay_workload.sh"
export LD_LIBRARY_PATH=$bin:${LD_LIBRARY_PATH:-}
for w in "${RANKS_PACED:-256} --spread_us=200000" "${RANKS_BURST:-1024} --spread_us=1000"; do
  # shellcheck disable=SC2086
  set -- $w
  r=$1
  shift
  timeout 100 "$bin/psync-bench" --coordinator="$bin/psync-coordinator" \
    --agent_binary="$bin/psync-agent" --agents=$((r / 8)) --ranks="$r" --optimizers=2 --chunks=8 \
    --lazy_acks=true --floor=false --steps=20 --step_period_ms=300 --hop_times --agent_metrics \
    --label=agents-hops --json "$@" >>"$out/hops-all.jsonl" 2>>"$out/hops-all.err"
  echo "agents: $r ranks rc=$?"
done
for spec in ${RELAY_RUNS:-16384:16:1000 131072:64:4000 131072:256:4000}; do
  IFS=: read -r ranks relays period <<<"$spec"
  timeout 200 "$bin/psync-bench" --coordinator="$bin/psync-coordinator" \
    --agent_binary="$bin/psync-agent" --relays="$relays" --ranks="$ranks" \
    "${RELAY_WORKLOAD[@]}" --steps=5 --warmup_steps=1 --step_period_ms="$period" --pump_threads=8 \
    --hop_times --agent_metrics --coordinator_args=--history_steps=2 \
    --label=relays-hops --json >>"$out/hops-all.jsonl" 2>>"$out/hops-all.err"
  echo "relays: $ranks ranks, $relays relays rc=$?"
done
python3 - "$out/hops-all.jsonl" <<'PY'
import json, sys
def s(h): return "n=%d mean=%.0fus p50<=%s p99<=%s" % (h["count"], h["mean_us"], h["p50_le_us"], h["p99_le_us"])
for line in open(sys.argv[1]):
    r = json.loads(line)
    h = r.get("hops", {})
    if "coordinator_agent_stream_down_wait" not in r or not h:
        continue
    w = r.get("relay_waits") or r.get("agent_waits") or {}
    print(r["system"], r["ranks"], "exactly once" if r["ok"] else "NOT OK",
          "last p50/p99 %.1f/%.1f ms" % (r["release_latency"]["p50_us"] / 1e3, r["release_latency"]["p99_us"] / 1e3),
          "up %.1f ms" % (h["up"]["p50_us"] / 1e3),
          "down first/last %.1f/%.1f ms" % (h["down_first"]["p50_us"] / 1e3, h["down_last"]["p50_us"] / 1e3))
    print("   coordinator delivery:", s(r["coordinator_decision_delivery"]))
    print("   coordinator queue:", s(r["coordinator_agent_stream_down_wait"]))
    for k in ("up_from_rank", "up_from_agent", "fanout_to_rank", "fanout_to_agent", "down_to_rank", "down_to_agent"):
        if w.get(k, {}).get("count"):
            print("   %-15s %s" % (k, s(w[k])))
PY
