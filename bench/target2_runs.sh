#!/bin/bash
# The scale work's target 2 on one host: RANKS simulated ranks (default 131072) in nodes of 8, sync
# groups of 8, K=2, C=8, lazy acks, arrivals over 100 ms, through RELAYS relays (psync-agent,
# default 64), one run per step period in PERIODS (ms, default "8000 4000 2000 1000"), STEPS
# measured steps each (default 5). After the measured steps one node (node 5: ranks 40-47) holds
# back chunk 0 of optimizer opt1 for HOLD seconds (default 8) while a probe asks the coordinator's
# HTTP API for the job (/api/job?list_limit=64) once a second through the whole run: how long each
# answer took, and whether the held step's chunk 0 names exactly the 8 held (rank, opt1).
# PUMP_THREADS: the load generator's pump threads (default 4, psync-bench's own default); HOPS=1
# also splits each release by hop (--hop_times: the load generator's lag, the way up, the way down
# to the first and the last node). Appends psync-bench's JSON plus "probe" to OUT_DIR/target2.jsonl
# and prints a summary line per run.
#   [RANKS=131072] [RELAYS=64] [PERIODS="8000 4000 2000 1000"] [PUMP_THREADS=4] [HOPS=1] \
#     bench/target2_runs.sh BIN_DIR [OUT_DIR]
# BIN_DIR holds psync-bench, psync-coordinator and psync-agent (shared libraries in BIN_DIR/../lib
# when bundled for another host).
set -u
if [ $# -lt 1 ]; then sed -n 2,16p "$0" >&2; exit 2; fi
bin=$(cd "$1" && pwd)
out=${2:-${OUT:-/tmp}}
mkdir -p "$out"
ranks=${RANKS:-131072}
relays=${RELAYS:-64}
steps=${STEPS:-5}
hold=${HOLD:-8}
port=${HTTP_PORT:-17173}
pump_threads=${PUMP_THREADS:-4}
hops=()
if [ "${HOPS:-0}" = 1 ]; then hops=(--hop_times); fi
probe() {  # asks for the job once a second until killed; one JSON line per answer to $1
  local log=$1 job=""
  while true; do
    if [ -z "$job" ]; then
      job=$(curl -s "http://127.0.0.1:$port/api/jobs" |
        python3 -c 'import json,sys; j=json.load(sys.stdin)["jobs"]; print(j[0]["job_id"] if j else "")' 2>/dev/null)
    fi
    if [ -n "$job" ]; then
      curl -s -o "$log.body" -w '%{http_code} %{time_total}\n' \
        "http://127.0.0.1:$port/api/job?id=$job&list_limit=64" >"$log.code"
      python3 - "$log.code" "$log.body" >>"$log" <<'PY'
import json, sys, time
code, seconds = open(sys.argv[1]).read().split()
entry = {"at": time.monotonic(), "code": int(code), "seconds": float(seconds)}
if code == "200":
    status = json.load(open(sys.argv[2]))
    entry["waiting"] = [
        {"chunk": c.get("chunk", 0), "step": int(c.get("step", 0)),
         "missing_count": c.get("missing_count", 0),
         "missing": sorted((m.get("rank", 0), m.get("optimizer", "")) for m in c.get("missing", []))}
        for c in status.get("chunks", []) if c.get("state") == "WAITING"]
print(json.dumps(entry))
PY
    fi
    sleep 1
  done
}
for period in ${PERIODS:-8000 4000 2000 1000}; do
  log="$out/probe-$$.log"
  : >"$log"
  probe "$log" & pid=$!
  LD_LIBRARY_PATH=$bin/../lib:${LD_LIBRARY_PATH:-} timeout $((60 + (steps + 2) * period / 1000 + hold + ranks / 2048)) \
    "$bin/psync-bench" --coordinator="$bin/psync-coordinator" --agent_binary="$bin/psync-agent" \
    --relays="$relays" --optimizers=2 --chunks=8 --lazy_acks=true --floor=false --json \
    --label="target2 relays=$relays period=$period" --ranks="$ranks" --group_size=8 \
    --steps="$steps" --warmup_steps=1 --step_period_ms="$period" --spread_us=100000 \
    --simulated_nodes=8 --node_tick_us=20000 --pump_threads="$pump_threads" "${hops[@]}" \
    --hold_nodes=5 --hold_chunk=0 --hold_optimizer=1 \
    --hold_seconds="$hold" "--coordinator_args=--history_steps=2 --http_listen=127.0.0.1:$port" \
    >"$out/target2-run.json" 2>>"$out/target2.err"
  rc=$?
  kill "$pid" 2>/dev/null; wait "$pid" 2>/dev/null
  python3 - "$out/target2-run.json" "$log" "$rc" >>"$out/target2.jsonl" <<'PY'
import json, sys
held = [[r, "opt1"] for r in range(40, 48)]
answers = [json.loads(l) for l in open(sys.argv[2]) if l.strip()]
ok = [a for a in answers if a["code"] == 200]
# The held step: the answers whose waiting chunk 0 misses exactly the held ranks' opt1.
named = [a for a in ok if any(w["chunk"] == 0 and w["missing_count"] == 8 and w["missing"] == held
                              for w in a["waiting"])]
probe = {"answers": len(answers), "ok": len(ok),
         "seconds_max": max((a["seconds"] for a in ok), default=0),
         "seconds_median": sorted(a["seconds"] for a in ok)[len(ok) // 2] if ok else 0,
         "held_named": len(named),
         "held_seconds_max": max((a["seconds"] for a in named), default=0)}
lines = [l for l in open(sys.argv[1]) if l.strip()]
r = json.loads(lines[-1]) if lines else {"ok": False}
r["probe"] = probe
r["rc"] = int(sys.argv[3])
print(json.dumps(r))
PY
  rm -f "$log" "$log.code" "$log.body"
  tail -1 "$out/target2.jsonl" | python3 -c '
import json, sys
r = json.loads(sys.stdin.read())
if "release_latency" not in r:
    print("rc", r["rc"], "no result", r["probe"]); sys.exit()
lat, first, c, rl, p = r["release_latency"], r["release_first_latency"], r["coordinator"], r["relays"], r["probe"]
hops = r.get("hops", {})
if hops:
    print("%s hops p50: lag %.1f ms, up %.1f ms, down to the first node %.1f ms, to the last %.1f ms" % (
          r["system"], r["pump_lag"]["p50_us"] / 1e3, hops["up"]["p50_us"] / 1e3,
          hops["down_first"]["p50_us"] / 1e3, hops["down_last"]["p50_us"] / 1e3))
print("%s rc=%d ok=%s last p50/p99 %.1f/%.1f ms first p50 %.1f ms | coordinator %.2f cores %.2f us/checkin HWM %.0f MiB |"
      " relays %.2f cores in all, busiest %.2f, HWM %.0f MiB | generator %.2f cores | join %.1f s |"
      " probe %d/%d answers, max %.3f s, held named in %d (max %.3f s)" % (
      r["system"], r["rc"], r["ok"], lat["p50_us"] / 1e3, lat["p99_us"] / 1e3, first["p50_us"] / 1e3,
      c["cpu_fraction"], c["cpu_s_per_1m_checkins"], c["hwm_mib"], rl["cpu_fraction"],
      rl["cpu_fraction_max"], rl["hwm_mib_max"], r["bench_cpu_s"] / r["measured_s"], r["join_s"],
      p["ok"], p["answers"], p["seconds_max"], p["held_named"], p["held_seconds_max"]))'
done
