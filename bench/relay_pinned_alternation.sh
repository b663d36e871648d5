#!/bin/bash
# One relay alone on a core of its own, its arms alternated: the relay's CPU per check-in and per
# node message, the messages a node sent and read per step, and the release, without the host's
# other processes in the relay's measurement. 1,024 ranks (128 simulated nodes of 8) through one
# relay pinned to CPU 1 and sized for one CPU; the coordinator and the load generator share CPU 0
# (one node process, one pump thread); 500 ms steps, 12 measured after 1 of warmup, the workload of
# bench/relay_workload.sh (arrivals over SPREAD_US, default 100000). ROUNDS (default 4): the arms in
# order, then in reverse, and so on. Appends psync-bench's JSON lines (labelled with the arm's name)
# to OUT_DIR/relay-pinned.jsonl and prints each arm's medians (bench/relay_pinned_summary.py).
#   [ROUNDS=n] [SPREAD_US=us] bench/relay_pinned_alternation.sh OUT_DIR ARM...
# ARM is name:BIN_DIR[:relay_flags[:bench_flags]], each list of flags comma-separated (e.g.
# --relay_fanout_threads=1 for the relay, --node_sync_done_delay_us=50000 for psync-bench); BIN_DIR
# holds psync-bench, psync-coordinator and psync-agent. Needs CPUs 0 and 1.
set -u
if [ $# -lt 2 ]; then sed -n 2,14p "$0" >&2; exit 2; fi
out=$1
shift
mkdir -p "$out"
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=bench/relay_workload.sh
. "$here/relay_workload.sh"
arms=("$@")
for round in $(seq 1 "${ROUNDS:-4}"); do
  order=("${arms[@]}")
  if [ $((round % 2)) = 0 ]; then
    order=()
    for ((i = ${#arms[@]} - 1; i >= 0; i--)); do order+=("${arms[$i]}"); done
  fi
  for arm in "${order[@]}"; do
    IFS=: read -r name dir relay_flags bench_flags <<<"$arm"
    bin=$(cd "$dir" && pwd)
    LD_LIBRARY_PATH=$bin/../lib:${LD_LIBRARY_PATH:-} timeout 120 taskset -c 0 "$bin/psync-bench" \
      --coordinator="$bin/psync-coordinator" --agent_binary="$bin/psync-agent" --relays=1 \
      --relay_taskset=1 --server_taskset=0 \
      "--relay_args=--target={coordinator} --listen=127.0.0.1:0 --port_file={port_file} --cpus=1 ${relay_flags//,/ }" \
      --ranks=1024 "${RELAY_WORKLOAD[@]}" --spread_us="${SPREAD_US:-100000}" --steps=12 \
      --warmup_steps=1 --step_period_ms=500 --pump_threads=1 --node_processes=1 --cpus=1 \
      --hop_times --agent_metrics --label="$name" --json ${bench_flags//,/ } \
      >>"$out/relay-pinned.jsonl" \
      2>>"$out/relay-pinned.err"
    echo "$name rc=$?"
  done
done
python3 "$here/relay_pinned_summary.py" "$out/relay-pinned.jsonl"
