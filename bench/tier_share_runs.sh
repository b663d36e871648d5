#!/bin/bash
# What each tier of the relay layout adds when it has CPUs of its own, as on a cluster, next to the
# whole layout on one host. A cluster of N ranks behind R relays runs each relay on a host of its
# own, with N/R ranks' nodes behind it; one host running all R relays and every node stream shares
# its cores between them. Three layouts of one build, alternated (bench/cpu_layout_runs.sh):
#   shared       N ranks in simulated nodes of 8, through R relays, nothing pinned (relays sized
#                for 1 CPU, the load generator for 2): the one-host figure of docs/performance.md.
#   relay        one relay's share: N/R ranks through ONE relay on a core of its own (CPU 1, sized
#                for 1), the coordinator on CPU 0, the load generator on CPUs 2-15.
#   coordinator  the coordinator's share: N ranks as R simulated streams of N/R ranks each, as a
#                relay's merged stream arrives (a batch every 2 ms, nothing sent early), straight to
#                the coordinator on CPU 0, the load generator on CPUs 1-15.
# K=2, C=8, lazy acks, groups of 8, arrivals over SPREAD_US (default 100 ms), 1 warmup step.
#   SIZE: 4096 (4 relays, 300 ms steps), 16384 (16 relays, 1 s steps; default) or 131072 (64
#   relays, STEP_MS, default 1000). ROUNDS (default 2): the layouts in order, then reversed.
#   ONLY (default "shared relay coordinator"): the layouts to run.
# Needs 16 CPUs. Appends to OUT_DIR/cpu-layouts.jsonl and prints the medians per layout.
#   [SIZE=n] [ROUNDS=n] [SPREAD_US=us] bench/tier_share_runs.sh BIN_DIR [OUT_DIR]
set -u
if [ $# -lt 1 ]; then sed -n 2,18p "$0" >&2; exit 2; fi
here=$(cd "$(dirname "$0")" && pwd)
size=${SIZE:-16384}
case "$size" in
  4096) relays=4 period=300 procs=4 ;;
  16384) relays=16 period=1000 procs=8 ;;
  131072) relays=64 period=${STEP_MS:-1000} procs=8 ;;
  *) echo "SIZE must be 4096, 16384 or 131072" >&2; exit 2 ;;
esac
per_relay=$((size / relays))
spread=--spread_us=${SPREAD_US:-100000}
shared="shared::::--cpus=1:--cpus=2,$spread"
relay="relay:0:1:2-15:--cpus=1:--cpus=2,$spread,--ranks=$per_relay,--relays=1"
coordinator="coordinator:0::1-15::--cpus=2,$spread,--relays=0,--simulated_nodes=$per_relay"
coordinator+=",--node_tick_us=2000,--node_flush_on_complete=false"
layouts=()
for name in ${ONLY:-shared relay coordinator}; do
  case "$name" in
    shared) layouts+=("$shared") ;;
    relay) layouts+=("$relay") ;;
    coordinator) layouts+=("$coordinator") ;;
    *) echo "ONLY: no layout '$name'" >&2; exit 2 ;;
  esac
done
SPEC="$size:$relays:$period:$procs" LAYOUTS="${layouts[*]}" exec "$here/cpu_layout_runs.sh" "$@"
