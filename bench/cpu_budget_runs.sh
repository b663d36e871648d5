#!/bin/bash
# The coordinator's CPU per check-in by how its thread pools are sized (issue: "the coordinator
# uses the CPUs it is given"): 256 ranks on their own Sessions (K=2, C=8, 20 steps of 300 ms,
# arrivals over 200 ms, lazy acks), one build, four arms alternated (a b c d d c b a):
#   host:    unpinned, pools sized for the host (the default on a host without a quota);
#   cpus1:   unpinned, --cpus=1 (pools sized for one CPU, the scheduler free to move threads);
#   pinned:  taskset to CPU 0 (the affinity mask makes the budget 1), load generators elsewhere;
#   cgroup1: a cgroup CPU quota of one CPU (v2 cpu.max or v1 cfs_quota_us; skipped when no cgroup
#            folder can be made), nothing pinned: the budget follows the quota.
# Appends psync-bench's JSON lines (system = the arm) to OUT_DIR/cpu_budget.jsonl and prints the
# median per arm: coordinator CPU per check-in, cores, release p50/p99, the generator's CPU.
#   bench/cpu_budget_runs.sh BIN_DIR [OUT_DIR]   (BIN_DIR holds psync-bench and psync-coordinator;
#   shared libraries in BIN_DIR/../lib when bundled for another host)
set -u
if [ $# -lt 1 ]; then sed -n 2,14p "$0" >&2; exit 2; fi
bin=$(cd "$1" && pwd)
out=${2:-${OUT:-/tmp}}
mkdir -p "$out"
export LD_LIBRARY_PATH=$bin/../lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}

# A cgroup of one CPU, and a wrapper that enters it and starts the coordinator (same pid).
cgroup=""
for parent in /sys/fs/cgroup /sys/fs/cgroup/cpu /sys/fs/cgroup/cpu,cpuacct; do
  folder=$parent/psync-bench-$$
  if mkdir "$folder" 2>/dev/null; then
    if [ -e "$folder/cpu.max" ] && echo "100000 100000" >"$folder/cpu.max" 2>/dev/null; then
      cgroup=$folder; break
    fi
    if [ -e "$folder/cpu.cfs_quota_us" ] && echo 100000 >"$folder/cpu.cfs_quota_us" 2>/dev/null &&
       echo 100000 >"$folder/cpu.cfs_period_us" 2>/dev/null; then
      cgroup=$folder; break
    fi
    rmdir "$folder"
  fi
done
wrapper=$out/coordinator-in-cgroup.sh
printf '#!/bin/bash\necho $$ > %s/cgroup.procs || exit 3\nexec %s "$@"\n' "$cgroup" \
  "$bin/psync-coordinator" >"$wrapper"
chmod +x "$wrapper"
echo "cgroup: ${cgroup:-none (the cgroup1 arm is skipped)}"

run() {  # ARM
  local arm=$1 coordinator=$bin/psync-coordinator extra=()
  case $arm in
    cpus1) extra=(--coordinator_args=--cpus=1) ;;
    pinned) extra=(--server_taskset=0) ;;
    cgroup1) [ -n "$cgroup" ] || return 0; coordinator=$wrapper ;;
  esac
  timeout 240 "$bin/psync-bench" --coordinator="$coordinator" --optimizers=2 --chunks=8 \
    --lazy_acks=true --floor=false --ranks=256 --steps=20 --step_period_ms=300 \
    --spread_us=200000 --label="$arm" --json "${extra[@]}" \
    >>"$out/cpu_budget.jsonl" 2>>"$out/cpu_budget.err"
  echo "$arm rc=$?"
}
for arm in host cpus1 pinned cgroup1 cgroup1 pinned cpus1 host; do run "$arm"; done
[ -n "$cgroup" ] && rmdir "$cgroup"
python3 - "$out/cpu_budget.jsonl" <<'PY'
import collections, json, statistics, sys
runs = collections.defaultdict(list)
for line in open(sys.argv[1]):
    r = json.loads(line)
    runs[r["system"]].append(r)
print("%-8s %3s %14s %7s %9s %9s %12s %s" % ("arm", "n", "us/check-in", "cores", "p50", "p99",
                                            "bench cores", "exactly once"))
for arm in ("host", "cpus1", "pinned", "cgroup1"):
    rs = runs.get(arm)
    if not rs:
        continue
    med = lambda f: statistics.median(f(r) for r in rs)
    print("%-8s %3d %14.1f %7.2f %7.2fms %7.2fms %12.2f %s" % (
        arm, len(rs), med(lambda r: r["coordinator"]["cpu_s_per_1m_checkins"]),
        med(lambda r: r["coordinator"]["cpu_fraction"]),
        med(lambda r: r["release_latency"]["p50_us"]) / 1e3,
        med(lambda r: r["release_latency"]["p99_us"]) / 1e3,
        med(lambda r: r["bench_cpu_s"] / r["measured_s"]),
        all(r["ok"] and r["duplicate_directives"] == 0 for r in rs)))
PY
