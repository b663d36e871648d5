#!/usr/bin/env bash
# Real Gloo workers survive coordinator kill -9 restarts: a psync-coordinator process and 4
# psync-worker processes (W=4, E=2, 4 chunks, 40 steps, CPU + Gloo, coordinated, every step's
# weights verified against the CPU reference on every rank). The coordinator is killed with
# SIGKILL twice while the job runs and comes back on the same port with no state; the workers'
# clients resume (JoinRequest.resume) and the job finishes with every step verified on every rank
# and no early or repeated sync in the new coordinator's audit.
set -euo pipefail
coordinator="$TEST_SRCDIR/psync/server/psync-coordinator"
worker="$TEST_SRCDIR/psync/worker/psync-worker"
tmp="${TEST_TMPDIR:-$(mktemp -d)}"
steps=40

"$coordinator" --listen=127.0.0.1:0 --port_file="$tmp/port.0" --http_listen= 2>"$tmp/coordinator.0.log" &
coordinator_pid=$!
for _ in $(seq 200); do [[ -s "$tmp/port.0" ]] && break; sleep 0.05; done
port=$(cat "$tmp/port.0")
pids=()
for rank in 0 1 2 3; do
  "$worker" --target=127.0.0.1:$port --job=restart --world_size=4 --rank=$rank --expert_parallel=2 \
    --chunks=4 --steps=$steps --timeout_s=60 >"$tmp/rank$rank.log" 2>&1 &
  pids+=($!)
done
cleanup() { kill -9 "${pids[@]}" "$coordinator_pid" 2>/dev/null || true; }
trap cleanup EXIT

# Kill the coordinator once rank 0 reached step 10, and again at step 25.
restarts=0
for at in 10 25; do
  for _ in $(seq 1200); do
    grep -q "^rank 0 step $at:" "$tmp/rank0.log" && break
    sleep 0.05
  done
  kill -9 "$coordinator_pid"
  wait "$coordinator_pid" 2>/dev/null || true
  restarts=$((restarts + 1))
  "$coordinator" --listen=127.0.0.1:$port --port_file="$tmp/port.$restarts" --http_listen= \
    2>"$tmp/coordinator.$restarts.log" &
  coordinator_pid=$!
  echo "coordinator killed (kill -9) at rank 0 step $at and restarted on port $port"
done

status=0
for i in 0 1 2 3; do
  if ! wait "${pids[$i]}"; then
    echo "rank $i failed:"; tail -n 20 "$tmp/rank$i.log"; status=1
  fi
done
for rank in 0 1 2 3; do
  grep " result: " "$tmp/rank$rank.log" || { echo "rank $rank printed no result"; status=1; }
  grep -q "rank $rank result: OK: all $steps steps verified" "$tmp/rank$rank.log" || status=1
done
audit=$("$worker" --target=127.0.0.1:$port --job=restart --audit) || { echo "$audit"; status=1; }
head -n 3 <<<"$audit"
exit $status
