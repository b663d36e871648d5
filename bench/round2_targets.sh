#!/bin/bash
# The second performance round's targets 1 to 4 at one build, side by side in one run on one host
# (docs/performance.md, "Second round: the targets at the end"). The coordinator is pinned to the
# first CPUs (--server_taskset), the load generators run on the others; K=2, C=8:
#   t1: ranks on their own Sessions (lazy acks), 256 and 1,024 ranks, 20 steps of 300 ms, arrivals
#       over 200 ms, the coordinator on CPU 0, the bare gRPC echo server measured in the same
#       invocation, and TCPStore (bench/tcpstore_barrier.py) on the same workload with its server on
#       CPU 0; then both with nothing pinned at 256 ranks (the issue's set-up);
#   t2: 1,024 ranks behind simulated nodes of 8 (20 ms window, lazy AgentAcks), the same workload,
#       the coordinator on CPUs 0-1 (on a 2-CPU machine: CPU 0);
#   t3: 16,384 ranks in groups of 8 behind nodes of 8, 10 steps of 500 ms, arrivals over 100 ms,
#       --history_steps=2, the coordinator on CPU 0, then on CPUs 0-3 (4 or more spare CPUs);
#   t4: (with --linearity) the cost against ranks x chunks, bench/linearity_runs.sh's two sweeps.
# Appends JSON lines labelled "t1 ...", "t2 ...", "t3 ..." to OUT_DIR/round2.jsonl (t4 to
# OUT_DIR/linearity.jsonl); bench/round2_summary.py OUT_DIR/round2.jsonl prints the table.
#   bench/round2_targets.sh BIN_DIR [OUT_DIR] [--linearity]
# BIN_DIR holds psync-bench and psync-coordinator (their shared libraries in BIN_DIR/../lib when
# bundled for another host). PYTHON names the interpreter with torch (default /usr/bin/python3).
set -u
if [ $# -lt 1 ]; then sed -n 2,19p "$0" >&2; exit 2; fi
here=$(cd "$(dirname "$0")" && pwd)
bin=$(cd "$1" && pwd)
out=${2:-${OUT:-/tmp}}
linearity=${3:-}
python=${PYTHON:-/usr/bin/python3}
export LD_LIBRARY_PATH=$bin/../lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
last=$(($(nproc) - 1))
two=0-1
((last < 3)) && two=0
pin=()
pin_load() {  # SERVER_CPUS: the load on the CPUs after them ("all": nothing pinned)
  pin=()
  if [ "$1" != all ]; then pin=(taskset -c "$((${1##*-} + 1))-$last"); fi
}
run() {  # LABEL SERVER_CPUS psync-bench flags...
  local label=$1 server=$2
  shift 2
  pin_load "$server"
  if [ "$server" != all ]; then set -- --server_taskset="$server" "$@"; fi
  timeout 300 "${pin[@]}" "$bin/psync-bench" --coordinator="$bin/psync-coordinator" \
    --optimizers=2 --chunks=8 --label="$label" --json "$@" >>"$out/round2.jsonl" 2>>"$out/round2.err"
  echo "$label rc=$?"
}
tcpstore() {  # LABEL SERVER_CPUS RANKS: the TCPStore server pinned like the coordinator, or not
  local label=$1 server=$2 n=$3
  pin_load "$server"
  set --
  if [ "$server" != all ]; then set -- --server_taskset="$server"; fi
  timeout 300 "${pin[@]}" "$python" "$here/tcpstore_barrier.py" --ranks="$n" --optimizers=2 \
    --chunks=8 "${paced[@]}" --label="$label" --json "$@" >>"$out/round2.jsonl" 2>>"$out/round2.err"
  echo "$label rc=$?"
}
paced=(--steps=20 --step_period_ms=300 --spread_us=200000)
for n in 256 1024; do
  run "t1 direct n=$n server=0" 0 --ranks=$n "${paced[@]}" --lazy_acks=true \
    --floor_streams=$n --floor_interval_ms=$((n / 25)) --floor_seconds=5
  tcpstore "t1 tcpstore n=$n server=0" 0 $n
done
# The issue's own set-up: nothing pinned, every CPU shared by the server and its load.
run "t1 direct n=256 server=all" all --ranks=256 "${paced[@]}" --lazy_acks=true --floor=false
tcpstore "t1 tcpstore n=256 server=all" all 256
run "t2 nodes n=1024 server=$two" "$two" --ranks=1024 "${paced[@]}" --floor=false \
  --simulated_nodes=8 --node_tick_us=20000 --lazy_acks=true
big=(--ranks=16384 --group_size=8 --steps=10 --warmup_steps=1 --step_period_ms=500
  --spread_us=100000 --timeout_s=240 --floor=false --simulated_nodes=8 --node_tick_us=20000
  --lazy_acks=true --coordinator_args=--history_steps=2)
run "t3 nodes n=16384 server=0" 0 "${big[@]}"
if ((last >= 7)); then run "t3 nodes n=16384 server=0-3" 0-3 "${big[@]}"; fi
if [ "$linearity" = --linearity ]; then "$here/linearity_runs.sh" "$bin" "$out"; fi
