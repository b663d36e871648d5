#!/bin/bash
# What a node agent's and its ranks' writes carry: one real psync-agent with RANKS ranks (default
# 8, K=2, C=8, lazy acks, 300 ms steps, arrivals over 200 ms), and for TRACE_SECONDS (default 3) of the
# measured steps every sendmsg(2) of the agent and of the load generator (the ranks' process)
# traced with strace and classified by the HTTP/2 frames it starts with: DATA (a message), only
# WINDOW_UPDATE frames (flow control), or other (PING, SETTINGS, HEADERS). Needs strace.
#   [RANKS=8] [TRACE_SECONDS=3] bench/agent_frames.sh BIN_DIR [OUT_DIR]
# BIN_DIR holds psync-bench, psync-coordinator and psync-agent (their shared libraries in
# BIN_DIR/../lib when bundled for another host, or on LD_LIBRARY_PATH).
set -u
if [ $# -lt 1 ]; then sed -n 2,9p "$0" >&2; exit 2; fi
bin=$(cd "$1" && pwd)
out=${2:-${OUT:-/tmp}}
mkdir -p "$out"
ranks=${RANKS:-8}
seconds=${TRACE_SECONDS:-3}
export LD_LIBRARY_PATH=$bin/../lib:$bin:${LD_LIBRARY_PATH:-}
"$bin/psync-bench" --coordinator="$bin/psync-coordinator" --agent_binary="$bin/psync-agent" \
  --agents=1 --ranks="$ranks" \
  "--agent_args=--target={coordinator} --listen=127.0.0.1:0 --port_file={port_file}" \
  --optimizers=2 --chunks=8 --lazy_acks=true --floor=false --steps=30 --step_period_ms=300 \
  --spread_us=200000 --json >"$out/agent-frames.json" 2>"$out/agent-frames.err" &
bench=$!
sleep 4  # past the joins and the warmup steps
agent=$(pgrep -n -x psync-agent)
timeout "$seconds" strace -f -p "$agent" -e trace=sendmsg -s 40 -x -o "$out/agent.strace" \
  2>/dev/null &
timeout "$seconds" strace -f -p "$bench" -e trace=sendmsg -s 40 -x -o "$out/ranks.strace" \
  2>/dev/null
wait
python3 - "$out" "$ranks" "$seconds" <<'PY'
import collections, json, re, sys
out, ranks, seconds = sys.argv[1], int(sys.argv[2]), float(sys.argv[3])
def kinds(path):
    c = collections.Counter()
    for line in open(path):
        m = re.search(r'iov_base="((?:\\x[0-9a-f]{2})+)', line)
        if not m:
            continue
        b = bytes(int(x, 16) for x in re.findall(r'\\x([0-9a-f]{2})', m.group(1)))
        types, i = [], 0
        while i + 9 <= len(b):  # HTTP/2 frame header: length (3), type (1), flags, stream id
            types.append(b[i + 3])
            i += 9 + int.from_bytes(b[i:i + 3], "big")
        c["data" if 0 in types else "window_update_only" if types and set(types) == {8}
          else "other"] += 1
    return dict(c)
run = json.loads(open(out + "/agent-frames.json").readline())
messages = ranks * (2 * 8 + 8) / 0.3 * seconds  # check-ins and SyncDones a rank sends
print(json.dumps({"agent_sendmsg": kinds(out + "/agent.strace"),
                  "ranks_sendmsg": kinds(out + "/ranks.strace"),
                  "rank_messages_in_window": round(messages), "run_ok": run["ok"]}))
PY
