#!/usr/bin/env bash
# The daemons size gRPC's thread pools for the CPUs they are given, not for the host's: with
# --cpus=12 (re-executed with PSYNC_CPUS, same pid) psync-coordinator runs 6 callback threads
# ("nexting_thread": half the count, 2 to 16, made once when the server starts), whatever this
# machine has; with PSYNC_CPUS=10, psync-agent runs 5; under taskset to one CPU the budget is 1; in
# a cgroup with a CPU quota of half a CPU (when this host lets the test make one) it is 1 and the
# log names the quota's file. Each daemon says its budget in one line on stderr. (gRPC's event
# engine starts with as many threads as the count but adds threads while its own are busy, so its
# size is not checked: it depends on the machine's load.)
set -euo pipefail
root="${TEST_SRCDIR:-$(cd "$(dirname "$0")/../.." && pwd)}/${TEST_WORKSPACE:-psync}"
coordinator=$root/server/psync-coordinator
agent=$root/agent/psync-agent
work=$(mktemp -d)
pids=()
cgroup=""
cleanup() {
  for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
  wait 2>/dev/null || true
  [[ -n $cgroup ]] && rmdir "$cgroup" 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT
fail() { echo "daemon_cpus_test: $*" >&2; exit 1; }

# Waits until FILE has a line matching PATTERN (the daemon's own log); fails after 30 s.
await_line() {  # FILE PATTERN
  for _ in $(seq 300); do
    grep -qE "$2" "$1" 2>/dev/null && return 0
    sleep 0.1
  done
  fail "no line matching '$2' in $1: $(cat "$1")"
}
# How many of PID's threads are named NAME.
threads() {  # PID NAME
  local count=0 t
  for t in /proc/"$1"/task/*/comm; do [[ $(cat "$t" 2>/dev/null) == "$2" ]] && count=$((count + 1)); done
  echo "$count"
}
# Waits until PID has COUNT threads named NAME (gRPC starts them while the server starts).
await_threads() {  # PID NAME COUNT
  for _ in $(seq 300); do
    [[ $(threads "$1" "$2") == "$3" ]] && return 0
    sleep 0.1
  done
  fail "pid $1 has $(threads "$1" "$2") threads named $2, expected $3"
}

# --cpus=12 on psync-coordinator: the started pid serves (re-executed in place).
"$coordinator" --listen=127.0.0.1:0 --http_listen= --port_file="$work/port" --cpus=12 \
  2>"$work/coordinator.log" &
pid=$!
pids+=("$pid")
await_line "$work/coordinator.log" "serving psync.v1 on port"
grep -qx "psync-coordinator: thread pools sized for 12 CPUs (--cpus or PSYNC_CPUS)" \
  "$work/coordinator.log" || fail "coordinator log: $(cat "$work/coordinator.log")"
[[ -s $work/port ]] || fail "no port file from pid $pid"
await_threads "$pid" nexting_thread 6
[[ $(threads "$pid" psync-coordinat) -ge 1 ]] || fail "threads lost the binary's name"
echo "coordinator --cpus=12: 6 callback threads, pid $pid"

# PSYNC_CPUS=10 on psync-agent.
PSYNC_CPUS=10 "$agent" --target=127.0.0.1:1 --listen=127.0.0.1:0 --port_file="$work/agent.port" \
  2>"$work/agent.log" &
pid=$!
pids+=("$pid")
await_line "$work/agent.log" "thread pools sized for"
grep -qx "psync-agent: thread pools sized for 10 CPUs (--cpus or PSYNC_CPUS)" "$work/agent.log" ||
  fail "agent log: $(cat "$work/agent.log")"
await_threads "$pid" nexting_thread 5
echo "agent PSYNC_CPUS=10: 5 callback threads"

# The affinity mask: one CPU.
cpu=$(taskset -cp $$ | sed 's/.*: //; s/[-,].*//')
taskset -c "$cpu" "$coordinator" --listen=127.0.0.1:0 --http_listen= 2>"$work/pinned.log" &
pids+=("$!")
await_line "$work/pinned.log" "thread pools sized for"
grep -qE "^psync-coordinator: thread pools sized for 1 CPU \(affinity 1, " "$work/pinned.log" ||
  fail "pinned log: $(cat "$work/pinned.log")"
echo "coordinator on CPU $cpu: budget 1"

# A cgroup CPU quota of half a CPU (v2 cpu.max, or v1 cfs_quota_us), where one can be made.
for parent in /sys/fs/cgroup /sys/fs/cgroup/cpu /sys/fs/cgroup/cpu,cpuacct; do
  folder=$parent/psync-daemon-cpus-test-$$
  mkdir "$folder" 2>/dev/null || continue
  if { [[ -e $folder/cpu.max ]] && echo "50000 100000" >"$folder/cpu.max"; } 2>/dev/null ||
     { [[ -e $folder/cpu.cfs_quota_us ]] && echo 50000 >"$folder/cpu.cfs_quota_us" &&
       echo 100000 >"$folder/cpu.cfs_period_us"; } 2>/dev/null; then
    cgroup=$folder
    break
  fi
  rmdir "$folder"
done
if [[ -z $cgroup ]]; then
  echo "no cgroup with a CPU quota can be made here: the quota case is not run"
  exit 0
fi
bash -c 'echo $$ >"$1/cgroup.procs" && exec "$2" --listen=127.0.0.1:0 --http_listen=' \
  _ "$cgroup" "$coordinator" 2>"$work/cgroup.log" &
pid=$!
pids+=("$pid")
await_line "$work/cgroup.log" "thread pools sized for"
grep -qE "^psync-coordinator: thread pools sized for 1 CPU \(affinity [0-9]+, cgroup quota 0\.50 from $cgroup/cpu\.(max|cfs_quota_us)\)$" \
  "$work/cgroup.log" || fail "cgroup log: $(cat "$work/cgroup.log")"
kill "$pid"; wait "$pid" 2>/dev/null || true
echo "coordinator in $cgroup (quota 0.5 CPU): budget 1"
