#!/usr/bin/env python3
"""etcd anchor: psync-bench's per-chunk barrier on etcd's v3 API (Debian's etcd-server, 3.4).

The benchmark starts a single-member etcd on loopback with a temporary data directory (default
settings: every write is a Raft commit with an fsync of the WAL) and talks to it through etcd's
JSON gateway (/v3/kv/put, /v3/kv/range, /v3/watch; keys and values base64), which etcd serves on
its client port. Each check-in puts its own key "b/{step}/{chunk}/{rank}.{optimizer}" and then
counts the chunk's keys (range, count_only); the check-in that sees N*K puts the chunk's done key
"d/{step}/{chunk}" (two arrivers seeing N*K both put it; waiters drop the repeat). Every rank's
waiter holds one watch on the prefix "d/", opened before the first step, and sees the chunks in
the order they completed. Workload, measurement and output: see barrier_harness.py.

  /usr/bin/python3 bench/etcd_barrier.py --ranks=64 --chunks=8 --steps=20 --json
"""

import base64
import http.client
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import barrier_harness  # noqa: E402

NAME = "etcd"
DESCRIPTION = "per-chunk barrier on etcd's v3 API"
ETCD = os.environ.get("ETCD", "/usr/bin/etcd")


def version():
    out = subprocess.run([ETCD, "--version"], capture_output=True, text=True, check=False).stdout
    return "etcd " + (out.split()[2] if out.startswith("etcd Version:") else "unknown")


def _b64(text):
    return base64.b64encode(text.encode()).decode()


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Server:
    def __init__(self, args):
        self.dir = tempfile.mkdtemp(prefix="psync-bench-etcd-")
        client, peer = _free_port(), _free_port()
        self.address = f"127.0.0.1:{client}"
        self.log = open(os.path.join(self.dir, "etcd.log"), "w")
        self.proc = subprocess.Popen(
            [ETCD, "--name=bench", f"--data-dir={self.dir}/data",
             f"--listen-client-urls=http://{self.address}",
             f"--advertise-client-urls=http://{self.address}",
             f"--listen-peer-urls=http://127.0.0.1:{peer}",
             f"--initial-advertise-peer-urls=http://127.0.0.1:{peer}",
             f"--initial-cluster=bench=http://127.0.0.1:{peer}", "--log-level=error"],
            stdout=self.log, stderr=subprocess.STDOUT)
        self.pid = self.proc.pid
        deadline = time.monotonic() + 30
        while True:
            try:
                _post(http.client.HTTPConnection(*_split(self.address), timeout=2),
                      "/v3/kv/range", {"key": _b64("probe")})
                break
            except (OSError, http.client.HTTPException):
                if self.proc.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(f"etcd did not start; see {self.dir}/etcd.log")
                time.sleep(0.05)

    def stop(self):
        self.proc.terminate()
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
        self.log.close()
        shutil.rmtree(self.dir, ignore_errors=True)


def start_server(args):
    return Server(args)


def _split(address):
    host, port = address.rsplit(":", 1)
    return host, int(port)


def _post(conn, path, body):
    conn.request("POST", path, json.dumps(body), {"Content-Type": "application/json"})
    response = conn.getresponse()
    data = response.read()
    if response.status != 200:
        raise RuntimeError(f"etcd {path}: HTTP {response.status}: {data[:200]!r}")
    return json.loads(data)


class Arrivals:
    def __init__(self, args):
        self.conn = http.client.HTTPConnection(*_split(args.address), timeout=args.timeout_s)
        self.complete = args.ranks * args.optimizers

    def arrive(self, step, chunk, rank, optimizer):
        prefix = f"b/{step}/{chunk}/"
        _post(self.conn, "/v3/kv/put", {"key": _b64(f"{prefix}{rank}.{optimizer}"),
                                        "value": _b64("1")})
        count = _post(self.conn, "/v3/kv/range", {"key": _b64(prefix),
                                                  "range_end": _b64(prefix[:-1] + "0"),
                                                  "count_only": True})
        if int(count.get("count", 0)) == self.complete:
            _post(self.conn, "/v3/kv/put", {"key": _b64(f"d/{step}/{chunk}"), "value": _b64("1")})

    def close(self):
        self.conn.close()


class Waiter:
    def __init__(self, args, rank):
        self.conn = http.client.HTTPConnection(*_split(args.address), timeout=args.timeout_s)
        self.conn.request("POST", "/v3/watch", json.dumps(
            {"create_request": {"key": _b64("d/"), "range_end": _b64("d0"),
                                "start_revision": 1}}))
        self.stream = self.conn.getresponse()
        if self.stream.status != 200:
            raise RuntimeError(f"etcd watch: HTTP {self.stream.status}")
        self.seen = set()
        self.ready = {}  # step -> chunks completed, in order

    def next_completion(self, step):
        while not self.ready.get(step):
            line = self.stream.readline()
            if not line:
                raise RuntimeError("etcd watch stream ended")
            result = json.loads(line).get("result", {})
            for event in result.get("events", []):
                _, s, c = base64.b64decode(event["kv"]["key"]).decode().split("/")
                key = (int(s), int(c))
                if key not in self.seen:
                    self.seen.add(key)
                    self.ready.setdefault(key[0], []).append(key[1])
        return self.ready[step].pop(0)

    def close(self):
        self.conn.close()


if __name__ == "__main__":
    sys.exit(barrier_harness.run(sys.modules[__name__], os.path.abspath(__file__)))
