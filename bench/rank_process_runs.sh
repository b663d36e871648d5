#!/bin/bash
# Real node agents (psync-agent, 8 ranks each), their ranks driven by one load-generating process
# against several (psync-bench --node_processes=P: rank r in process r % P, as separate rank
# processes would be), every hop timed (--hop_times). K=2, C=8, lazy acks, 20 steps of 300 ms:
#   paced: RANKS_PACED ranks (default 256), arrivals over 200 ms;
#   burst: RANKS_BURST ranks (default 1024), arrivals within 1 ms.
# ORDER (default "1 6 6 1") lists the P of each run, per workload. With PIN=1 (default with 16 or
# more CPUs) the coordinator runs on CPUs 0-1, the agents on 2-9 and the load processes on the
# rest, so that neither the agents' nor the coordinator's figures are the load generator's.
# EXTRA (default empty) adds psync-bench flags to every run, e.g. EXTRA=--agent_metrics for the
# agents' wait histograms and directive ages in the JSON. Appends psync-bench's JSON lines
# (labelled "ranks-in-P") to OUT_DIR/rank-processes.jsonl and prints the medians per workload and P.
#   [ORDER=...] [PIN=0|1] [EXTRA=...] bench/rank_process_runs.sh BIN_DIR [OUT_DIR]
# BIN_DIR holds psync-bench, psync-coordinator and psync-agent (their shared libraries in
# BIN_DIR/../lib when bundled for another host, or on LD_LIBRARY_PATH).
set -u
if [ $# -lt 1 ]; then sed -n 2,14p "$0" >&2; exit 2; fi
bin=$(cd "$1" && pwd)
out=${2:-${OUT:-/tmp}}
mkdir -p "$out"
cpus=$(nproc)
pin=${PIN:-$([ "$cpus" -ge 16 ] && echo 1 || echo 0)}
run() {  # P RANKS psync-bench flags...
  local p=$1 ranks=$2 taskset=() placed=()
  shift 2
  if [ "$pin" = 1 ]; then
    taskset=(taskset -c "10-$((cpus - 1))")
    placed=(--server_taskset=0-1 --agent_taskset=2-9)
  fi
  # shellcheck disable=SC2086  # EXTRA is a list of flags
  LD_LIBRARY_PATH=$bin/../lib:$bin:${LD_LIBRARY_PATH:-} timeout 280 "${taskset[@]}" \
    "$bin/psync-bench" --coordinator="$bin/psync-coordinator" --agent_binary="$bin/psync-agent" \
    --agents=$((ranks / 8)) --ranks="$ranks" --node_processes="$p" "${placed[@]}" \
    "--agent_args=--target={coordinator} --listen=127.0.0.1:0 --port_file={port_file}" \
    --optimizers=2 --chunks=8 --lazy_acks=true --floor=false --steps=20 --step_period_ms=300 \
    --hop_times --label="ranks-in-$p" --json ${EXTRA:-} "$@" \
    >>"$out/rank-processes.jsonl" 2>>"$out/rank-processes.err"
  echo "ranks-in-$p ranks $ranks $* rc=$?"
}
for workload in "${RANKS_PACED:-256} --spread_us=200000" "${RANKS_BURST:-1024} --spread_us=1000"; do
  for p in ${ORDER:-1 6 6 1}; do
    # shellcheck disable=SC2086
    run "$p" $workload
  done
done
python3 - "$out/rank-processes.jsonl" <<'PY'
import collections, json, statistics, sys
runs = collections.defaultdict(list)
for line in open(sys.argv[1]):
    r = json.loads(line)
    runs[(r["ranks"], r["spread_us"], r["system"])].append(r)
print("%-6s %-8s %-12s %2s %15s %15s %13s %17s %10s %10s %10s %s" % (
    "ranks", "spread", "load", "n", "total p50/p99", "up p50/p99", "down first p50",
    "down last p50/p99", "coord us", "agents us", "load cores", "exactly once"))
for (ranks, spread, label), rs in sorted(runs.items()):
    med = lambda f: statistics.median(f(r) for r in rs)
    ms = lambda f: med(f) / 1e3
    per = lambda key: med(lambda r: r[key]["cpu_s"] / r["checkins"] * 1e6)
    print("%-6d %-8d %-12s %2d %7.1f/%6.1fms %7.1f/%6.1fms %11.1fms %8.1f/%6.1fms %10.1f %10.1f %10.2f %s" % (
        ranks, spread, label, len(rs), ms(lambda r: r["release_latency"]["p50_us"]),
        ms(lambda r: r["release_latency"]["p99_us"]), ms(lambda r: r["hops"]["up"]["p50_us"]),
        ms(lambda r: r["hops"]["up"]["p99_us"]), ms(lambda r: r["hops"]["down_first"]["p50_us"]),
        ms(lambda r: r["hops"]["down_last"]["p50_us"]),
        ms(lambda r: r["hops"]["down_last"]["p99_us"]), per("coordinator"), per("agents_total"),
        med(lambda r: r["bench_cpu_s"] / r["measured_s"]),
        all(r["ok"] and r["duplicate_directives"] == 0 for r in rs)))
PY
