"""Fixtures: a real psync-coordinator process on a free port (restartable on the same port)."""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

REPO = Path(__file__).absolute().parents[2]
# The package under test: this repository's python/, unless PSYNC_TEST_INSTALLED says the installed
# one (the wheel's, python/wheel_test.sh).
if not os.environ.get("PSYNC_TEST_INSTALLED"):
    sys.path.insert(0, str(REPO / "python"))


def coordinator_binary() -> Path:
    env = os.environ.get("PSYNC_COORDINATOR")
    return Path(env) if env else REPO / "bazel-bin" / "server" / "psync-coordinator"


class Coordinator:
    """A psync-coordinator process. start() binds port 0 the first time, the same port after."""

    def __init__(self, workdir: Path, flags=()):
        self.workdir = workdir
        self.flags = list(flags)  # more psync-coordinator flags
        self.port = 0
        self.proc = None
        self.starts = 0

    @property
    def target(self) -> str:
        return f"127.0.0.1:{self.port}"

    def start(self) -> None:
        self.starts += 1
        port_file = self.workdir / f"port{self.starts}"
        log = open(self.workdir / f"coordinator{self.starts}.log", "w")
        self.proc = subprocess.Popen(
            [str(coordinator_binary()), f"--listen=127.0.0.1:{self.port}",
             f"--port_file={port_file}", "--http_listen="] + self.flags,
            stdout=log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            if port_file.exists() and port_file.read_text().strip():
                self.port = int(port_file.read_text().strip())
                return
            if self.proc.poll() is not None:
                break
            time.sleep(0.05)
        self.kill()
        raise RuntimeError(f"the coordinator did not start: {(self.workdir / f'coordinator{self.starts}.log').read_text()}")

    def kill(self) -> None:
        """kill -9, as a crash."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(timeout=10)
        self.proc = None


@pytest.fixture
def coordinator():
    with tempfile.TemporaryDirectory(dir=os.environ.get("TEST_TMPDIR")) as d:
        c = Coordinator(Path(d))
        c.start()
        try:
            yield c
        finally:
            c.kill()
