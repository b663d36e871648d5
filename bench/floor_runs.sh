#!/bin/bash
# A direct-Session check-in's coordinator CPU against the bare gRPC echo server's CPU per message,
# measured in the same psync-bench invocation on the same host: the coordinator and the echo
# server pinned to the first 1, 2 and 4 CPUs (--server_taskset), the load generator on the others;
# 256 and 1,024 ranks x 2 optimizers x 8 chunks, 20 steps of 300 ms, arrivals over 200 ms; the
# echo server loaded with as many paced streams as ranks, about 25,600 round trips/s in all.
# Appends psync-bench's JSON lines to OUT_DIR/floor.jsonl (docs/performance.md, "Second
# performance round"). Needs taskset (util-linux) and at least 5 CPUs.
#   bench/floor_runs.sh BIN_DIR [OUT_DIR]
# BIN_DIR holds psync-bench and psync-coordinator (and their shared libraries in BIN_DIR/../lib
# when they were bundled for another host).
set -u
if [ $# -lt 1 ]; then sed -n 2,11p "$0" >&2; exit 2; fi
bin=$(cd "$1" && pwd)
out=${2:-${OUT:-/tmp}}
export LD_LIBRARY_PATH=$bin/../lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
last=$(($(nproc) - 1))
for server in 0 0-1 0-3; do
  first_load=$((${server##*-} + 1))
  for n in 256 1024; do
    interval=$((n / 25))  # streams x (1000 / interval) = 25,600 round trips/s
    timeout 300 taskset -c "$first_load-$last" "$bin/psync-bench" \
      --coordinator="$bin/psync-coordinator" --server_taskset="$server" \
      --floor_streams="$n" --floor_interval_ms="$interval" --floor_seconds=5 \
      --ranks="$n" --optimizers=2 --chunks=8 --steps=20 --step_period_ms=300 \
      --spread_us=200000 --label="psync server=$server" --json >>"$out/floor.jsonl" 2>>"$out/floor.err"
    echo "server=$server n=$n rc=$?"
  done
done
