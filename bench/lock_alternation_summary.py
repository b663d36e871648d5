"""Prints bench/lock_alternation.sh's runs: per run the release latency and its hops, the CPU of
the coordinator, the relays and the load generator, and the job lock's counters over 4 s.

    python3 bench/lock_alternation_summary.py OUT_DIR
"""
import json
import re
import sys


def ms(hist, key="p50_us"):
    return hist[key] / 1e3


def runs(path):
    for line in open(path):
        r = json.loads(line)
        h = r["hops"]
        w = r.get("relay_waits") or {}
        print("%-14s %s last rank p50/p99 %.0f/%.0f ms, first %.0f, lag %.0f, up %.0f/%.0f, "
              "down first/last %.0f/%.0f, delivery mean %.1f, relay fan-out mean %.1f | "
              "coordinator %.2f cores %.2f us/check-in, relays %.2f cores %.2f us, "
              "load generator %.2f cores" % (
                  r["system"], "exactly once" if r["ok"] else "NOT OK",
                  ms(r["release_latency"]), ms(r["release_latency"], "p99_us"),
                  ms(r["release_first_latency"]), ms(r.get("pump_lag", {"p50_us": 0})),
                  ms(h["up"]), ms(h["up"], "p99_us"), ms(h["down_first"]), ms(h["down_last"]),
                  r["coordinator_decision_delivery"]["mean_us"] / 1e3,
                  w.get("fanout_to_agent", {"mean_us": 0})["mean_us"] / 1e3,
                  r["coordinator"]["cpu_fraction"], r["coordinator"]["cpu_s_per_1m_checkins"],
                  r["relays"]["cpu_fraction"], r["relays"]["cpu_s_per_1m_checkins"],
                  r["bench_cpu_s"] / r["measured_s"]))


def values(text):
    v = {}
    for line in text.splitlines():
        m = re.match(r"(psync_\w+)(\{[^}]*\})? ([0-9.e+-]+)$", line)
        if m:
            v[m.group(1)] = v.get(m.group(1), 0) + float(m.group(3))
        m = re.match(r"utime (\d+) stime (\d+)", line)
        if m:
            v["cpu_s"] = (int(m.group(1)) + int(m.group(2))) / 100
    return v


def counters(path):
    for block in open(path).read().split("== ")[1:]:
        label, _, rest = block.partition("\n")
        if "-- after 4 s" not in rest:
            continue
        first, second = rest.split("-- after 4 s")
        a, z = values(first), values(second)
        d = {k: z[k] - a.get(k, 0) for k in z}
        msgs = d.get("psync_checkins_total", 0) + d.get("psync_sync_done_total", 0)
        held = d.get("psync_job_lock_held_seconds_total", 0)
        print("%-14s over 4 s: %d check-ins (%d chunk by chunk), %d SyncDones; job lock held "
              "%.3f s (%.0f ns a message), waited %.3f s; coordinator CPU %.2f s" % (
                  label, d.get("psync_checkins_total", 0),
                  d.get("psync_checkins_by_chunk_total", 0), d.get("psync_sync_done_total", 0),
                  held, 1e9 * held / max(1, msgs),
                  d.get("psync_job_lock_wait_seconds_total", 0), d.get("cpu_s", 0)))


if __name__ == "__main__":
    runs(sys.argv[1] + "/lock-alternation.jsonl")
    counters(sys.argv[1] + "/lock-alternation-counters.txt")
