#!/bin/bash
# Lazy acks against immediate Acks, alternated in one session on one host: the coordinator pinned
# to the first 1 and 2 CPUs (--server_taskset), the load generator on the others; 256 and 1,024
# direct-Session ranks x 2 optimizers x 8 chunks, 20 steps of 300 ms, arrivals over 200 ms; each
# pair run twice, in the order off, on, on, off. Appends psync-bench's JSON lines to
# OUT_DIR/lazy.jsonl (docs/performance.md, "Second performance round").
#   bench/lazy_ack_runs.sh BIN_DIR [OUT_DIR]
set -u
if [ $# -lt 1 ]; then sed -n 2,7p "$0" >&2; exit 2; fi
bin=$(cd "$1" && pwd)
out=${2:-${OUT:-/tmp}}
export LD_LIBRARY_PATH=$bin/../lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
last=$(($(nproc) - 1))
for server in 0 0-1; do
  first_load=$((${server##*-} + 1))
  for n in 256 1024; do
    for lazy in false true true false; do
      timeout 300 taskset -c "$first_load-$last" "$bin/psync-bench" \
        --coordinator="$bin/psync-coordinator" --server_taskset="$server" --floor=false \
        --lazy_acks="$lazy" --ranks="$n" --optimizers=2 --chunks=8 --steps=20 \
        --step_period_ms=300 --spread_us=200000 --label="psync server=$server" --json \
        >>"$out/lazy.jsonl" 2>>"$out/lazy.err"
      echo "server=$server n=$n lazy=$lazy rc=$?"
    done
  done
done
