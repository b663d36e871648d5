"""psync.Client across a replica failover, with the client's defaults: two coordinator replicas on a
real etcd (Debian's /usr/bin/etcd, which tools/bootstrap installs), the job's owner paused
(SIGSTOP) past its lease, or drained (SIGTERM). The ranks, given both addresses, leave the owner and
resume at the other replica; every (step, chunk) reaches every rank exactly once and every step
completes; the new owner's GetAudit answers for the whole job, the earlier owner's part included.

Prints the failover time of the Python binding (the pause to the first directive of the new
owner's generation that reached a rank; docs/reliability.md, "Failover, measured"). It is a figure,
not an assertion."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import tempfile
import threading
import time
from pathlib import Path

import psync
from psync import ChunkPlan

from conftest import Coordinator

ETCD = "/usr/bin/etcd"
WORLD, CHUNKS, STEPS, PAUSE_AT = 2, 2, 40, 10


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_for_port(port: int, seconds: float) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.05)
    raise RuntimeError(f"nothing listens on 127.0.0.1:{port} after {seconds} s")


def owner_of(replicas, job: str):
    """The replica whose log says it claimed (or took over) `job` last, or None."""
    for r in replicas:
        log = (r.workdir / f"coordinator{r.starts}.log").read_text()
        if f"claimed job '{job}'" in log or f"took over job '{job}'" in log:
            return r
    return None


def test_ranks_leave_a_paused_owner_and_every_step_completes_once():
    paused, audit = run_failover(signal.SIGSTOP)
    # The paused owner's part is as it last published it (it cannot write a last word while
    # stopped, and the job ended before it woke): named, with no sync done twice or early.
    assert [o["replica"] for o in audit["earlierOwners"]] == [paused], audit
    job = audit["jobTotals"]
    assert int(job["released"]) <= STEPS * CHUNKS, audit
    assert (int(job["doubleReleases"]), int(job["earlySyncs"]), int(job["repeatedSyncs"])) == \
        (0, 0, 0), audit


def test_a_drained_owners_part_stays_in_the_jobs_audit():
    drained, audit = run_failover(signal.SIGTERM)
    # A draining owner writes its last word before it stops serving: the whole job adds up.
    assert [o["replica"] for o in audit["earlierOwners"]] == [drained], audit
    job, mine, theirs = audit["jobTotals"], audit["totals"], audit["earlierOwners"][0]["totals"]
    assert int(job["released"]) == STEPS * CHUNKS, audit
    assert int(mine["released"]) < STEPS * CHUNKS and int(theirs["released"]) > 0, audit
    assert int(job["released"]) == \
        int(mine["released"]) + int(theirs["released"]) - int(mine["resumed"]), audit
    assert (int(job["doubleReleases"]), int(job["earlySyncs"]), int(job["repeatedSyncs"])) == \
        (0, 0, 0), audit


def run_failover(stop_signal: int):
    """Runs the job across `stop_signal` sent to its owner at step PAUSE_AT; returns the owner's
    address and the job's GetAudit (as a dict) once every rank finished."""
    assert os.access(ETCD, os.X_OK), f"{ETCD} is missing: install Debian's etcd-server"
    with tempfile.TemporaryDirectory(dir=os.environ.get("TEST_TMPDIR")) as d:
        root = Path(d)
        client_port, peer_port = free_port(), free_port()
        etcd = subprocess.Popen(
            [ETCD, "--name=psync-py", f"--data-dir={root / 'etcd'}",
             f"--listen-client-urls=http://127.0.0.1:{client_port}",
             f"--advertise-client-urls=http://127.0.0.1:{client_port}",
             f"--listen-peer-urls=http://127.0.0.1:{peer_port}",
             f"--initial-advertise-peer-urls=http://127.0.0.1:{peer_port}",
             f"--initial-cluster=psync-py=http://127.0.0.1:{peer_port}"],
            stdout=open(root / "etcd.log", "w"), stderr=subprocess.STDOUT)
        replicas = []
        paused = None
        try:
            wait_for_port(client_port, 30)
            for i in range(2):
                workdir = root / f"replica{i}"
                workdir.mkdir()
                port = free_port()
                r = Coordinator(workdir, flags=[
                    f"--etcd=127.0.0.1:{client_port}", f"--advertise=127.0.0.1:{port}",
                    "--etcd_lease_ttl=2s", "--etcd_lease_margin=500ms",
                    "--etcd_poll_interval=100ms"])
                r.port = port
                r.start()
                replicas.append(r)
            target = ",".join(r.target for r in replicas)
            plan = [ChunkPlan(chunk=c, optimizers=["dense"], groups={"dp": list(range(WORLD))})
                    for c in range(CHUNKS)]
            received = [[] for _ in range(WORLD)]  # (monotonic time, step, chunk, generation)
            errors = []
            progress = [0] * WORLD
            infos = [None] * WORLD

            def rank(r: int) -> None:
                try:
                    with psync.Client(target, job="py-failover", rank=r, world_size=WORLD,
                                      chunks=plan, call_timeout=60) as client:
                        for step in range(STEPS):
                            for chunk in range(CHUNKS):
                                client.staged(step, chunk, "dense")
                            for chunk in range(CHUNKS):
                                d = client.wait_directive(step, chunk, timeout=120)
                                received[r].append((time.monotonic(), d.step, d.chunk, d.generation))
                                client.sync_done(step, chunk)
                            progress[r] = step + 1
                        infos[r] = client.info()
                except Exception as e:  # reported by the main thread
                    errors.append(f"rank {r}: {e!r}")

            threads = [threading.Thread(target=rank, args=(r,)) for r in range(WORLD)]
            for t in threads:
                t.start()
            deadline = time.monotonic() + 120
            while min(progress) < PAUSE_AT and not errors and time.monotonic() < deadline:
                time.sleep(0.01)
            assert not errors, errors
            assert min(progress) >= PAUSE_AT, f"the ranks reached steps {progress}"
            paused = owner_of(replicas, "py-failover")
            assert paused is not None, "no replica logged a claim of the job"
            paused.proc.send_signal(stop_signal)
            paused_at = time.monotonic()
            for t in threads:
                t.join(timeout=240)
            paused.proc.send_signal(signal.SIGCONT)
            audit = psync.get_audit(target, "py-failover", timeout=30)
            print("AUDIT", {k: v for k, v in audit.items() if k != "records"})
            print("STATUS", psync.get_job_status(target, "py-failover")["state"])
            import urllib.request, json, base64
            req = urllib.request.Request(f"http://127.0.0.1:{client_port}/v3/kv/range", data=json.dumps({"key": base64.b64encode(b"/psync/").decode(), "range_end": base64.b64encode(b"/psync0").decode()}).encode())
            for kv in json.loads(urllib.request.urlopen(req).read()).get("kvs", []):
                print("ETCD", base64.b64decode(kv["key"]), base64.b64decode(kv.get("value", "")))
            for r in replicas:
                print("LOG", r.target, (r.workdir / f"coordinator{r.starts}.log").read_text())
            assert not errors, errors
            assert progress == [STEPS] * WORLD
            for r in range(WORLD):
                got = [(s, c) for _, s, c, _ in received[r]]
                assert got == [(s, c) for s in range(STEPS) for c in range(CHUNKS)], f"rank {r}"
                assert infos[r].resumes >= 1, f"rank {r} never resumed: {infos[r]}"
            before = max(g for rec in received for t, _, _, g in rec if t <= paused_at)
            moved = [(t, s) for rec in received for t, s, _, g in rec if g > before]
            assert moved, "no directive of a newer generation: the job did not move"
            first_after, step = min(moved)
            print(f"python failover: {signal.Signals(stop_signal).name} of the owner "
                  f"({paused.target}) at step {step}: the new owner's first directive "
                  f"{1000 * (first_after - paused_at):.0f} ms after it (lease TTL 2000 ms, the "
                  f"client's default keepalive)")
            return paused.target, audit
        finally:
            if paused is not None and paused.proc is not None:
                paused.proc.send_signal(signal.SIGCONT)
            for r in replicas:
                r.kill()
            etcd.kill()
            etcd.wait(timeout=10)
