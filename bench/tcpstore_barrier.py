#!/usr/bin/env python3
"""TCPStore anchor: psync-bench's per-chunk barrier on PyTorch's torch.distributed.TCPStore.

Run with Debian's python3-torch (/usr/bin/python3). The store's server (the master TCPStore, whose
daemon thread serves every client) runs in its own process so that its CPU time and memory are
measured alone. Each check-in is `store.add("s{step}c{chunk}", 1)`; the add that returns N*K
completes the chunk and publishes it: `i = store.add("s{step}n", 1) - 1`,
`store.set("s{step}d{i}", chunk)`. Every rank's waiter reads "s{step}d0", "s{step}d1", ... with
`store.get` (which blocks until the key is set), so it sees the step's chunks in completion order.
Workload, measurement and output: see barrier_harness.py.

  /usr/bin/python3 bench/tcpstore_barrier.py --ranks=64 --chunks=8 --steps=20 --json
"""

import datetime
import os
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import barrier_harness  # noqa: E402

NAME = "tcpstore"
DESCRIPTION = "per-chunk barrier on torch.distributed.TCPStore"

SERVER = """
import datetime, sys
import torch.distributed as dist
store = dist.TCPStore("127.0.0.1", 0, None, True, timeout=datetime.timedelta(seconds=600),
                      wait_for_workers=False)
print(store.port, flush=True)
sys.stdin.read()
"""


def version():
    import torch
    return f"torch {torch.__version__}"


class Server:
    def __init__(self, args):
        # Pinned like psync-bench's --server_taskset pins the coordinator, when asked.
        pin = ["taskset", "-c", args.server_taskset] if args.server_taskset else []
        self.proc = subprocess.Popen(pin + [sys.executable, "-c", SERVER], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, text=True)
        line = self.proc.stdout.readline()
        if not line.strip().isdigit():
            raise RuntimeError(f"TCPStore server did not start: {line!r}")
        self.pid = self.proc.pid
        self.address = f"127.0.0.1:{int(line)}"

    def stop(self):
        try:
            self.proc.stdin.close()
            self.proc.wait(timeout=5)
        except Exception:
            self.proc.kill()


def start_server(args):
    return Server(args)


def _client(args):
    import torch.distributed as dist
    host, port = args.address.rsplit(":", 1)
    return dist.TCPStore(host, int(port), None, False,
                         timeout=datetime.timedelta(seconds=args.timeout_s))


class Arrivals:
    def __init__(self, args):
        self.store = _client(args)
        self.complete = args.ranks * args.optimizers

    def arrive(self, step, chunk, rank, optimizer):
        if self.store.add(f"s{step}c{chunk}", 1) == self.complete:
            i = self.store.add(f"s{step}n", 1) - 1
            self.store.set(f"s{step}d{i}", str(chunk))

    def close(self):
        pass


class Waiter:
    def __init__(self, args, rank):
        self.store = _client(args)
        self.step = -1
        self.index = 0

    def next_completion(self, step):
        if step != self.step:
            self.step, self.index = step, 0
        value = self.store.get(f"s{step}d{self.index}")
        self.index += 1
        return int(value)

    def close(self):
        pass


if __name__ == "__main__":
    sys.exit(barrier_harness.run(sys.modules[__name__], os.path.abspath(__file__)))
