#!/usr/bin/python3
"""Cluster-wide check-in rate of 1, 2 and 4 coordinator replicas on one many-job workload.

For each replica count R: a fresh etcd (temporary data dir), R psync-coordinator replicas
(--etcd, each pinned to its own cores), then J concurrent psync-bench processes (one job each,
every replica's address given, so each job's ranks go to the replica that owns it; pinned to the
load cores). Once every job is running, the replicas' psync_checkins_total counters and CPU times
are read at the start and end of a fixed window; the cluster rate is the sum of their increases
over the window. Then the jobs' audits are read from their owners (0 early, 0 repeated syncs is
required) and everything is stopped.

  bench/replica_throughput.py --bin DIR --etcd /usr/bin/etcd --replicas 1,2,4 --jobs 16 \
      --ranks 64 --replica_cores 2 --first_core 0 --load_cores 9-15 --window_s 10

DIR holds psync-coordinator, psync-bench and psyncctl. One JSON object per replica count is
printed (one line each); a summary table follows on stderr.
"""

import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
import time

from coordinator_probe import cpu_seconds, free_port, metric_sums


def checkins(http_port):
    return metric_sums(http_port, ["psync_checkins_total{"])["psync_checkins_total{"]


def wait_for(predicate, timeout, what):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.1)
    raise RuntimeError(f"timed out waiting for {what}")


def psyncctl(args, binary, target):
    out = subprocess.run([binary, "--target", target, "--json"] + args, capture_output=True,
                         text=True, timeout=30)
    if out.returncode != 0:
        raise RuntimeError(f"psyncctl {' '.join(args)} at {target}: {out.stderr.strip()}")
    return json.loads(out.stdout)


def run(args, replicas, workdir):
    procs = []
    try:
        etcd_client, etcd_peer = free_port(), free_port()
        etcd = subprocess.Popen(
            ["taskset", "-c", args.etcd_core, args.etcd, "--data-dir", f"{workdir}/etcd-{replicas}",
             "--listen-client-urls", f"http://127.0.0.1:{etcd_client}",
             "--advertise-client-urls", f"http://127.0.0.1:{etcd_client}",
             "--listen-peer-urls", f"http://127.0.0.1:{etcd_peer}",
             "--initial-advertise-peer-urls", f"http://127.0.0.1:{etcd_peer}",
             "--initial-cluster", f"default=http://127.0.0.1:{etcd_peer}"],
            stdout=subprocess.DEVNULL, stderr=open(f"{workdir}/etcd-{replicas}.log", "w"))
        procs.append(etcd)
        coord = []  # (process, grpc port, http port)
        for i in range(replicas):
            port, http = free_port(), free_port()
            first = args.first_core + i * args.replica_cores
            cores = f"{first}-{first + args.replica_cores - 1}"
            p = subprocess.Popen(
                ["taskset", "-c", cores, f"{args.bin}/psync-coordinator",
                 f"--listen=127.0.0.1:{port}", f"--advertise=127.0.0.1:{port}",
                 f"--http_listen=127.0.0.1:{http}", f"--etcd=127.0.0.1:{etcd_client}",
                 "--rank_lease=3600s", "--lost_rank_abort_after=7200s"],
                stdout=subprocess.DEVNULL,
                stderr=open(f"{workdir}/replica-{replicas}-{i}.log", "w"))
            procs.append(p)
            coord.append((p, port, http))
        targets = [f"127.0.0.1:{port}" for _, port, _ in coord]
        ctl = f"{args.bin}/psyncctl"

        def all_see_all():
            try:
                return all(len(psyncctl(["replicas"], ctl, t).get("replicas", [])) == replicas
                           for t in targets)
            except (RuntimeError, subprocess.TimeoutExpired, json.JSONDecodeError):
                return False
        wait_for(all_see_all, 60, f"{replicas} replicas to register in etcd")

        benches = []
        for j in range(args.jobs):
            b = subprocess.Popen(
                ["taskset", "-c", args.load_cores, f"{args.bin}/psync-bench",
                 f"--target={','.join(targets)}", f"--ranks={args.ranks}",
                 f"--optimizers={args.optimizers}", f"--chunks={args.chunks}",
                 f"--steps={args.steps}", "--warmup_steps=2", f"--spread_us={args.spread_us}",
                 "--floor=false", "--json", f"--timeout_s={args.timeout_s}"],
                stdout=open(f"{workdir}/bench-{replicas}-{j}.json", "w"),
                stderr=open(f"{workdir}/bench-{replicas}-{j}.log", "w"))
            procs.append(b)
            benches.append(b)

        # Every job is running once each replica's live jobs add up to J and check-ins flow.
        def jobs_running():
            try:
                n = sum(len([x for x in psyncctl(["jobs"], ctl, t).get("jobs", [])
                             if x.get("state") in ("RUNNING", "DEGRADED")]) for t in targets)
            except (RuntimeError, subprocess.TimeoutExpired, json.JSONDecodeError):
                return False
            return n == args.jobs
        wait_for(jobs_running, args.timeout_s, f"{args.jobs} jobs to run")
        time.sleep(args.settle_s)
        if any(b.poll() is not None for b in benches):
            raise RuntimeError("a job ended before the window: raise --steps")
        start = [(checkins(h), cpu_seconds(p.pid)) for p, _, h in coord]
        t0 = time.monotonic()
        time.sleep(args.window_s)
        end = [(checkins(h), cpu_seconds(p.pid)) for p, _, h in coord]
        window = time.monotonic() - t0
        still_running = sum(1 for b in benches if b.poll() is None)

        per_replica = []
        violations = 0
        owned = []
        for (p, port, _), (c0, u0), (c1, u1) in zip(coord, start, end):
            target = f"127.0.0.1:{port}"
            jobs = [x["job_id"] for x in psyncctl(["jobs"], ctl, target).get("jobs", [])]
            for job in jobs:
                audit = psyncctl(["status", job], ctl, target).get("audit", {})
                violations += sum(int(audit.get(k, 0)) for k in
                                  ("double_releases", "early_syncs", "repeated_syncs"))
            owned.append(len(jobs))
            per_replica.append({"target": target, "jobs": len(jobs),
                                "checkins_per_s": round((c1 - c0) / window, 1),
                                "cpu_cores": round((u1 - u0) / window, 3)})
        rate = sum(r["checkins_per_s"] for r in per_replica)
        return {"replicas": replicas, "jobs": args.jobs, "ranks_per_job": args.ranks,
                "optimizers": args.optimizers, "chunks": args.chunks,
                "replica_cores": args.replica_cores, "window_s": round(window, 3),
                "jobs_running_at_end": still_running, "checkins_per_s": round(rate, 1),
                "audit_violations": violations, "per_replica": per_replica,
                "load_avg": os.getloadavg()}
    finally:
        for p in reversed(procs):
            if p.poll() is None:
                p.send_signal(signal.SIGKILL)
                p.wait()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--bin", required=True, help="folder of psync-coordinator, psync-bench, psyncctl")
    ap.add_argument("--etcd", default="/usr/bin/etcd")
    ap.add_argument("--replicas", default="1,2,4")
    ap.add_argument("--jobs", type=int, default=16)
    ap.add_argument("--ranks", type=int, default=64)
    ap.add_argument("--optimizers", type=int, default=2)
    ap.add_argument("--chunks", type=int, default=8)
    ap.add_argument("--steps", type=int, default=1000000, help="per job: more than the run needs")
    ap.add_argument("--spread_us", type=int, default=0)
    ap.add_argument("--replica_cores", type=int, default=2)
    ap.add_argument("--first_core", type=int, default=0)
    ap.add_argument("--etcd_core", default="8")
    ap.add_argument("--load_cores", default="9-15")
    ap.add_argument("--settle_s", type=float, default=3)
    ap.add_argument("--window_s", type=float, default=10)
    ap.add_argument("--timeout_s", type=int, default=120)
    args = ap.parse_args()
    results = []
    with tempfile.TemporaryDirectory(prefix="psync-replicas-") as workdir:
        for r in [int(x) for x in args.replicas.split(",")]:
            try:
                result = run(args, r, workdir)
            except Exception as e:  # report the failed run, keep the logs' tails
                logs = sorted(f for f in os.listdir(workdir) if f.endswith(".log"))
                for name in logs[-3:]:
                    with open(os.path.join(workdir, name)) as f:
                        sys.stderr.write(f"--- {name}\n{f.read()[-2000:]}\n")
                result = {"replicas": r, "error": str(e)}
            results.append(result)
            print(json.dumps(result), flush=True)
    base = next((x["checkins_per_s"] for x in results if "checkins_per_s" in x), None)
    for x in results:
        if "checkins_per_s" in x:
            sys.stderr.write(
                f"{x['replicas']} replica(s): {x['checkins_per_s']:.0f} check-ins/s"
                f" ({x['checkins_per_s'] / base:.2f}x of the first row), jobs per replica "
                f"{[p['jobs'] for p in x['per_replica']]}, audit violations "
                f"{x['audit_violations']}\n")
        else:
            sys.stderr.write(f"{x['replicas']} replica(s): FAILED: {x['error']}\n")
    return 0 if all("checkins_per_s" in x and x["audit_violations"] == 0 for x in results) else 1


if __name__ == "__main__":
    sys.exit(main())
