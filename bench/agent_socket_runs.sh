#!/bin/bash
# Real node agents (8 of 8 ranks) with their ranks on TCP loopback against a unix socket,
# alternated tcp/unix/unix/tcp/tcp/unix; K=2, C=8, lazy acks, arrivals over 200 ms of 300 ms steps.
# Appends psync-bench's JSON lines (system "tcp" or "unix") to OUT (default
# /tmp/agent-socket-runs.jsonl). Needs an opt build:
#   bazel build -c opt //server:psync-coordinator //bench:psync-bench //agent:psync-agent
#   bench/agent_socket_runs.sh [OUT]
set -u
cd "$(dirname "$0")/.."
B=$PWD/bazel-bin
out=${1:-/tmp/agent-socket-runs.jsonl}
for mode in tcp unix unix tcp tcp unix; do
  if [ $mode = unix ]; then
    args="--target={coordinator} --listen=unix:/tmp/psync-bench-agent-$$-{index}.sock --port_file={port_file}"
  else
    args="--target={coordinator} --listen=127.0.0.1:0 --port_file={port_file}"
  fi
  timeout 200 $B/bench/psync-bench --coordinator=$B/server/psync-coordinator --agent_binary=$B/agent/psync-agent --agents=8 \
   --ranks=64 --optimizers=2 --chunks=8 --lazy_acks=true --floor=false --steps=30 --warmup_steps=1 \
   --step_period_ms=300 --spread_us=200000 --agent_args="$args" --label=$mode --json >>"$out" 2>>"$out.err"
  echo "$mode rc=$?"
  rm -f /tmp/psync-bench-agent-$$-*.sock
done
