#!/usr/bin/env bash
# The Grafana dashboard (psync-dashboard.json) against a real coordinator and a real Prometheus:
#  1. starts Debian's etcd and a coordinator replica on it (--etcd, so the psync_replica_* gauges
#     exist), runs psync_sim jobs that leave series for every family the dashboard charts: one that
#     completes, one killed mid-run (ranks lost, generation aborted), one refused (world size above
#     --max_world_size: rejected), and one stopped (SIGSTOP) while a chunk waits for contributors,
#     so stalls, chunks waiting and the missing-contributor gauges exist;
#  2. scrapes /metrics and checks that every metric each panel's query (rows' nested panels and the
#     template variables' queries included) names is in it, histograms by their family; fails
#     naming the panel and the metric otherwise;
#  3. starts Prometheus with deploy/prometheus/prometheus.yml (and alerts.yml) scraping that
#     coordinator and runs every query through /api/v1/query with Grafana's variables substituted
#     ($job -> .*, $__rate_interval -> 1m, ...): each must answer status "success".
#   dashboard_test.sh PSYNC_COORDINATOR PSYNC_SIM
# SKIPs (exit 0) only when Debian's prometheus or etcd is not installed.
set -euo pipefail

PROMETHEUS=/usr/bin/prometheus
ETCD=/usr/bin/etcd
PYTHON=/usr/bin/python3
for tool in "$PROMETHEUS" "$ETCD"; do
  if [[ ! -x $tool ]]; then
    echo "SKIP: $tool is not installed (Debian's prometheus and etcd-server; tools/bootstrap installs them)"
    exit 0
  fi
done
[[ $# -eq 3 ]] || {
  echo "usage: dashboard_test.sh PSYNC_COORDINATOR PSYNC_SIM DASHBOARD_JSON" >&2; exit 2; }
coordinator=$(readlink -f "$1")
sim=$(readlink -f "$2")
dashboard=$(readlink -f "$3")
prometheus_dir=$(dirname "$dashboard")/../prometheus
for f in "$dashboard" "$prometheus_dir/prometheus.yml" "$prometheus_dir/alerts.yml"; do
  [[ -f $f ]] || { echo "FAIL: $f is missing (a data file of the test)"; exit 1; }
done
if [[ -n ${TEST_TMPDIR:-} ]]; then
  work=$(mktemp -d "$TEST_TMPDIR/dashboard.XXXXXX")
else
  work=$(mktemp -d)
fi
pids=()
cleanup() {
  local rc=$?
  # The servers run under timeout(1), which passes SIGTERM on to them; psync_sim ends on SIGTERM
  # (the stopped one once continued).
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; kill -CONT "$p" 2>/dev/null || true; done
  for p in "${pids[@]}"; do
    for _ in $(seq 100); do kill -0 "$p" 2>/dev/null || break; sleep 0.1; done
    # Still there after 10 s: SIGKILL what timeout(1) runs (by its parent's pid), then it.
    if kill -0 "$p" 2>/dev/null; then pkill -9 -P "$p" 2>/dev/null || true; kill -9 "$p" 2>/dev/null || true; fi
  done
  wait 2>/dev/null || true
  # Without bazel's TEST_TMPDIR, the logs are kept only when the test failed.
  [[ -n ${TEST_TMPDIR:-} || $rc != 0 ]] || rm -rf "$work"
  exit "$rc"
}
trap cleanup EXIT
# Every server gets this long at most, even if the trap never runs.
bound=${PSYNC_DASHBOARD_TEST_BOUND_S:-280}

free_port() {
  "$PYTHON" -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'
}
wait_for_file() {
  for _ in $(seq 300); do [[ -s $1 ]] && return 0; sleep 0.05; done
  echo "FAIL: $1 never appeared"; tail -20 "$2"; exit 1
}
scrape() { curl -sf --max-time 5 "http://127.0.0.1:$http_port/metrics"; }
# The value of one sample line of /metrics (empty when absent).
sample() { scrape | awk -v s="$1" '$1 == s { print $2 }'; }

# ---- etcd and a coordinator replica on it ----------------------------------------------------------
etcd_client=$(free_port)
etcd_peer=$(free_port)
timeout "$bound" "$ETCD" --name=psync-dashboard-test --data-dir="$work/etcd" \
  --listen-client-urls="http://127.0.0.1:$etcd_client" \
  --advertise-client-urls="http://127.0.0.1:$etcd_client" \
  --listen-peer-urls="http://127.0.0.1:$etcd_peer" \
  --initial-advertise-peer-urls="http://127.0.0.1:$etcd_peer" \
  --initial-cluster="psync-dashboard-test=http://127.0.0.1:$etcd_peer" >"$work/etcd.log" 2>&1 &
pids+=($!)
for i in $(seq 300); do
  curl -sf --max-time 2 "http://127.0.0.1:$etcd_client/health" | grep -q '"health":"true"' && break
  [[ $i == 300 ]] && { echo "FAIL: etcd did not become healthy in 30 s"; tail -20 "$work/etcd.log"; exit 1; }
  sleep 0.1
done

grpc_port=$(free_port)
# --rank_lease/--lost_rank_abort_after: the killed job's ranks are lost and its generation aborted
# within seconds. --max_world_size: the oversized job is refused.
timeout "$bound" "$coordinator" --listen="127.0.0.1:$grpc_port" --advertise="127.0.0.1:$grpc_port" \
  --etcd="127.0.0.1:$etcd_client" --etcd_lease_ttl=5s --etcd_poll_interval=100ms \
  --port_file="$work/grpc_port" --http_listen=127.0.0.1:0 --http_port_file="$work/http_port" \
  --rank_lease=1s --lost_rank_abort_after=2s --max_world_size=64 >"$work/coordinator.log" 2>&1 &
pids+=($!)
wait_for_file "$work/grpc_port" "$work/coordinator.log"
wait_for_file "$work/http_port" "$work/coordinator.log"
http_port=$(cat "$work/http_port")
target=127.0.0.1:$grpc_port

# ---- jobs --------------------------------------------------------------------------------------------
# 1. A job that runs to its end: releases, the three latency histograms.
"$sim" --target="$target" --job=complete --ranks=4 --experts=2 --chunks=3 --steps=5 \
  --max_delay_ms=1 >"$work/sim-complete.log" 2>&1 || {
  echo "FAIL: psync_sim --job=complete"; tail -5 "$work/sim-complete.log"; exit 1; }
# 2. A world size above --max_world_size: the coordinator refuses its joins (psync_rejected_total).
"$sim" --target="$target" --job=oversized --ranks=128 --experts=2 --chunks=1 --steps=1 \
  --timeout_ms=5000 >"$work/sim-oversized.log" 2>&1 && {
  echo "FAIL: the coordinator accepted a job of world size 128 with --max_world_size=64"; exit 1; }
# 3. A job killed mid-run: its ranks are lost after --rank_lease, its generation aborted.
"$sim" --target="$target" --job=killed --ranks=2 --experts=1 --chunks=1 --steps=1000000 \
  --max_delay_ms=20 >"$work/sim-killed.log" 2>&1 &
killed=$!
pids+=("$killed")
# 4. A job stopped while chunks wait for contributors: its ranks stay attached (the kernel keeps
#    their connections), the chunks stall, and the contributors it holds back stay missing. 16 ranks:
#    two nodes of the coordinator's default 8 ranks each.
"$sim" --target="$target" --job=held --ranks=16 --experts=4 --chunks=4 --steps=1000000 \
  --max_delay_ms=100 >"$work/sim-held.log" 2>&1 &
held=$!
pids+=("$held")
for i in $(seq 200); do
  [[ -n $(sample 'psync_releases_total{job="held"}') && -n $(sample 'psync_releases_total{job="killed"}') ]] && break
  [[ $i == 200 ]] && { echo "FAIL: the held and killed jobs released nothing in 20 s"; exit 1; }
  sleep 0.1
done
{ kill -9 "$killed" && wait "$killed"; } 2>/dev/null || true
# Stop the held job while a chunk waits (the sim's check-ins are spread over 100 ms); retry where
# the stop fell between two steps.
for i in $(seq 20); do
  kill -STOP "$held"
  sleep 0.5
  waiting=$(sample 'psync_chunks_waiting{job="held"}')
  [[ -n $waiting && $waiting != 0 ]] && break
  [[ $i == 20 ]] && { echo "FAIL: no chunk of the held job waits after 20 stops"; exit 1; }
  kill -CONT "$held"
  sleep 0.$((RANDOM % 9 + 1))
done
# The killed job's ranks lost (1 s) and its generation aborted (2 s later); the held job stalls.
for i in $(seq 100); do
  [[ -n $(sample 'psync_aborts_total{job="killed"}') && -n $(sample 'psync_stalls_total{job="held"}') ]] && break
  [[ $i == 100 ]] && { echo "FAIL: no abort of the killed job or no stall of the held job in 10 s"; exit 1; }
  sleep 0.1
done
scrape >"$work/metrics.txt"
echo "PASS: jobs set up: complete, oversized (refused), killed (ranks lost, aborted), held" \
  "(stopped; psync_chunks_waiting $waiting)"

# ---- the dashboard's queries and the metrics they name -------------------------------------------------
cat >"$work/check.py" <<'PY'
"""check.py scrape DASHBOARD METRICS QUERIES_OUT BINARY | check.py prometheus QUERIES URL"""
import json
import re
import sys
import time
import urllib.parse
import urllib.request

# Series Prometheus makes itself for each target (not in /metrics): checked through its API.
PROMETHEUS_OWN = {"up"}
# Families that get a series only on an event psync_sim cannot cause: a coordinator never reports a
# violation of a correct client. They must be declared by the coordinator binary (its string
# table), and are listed, not failed, when the scrape lacks them.
EVENT_ONLY = {"psync_violations_total": "only a violation creates a series (psync_sim cannot cause one)"}
KEYWORDS = {"by", "without", "on", "ignoring", "group_left", "group_right", "bool", "and", "or",
            "unless", "offset", "inf", "nan", "atan2", "start", "end"}
VARIABLES = [("$__rate_interval", "1m"), ("${__rate_interval}", "1m"), ("$__interval", "15s"),
             ("${__interval}", "15s"), ("$__range_s", "3600"), ("$__range_ms", "3600000"),
             ("$__range", "1h"), ("${__range}", "1h"), ("${job:regex}", ".*"), ("${job}", ".*"),
             ("[[job]]", ".*"), ("$job", ".*")]


def walk(dashboard):
    """Yields (where, kind, query): every panel target's expr, nested rows included, every
    template variable's query and every annotation's expr."""
    def panels(items, row):
        for p in items:
            title = p.get("title", "")
            if p.get("type") == "row":
                # A collapsed row holds its panels; an expanded one is followed by them.
                yield from panels(p.get("panels", []), title)
                row = title
                continue
            where = f'panel {p.get("id")} "{row} / {title}"' if row else f'panel {p.get("id")} "{title}"'
            targets = p.get("targets", [])
            if not targets:
                yield where, "none", ""
            for t in targets:
                if "expr" not in t:
                    yield where, "none", f'target {t.get("refId")} has no expr'
                else:
                    yield f'{where} target {t.get("refId")}', "expr", t["expr"]
    yield from panels(dashboard.get("panels", []), "")
    for v in dashboard.get("templating", {}).get("list", []):
        if v.get("type") != "query":
            continue
        q = v.get("query")
        q = q.get("query", "") if isinstance(q, dict) else q
        yield f'variable "{v.get("name")}"', "variable", q
    for a in dashboard.get("annotations", {}).get("list", []):
        expr = a.get("expr") or (a.get("target") or {}).get("expr")
        if expr:
            yield f'annotation "{a.get("name")}"', "expr", expr


def promql_of(kind, query):
    """(PromQL to evaluate or None, label_values (metric selector, label) or None)."""
    if kind == "expr":
        return query, None
    m = re.fullmatch(r"\s*label_values\(\s*(.+?)\s*,\s*(\w+)\s*\)\s*", query)
    if m:
        return None, (m.group(1), m.group(2))
    m = re.fullmatch(r"\s*query_result\((.*)\)\s*", query, re.S)
    if m:
        return m.group(1), None
    raise ValueError(f"unsupported variable query {query!r} (label_values or query_result)")


def metric_names(promql):
    s = re.sub(r'"(?:[^"\\]|\\.)*"|\'(?:[^\'\\]|\\.)*\'|`[^`]*`', '""', promql)  # strings
    s = re.sub(r"\{[^}]*\}", " ", s)  # label matchers
    s = re.sub(r"\[[^\]]*\]", " ", s)  # ranges and subqueries
    s = re.sub(r"\b(by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)", " ", s)
    names = set()
    for m in re.finditer(r"(?<![\w.:])[A-Za-z_:][\w:]*", s):
        word = m.group(0)
        if re.match(r"\s*\(", s[m.end():]) or word.lower() in KEYWORDS:
            continue  # a function or aggregation, or a keyword
        names.add(word)
    return names


def scrape_check(dashboard_file, metrics_file, queries_out, binary_file):
    dashboard = json.load(open(dashboard_file))
    types, samples = {}, set()
    for line in open(metrics_file):
        if line.startswith("# TYPE "):
            _, _, name, kind = line.split()[:4]
            types[name] = kind
        elif line.strip() and not line.startswith("#"):
            samples.add(re.match(r"[\w:]+", line).group(0))
    binary = open(binary_file, "rb").read()
    failures, queries, metrics, panels, notes = [], [], set(), set(), []
    for where, kind, query in walk(dashboard):
        if kind == "none":
            failures.append(f"{where}: no Prometheus query {query}".rstrip())
            continue
        panels.add(where.split(" target ")[0])
        promql, label_values = promql_of(kind, query)
        names = metric_names(promql) if promql is not None else metric_names(label_values[0])
        if not names:
            failures.append(f"{where}: names no metric: {query}")
        for name in sorted(names):
            family = name
            base = re.sub(r"_(bucket|sum|count)$", "", name)
            if base != name and types.get(base) == "histogram":
                family = base
            elif types.get(name) == "histogram":
                failures.append(f"{where}: {name} is a histogram: query {name}_bucket, _sum or _count")
                continue
            metrics.add(family)
            if not (family.startswith("psync_") or family.startswith("process_") or family in PROMETHEUS_OWN):
                failures.append(f"{where}: {name} is not a psync metric (psync_*, process_*, up)")
            elif family in PROMETHEUS_OWN:
                pass
            elif family in types or name in samples:
                pass
            elif family in EVENT_ONLY and family.encode() in binary:
                notes.append(f"{family} ({where}): {EVENT_ONLY[family]}; the coordinator declares it")
            else:
                failures.append(f"{where}: {name} is not in the coordinator's /metrics")
        queries.append({"where": where, "promql": promql, "label_values": label_values})
    json.dump(queries, open(queries_out, "w"))
    for n in sorted(set(notes)):
        print(f"NOTE: no series yet: {n}")
    for f in failures:
        print(f"FAIL: {f}")
    if failures:
        return 1
    scraped = sorted(m for m in metrics if m not in PROMETHEUS_OWN and m not in EVENT_ONLY)
    print(f"PASS: {len(panels)} panels and variables, {len(queries)} queries, {len(metrics)} metrics; "
          f"{len(scraped)} in the coordinator's /metrics, "
          f"{len(metrics & PROMETHEUS_OWN)} Prometheus' own ({', '.join(sorted(metrics & PROMETHEUS_OWN))})")
    return 0


def get(url):
    try:
        with urllib.request.urlopen(url, timeout=10) as r:
            return json.load(r)
    except urllib.error.HTTPError as e:  # 400/422: a query Prometheus refuses, with its reason
        return json.load(e)


def prometheus_check(queries_file, base):
    queries = json.load(open(queries_file))
    failures, data, empty = [], 0, []
    for q in queries:
        if q["label_values"]:
            selector, label = q["label_values"]
            url = (f"{base}/api/v1/label/{urllib.parse.quote(label)}/values?"
                   + urllib.parse.urlencode({"match[]": selector}))
            shown = f"label_values({selector}, {label})"
        else:
            promql = q["promql"]
            for var, value in VARIABLES:
                promql = promql.replace(var, value)
            if "$" in promql:
                failures.append(f'{q["where"]}: a Grafana variable the test does not know: {promql}')
                continue
            url = f"{base}/api/v1/query?" + urllib.parse.urlencode({"query": promql, "time": time.time()})
            shown = promql
        body = get(url)
        if body.get("status") != "success":
            failures.append(f'{q["where"]}: Prometheus answers {body.get("errorType")}: '
                            f'{body.get("error")} for {shown}')
            continue
        result = body["data"] if q["label_values"] else body["data"]["result"]
        if result:
            data += 1
        else:
            empty.append(q["where"])
        if q["label_values"] and not {"complete", "held"} <= set(result):
            failures.append(f'{q["where"]}: {shown} lists {result}, not the test\'s jobs')
    for f in failures:
        print(f"FAIL: {f}")
    if failures:
        return 1
    print(f"PASS: Prometheus evaluates all {len(queries)} queries (status success); {data} return "
          f"series, {len(empty)} none yet (no such event in the window, or too few scrapes for it)")
    if empty:
        print("NOTE: no series yet: " + "; ".join(empty))
    return 0


if __name__ == "__main__":
    mode = sys.argv[1]
    if mode == "scrape":
        sys.exit(scrape_check(*sys.argv[2:6]))
    sys.exit(prometheus_check(*sys.argv[2:4]))
PY
failed=0
"$PYTHON" "$work/check.py" scrape "$dashboard" "$work/metrics.txt" "$work/queries.json" \
  "$coordinator" || failed=1

# ---- Prometheus -------------------------------------------------------------------------------------------
prom_port=$(free_port)
sed "s/localhost:7071/127.0.0.1:$http_port/; s/scrape_interval: 5s/scrape_interval: 1s/" \
  "$prometheus_dir/prometheus.yml" >"$work/prometheus.yml"
cp "$prometheus_dir/alerts.yml" "$work/alerts.yml"
timeout "$bound" "$PROMETHEUS" --config.file="$work/prometheus.yml" --storage.tsdb.path="$work/tsdb" \
  --web.listen-address="127.0.0.1:$prom_port" >"$work/prometheus.log" 2>&1 &
pids+=($!)
# Three scrapes or more, so that rate() and increase() over them have samples.
scrapes="http://127.0.0.1:$prom_port/api/v1/query?query=count_over_time%28up%7Bjob%3D%22psync-coordinator%22%7D%5B1m%5D%29"
for i in $(seq 600); do
  body=$(curl -sf --max-time 2 "$scrapes" || true)
  n=$("$PYTHON" -c 'import json,sys
try: r=json.loads(sys.argv[1])["data"]["result"]; print(r[0]["value"][1] if r else 0)
except Exception: print(0)' "$body")
  (( n >= 3 )) && break
  [[ $i == 600 ]] && { echo "FAIL: Prometheus did not scrape the coordinator 3 times in 60 s"; tail -20 "$work/prometheus.log"; exit 1; }
  sleep 0.1
done
up=$(curl -sf "http://127.0.0.1:$prom_port/api/v1/query?query=up%7Bjob%3D%22psync-coordinator%22%7D")
[[ $up == *'"value":['*',"1"]'* ]] || { echo "FAIL: up{job=\"psync-coordinator\"} is not 1: $up"; failed=1; }
"$PYTHON" "$work/check.py" prometheus "$work/queries.json" "http://127.0.0.1:$prom_port" || failed=1

if (( failed )); then
  echo "FAIL: the dashboard does not match the coordinator (logs in $work)"
  exit 1
fi
echo "PASS: every query of psync-dashboard.json names real psync metrics and Prometheus evaluates it"
