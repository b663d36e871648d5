#!/bin/bash
# The node agent's flush window: real psync-agent processes of 8 ranks each, --flush_window=0
# (write whatever is queued as soon as the writer is free) against the default 20ms (a check-in a
# release may wait for is still written at once), alternated in one session with one build:
# 0, 20ms, 20ms, 0 per workload. K=2 optimizers, C=8 chunks, lazy acks, nothing pinned:
#   paced: RANKS_PACED ranks (default 256), 20 steps of 300 ms, arrivals over 200 ms;
#   burst: RANKS_BURST ranks (default 1024), 20 steps of 300 ms, arrivals within 1 ms.
# Appends psync-bench's JSON lines (labelled window-0 / window-20ms) to OUT_DIR/agent-window.jsonl
# (docs/performance.md, "The node agent's flush window").
#   bench/agent_window_runs.sh BIN_DIR [OUT_DIR]
# BIN_DIR holds psync-bench, psync-coordinator and psync-agent.
set -u
if [ $# -lt 1 ]; then sed -n 2,12p "$0" >&2; exit 2; fi
bin=$(cd "$1" && pwd)
out=${2:-${OUT:-/tmp}}
paced=${RANKS_PACED:-256}
burst=${RANKS_BURST:-1024}
run() {  # WINDOW RANKS psync-bench flags...
  local window=$1 ranks=$2
  shift 2
  timeout 240 "$bin/psync-bench" --coordinator="$bin/psync-coordinator" \
    --agent_binary="$bin/psync-agent" --agents=$((ranks / 8)) --ranks="$ranks" \
    --agent_args="--target={coordinator} --listen=127.0.0.1:0 --port_file={port_file} --flush_window=$window" \
    --optimizers=2 --chunks=8 --lazy_acks=true --floor=false --steps=20 --step_period_ms=300 \
    --label="window-$window" --json "$@" >>"$out/agent-window.jsonl" 2>>"$out/agent-window.err"
  echo "window $window ranks $ranks $* rc=$?"
}
for workload in "$paced --spread_us=200000" "$burst --spread_us=1000"; do
  # shellcheck disable=SC2086
  set -- $workload
  run 0 "$@"
  run 20ms "$@"
  run 20ms "$@"
  run 0 "$@"
done
