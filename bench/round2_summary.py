#!/usr/bin/env python3
"""Prints the second performance round's targets 1 to 3 from bench/round2_targets.sh's JSON lines.

  python3 bench/round2_summary.py OUT_DIR/round2.jsonl [more.jsonl ...]

One markdown row per run, grouped by target, with the figure each target is judged by and the
target beside it (docs/performance.md, "Second round: the targets at the end"). Runs that did not
release every (step, chunk) exactly once are marked "not ok".
"""

import json
import sys


def ms(lat, key):
    return f"{lat[key] / 1000:.1f} ms"


def load(paths):
    runs = []
    for path in paths:
        with open(path) as f:
            runs += [json.loads(line) for line in f if line.startswith("{")]
    return runs


def cost(run):
    return run.get("coordinator") or run.get("server") or {}


def target1(runs):
    print("| target 1 | ranks | coordinator CPU per check-in (target 10 us) | echo server per "
          "message | release p99 | TCPStore p99 | TCPStore / psync (target 10x) | TCPStore server CPU "
          "per check-in |")
    print("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    # A psync run is compared with the TCPStore run of the same ranks and the same pinning.
    def key(r):
        return r["ranks"], r["system"].split()[-1]

    store = {key(r): r for r in runs if r["system"].startswith("t1 tcpstore")}
    for r in runs:
        if not r["system"].startswith("t1 direct"):
            continue
        p99 = r["release_latency"]["p99_us"]
        s = store.get(key(r))
        floor = r.get("grpc_floor_cpu", {}).get("cpu_us_per_message")
        print(f"| {r['system']}{'' if r['ok'] else ' (not ok)'} | {r['ranks']:,} | "
              f"{cost(r)['cpu_s_per_1m_checkins']:.1f} us | "
              f"{'' if floor is None else f'{floor:.1f} us'} | {p99 / 1000:.1f} ms | "
              f"{'' if s is None else ms(s['release_latency'], 'p99_us')} | "
              f"{'' if s is None else '%.1fx' % (s['release_latency']['p99_us'] / p99)} | "
              f"{'' if s is None else '%.1f us' % cost(s)['cpu_s_per_1m_checkins']} |")


def target23(runs):
    print()
    print("| target 2, 3 | ranks | release p50 | release p99 (target 1 ms; 50 ms) | check-ins/s "
          "(asked) | cores | CPU per check-in | VmHWM (target 256 MiB) |")
    print("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    for r in runs:
        if not r["system"].startswith(("t2", "t3")):
            continue
        lat = r["release_latency"]
        asked = r["ranks"] * r["optimizers"] * r["chunks"] * 1000 / r["step_period_ms"]
        c = cost(r)
        print(f"| {r['system']}{'' if r['ok'] else ' (not ok)'} | {r['ranks']:,} | "
              f"{ms(lat, 'p50_us')} | {ms(lat, 'p99_us')} | {r['checkins_per_s']:,.0f} "
              f"({asked:,.0f}) | {c['cpu_fraction']:.2f} | "
              f"{c['cpu_s_per_1m_checkins']:.2f} us | {c['hwm_mib']:.0f} MiB |")


def main():
    if len(sys.argv) < 2:
        print(__doc__, file=sys.stderr)
        return 2
    runs = load(sys.argv[1:])
    target1(runs)
    target23(runs)
    return 0


if __name__ == "__main__":
    sys.exit(main())
