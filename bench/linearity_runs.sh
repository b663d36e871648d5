#!/bin/bash
# Target 4 of the second performance round: the coordinator's CPU per step against ranks x chunks,
# for direct Sessions (lazy acks, the coordinator on CPUs 0-1) and for ranks behind simulated node
# agents of 8 (the coordinator on CPU 0), the load generator on the other CPUs. Appends psync-bench's
# JSON lines to OUT_DIR/linearity.jsonl; bench/plot.py OUT_DIR/linearity.jsonl prints the fits.
#   bench/linearity_runs.sh BIN_DIR [OUT_DIR]
set -u
if [ $# -lt 1 ]; then sed -n 2,6p "$0" >&2; exit 2; fi
bin=$(cd "$1" && pwd)
out=${2:-${OUT:-/tmp}}
export LD_LIBRARY_PATH=$bin/../lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
last=$(($(nproc) - 1))
timeout 400 taskset -c "2-$last" "$bin/psync-bench" --coordinator="$bin/psync-coordinator" \
  --server_taskset=0-1 --floor=false --lazy_acks --sweep_ranks=32,64,128,256,512 \
  --sweep_chunks=2,4,8 --optimizers=2 --steps=10 --step_period_ms=300 --spread_us=200000 \
  --json >>"$out/linearity.jsonl" 2>>"$out/linearity.err"
echo "direct rc=$?"
timeout 400 taskset -c "1-$last" "$bin/psync-bench" --coordinator="$bin/psync-coordinator" \
  --server_taskset=0 --floor=false --simulated_nodes=8 --node_tick_us=20000 --group_size=8 \
  --sweep_ranks=1024,2048,4096,8192 --sweep_chunks=4,8 --optimizers=2 --steps=10 \
  --step_period_ms=500 --spread_us=100000 --json >>"$out/linearity.jsonl" 2>>"$out/linearity.err"
echo "nodes rc=$?"
