"""Prints bench/cpu_layout_runs.sh's runs, one line each, then the medians per layout: the release
latency and its hops, the load generator's lag, the relays' directive ages (mean), the CPU of
the coordinator, the relays and the load generator (and of all three), and the AgentSession
messages each node sent and read per step.

    python3 bench/cpu_layout_summary.py OUT_DIR/cpu-layouts.jsonl
"""
import collections
import json
import statistics
import sys


def nodes_steps(r):
    return r["ranks"] / r["ranks_per_node"] * (r["steps"] + r["warmup_steps"])


def load_cores(r):
    return r["bench_cpu_s"] / r["measured_s"]


COLUMNS = [
    # name, how to read it from a run (ms or cores)
    ("last p50", lambda r: r["release_latency"]["p50_us"] / 1e3),
    ("last p99", lambda r: r["release_latency"]["p99_us"] / 1e3),
    ("first p50", lambda r: r["release_first_latency"]["p50_us"] / 1e3),
    ("lag p50", lambda r: r.get("pump_lag", {}).get("p50_us", 0) / 1e3),
    ("lag p99", lambda r: r.get("pump_lag", {}).get("p99_us", 0) / 1e3),
    ("up p50", lambda r: r["hops"]["up"]["p50_us"] / 1e3),
    ("down first", lambda r: r["hops"]["down_first"]["p50_us"] / 1e3),
    ("down last", lambda r: r["hops"]["down_last"]["p50_us"] / 1e3),
    ("relay read", lambda r: r["relay_waits"]["directive_age_read"]["mean_us"] / 1e3),
    ("relay queued", lambda r: r["relay_waits"]["directive_age_queued_to_agent"]["mean_us"] / 1e3),
    ("relay write", lambda r: r["relay_waits"]["write_to_agent"]["mean_us"] / 1e3),
    ("coord cores", lambda r: r["coordinator"]["cpu_fraction"]),
    ("coord us/ci", lambda r: r["coordinator"]["cpu_s_per_1m_checkins"]),
    ("relays cores", lambda r: r["relays"]["cpu_fraction"]),
    ("relay max", lambda r: r["relays"]["cpu_fraction_max"]),
    ("load cores", load_cores),
    ("all cores",
     lambda r: r["coordinator"]["cpu_fraction"] + r["relays"]["cpu_fraction"] + load_cores(r)),
    # AgentSession messages a node sent and read per step, over the whole run (warm-up and
    # attaches included): the relays' and the load generator's work
    ("up/node-step", lambda r: r["messages_up"] / nodes_steps(r)),
    ("down/node-step", lambda r: r["messages_down"] / nodes_steps(r)),
]


def value(read, r):
    """A column's value, or NaN where the run has no such part (no relays: --relays=0)."""
    try:
        return read(r)
    except KeyError:
        return float("nan")


def row(label, values, ok):
    print("%-22s %s %s" % (label, " ".join("%12.2f" % v for v in values), ok))


def main(path):
    runs = collections.OrderedDict()
    print("%-22s %s" % ("run", " ".join("%12s" % c for c, _ in COLUMNS)))
    for line in open(path):
        r = json.loads(line)
        values = [value(f, r) for _, f in COLUMNS]
        ok = "exactly once" if r["ok"] else "NOT OK"
        row(r["system"], values, ok)
        runs.setdefault(r["system"], []).append((values, r["ok"]))
    print("medians (ms; cores)")
    for label, rs in runs.items():
        medians = [statistics.median(v[i] for v, _ in rs) for i in range(len(COLUMNS))]
        row("%s (%d)" % (label, len(rs)), medians,
            "exactly once" if all(ok for _, ok in rs) else "NOT OK")


if __name__ == "__main__":
    main(sys.argv[1])
