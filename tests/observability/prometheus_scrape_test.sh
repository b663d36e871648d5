#!/usr/bin/env bash
# A real Prometheus server (Debian's package) scrapes a running coordinator after a simulated job
# and its query API returns the exact release count; promtool accepts the exposition.
set -euo pipefail

PROMETHEUS=/usr/bin/prometheus
PROMTOOL=/usr/bin/promtool
if [[ ! -x $PROMETHEUS || ! -x $PROMTOOL ]]; then
  echo "SKIP: Debian's prometheus package is not installed (tools/bootstrap installs it)"
  exit 0
fi
coordinator=$1
sim=$2
work=${TEST_TMPDIR:-$(mktemp -d)}
pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; wait 2>/dev/null || true; }
trap cleanup EXIT

wait_for_file() {
  for _ in $(seq 200); do [[ -s $1 ]] && return 0; sleep 0.05; done
  echo "FAIL: $1 never appeared"; exit 1
}

"$coordinator" --listen=127.0.0.1:0 --port_file="$work/grpc_port" --http_listen=127.0.0.1:0 \
  --http_port_file="$work/http_port" 2>"$work/coordinator.log" &
pids+=($!)
wait_for_file "$work/grpc_port"
wait_for_file "$work/http_port"
grpc_port=$(cat "$work/grpc_port")
http_port=$(cat "$work/http_port")

"$sim" --target="127.0.0.1:$grpc_port" --job=scrape --ranks=4 --experts=2 --chunks=3 --steps=5 \
  --max_delay_ms=1 >"$work/sim.log"
# 3 chunks x 5 steps, each released once.
expected=15

curl -sf "http://127.0.0.1:$http_port/metrics" >"$work/metrics.txt"
"$PROMTOOL" check metrics <"$work/metrics.txt"
grep -Eq '^process_start_time_seconds [0-9]{10}' "$work/metrics.txt" || {
  echo "FAIL: /metrics lacks process_start_time_seconds"; exit 1; }
grep -q "^psync_releases_total{job=\"scrape\"} $expected\$" "$work/metrics.txt" || {
  echo "FAIL: /metrics lacks psync_releases_total{job=\"scrape\"} $expected"; exit 1; }

# A free port for Prometheus' own web server.
prom_port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
sed "s/localhost:7071/127.0.0.1:$http_port/; s/scrape_interval: 5s/scrape_interval: 1s/" \
  "$(dirname "$0")/../../deploy/prometheus/prometheus.yml" >"$work/prometheus.yml"
cp "$(dirname "$0")/../../deploy/prometheus/alerts.yml" "$work/alerts.yml"
"$PROMTOOL" check config "$work/prometheus.yml" >/dev/null
"$PROMETHEUS" --config.file="$work/prometheus.yml" --storage.tsdb.path="$work/tsdb" \
  --web.listen-address="127.0.0.1:$prom_port" >"$work/prometheus.log" 2>&1 &
pids+=($!)

query="http://127.0.0.1:$prom_port/api/v1/query?query=psync_releases_total%7Bjob%3D%22scrape%22%7D"
for _ in $(seq 300); do
  body=$(curl -sf "$query" || true)
  if [[ $body == *'"result":[{'* ]]; then
    value=$(python3 -c 'import json,sys; print(json.loads(sys.argv[1])["data"]["result"][0]["value"][1])' "$body")
    if [[ $value == "$expected" ]]; then
      echo "PASS: Prometheus scraped psync_releases_total{job=\"scrape\"} = $value"
      # It loaded the alerting rules of deploy/prometheus/alerts.yml, each healthy.
      rules=$(curl -sf "http://127.0.0.1:$prom_port/api/v1/rules")
      python3 - "$rules" "$(dirname "$0")/../../deploy/prometheus/alerts.yml" <<'PY'
import json, re, sys
groups = json.loads(sys.argv[1])["data"]["groups"]
loaded = sorted(r["name"] for g in groups for r in g["rules"] if r["health"] != "err")
declared = sorted(re.findall(r"^\s*- alert: (\S+)", open(sys.argv[2]).read(), re.M))
if not declared or loaded != declared:
    sys.exit(f"FAIL: Prometheus loaded rules {loaded}, alerts.yml declares {declared}")
print(f"PASS: Prometheus loaded the {len(loaded)} rules of alerts.yml")
PY
      exit 0
    fi
    echo "FAIL: Prometheus has $value, expected $expected"; exit 1
  fi
  sleep 0.1
done
echo "FAIL: Prometheus never scraped the coordinator"; tail -20 "$work/prometheus.log"; exit 1
