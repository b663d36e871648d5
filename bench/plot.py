#!/usr/bin/env python3
"""Reads the JSON lines of psync-bench and the anchors, prints the side-by-side table with ratios and
a linear fit of the server's CPU cost against ranks x chunks, and draws scaling.png.

  python3 bench/plot.py bench/results/latest.jsonl [more.jsonl ...] [--png bench/results/scaling.png]

Table (latency-mode runs, one row per (N, K, C, spread)): release latency p50/p99 of each system,
the ratios TCPStore p99 / psync p99, etcd p99 / psync p99 and psync p99 / gRPC floor round-trip p99
(the floor is measured by psync-bench in the same run), and each server's CPU seconds per 1M
check-ins. Fit: per system, CPU seconds per step = a + b * (ranks x chunks), least squares, with R².
Plot (matplotlib, Agg): release latency p99 and CPU per 1M check-ins against N, one line per
system (and per C when several were run). Throughput-mode runs are listed separately.
"""

import argparse
import json
import sys
from collections import defaultdict

SYSTEMS = ["psync", "psync+agents", "psync+nodes", "tcpstore", "etcd"]


def load(paths):
    runs = []
    for path in paths:
        with open(path) as f:
            for line in f:
                line = line.strip()
                if line.startswith("{"):
                    runs.append(json.loads(line))
    return runs


def server(run):
    return run.get("coordinator") or run.get("server") or {}


def fit(points):
    """Least squares y = a + b x; returns (a, b, r2)."""
    n = len(points)
    if n < 2:
        return None
    mx = sum(x for x, _ in points) / n
    my = sum(y for _, y in points) / n
    sxx = sum((x - mx) ** 2 for x, _ in points)
    if sxx == 0:
        return None
    b = sum((x - mx) * (y - my) for x, y in points) / sxx
    a = my - b * mx
    ss_tot = sum((y - my) ** 2 for _, y in points)
    ss_res = sum((y - (a + b * x)) ** 2 for x, y in points)
    return a, b, (1 - ss_res / ss_tot) if ss_tot > 0 else 1.0


def fmt_us(v):
    if v is None:
        return "-"
    return f"{v / 1000:.2f} ms" if v >= 1000 else f"{v:.0f} us"


def ratio(a, b):
    return f"{a / b:.1f}x" if a and b else "-"


def table(runs):
    latency = [r for r in runs if r.get("mode") == "latency" and r.get("ok", True)]
    rows = defaultdict(dict)
    for r in latency:
        key = (r["ranks"], r["optimizers"], r["chunks"], r["spread_us"],
               float(r.get("step_period_ms", 0)))
        rows[key][r["system"]] = r
    header = ("N", "K", "C", "spread", "period", "psync p50", "psync p99", "agents p99",
              "nodes p99", "TCPStore p99",
              "etcd p99", "floor p99", "TCPStore/psync", "etcd/psync", "psync/floor",
              "CPU s/1M: psync", "TCPStore", "etcd")
    lines = [header]
    for key in sorted(rows):
        by = rows[key]
        p99 = {s: by[s]["release_latency"]["p99_us"] for s in by}
        floor = next((by[s]["grpc_floor_rtt"]["p99_us"] for s in by
                      if "grpc_floor_rtt" in by[s]), None)
        cpu = {s: server(by[s]).get("cpu_s_per_1m_checkins") for s in by}
        ps = p99.get("psync")
        lines.append((str(key[0]), str(key[1]), str(key[2]), f"{key[3]} us",
                      f"{key[4]:g} ms" if key[4] else "-",
                      fmt_us(by["psync"]["release_latency"]["p50_us"]) if "psync" in by else "-",
                      fmt_us(ps), fmt_us(p99.get("psync+agents")), fmt_us(p99.get("psync+nodes")),
                      fmt_us(p99.get("tcpstore")),
                      fmt_us(p99.get("etcd")), fmt_us(floor),
                      ratio(p99.get("tcpstore"), ps), ratio(p99.get("etcd"), ps), ratio(ps, floor),
                      *(f"{cpu[s]:.1f}" if cpu.get(s) is not None else "-"
                        for s in ("psync", "tcpstore", "etcd"))))
    widths = [max(len(l[i]) for l in lines) for i in range(len(header))]
    for i, l in enumerate(lines):
        print("  ".join(c.rjust(w) for c, w in zip(l, widths)))
        if i == 0:
            print("  ".join("-" * w for w in widths))

    tput = [r for r in runs if r.get("mode") == "throughput"]
    if tput:
        print("\nthroughput mode (each rank sends a step's K*C check-ins in one StagedBatch):")
        for r in tput:
            s = server(r)
            print(f"  {r['system']} N={r['ranks']} K={r['optimizers']} C={r['chunks']}: "
                  f"{r['checkins_per_s']:.0f} check-ins/s, coordinator "
                  f"{100 * s.get('cpu_fraction', 0):.0f}% of a core, "
                  f"{s.get('cpu_s_per_1m_checkins', 0):.2f} s CPU/1M check-ins, "
                  f"HWM {s.get('hwm_mib', 0):.0f} MiB")

    print("\nlinear fit of server CPU seconds per step against ranks x chunks (latency mode):")
    for system in SYSTEMS:
        pts = [(r["ranks"] * r["chunks"], server(r).get("cpu_s", 0) / r["steps"])
               for r in latency if r["system"] == system and server(r)]
        f = fit(pts)
        if f:
            a, b, r2 = f
            print(f"  {system}: cpu_s/step = {a * 1e3:.3f} ms + {b * 1e6:.2f} us x (N x C), "
                  f"R^2 = {r2:.3f} ({len(pts)} runs)")


def plot(runs, png):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    latency = [r for r in runs if r.get("mode") == "latency" and r.get("ok", True)]
    series = sorted({(r["chunks"], float(r.get("step_period_ms", 0)), r["spread_us"])
                     for r in latency})
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(12, 4.8))
    colors = {"psync": "tab:blue", "psync+agents": "tab:cyan", "psync+nodes": "tab:purple",
              "tcpstore": "tab:orange",
              "etcd": "tab:green"}
    markers = ["o", "s", "^", "D", "v"]
    for system in SYSTEMS:
        for i, (c, period, spread) in enumerate(series):
            pts = sorted((r["ranks"], r["release_latency"]["p99_us"] / 1000,
                          server(r).get("cpu_s_per_1m_checkins"))
                         for r in latency if r["system"] == system and r["chunks"] == c and
                         float(r.get("step_period_ms", 0)) == period and r["spread_us"] == spread)
            if not pts:
                continue
            label = system
            if len({s[0] for s in series}) > 1:
                label += f" C={c}"
            if len({s[2] for s in series}) > 1:
                label += f", spread {spread / 1000:g} ms"
            if len({s[1] for s in series}) > 1:
                label += f", {period:g} ms/step" if period else ", back to back"
            style = dict(color=colors[system], marker=markers[i % len(markers)], label=label)
            ax1.plot([p[0] for p in pts], [p[1] for p in pts], **style)
            cpu = [(p[0], p[2]) for p in pts if p[2] is not None]
            ax2.plot([p[0] for p in cpu], [p[1] for p in cpu], **style)
    floors = [r["grpc_floor_rtt"]["p99_us"] / 1000 for r in latency if "grpc_floor_rtt" in r]
    if floors:
        ax1.axhline(sum(floors) / len(floors), color="gray", linestyle="--",
                    label="gRPC round trip p99 (floor)")
    ax1.set(xscale="log", yscale="log", xlabel="ranks N", ylabel="release latency p99 (ms)",
            title="Release latency, K=2 optimizers")
    ax2.set(xscale="log", yscale="log", xlabel="ranks N",
            ylabel="server CPU s per 1M check-ins", title="Server CPU cost")
    from matplotlib.ticker import FuncFormatter, LogLocator
    for ax in (ax1, ax2):
        ax.yaxis.set_major_locator(LogLocator(subs=(1.0, 2.0, 5.0)))
        ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(png, dpi=110)
    print(f"\nwrote {png}")


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("files", nargs="+")
    p.add_argument("--png", default="")
    args = p.parse_args()
    runs = load(args.files)
    if not runs:
        print("no runs in", args.files)
        return 1
    table(runs)
    if args.png:
        plot(runs, args.png)
    return 0


if __name__ == "__main__":
    sys.exit(main())
