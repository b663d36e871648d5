#!/usr/bin/env bash
# The container image for real: builds it with podman (build_image.sh; the debootstrap base is
# cached), runs psync-coordinator and psync-agent in containers (host network, ports picked by the
# kernel), runs two simulated jobs against them (one straight to the coordinator, one through the
# agent), and checks:
#   - each job released every (step, chunk) exactly once (psyncctl audit, run in the image);
#   - /metrics answers with the exact release counts;
#   - the gRPC health service answers SERVING for "" and psync.v1.Coordinator on both daemons,
#     NOT_FOUND for an unknown service;
#   - the daemons run as the unprivileged user 65532;
#   - `podman stop` ends each daemon by its SIGTERM handling within the stop timeout: exit status 0
#     (a SIGKILL after the timeout shows as 137), the coordinator draining its open agent stream.
#   image_test.sh PSYNC_COORDINATOR PSYNC_AGENT PSYNCCTL PSYNC_SIM
# Needs root, podman, runc and debootstrap (tools/bootstrap --with-test-tools).
set -euo pipefail
here=$(cd "$(dirname "$(readlink -f "${BASH_SOURCE[0]}")")" && pwd)
[[ $# -eq 4 ]] || { echo "usage: image_test.sh COORDINATOR AGENT PSYNCCTL SIM" >&2; exit 2; }
export PATH="$PATH:/usr/sbin:/sbin"
for tool in podman runc debootstrap; do
  command -v "$tool" >/dev/null || {
    echo "FAIL: $tool not found (tools/bootstrap --with-test-tools installs it)"; exit 1; }
done
[[ $(id -u) -eq 0 ]] || { echo "FAIL: the image test needs root (rootful podman, debootstrap)"; exit 1; }
export CONTAINERS_CONF="$here/containers.conf"
sim=$(readlink -f "$4")
work=$(mktemp -d "${TEST_TMPDIR:-/tmp}/image-test.XXXXXX")
chmod 0777 "$work"
tag=localhost/psync:image-test
coordinator=psync-test-coordinator-$$
agent=psync-test-agent-$$
cleanup() {
  podman rm -f -t 0 "$coordinator" "$agent" >/dev/null 2>&1 || true
}
trap cleanup EXIT
fail() {
  echo "FAIL: $*"
  for c in "$coordinator" "$agent"; do
    echo "--- podman logs $c"; podman logs "$c" 2>&1 | tail -20 || true
  done
  exit 1
}
wait_for_file() {
  for _ in $(seq 600); do [[ -s $1 ]] && return 0; sleep 0.05; done
  fail "$1 never appeared"
}

# Build.
mkdir "$work/bin"
for i in 1 2 3; do cp "$(readlink -f "${!i}")" "$work/bin/"; done
start=$(date +%s)
"$here/build_image.sh" "$work/bin" "$tag" >/dev/null
echo "built $tag in $(($(date +%s) - start)) s: $(podman image inspect "$tag" --format '{{.Size}}') bytes"

run() { podman run -d --network=host -v "$work:/run/psync" "$@"; }
run --name "$coordinator" "$tag" --listen=127.0.0.1:0 --port_file=/run/psync/grpc_port \
  --http_listen=127.0.0.1:0 --http_port_file=/run/psync/http_port --drain_timeout=3s >/dev/null
wait_for_file "$work/grpc_port"
wait_for_file "$work/http_port"
grpc=127.0.0.1:$(cat "$work/grpc_port")
http=127.0.0.1:$(cat "$work/http_port")
run --name "$agent" --entrypoint /usr/local/bin/psync-agent "$tag" --target="$grpc" \
  --listen=127.0.0.1:0 --port_file=/run/psync/agent_port >/dev/null
wait_for_file "$work/agent_port"
agent_target=127.0.0.1:$(cat "$work/agent_port")
echo "coordinator container: gRPC $grpc, HTTP $http; agent container: $agent_target"

# Non-root.
for c in "$coordinator" "$agent"; do
  uid=$(podman exec "$c" id -u)
  [[ $uid == 65532 ]] || fail "$c runs as uid $uid, not 65532"
done
echo "PASS: both daemons run as uid 65532"

# Health, asked by psyncctl inside the image.
ctl() { podman run --rm --network=host --entrypoint /usr/local/bin/psyncctl "$tag" "$@"; }
for target in "$grpc" "$agent_target"; do
  for service in "" psync.v1.Coordinator; do
    out=$(ctl --target "$target" health "$service") || fail "health '$service' at $target: $out"
    [[ $out == SERVING ]] || fail "health '$service' at $target answered '$out'"
  done
  set +e
  out=$(ctl --target "$target" health psync.v1.Nope 2>&1)
  code=$?
  set -e
  [[ $code -eq 2 && $out == *"failed: NOT_FOUND"* ]] || fail "health of an unknown service at $target: exit $code, $out"
done
echo "PASS: health is SERVING for \"\" and psync.v1.Coordinator on the coordinator and the agent, NOT_FOUND otherwise"

# Two jobs of simulated ranks (W=4, E=2, 3 chunks, 5 steps, 20% of check-ins sent twice): one
# straight to the coordinator, one through the agent.
steps=5
chunks=3
"$sim" --target="$grpc" --job=direct --ranks=4 --experts=2 --chunks=$chunks --steps=$steps \
  --dup_prob=0.2 --max_delay_ms=1 >"$work/sim-direct.log" 2>&1 || {
  tail "$work/sim-direct.log"; fail "the simulated job 'direct' failed"; }
"$sim" --target="$agent_target" --job=via-agent --ranks=4 --experts=2 --chunks=$chunks \
  --steps=$steps --dup_prob=0.2 --max_delay_ms=1 >"$work/sim-agent.log" 2>&1 || {
  tail "$work/sim-agent.log"; fail "the simulated job 'via-agent' failed"; }

# Exactly once per (step, chunk), from the coordinator's audit.
for job in direct via-agent; do
  ctl --target "$grpc" --json audit "$job" >"$work/audit-$job.json" || fail "psyncctl audit $job"
  /usr/bin/python3 - "$work/audit-$job.json" "$job" "$steps" "$chunks" <<'PY' || fail "audit of $job"
import json, sys
audit = json.load(open(sys.argv[1]))
job, steps, chunks = sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
records = audit.get("records", [])
keys = sorted((int(r["step"]), r["chunk"]) for r in records)
want = [(s, c) for s in range(steps) for c in range(chunks)]
bad = [r for r in records if r["releases"] != 1 or not r["complete"] or r["checksum_mismatch"]
       or r["early_syncs"] or r["repeated_syncs"]]
t = audit["totals"]
totals = {k: int(t[k]) for k in ("released", "complete", "double_releases", "checksum_mismatches",
                                 "early_syncs", "repeated_syncs")}
want_totals = {"released": steps * chunks, "complete": steps * chunks, "double_releases": 0,
               "checksum_mismatches": 0, "early_syncs": 0, "repeated_syncs": 0}
if keys != want or bad or totals != want_totals:
    sys.exit(f"{job}: records {keys}, bad {bad}, totals {totals}")
print(f"PASS: {job}: {len(records)} (step, chunk)s, each released once and complete; totals {totals}")
PY
done

# /metrics.
curl -sf "http://$http/metrics" >"$work/metrics.txt" || fail "GET /metrics"
for job in direct via-agent; do
  grep -q "^psync_releases_total{job=\"$job\"} $((steps * chunks))\$" "$work/metrics.txt" ||
    fail "/metrics lacks psync_releases_total{job=\"$job\"} $((steps * chunks))"
done
grep -Eq '^process_start_time_seconds [0-9]' "$work/metrics.txt" || fail "/metrics lacks process_start_time_seconds"
echo "PASS: /metrics answers: psync_releases_total is $((steps * chunks)) for each job"

# podman stop: SIGTERM, then SIGKILL after 10 s. The agent's stream to the coordinator is still
# open, so the coordinator drains it for --drain_timeout=3s, then exits 0.
stop_and_check() {
  local c=$1 expect=$2
  start=$(date +%s.%N)
  podman stop -t 10 "$c" >/dev/null
  elapsed=$(/usr/bin/python3 -c "import sys; print(f'{float(sys.argv[2]) - float(sys.argv[1]):.1f}')" "$start" "$(date +%s.%N)")
  code=$(podman inspect "$c" --format '{{.State.ExitCode}}')
  [[ $code == 0 ]] || fail "$c exited $code after podman stop (137: killed after the timeout)"
  # The log is read whole before grep: with pipefail, grep -q closing the pipe at its
  # first match would fail the pipeline whenever podman logs was still writing.
  log=$(podman logs "$c" 2>&1)
  grep -qF "$expect" <<<"$log" || fail "$c's log lacks '$expect'"
  echo "PASS: podman stop ended $c with status 0 in ${elapsed} s ('$expect')"
}
stop_and_check "$coordinator" "draining on signal 15"
grep -qF "psync-coordinator: stopped" <<<"$(podman logs "$coordinator" 2>&1)" || fail "the coordinator did not log 'stopped'"
stop_and_check "$agent" "stopping on signal 15"
echo "PASS: image test"
