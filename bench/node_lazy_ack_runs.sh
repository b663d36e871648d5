#!/bin/bash
# Lazy AgentAcks for simulated nodes of 8, alternated in one session on one host with the build
# before them: arms BEFORE_DIR (eager AgentAcks), AFTER_DIR --lazy_acks=false and AFTER_DIR
# --lazy_acks=true, in the order before, off, on, on, off, before. Two workloads, K=2, C=8:
#   target 2: 1,024 ranks, 20 steps of 300 ms, arrivals over 200 ms, the coordinator on CPUs 0-1;
#   target 3: 16,384 ranks in groups of 8, 10 steps of 500 ms, arrivals over 100 ms,
#             --history_steps=2, the coordinator on CPU 0.
# The load generator runs on the other CPUs. Appends psync-bench's JSON lines (labelled with the
# arm) to OUT_DIR/node-lazy.jsonl (docs/performance.md, "Second performance round").
#   bench/node_lazy_ack_runs.sh BEFORE_DIR AFTER_DIR [OUT_DIR]
set -u
if [ $# -lt 2 ]; then sed -n 2,10p "$0" >&2; exit 2; fi
before=$(cd "$1" && pwd)
after=$(cd "$2" && pwd)
out=${3:-${OUT:-/tmp}}
last=$(($(nproc) - 1))
run() {  # ARM BIN LAZY SERVER_CPUS psync-bench flags...
  local arm=$1 bin=$2 lazy=$3 server=$4
  shift 4
  timeout 300 taskset -c "$((${server##*-} + 1))-$last" "$bin/psync-bench" \
    --coordinator="$bin/psync-coordinator" --server_taskset="$server" --floor=false \
    --simulated_nodes=8 --node_tick_us=20000 --optimizers=2 --chunks=8 --lazy_acks="$lazy" \
    --label="$arm" --json "$@" >>"$out/node-lazy.jsonl" 2>>"$out/node-lazy.err"
  echo "$arm $* rc=$?"
}
arms() {  # SERVER_CPUS psync-bench flags...
  local server=$1
  shift
  run before "$before" false "$server" "$@"
  run lazy-off "$after" false "$server" "$@"
  run lazy-on "$after" true "$server" "$@"
  run lazy-on "$after" true "$server" "$@"
  run lazy-off "$after" false "$server" "$@"
  run before "$before" false "$server" "$@"
}
arms 0-1 --ranks=1024 --steps=20 --step_period_ms=300 --spread_us=200000
arms 0 --ranks=16384 --group_size=8 --steps=10 --warmup_steps=1 --step_period_ms=500 \
  --spread_us=100000 --timeout_s=600 --coordinator_args=--history_steps=2
