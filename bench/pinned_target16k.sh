#!/usr/bin/env bash
# The 16k target (16,384 ranks x 2 optimizers x 8 chunks behind simulated nodes of 8, 2 steps/s)
# with the coordinator alone on CPU 0 and the load generator on the other CPUs, so that the
# coordinator's cost is measured without the generator competing for its core. Prints
# psync-bench's JSON line. Needs taskset (util-linux) and at least 2 CPUs.
#   bench/pinned_target16k.sh BIN_DIR STEPS [more psync-bench flags]
# BIN_DIR holds psync-bench and psync-coordinator (e.g. bazel-bin/bench with the coordinator
# copied next to it); later flags override the defaults, e.g. --step_period_ms=333.
set -euo pipefail
if [ $# -lt 2 ]; then sed -n 2,8p "$0" >&2; exit 2; fi
bin=$(cd "$1" && pwd) steps=$2
shift 2
wrapper=$(mktemp /tmp/psync-coordinator-cpu0.XXXXXX)
trap 'rm -f "$wrapper"' EXIT
# exec keeps the pid psync-bench started, the one whose CPU and memory it samples.
printf '#!/bin/sh\nexec taskset -c 0 "%s" "$@"\n' "$bin/psync-coordinator" > "$wrapper"
chmod +x "$wrapper"
last=$(($(nproc) - 1))
taskset -c "1-$last" "$bin/psync-bench" --coordinator="$wrapper" --ranks=16384 --optimizers=2 \
  --chunks=8 --step_period_ms=500 --spread_us=100000 --steps="$steps" --warmup_steps=1 \
  --group_size=8 --simulated_nodes=8 --node_tick_us=20000 --timeout_s=600 --floor=false \
  --coordinator_args=--history_steps=2 --json "$@"
