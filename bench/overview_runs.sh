#!/bin/bash
# What a dashboard costs the release path: paced runs of RANKS ranks (default 16384) in simulated
# nodes of 8, 1 step/s, arrivals over 100 ms, sync groups of 8, K=2, C=8, lazy acks, 10 steps,
# alternated (A B A B, ROUNDS rounds, default 2): without a viewer, and with one that fetches the
# dashboard's answer (/api/overview of every node, gzip, as the page asks for it) once a second
# all run long. Appends to OUT_DIR/overview.jsonl (psync-bench's JSON plus "viewer": polls, bytes
# and wall time of each fetch) and prints the medians.
#   bench/overview_runs.sh BIN_DIR [OUT_DIR]
set -u
if [ $# -lt 1 ]; then sed -n 2,9p "$0" >&2; exit 2; fi
bin=$(cd "$1" && pwd)
out=${2:-${OUT:-/tmp}}
mkdir -p "$out"
ranks=${RANKS:-16384}
port=${HTTP_PORT:-17171}
viewer() {  # polls /api/overview once a second until killed; one line per fetch to $1
  local log=$1 job=""
  while true; do
    if [ -z "$job" ]; then
      job=$(curl -s "http://127.0.0.1:$port/api/jobs" |
        python3 -c 'import json,sys; j=json.load(sys.stdin)["jobs"]; print(j[0]["job_id"] if j else "")' 2>/dev/null)
    fi
    if [ -n "$job" ]; then
      curl -s -o /dev/null -H 'Accept-Encoding: gzip' -w '%{http_code} %{size_download} %{time_total}\n' \
        "http://127.0.0.1:$port/api/overview?id=$job&node_limit=4096&missing_limit=32" >>"$log"
    fi
    sleep 1
  done
}
run() {  # LABEL
  local label=$1 log="$out/viewer-$$.log" pid=""
  : >"$log"
  if [ "$label" = viewer ]; then viewer "$log" & pid=$!; fi
  LD_LIBRARY_PATH=$bin:${LD_LIBRARY_PATH:-} timeout 300 "$bin/psync-bench" \
    --coordinator="$bin/psync-coordinator" --optimizers=2 --chunks=8 --lazy_acks=true \
    --floor=false --label="$label" --json --ranks="$ranks" --group_size=8 --steps=10 \
    --warmup_steps=1 --step_period_ms=1000 --spread_us=100000 --simulated_nodes=8 \
    --node_tick_us=20000 "--coordinator_args=--history_steps=2 --http_listen=127.0.0.1:$port" \
    >"$out/overview-run.json" 2>>"$out/overview.err"
  local rc=$?
  [ -n "$pid" ] && kill "$pid" 2>/dev/null && wait "$pid" 2>/dev/null
  python3 - "$out/overview-run.json" "$log" >>"$out/overview.jsonl" <<'PY'
import json, sys
for line in open(sys.argv[1]):
    r = json.loads(line)
    fetches = [l.split() for l in open(sys.argv[2]) if l.strip()]
    ok = [(int(b), float(t)) for c, b, t in fetches if c == "200"]
    r["viewer"] = {"polls": len(fetches), "ok": len(ok),
                   "bytes_mean": sum(b for b, _ in ok) / len(ok) if ok else 0,
                   "seconds_max": max((t for _, t in ok), default=0)}
    print(json.dumps(r))
PY
  echo "$label rc=$rc polls=$(wc -l <"$log")"
  rm -f "$log"
}
for _ in $(seq "${ROUNDS:-2}"); do
  run none
  run viewer
done
python3 - "$out/overview.jsonl" <<'PY'
import collections, json, statistics, sys
runs = collections.defaultdict(list)
for line in open(sys.argv[1]):
    r = json.loads(line)
    runs[(r["ranks"], r["system"])].append(r)
print("%-6s %-7s %2s %16s %16s %10s %8s %12s %s" % ("ranks", "viewer", "n", "last p50/p99 ms",
      "coord cores", "coord MiB", "polls", "bytes/poll", "exactly once"))
for (ranks, label), rs in sorted(runs.items()):
    med = lambda f: statistics.median(f(r) for r in rs)
    print("%-6d %-7s %2d %7.1f/%7.1f %16.3f %10.1f %8d %12.0f %s" % (
        ranks, label, len(rs), med(lambda r: r["release_latency"]["p50_us"]) / 1e3,
        med(lambda r: r["release_latency"]["p99_us"]) / 1e3,
        med(lambda r: r["coordinator"]["cpu_fraction"]), med(lambda r: r["coordinator"]["hwm_mib"]),
        med(lambda r: r["viewer"]["polls"]), med(lambda r: r["viewer"]["bytes_mean"]),
        all(r["ok"] for r in rs)))
PY
