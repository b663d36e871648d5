"""What the Python benchmark drivers read of a running psync-coordinator: a free local port to
start one on, its CPU time from /proc, and sums of its /metrics series."""

import os
import socket
import urllib.request


def free_port():
    # A coordinator must be told its ports (and a replica its own address) before it starts, so a
    # port is picked here; the bind race with other processes is accepted for a benchmark host.
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def cpu_seconds(pid):
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def metric_sums(http_port, prefixes):
    """{prefix: sum of the values of every series whose line starts with prefix}."""
    with urllib.request.urlopen(f"http://127.0.0.1:{http_port}/metrics", timeout=10) as r:
        text = r.read().decode()
    sums = {prefix: 0.0 for prefix in prefixes}
    for line in text.splitlines():
        for prefix in prefixes:
            if line.startswith(prefix):
                sums[prefix] += float(line.rsplit(" ", 1)[1])
    return sums
