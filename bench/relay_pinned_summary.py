"""Medians per arm of bench/relay_pinned_alternation.sh's JSON lines (psync-bench --json with
--relays=1 --hop_times --agent_metrics), each run's value in brackets, in the order run.

  python3 bench/relay_pinned_summary.py RELAY_PINNED_JSONL
"""
import collections
import json
import statistics
import sys

from cpu_layout_summary import nodes_steps

ROWS = [
    # (label, unit, value of one run)
    ("relay CPU a check-in", "us", lambda r, n: r["relays"]["cpu_s_per_1m_checkins"]),
    ("relay CPU a node message", "us",
     lambda r, n: r["relays"]["cpu_s"] * 1e6 / (r["messages_up"] + r["messages_down"])),
    ("messages up a node-step", "", lambda r, n: r["messages_up"] / n),
    ("messages down a node-step", "", lambda r, n: r["messages_down"] / n),
    ("relay fan-out, mean", "ms",
     lambda r, n: r["relay_waits"]["fanout_to_agent"]["mean_us"] / 1e3),
    ("way up p50", "ms", lambda r, n: r["hops"]["up"]["p50_us"] / 1e3),
    ("down, last node p50", "ms", lambda r, n: r["hops"]["down_last"]["p50_us"] / 1e3),
    ("first rank p50", "ms", lambda r, n: r["release_first_latency"]["p50_us"] / 1e3),
    ("last rank p50", "ms", lambda r, n: r["release_latency"]["p50_us"] / 1e3),
    ("last rank p99", "ms", lambda r, n: r["release_latency"]["p99_us"] / 1e3),
]


def main(path):
    runs = collections.OrderedDict()
    for line in open(path):
        r = json.loads(line)
        runs.setdefault(r["system"], []).append(r)
    for arm, rs in runs.items():
        clean = all(r["ok"] and r["duplicate_directives"] == 0 for r in rs)
        print(f"{arm}: {len(rs)} runs, {'exactly once' if clean else 'NOT exactly once'}")
        for label, unit, value in ROWS:
            xs = [value(r, nodes_steps(r)) for r in rs]
            each = " ".join(f"{x:.2f}" for x in xs)
            print(f"  {label:28s} {statistics.median(xs):8.2f} {unit:2s} [{each}]")


if __name__ == "__main__":
    main(sys.argv[1])
