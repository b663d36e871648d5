"""`python -m psync`: status and audit of a real job, their exit codes, a refused query."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import psync
from psync import ChunkPlan


def run_cli(*args: str) -> subprocess.CompletedProcess:
    env = dict(os.environ)
    # The package under test, wherever the suite imported it from (the checkout or the wheel).
    env["PYTHONPATH"] = os.pathsep.join(
        [os.path.dirname(os.path.dirname(psync.__file__))] +
        ([env["PYTHONPATH"]] if env.get("PYTHONPATH") else []))
    return subprocess.run([sys.executable, "-m", "psync", *args], capture_output=True, text=True,
                          timeout=60, env=env)


def test_status_and_audit_of_a_released_chunk(coordinator):
    plan = [ChunkPlan(chunk=0, optimizers=["dense"], groups={"dp": [0]})]
    with psync.Client(coordinator.target, job="cli", rank=0, world_size=1, chunks=plan) as c:
        c.staged(0, 0, "dense")
        c.wait_directive(0, 0, timeout=10)
        c.sync_done(0, 0, {"dp": 7})
        status = run_cli("status", "cli", "--target", coordinator.target)
        assert status.returncode == 0, status.stderr
        assert json.loads(status.stdout)["jobId"] == "cli"
        audit = run_cli("audit", "cli", "--target", coordinator.target)
        assert audit.returncode == 0, audit.stderr
        totals = json.loads(audit.stdout)["jobTotals"]
        assert (int(totals["released"]), int(totals["complete"])) == (1, 1)


def test_an_unknown_job_is_exit_code_2_with_the_coordinators_answer(coordinator):
    result = run_cli("status", "nope", "--target", coordinator.target)
    assert result.returncode == 2
    assert result.stdout == ""
    assert "NOT_FOUND" in result.stderr and "'nope' is not known" in result.stderr


def test_version_is_the_packages():
    result = run_cli("--version")
    assert result.returncode == 0
    assert result.stdout.strip() == f"psync {psync.__version__}"
