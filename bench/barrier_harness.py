"""The per-chunk barrier workload that the anchors (TCPStore, etcd) run, measured like psync-bench.

Contract. run(backend) parses the command line and either runs the parent or, with --worker, one
worker process. The parent starts the backend's server (backend.start_server), starts --procs worker
processes (this same script with --worker) that together simulate --ranks ranks, samples the
server's CPU time (/proc/<pid>/stat) and memory around the measured steps, and prints one JSON
object (with --json) or a summary line. Each worker runs two threads per rank, each with its own
connection to the server: an arrival thread and a waiter thread.

Per step, each of a rank's optimizers checks in to each chunk after a delay uniform in
[0, spread_us] from the rank's step start (backend.Arrivals.arrive). The check-in that completes a
chunk (N*K arrivals) publishes the chunk's completion; the waiter thread of every rank observes the
step's completions in the order they were published (backend.Waiter.next_completion). A rank starts
its next step once it observed every chunk of the current one. Release latency of a (step, chunk)
is the time the last member observed it minus the time its last check-in was sent (the call's
start), on CLOCK_MONOTONIC, which every process on the machine shares. Between the warmup steps and
the measured steps every rank waits for all ranks (the parent samples the server there). With
--step_period_ms, measured step s starts no earlier than the measured start + s * step_period_ms
(as psync-bench --step_period_ms).

Wire protocol between parent and workers: a worker prints 'parked' once its ranks finished warmup,
reads 'go', prints 'finished' when its ranks are done and then 'result <json>'.
"""

import argparse
import json
import os
import random
import subprocess
import sys
import threading
import time

CLOCK_TICKS = os.sysconf("SC_CLK_TCK")


def proc_sample(pid):
    """(cpu_seconds, rss_bytes, hwm_bytes) of a process, from /proc."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        cpu = (int(fields[11]) + int(fields[12])) / CLOCK_TICKS
        rss = hwm = 0
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    rss = int(line.split()[1]) * 1024
                elif line.startswith("VmHWM:"):
                    hwm = int(line.split()[1]) * 1024
        return cpu, rss, hwm
    except (OSError, IndexError, ValueError):
        return 0.0, 0, 0


def tree_pids(pid):
    """pid and its descendants (a server may run as a child of a launcher process)."""
    pids = [pid]
    try:
        out = subprocess.run(["ps", "-o", "pid=", "--ppid", str(pid)], capture_output=True,
                             text=True, check=False).stdout
        for child in out.split():
            pids.extend(tree_pids(int(child)))
    except OSError:
        pass
    return pids


def sample_tree(pid):
    total = [0.0, 0, 0]
    for p in tree_pids(pid):
        cpu, rss, hwm = proc_sample(p)
        total[0] += cpu
        total[1] += rss
        total[2] += hwm
    return total


def parse_args(description):
    p = argparse.ArgumentParser(description=description)
    p.add_argument("--ranks", type=int, default=8)
    p.add_argument("--optimizers", type=int, default=2)
    p.add_argument("--chunks", type=int, default=8)
    p.add_argument("--steps", type=int, default=20)
    p.add_argument("--warmup_steps", type=int, default=2)
    p.add_argument("--spread_us", type=int, default=500)
    p.add_argument("--step_period_ms", type=float, default=0,
                   help="0: a rank starts its next step once it observed every chunk; else "
                        "measured steps start every step_period_ms")
    p.add_argument("--procs", type=int, default=8, help="worker processes (ranks are threads)")
    p.add_argument("--timeout_s", type=float, default=300)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--server_taskset", default="",
                   help="CPUs for the server process, as taskset -c takes them (tcpstore only)")
    p.add_argument("--json", action="store_true")
    p.add_argument("--label", default="")
    p.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--address", default="", help=argparse.SUPPRESS)
    p.add_argument("--first_rank", type=int, default=0, help=argparse.SUPPRESS)
    p.add_argument("--last_rank", type=int, default=0, help=argparse.SUPPRESS)
    return p.parse_args()


def percentile(sorted_values, p):
    if not sorted_values:
        return 0.0
    rank = max(1, int(-(-p * len(sorted_values) // 1)))
    return sorted_values[min(rank, len(sorted_values)) - 1]


def summarize(samples_ns):
    s = sorted(samples_ns)
    if not s:
        return {"count": 0, "p50_us": 0, "p90_us": 0, "p99_us": 0, "max_us": 0, "mean_us": 0}
    us = lambda v: round(v / 1000.0, 1)
    return {"count": len(s), "p50_us": us(percentile(s, 0.5)), "p90_us": us(percentile(s, 0.9)),
            "p99_us": us(percentile(s, 0.99)), "max_us": us(s[-1]), "mean_us": us(sum(s) / len(s))}


# ---------------------------------------------------------------------------------------------
# Worker

def run_worker(args, backend):
    total_steps = args.warmup_steps + args.steps
    ranks = list(range(args.first_rank, args.last_rank))
    records = {}  # (step, chunk) -> [max_send_ns, max_observed_ns, observations]
    records_lock = threading.Lock()
    errors = []
    parked = threading.Semaphore(0)
    go = threading.Event()
    measure_start = [time.monotonic()]  # set again when the measured steps start
    optimizer_names = [f"opt{k}" for k in range(args.optimizers)]

    def record(step, chunk, send=None, observed=None):
        with records_lock:
            r = records.setdefault((step, chunk), [0, 0, 0])
            if send is not None:
                r[0] = max(r[0], send)
            if observed is not None:
                r[1] = max(r[1], observed)
                r[2] += 1

    def rank_main(rank):
        rng = random.Random(args.seed * 1000003 + rank)
        step_done = [threading.Event() for _ in range(total_steps)]

        def waiter():
            try:
                w = backend.Waiter(args, rank)
                for step in range(total_steps):
                    for _ in range(args.chunks):
                        chunk = w.next_completion(step)
                        record(step, chunk, observed=time.monotonic_ns())
                    step_done[step].set()
                w.close()
            except Exception as e:  # reported by the parent
                errors.append(f"rank {rank} waiter: {e!r}")
                for ev in step_done:
                    ev.set()

        t = threading.Thread(target=waiter, daemon=True)
        t.start()
        try:
            a = backend.Arrivals(args)
            for step in range(total_steps):
                if step == args.warmup_steps and step > 0:
                    parked.release()
                    go.wait()
                base = time.monotonic()
                if args.step_period_ms > 0 and step >= args.warmup_steps:
                    base = max(base, measure_start[0] +
                               (step - args.warmup_steps) * args.step_period_ms / 1000)
                spread = args.spread_us / 1e6
                plan = sorted((base + rng.random() * spread, c, k)
                              for c in range(args.chunks) for k in range(args.optimizers))
                for due, chunk, k in plan:
                    delay = due - time.monotonic()
                    if delay > 0:
                        time.sleep(delay)
                    record(step, chunk, send=time.monotonic_ns())
                    a.arrive(step, chunk, rank, optimizer_names[k])
                if not step_done[step].wait(args.timeout_s):
                    raise TimeoutError(f"step {step} not released within {args.timeout_s} s")
                if errors:
                    break
            a.close()
        except Exception as e:
            errors.append(f"rank {rank}: {e!r}")
            if args.warmup_steps > 0:
                parked.release()
        t.join(args.timeout_s)

    threads = [threading.Thread(target=rank_main, args=(r,), daemon=True) for r in ranks]
    for t in threads:
        t.start()
    if args.warmup_steps > 0:
        for _ in ranks:
            parked.acquire()
        print("parked", flush=True)
        sys.stdin.readline()
        measure_start[0] = time.monotonic()
        go.set()
    for t in threads:
        t.join()
    print("finished", flush=True)
    result = {"records": [[s, c, v[0], v[1], v[2]] for (s, c), v in records.items()],
              "errors": errors[:5]}
    print("result " + json.dumps(result), flush=True)


# ---------------------------------------------------------------------------------------------
# Parent

def run_parent(args, backend, script):
    server = backend.start_server(args)
    procs = []
    try:
        idle = sample_tree(server.pid)
        n = args.ranks
        p = max(1, min(args.procs, n))
        bounds = [n * i // p for i in range(p + 1)]
        common = [f"--{k}={getattr(args, k)}" for k in
                  ("ranks", "optimizers", "chunks", "steps", "warmup_steps", "spread_us",
                   "step_period_ms", "timeout_s", "seed")]
        for i in range(p):
            procs.append(subprocess.Popen(
                [sys.executable, script, "--worker", f"--address={server.address}",
                 f"--first_rank={bounds[i]}", f"--last_rank={bounds[i + 1]}"] + common,
                stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, bufsize=1))
        load = os.getloadavg()
        deadline = time.monotonic() + args.timeout_s

        def expect(proc, word):
            line = proc.stdout.readline()
            if not line.startswith(word):
                raise RuntimeError(f"worker {proc.pid}: expected '{word}', got {line!r} "
                                   f"(exit {proc.poll()})")
            return line

        if args.warmup_steps > 0:
            for proc in procs:
                expect(proc, "parked")
        start_sample = sample_tree(server.pid)
        start = time.monotonic()
        if args.warmup_steps > 0:
            for proc in procs:
                proc.stdin.write("go\n")
                proc.stdin.flush()
        for proc in procs:
            expect(proc, "finished")
        end = time.monotonic()
        end_sample = sample_tree(server.pid)
        records = {}
        errors = []
        for proc in procs:
            result = json.loads(expect(proc, "result")[len("result "):])
            errors.extend(result["errors"])
            for s, c, send, observed, count in result["records"]:
                r = records.setdefault((s, c), [0, 0, 0])
                r[0] = max(r[0], send)
                r[1] = max(r[1], observed)
                r[2] += count
            proc.wait(timeout=max(1, deadline - time.monotonic()))
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.kill()
        server.stop()

    total_steps = args.warmup_steps + args.steps
    complete = [(s, c) for (s, c), v in records.items() if v[2] == n]
    latencies = [records[k][1] - records[k][0] for k in complete if k[0] >= args.warmup_steps]
    measured = end - start
    checkins = n * args.optimizers * args.chunks * args.steps
    cpu = end_sample[0] - start_sample[0]
    out = {
        "system": args.label or backend.NAME, "mode": "latency", "ranks": n,
        "optimizers": args.optimizers, "chunks": args.chunks, "steps": args.steps,
        "warmup_steps": args.warmup_steps, "spread_us": args.spread_us,
        "step_period_ms": args.step_period_ms, "procs": p,
        "ok": not errors and len(complete) == total_steps * args.chunks,
        "release_latency": summarize(latencies),
        "releases_expected": total_steps * args.chunks, "releases_complete": len(complete),
        "checkins": checkins, "measured_s": round(measured, 4),
        "checkins_per_s": round(checkins / measured, 1) if measured > 0 else 0,
        "server": {"cpu_s": round(cpu, 3), "cpu_fraction": round(cpu / measured, 4),
                   "cpu_s_per_1m_checkins": round(cpu / checkins * 1e6, 3),
                   "rss_idle_mib": round(idle[1] / 2**20, 2),
                   "rss_mib": round(end_sample[1] / 2**20, 2),
                   "hwm_mib": round(end_sample[2] / 2**20, 2),
                   "bytes_per_rank": round((end_sample[2] - idle[1]) / n)},
        "server_version": backend.version(), "errors": errors[:5],
        "load_avg": [round(x, 2) for x in load],
    }
    if args.json:
        print(json.dumps(out, separators=(",", ":")), flush=True)
    else:
        lat = out["release_latency"]
        print(f"{out['system']} N={n} K={args.optimizers} C={args.chunks} S={args.steps}: "
              f"release p50 {lat['p50_us']:.0f} us p99 {lat['p99_us']:.0f} us max "
              f"{lat['max_us']:.0f} us; {out['checkins_per_s']:.0f} check-ins/s; server "
              f"{out['server']['cpu_s_per_1m_checkins']:.2f} s CPU/1M check-ins, "
              f"{100 * out['server']['cpu_fraction']:.0f}% of a core; releases "
              f"{len(complete)}/{total_steps * args.chunks}" + ("" if out["ok"] else " (FAILED)"))
        for e in errors[:5]:
            print("  error:", e)
    return 0 if out["ok"] else 1


def run(backend, script):
    args = parse_args(backend.DESCRIPTION)
    if args.worker:
        run_worker(args, backend)
        return 0
    return run_parent(args, backend, script)
