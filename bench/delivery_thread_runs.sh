#!/bin/bash
# The coordinator's delivery threads (--delivery_threads) against none, alternated in one session
# on one host (0, 3, 3, 0 per workload), the coordinator pinned to CPUs 0-3 and the load
# generator on the others; K=2 unless stated:
#   idle release: 1,024 ranks on simulated nodes of 8, 1 chunk, one step a second, arrivals over
#                 100 ms, 10 steps;
#   target 2:     1,024 ranks on simulated nodes of 8, 8 chunks, 20 steps of 300 ms, arrivals
#                 over 200 ms, lazy acks;
#   direct:       256 ranks on their own Sessions, 8 chunks, 20 steps of 300 ms, arrivals over
#                 200 ms, lazy acks;
#   target 3:     16,384 ranks on nodes of 8 in groups of 8, 8 chunks, 10 steps of 500 ms,
#                 arrivals over 100 ms, --history_steps=2 (0, 3 only).
# Appends psync-bench's JSON lines (labelled) to OUT_DIR/delivery.jsonl (docs/performance.md,
# "Second performance round").
#   bench/delivery_thread_runs.sh BIN_DIR [OUT_DIR]
set -u
if [ $# -lt 1 ]; then sed -n 2,17p "$0" >&2; exit 2; fi
bin=$(cd "$1" && pwd)
out=${2:-${OUT:-/tmp}}
last=$(($(nproc) - 1))
run() {  # LABEL THREADS psync-bench flags...
  local label=$1 threads=$2
  shift 2
  timeout 300 taskset -c "4-$last" "$bin/psync-bench" --coordinator="$bin/psync-coordinator" \
    --server_taskset=0-3 --floor=false --optimizers=2 --label="$label threads=$threads" --json \
    "$@" --coordinator_args="--delivery_threads=$threads${extra_args:-}" \
    >>"$out/delivery.jsonl" 2>>"$out/delivery.err"
  echo "$label threads=$threads rc=$?"
}
alternate() {  # LABEL psync-bench flags...
  local label=$1
  shift
  for threads in 0 3 3 0; do run "$label" "$threads" "$@"; done
}
nodes="--simulated_nodes=8 --node_tick_us=20000"
alternate idle $nodes --ranks=1024 --chunks=1 --steps=10 --step_period_ms=1000 --spread_us=100000
alternate target2 $nodes --ranks=1024 --chunks=8 --steps=20 --step_period_ms=300 \
  --spread_us=200000 --lazy_acks
alternate direct --ranks=256 --chunks=8 --steps=20 --step_period_ms=300 --spread_us=200000 \
  --lazy_acks
extra_args=" --history_steps=2"
for threads in 0 3; do
  run target3 "$threads" $nodes --ranks=16384 --group_size=8 --chunks=8 --steps=10 \
    --warmup_steps=1 --step_period_ms=500 --spread_us=100000 --timeout_s=600
done
