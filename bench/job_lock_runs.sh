#!/bin/bash
# Jobs under their own locks against one lock for every job, alternated in one session on one
# host (before, after, after, before per workload) with bench/load_times.py: simulated nodes of 8,
# K=2, C=8, 500 ms steps, arrivals over 100 ms, 16 steps:
#   4 jobs x 4,096 ranks, the coordinator on CPUs 0-3;
#   1 job x 16,384 ranks, the coordinator on CPUs 0-3 (one job: nothing to run at once);
#   8 jobs x 2,048 ranks, the coordinator on CPUs 0-7.
# Writes each run's per-second table and psync-bench JSON lines to OUT_DIR/job-lock-*.txt
# (docs/performance.md, "Second performance round").
#   bench/job_lock_runs.sh BEFORE_DIR AFTER_DIR [OUT_DIR]
set -u
if [ $# -lt 2 ]; then sed -n 2,11p "$0" >&2; exit 2; fi
here=$(cd "$(dirname "$0")" && pwd)
out=${3:-${OUT:-/tmp}}
before=$(cd "$1" && pwd)
after=$(cd "$2" && pwd)
run() {  # ARM CORES JOBS RANKS
  local bin=$before
  [ "$1" = after ] && bin=$after
  timeout 200 python3 "$here/load_times.py" --bin "$bin" --server_cores "$2" --jobs "$3" \
    --ranks "$4" --steps 16 --label "$1" >>"$out/job-lock-$3x$4-cores$2.txt" 2>&1
  echo "$1 jobs=$3 ranks=$4 cores=$2 rc=$?"
}
for workload in "0-3 4 4096" "0-3 1 16384" "0-7 8 2048"; do
  for arm in before after after before; do run "$arm" $workload; done
done
