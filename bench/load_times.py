#!/usr/bin/python3
"""Where a coordinator's time goes under load: its lock, its delivering thread, or neither.

Starts one psync-coordinator pinned to --server_cores, then --jobs concurrent psync-bench
processes (one job each, simulated nodes of 8, K=2, C=8, lazy acks; pinned to the other cores),
and every second reads the coordinator's /metrics and CPU time. Each line of output is one
second: check-ins/s, cores used, and the seconds per second spent holding the state machine's
lock (psync_coordinator_lock_held_seconds_total), waiting for it, and delivering decisions
(psync_coordinator_delivering_seconds_total). A lock held close to 1.0 s/s is a coordinator bound
by its one lock; delivering close to 1.0 s/s, by its one delivering thread. The psync-bench JSON
lines follow (each job's releases must all be exactly once).

  bench/load_times.py --bin DIR --server_cores 0-3 --jobs 4 --ranks 4096 [--steps 20]

DIR holds psync-coordinator and psync-bench.
"""

import argparse
import os
import subprocess
import sys
import tempfile
import time

from coordinator_probe import cpu_seconds, free_port, metric_sums


# Series summed per second: check-ins over every job, the coordinator's lock and delivery times.
SERIES = {"psync_checkins_total{": "checkins",
          "psync_coordinator_lock_held_seconds_total": "held",
          "psync_coordinator_lock_wait_seconds_total": "wait",
          "psync_coordinator_delivering_seconds_total": "delivering"}


def scrape(http_port):
    sums = metric_sums(http_port, list(SERIES))
    return {key: sums[prefix] for prefix, key in SERIES.items()}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--bin", required=True)
    ap.add_argument("--server_cores", default="0-3")
    ap.add_argument("--jobs", type=int, default=1)
    ap.add_argument("--ranks", type=int, default=16384)
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--step_period_ms", type=int, default=500)
    ap.add_argument("--spread_us", type=int, default=100000)
    ap.add_argument("--label", default="")
    args = ap.parse_args()
    last = os.cpu_count() - 1
    first_load = int(args.server_cores.split("-")[-1]) + 1
    port, http_port = free_port(), free_port()
    logs = tempfile.mkdtemp(prefix="load-times-")
    server = subprocess.Popen(
        ["taskset", "-c", args.server_cores, f"{args.bin}/psync-coordinator",
         f"--listen=127.0.0.1:{port}", f"--http_listen=127.0.0.1:{http_port}",
         "--history_steps=2"],
        stdout=open(f"{logs}/coordinator.out", "w"), stderr=subprocess.STDOUT)
    deadline = time.monotonic() + 20
    while True:
        try:
            scrape(http_port)
            break
        except OSError:
            if time.monotonic() > deadline or server.poll() is not None:
                sys.exit("the coordinator did not start; see " + logs)
            time.sleep(0.1)
    benches = [subprocess.Popen(
        ["taskset", "-c", f"{first_load}-{last}", f"{args.bin}/psync-bench",
         f"--target=127.0.0.1:{port}", f"--coordinator_pid={server.pid}", "--floor=false",
         "--simulated_nodes=8", "--node_tick_us=20000", "--optimizers=2", "--chunks=8",
         "--lazy_acks=true", f"--ranks={args.ranks}", "--group_size=8",
         f"--steps={args.steps}", "--warmup_steps=1", f"--step_period_ms={args.step_period_ms}",
         f"--spread_us={args.spread_us}", "--timeout_s=240",
         f"--label={args.label} job{j}", "--json"],
        stdout=subprocess.PIPE, stderr=open(f"{logs}/bench{j}.err", "w"), text=True)
        for j in range(args.jobs)]
    before, cpu_before, t_before = scrape(http_port), cpu_seconds(server.pid), time.monotonic()
    print(f"# {args.label}: jobs={args.jobs} ranks={args.ranks} server_cores={args.server_cores}")
    print("#   s  checkins/s  cores  lock_held  lock_wait  delivering")
    second = 0
    while any(b.poll() is None for b in benches):
        time.sleep(1)
        second += 1
        now, cpu_now, t_now = scrape(http_port), cpu_seconds(server.pid), time.monotonic()
        dt = t_now - t_before
        rate = {k: (now[k] - before[k]) / dt for k in now}
        print(f"{second:5d} {rate['checkins']:11.0f} {(cpu_now - cpu_before) / dt:6.2f}"
              f" {rate['held']:10.3f} {rate['wait']:10.3f} {rate['delivering']:11.3f}",
              flush=True)
        before, cpu_before, t_before = now, cpu_now, t_now
    for b in benches:
        print(b.stdout.read().strip())
    server.terminate()
    server.wait(timeout=30)
    return 0 if all(b.returncode == 0 for b in benches) else 1


if __name__ == "__main__":
    sys.exit(main())
