#!/bin/bash
# Two builds alternated through relays in front of simulated nodes of 8 (as relay_alternation.sh),
# with the coordinator's own counters read over 4 s of the measured steps: how long the job's lock
# was held and waited for per message, and the coordinator's CPU. SPECS (default
# "16384:16:1000:4 131072:64:4000:8"): ranks, relays, step period in ms, load-generating
# processes; ORDER (default "before after after before") per spec. K=2, C=8, lazy acks, arrivals
# over 100 ms, 1 warmup step, hop times. With INPROC=1 first runs each build's
# release_path_bench (BM_StepArrivals, BM_Step/16384/8/2048) in the same order.
# Appends psync-bench's JSON lines (labelled "before" / "after") to OUT_DIR/lock-alternation.jsonl
# and the counters to OUT_DIR/lock-alternation-counters.txt, then prints both per run
# (bench/lock_alternation_summary.py).
#   [SPECS=...] [ORDER=...] [INPROC=1] bench/lock_alternation.sh BEFORE_DIR AFTER_DIR [OUT_DIR]
# Each DIR holds psync-bench, psync-coordinator, psync-agent (and release_path_bench with
# INPROC=1); their shared libraries in DIR/../lib when bundled for another host. BEFORE_RELAY and
# AFTER_RELAY (default empty) are flags added to that label's relays, e.g. one build against
# itself: BEFORE_RELAY=--relay_flush_window=0 AFTER_RELAY=--relay_flush_window=2ms. BEFORE_ARGS
# and AFTER_ARGS likewise add flags to that label's psync-bench, e.g.
# BEFORE_ARGS=--node_merge_sync_dones=false.
set -u
if [ $# -lt 2 ]; then sed -n 2,15p "$0" >&2; exit 2; fi
out=${3:-${OUT:-/tmp}}
mkdir -p "$out"
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=bench/relay_workload.sh
. "$here/relay_workload.sh"
dir_of() { if [ "$1" = after ]; then (cd "$AFTER" && pwd); else (cd "$BEFORE" && pwd); fi; }
BEFORE=$1 AFTER=$2
port=17300
counters() {  # label pid
  curl -s "127.0.0.1:$port/metrics" |
    grep -E '^psync_(job_lock|coordinator_deliver|checkins_total|checkins_by_chunk_total|sync_done_total)'
  awk '{print "utime", $14, "stime", $15}' "/proc/$2/stat"
}
if [ "${INPROC:-0}" = 1 ]; then
  for build in ${ORDER:-before after after before}; do
    bin=$(dir_of "$build")
    echo "== $build" >>"$out/lock-alternation-inprocess.txt"
    LD_LIBRARY_PATH=$bin/../lib:${LD_LIBRARY_PATH:-} timeout 200 "$bin/release_path_bench" \
      --benchmark_filter='BM_StepArrivals/16384/8/(8|128|2048)|BM_Step/16384/8/2048$' \
      --benchmark_counters_tabular=true >>"$out/lock-alternation-inprocess.txt" 2>&1
  done
fi
for spec in ${SPECS:-16384:16:1000:4 131072:64:4000:8}; do
  IFS=: read -r ranks relays period procs <<<"$spec"
  for build in ${ORDER:-before after after before}; do
    bin=$(dir_of "$build")
    if [ "$build" = after ]; then extra=${AFTER_RELAY:-}; else extra=${BEFORE_RELAY:-}; fi
    if [ "$build" = after ]; then args=${AFTER_ARGS:-}; else args=${BEFORE_ARGS:-}; fi
    label="$build $ranks/$relays"
    port=$((port + 1))  # a port of its own: the last run's coordinator may still hold its own
    LD_LIBRARY_PATH=$bin/../lib:${LD_LIBRARY_PATH:-} timeout 280 "$bin/psync-bench" \
      --coordinator="$bin/psync-coordinator" --agent_binary="$bin/psync-agent" --relays="$relays" \
      "--relay_args=--target={coordinator} --listen=127.0.0.1:0 --port_file={port_file} $extra" \
      --ranks="$ranks" "${RELAY_WORKLOAD[@]}" --steps=$((period >= 4000 ? 5 : 8)) --warmup_steps=1 \
      --step_period_ms="$period" --pump_threads=2 \
      --node_processes="$procs" --hop_times --agent_metrics \
      "--coordinator_args=--history_steps=2 --http_listen=127.0.0.1:$port" --label="$label" \
      --json $args >>"$out/lock-alternation.jsonl" 2>>"$out/lock-alternation.err" &
    bench=$!
    # Once 2.7 steps' check-ins are in (past the warmup step), 4 s of the steps.
    for _ in $(seq 1 240); do
      sleep 0.5
      n=$(curl -s "127.0.0.1:$port/metrics" | awk '/^psync_checkins_total/{s+=$2} END{printf "%d", s}')
      [ "${n:-0}" -gt $((ranks * 43)) ] && break
    done
    pid=$(pgrep -n -x psync-coordinat)
    if [ -n "$pid" ]; then
      { echo "== $label"; counters "$label" "$pid"; } >>"$out/lock-alternation-counters.txt"
      sleep 4
      { echo "-- after 4 s"; counters "$label" "$pid"; } >>"$out/lock-alternation-counters.txt"
    fi
    wait "$bench"
    echo "$label rc=$?"
  done
done
python3 "$here/lock_alternation_summary.py" "$out"
