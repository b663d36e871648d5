#!/bin/bash
# Two builds alternated (before, after, after, before) through relays in front of simulated nodes
# of 8, the load generator in node processes, every hop timed (psync-bench --hop_times
# --agent_metrics). SPECS (default "131072:64:4000:8 16384:16:1000:4"): ranks, relays, step period
# in ms, load-generating processes. K=2, C=8, lazy acks, 5 measured steps after 1 of warmup,
# arrivals over 100 ms. Appends psync-bench's JSON lines (labelled "before" / "after") to
# OUT_DIR/relay-alternation.jsonl and prints per run: the last and first rank's release latency,
# the load generator's lag, the way up, the way down to the first and last node, the coordinator's
# delivery of a step's releases and the relays' fan-out.
#   [SPECS=...] bench/relay_alternation.sh BEFORE_DIR AFTER_DIR [OUT_DIR]
# Each DIR holds psync-bench, psync-coordinator and psync-agent (their shared libraries in
# DIR/../lib when bundled for another host).
set -u
if [ $# -lt 2 ]; then sed -n 2,12p "$0" >&2; exit 2; fi
out=${3:-${OUT:-/tmp}}
mkdir -p "$out"
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=bench/relay_workload.sh
. "$here/relay_workload.sh"
for spec in ${SPECS:-131072:64:4000:8 16384:16:1000:4}; do
  IFS=: read -r ranks relays period procs <<<"$spec"
  for build in before after after before; do
    dir=$1
    [ "$build" = after ] && dir=$2
    bin=$(cd "$dir" && pwd)
    LD_LIBRARY_PATH=$bin/../lib:${LD_LIBRARY_PATH:-} timeout 280 "$bin/psync-bench" \
      --coordinator="$bin/psync-coordinator" --agent_binary="$bin/psync-agent" --relays="$relays" \
      --ranks="$ranks" "${RELAY_WORKLOAD[@]}" --steps=5 --warmup_steps=1 \
      --step_period_ms="$period" --pump_threads=$((8 / procs > 2 ? 8 / procs : 2)) \
      --node_processes="$procs" --hop_times --agent_metrics --coordinator_args=--history_steps=2 \
      --label="$build" --json >>"$out/relay-alternation.jsonl" 2>>"$out/relay-alternation.err"
    echo "$build: $ranks ranks, $relays relays rc=$?"
  done
done
python3 - "$out/relay-alternation.jsonl" <<'PY'
import json, sys
def ms(h, k="p50_us"): return h[k] / 1e3
for line in open(sys.argv[1]):
    r = json.loads(line)
    h, w = r["hops"], r.get("relay_waits") or {}
    d = r["coordinator_decision_delivery"]
    print(r["system"], r["ranks"], "exactly once" if r["ok"] else "NOT OK",
          "last p50/p99 %.1f/%.1f ms" % (ms(r["release_latency"]), ms(r["release_latency"], "p99_us")),
          "first p50 %.1f" % ms(r["release_first_latency"]),
          "lag %.1f" % ms(r.get("pump_lag", {"p50_us": 0})), "up %.1f" % ms(h["up"]),
          "down first/last %.1f/%.1f ms" % (ms(h["down_first"]), ms(h["down_last"])),
          "delivery mean %.1f ms" % (d["mean_us"] / 1e3),
          "relay fan-out mean %.1f ms" % (w["fanout_to_agent"]["mean_us"] / 1e3),
          "coordinator %.2f cores" % r["coordinator"]["cpu_fraction"])
PY
