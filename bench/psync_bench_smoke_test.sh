#!/usr/bin/env bash
# Smoke test of psync-bench: 8 ranks x 2 optimizers x 2 chunks x 3 steps against a coordinator it
# starts, and a short gRPC floor; the throughput mode; simulated node agents; ranks spread over
# several processes, direct and behind real node agents; --cpus sizing the node processes only.
# Checks the counts in the JSON (every (step, chunk) released once to every rank, no duplicate or
# unexpected directive), never timings.
#   psync_bench_smoke_test.sh PSYNC_BENCH PSYNC_COORDINATOR PSYNC_AGENT
set -euo pipefail
bench=$1
coordinator=$2
agent=$3
tmp=${TEST_TMPDIR:-$(mktemp -d)}

out=$("$bench" --coordinator="$coordinator" --ranks=8 --optimizers=2 --chunks=2 --steps=3 \
  --warmup_steps=0 --spread_us=200 --floor_round_trips=50 --json --log_dir="$tmp")
echo "$out"
[[ $(echo "$out" | wc -l) -eq 1 ]] || { echo "FAIL: expected one JSON line"; exit 1; }

expect() {
  if ! grep -q -- "$1" <<<"$out"; then
    echo "FAIL: expected $1"
    exit 1
  fi
}
expect '"ok":true'
expect '"releases_expected":6,'
expect '"releases_complete":6,'
expect '"distinct_sequences":6,'
expect '"duplicate_directives":0,'
expect '"unexpected_directives":0,'
expect '"sequence_mismatches":0,'
expect '"checkins":96,'      # 8 ranks x 2 optimizers x 2 chunks x 3 steps
expect '"directives":48,'    # 8 ranks x 2 chunks x 3 steps
expect '"release_latency":{"count":6,'
expect '"release_first_latency":{"count":6,'
expect '"grpc_floor_rtt":{"count":50,'

# Throughput mode batches a rank's check-ins of a step into one message.
out=$("$bench" --coordinator="$coordinator" --throughput --ranks=8 --optimizers=2 --chunks=2 \
  --steps=3 --warmup_steps=1 --floor=false --json --log_dir="$tmp")
echo "$out"
expect '"ok":true'
expect '"mode":"throughput"'
expect '"releases_complete":8,'
expect '"checkins":96,'

# 10 ranks x 2 optimizers x 2 chunks, 3 measured steps after 1 warmup step: every release exactly
# once, and the exact counts.
expect_ten_ranks_counts() {
  expect '"ok":true'
  expect '"releases_expected":8,'
  expect '"releases_complete":8,'
  expect '"distinct_sequences":8,'
  expect '"duplicate_directives":0,'
  expect '"unexpected_directives":0,'
  expect '"sequence_mismatches":0,'
  expect '"checkins":120,'  # 10 ranks x 2 optimizers x 2 chunks x 3 measured steps
  expect '"directives":80,' # 10 ranks x 2 chunks x 4 steps, warmup included
  expect '"release_latency":{"count":6,'
}

# Simulated node agents: 10 ranks on nodes of 4, 4 and 2, one AgentSession each; 3 measured steps
# of 2 chunks after 1 warmup step. Every release exactly once, and the exact counts.
run_nodes() {
  out=$("$bench" --coordinator="$coordinator" --simulated_nodes=4 --ranks=10 --optimizers=2 \
    --chunks=2 --steps=3 --warmup_steps=1 --step_period_ms=50 --spread_us=5000 --floor=false \
    --json --log_dir="$tmp" "$@")
  echo "$out"
  expect_ten_ranks_counts
}
run_nodes --hop_times
expect '"system":"psync+nodes"'
# Every measured release's decision was read from the coordinator's events and split there.
expect '"hops":{"matched":6,"up":{"count":6,'
expect '"ranks_per_node":4,'
# The same nodes spread over 2 processes (node n in process n % 2): one job, the merged counts
# exact.
run_nodes --node_processes=2
# Param syncs of 20 ms (each SyncDone 20 ms after its directive; the next step's check-ins of a
# rank wait for its SyncDones): the same exact counts.
run_nodes --node_sync_done_delay_us=20000
expect '"node_sync_done_delay_us":20000,'
# --cpus sizes gRPC's pools in psync-bench's node processes, and not in the coordinator it starts.
cpus_logs=$tmp/cpus
mkdir -p "$cpus_logs"
out=$("$bench" --coordinator="$coordinator" --simulated_nodes=4 --ranks=10 --optimizers=2 \
  --chunks=2 --steps=3 --warmup_steps=1 --step_period_ms=50 --spread_us=5000 --floor=false \
  --json --log_dir="$cpus_logs" --node_processes=2 --cpus=3)
echo "$out"
expect_ten_ranks_counts
for worker in 0 1; do
  grep -q "psync-bench: thread pools sized for 3 CPUs" "$cpus_logs"/psync-bench-*-load-0/worker-$worker.log ||
    { echo "FAIL: node process $worker was not sized for --cpus=3"; exit 1; }
done
grep -q "psync-coordinator: thread pools sized for" "$cpus_logs"/psync-bench-*-coordinator-0.log ||
  { echo "FAIL: the coordinator's log names no budget"; exit 1; }
if grep -q "PSYNC_CPUS" "$cpus_logs"/psync-bench-*-coordinator-0.log; then
  echo "FAIL: the coordinator was sized by psync-bench's --cpus"; exit 1
fi
if out=$("$bench" --coordinator="$coordinator" --simulated_nodes=4 --ranks=8 --floor=false \
    --step_period_ms=50 --node_processes=2 --hold_nodes=0 --json --log_dir="$tmp" 2>&1); then
  echo "FAIL: --node_processes with --hold_nodes must fail"; exit 1
fi
grep -q "node_processes above 1 and --hold_nodes exclude each other" <<<"$out" ||
  { echo "FAIL: $out"; exit 1; }

# Ranks on their own Sessions spread over processes (rank r in process r % P): one job, the merged
# counts exact; directly to the coordinator, and behind 2 real node agents of 5 ranks each.
run_ranks() {
  out=$("$bench" --coordinator="$coordinator" --ranks=10 --optimizers=2 --chunks=2 --steps=3 \
    --warmup_steps=1 --spread_us=2000 --lazy_acks=true --floor=false --json --log_dir="$tmp" "$@")
  echo "$out"
  expect_ten_ranks_counts
}
run_ranks --node_processes=3
expect '"system":"psync"'
run_ranks --node_processes=2 --agents=2 --agent_binary="$agent" \
  "--agent_args=--target={coordinator} --listen=127.0.0.1:0 --port_file={port_file}"
expect '"system":"psync+agents"'
expect '"agents":2,'

# Bad input names the flag and runs nothing.
if out=$("$bench" --coordinator="$coordinator" --ranks=4 --node_processes=5 --floor=false \
    --json --log_dir="$tmp" 2>&1); then
  echo "FAIL: --node_processes above --ranks must fail"; exit 1
fi
grep -q -- "--node_processes must be at most --ranks" <<<"$out" || { echo "FAIL: $out"; exit 1; }
if out=$("$bench" --coordinator="$coordinator" --simulated_nodes=4 --ranks=8 --floor=false \
    --json --log_dir="$tmp" 2>&1); then
  echo "FAIL: --simulated_nodes without --step_period_ms must fail"; exit 1
fi
grep -q "needs --step_period_ms > 0" <<<"$out" || { echo "FAIL: $out"; exit 1; }
if out=$("$bench" --coordinator="$coordinator" --simulated_nodes=4 --ranks=8 --floor=false \
    --step_period_ms=50 --node_sync_done_delay_us=-1 --json --log_dir="$tmp" 2>&1); then
  echo "FAIL: a negative --node_sync_done_delay_us must fail"; exit 1
fi
grep -q -- "--node_sync_done_delay_us must not be negative" <<<"$out" || { echo "FAIL: $out"; exit 1; }
echo "PASS"
