#!/bin/bash
# How long one idle release takes to reach its nodes: psync-bench's release_first_latency (the
# first node holding the directive) and release_latency (the last), simulated nodes, K=2, C=1, one
# step a second, 30 steps, the coordinator on CPUs 0-1 and the load generator on the others, for
# 128 and 8 node streams and 0, 3 and 8 delivery threads (target 2, docs/performance.md). Appends
# JSON lines to OUT_DIR/spread.jsonl.
#   bench/release_spread_runs.sh BIN_DIR [OUT_DIR]
set -u
if [ $# -lt 1 ]; then sed -n 2,7p "$0" >&2; exit 2; fi
bin=$(cd "$1" && pwd)
OUT=${2:-${OUT:-/tmp}}
last=$(($(nproc) - 1))
run() {  # LABEL RANKS PER_NODE DELIVERY_THREADS
  timeout 120 taskset -c 2-$last $bin/psync-bench --coordinator=$bin/psync-coordinator --server_taskset=0-1 \
    --floor=false --simulated_nodes=$3 --node_tick_us=20000 --optimizers=2 --lazy_acks=true \
    --ranks=$2 --chunks=1 --steps=30 --step_period_ms=1000 --spread_us=100000 \
    --coordinator_args=--delivery_threads=$4 --label="$1" --json >> $OUT/spread.jsonl 2>>$OUT/spread.err
  echo "$1 rc=$?"
}
run "n=1024 per_node=8 threads=3" 1024 8 3
run "n=1024 per_node=8 threads=0" 1024 8 0
run "n=1024 per_node=8 threads=8" 1024 8 8
run "n=1024 per_node=128 threads=3" 1024 128 3
run "n=64 per_node=8 threads=3" 64 8 3
