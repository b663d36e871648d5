#!/bin/bash
# Whose CPUs a release waits for on one host: the same run through relays in front of simulated
# nodes of 8 with the coordinator, the relays and the load generator each on CPUs of their own, and
# the load generator's CPUs (or the relays') varied between layouts. If the last node's wait
# follows the load generator's CPUs, it is the harness's; if it follows the relays' or stays put,
# it is psync's processes'. K=2, C=8, lazy acks, groups of 8, arrivals over 100 ms, 1 warmup step,
# hop times and the relays' directive ages (--agent_metrics), as bench/lock_alternation.sh.
#   SPEC (default 16384:16:1000:8): ranks, relays, step period in ms, load-generating processes.
#   LAYOUTS (default below): name:coordinator_cpus:relay_cpus:load_cpus[:relay_flags[:load_flags]]
#   each; empty lists leave that part unpinned (the load generator's CPUs are psync-bench's own,
#   which the coordinator and the relays inherit when theirs are empty); relay_flags and
#   load_flags, comma-separated, are added to every relay's command line (e.g.
#   --cpus=2,--relay_fanout_threads=1) and to psync-bench's (e.g. --cpus=2).
#   ROUNDS (default 2): the layouts in order, then in reverse, ROUNDS times in all.
#   EXTRA (default empty): flags added to every psync-bench run, e.g. --pump_threads=4.
# Appends psync-bench's JSON lines (labelled with the layout's name) to OUT_DIR/cpu-layouts.jsonl
# and prints the medians per layout (bench/cpu_layout_summary.py).
#   [SPEC=...] [LAYOUTS=...] [ROUNDS=n] bench/cpu_layout_runs.sh BIN_DIR [OUT_DIR]
# BIN_DIR holds psync-bench, psync-coordinator and psync-agent; their shared libraries in
# BIN_DIR/../lib when bundled for another host.
set -u
if [ $# -lt 1 ]; then sed -n 2,20p "$0" >&2; exit 2; fi
bin=$(cd "$1" && pwd)
out=${2:-${OUT:-/tmp}}
mkdir -p "$out"
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=bench/relay_workload.sh
. "$here/relay_workload.sh"
IFS=: read -r ranks relays period procs <<<"${SPEC:-16384:16:1000:8}"
layouts=(${LAYOUTS:-load4:0:1-3:4-7 load8:0:1-3:4-11 load12:0:1-3:4-15 relays7:0:1-7:8-15 unpinned:::})
order=()
for round in $(seq 1 "${ROUNDS:-2}"); do
  if [ $((round % 2)) = 1 ]; then
    order+=("${layouts[@]}")
  else
    for ((i = ${#layouts[@]} - 1; i >= 0; i--)); do order+=("${layouts[$i]}"); done
  fi
done
for layout in "${order[@]}"; do
  IFS=: read -r name coordinator_cpus relay_cpus load_cpus relay_flags load_flags <<<"$layout"
  taskset=()
  [ -n "$load_cpus" ] && taskset=(taskset -c "$load_cpus")
  LD_LIBRARY_PATH=$bin/../lib:${LD_LIBRARY_PATH:-} timeout 280 "${taskset[@]}" "$bin/psync-bench" \
    --coordinator="$bin/psync-coordinator" --agent_binary="$bin/psync-agent" --relays="$relays" \
    "--relay_args=--target={coordinator} --listen=127.0.0.1:0 --port_file={port_file} ${relay_flags//,/ }" \
    --server_taskset="$coordinator_cpus" --relay_taskset="$relay_cpus" \
    --ranks="$ranks" "${RELAY_WORKLOAD[@]}" --steps=$((period >= 4000 ? 5 : 8)) --warmup_steps=1 \
    --step_period_ms="$period" --pump_threads=2 \
    --node_processes="$procs" --hop_times --agent_metrics \
    --coordinator_args=--history_steps=2 --label="$name $ranks/$relays" \
    --json ${load_flags//,/ } ${EXTRA:-} >>"$out/cpu-layouts.jsonl" 2>>"$out/cpu-layouts.err"
  echo "$name $ranks/$relays rc=$?"
done
python3 "$here/cpu_layout_summary.py" "$out/cpu-layouts.jsonl"
