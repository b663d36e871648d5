# shellcheck shell=bash
# The workload of the relay tier's runs (docs/performance.md): simulated nodes of 8 ranks, sync
# groups of 8, K = 2 optimizers, C = 8 chunks, lazy acks, a node tick of 20 ms, a step's
# check-ins arriving over 100 ms. Sourced by cpu_layout_runs.sh, lock_alternation.sh,
# relay_alternation.sh and way_down_runs.sh, which add the size, the steps and what they time;
# a flag given after these (e.g. another --spread_us) overrides it.
# shellcheck disable=SC2034  # used by the scripts that source this
RELAY_WORKLOAD=(--group_size=8 --optimizers=2 --chunks=8 --lazy_acks=true --floor=false
  --spread_us=100000 --simulated_nodes=8 --node_tick_us=20000)
