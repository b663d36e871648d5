#!/bin/bash
# The coordinator's cost per check-in and its release latency, a build against the one before it,
# alternated in one session on one host (before, after, after, before per workload); simulated
# nodes of 8 with a 20 ms window and lazy AgentAcks, K=2, C=8:
#   16k-1core: 16,384 ranks in groups of 8, 10 steps of 500 ms, arrivals over 100 ms,
#              --history_steps=2, the coordinator on CPU 0 (target 3), twice;
#   16k-4core: the same on CPUs 0-3;
#   1k-2core:  1,024 ranks, 20 steps of 300 ms, arrivals over 200 ms, the coordinator on CPUs 0-1.
# The load generator runs on the other CPUs. Appends psync-bench's JSON lines (labelled with the
# arm and the workload) to OUT_DIR/checkin-cost.jsonl (docs/performance.md, "Second performance
# round").
#   bench/checkin_cost_runs.sh BEFORE_DIR AFTER_DIR [OUT_DIR]
set -u
if [ $# -lt 2 ]; then sed -n 2,13p "$0" >&2; exit 2; fi
before=$(cd "$1" && pwd)
after=$(cd "$2" && pwd)
out=${3:-${OUT:-/tmp}}
last=$(($(nproc) - 1))
run() {  # ARM WORKLOAD SERVER_CPUS psync-bench flags...
  local arm=$1 workload=$2 server=$3 bin
  shift 3
  if [ "$arm" = before ]; then bin=$before; else bin=$after; fi
  timeout 300 taskset -c "$((${server##*-} + 1))-$last" "$bin/psync-bench" \
    --coordinator="$bin/psync-coordinator" --server_taskset="$server" --floor=false \
    --simulated_nodes=8 --node_tick_us=20000 --optimizers=2 --chunks=8 --lazy_acks=true \
    --label="$arm $workload" --json "$@" >>"$out/checkin-cost.jsonl" 2>>"$out/checkin-cost.err"
  echo "$arm $workload rc=$?"
}
arms() {  # WORKLOAD SERVER_CPUS psync-bench flags...
  for arm in before after after before; do run "$arm" "$@"; done
}
big=(--ranks=16384 --group_size=8 --steps=10 --warmup_steps=1 --step_period_ms=500
  --spread_us=100000 --timeout_s=240 --coordinator_args=--history_steps=2)
arms 16k-1core 0 "${big[@]}"
arms 16k-4core 0-3 "${big[@]}"
arms 1k-2core 0-1 --ranks=1024 --steps=20 --step_period_ms=300 --spread_us=200000
arms 16k-1core 0 "${big[@]}"
