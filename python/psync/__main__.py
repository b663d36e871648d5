"""`python -m psync`: the queries users type most, without psyncctl.

    python -m psync status JOB [--target HOST:PORT[,...]]   the job's status (JSON)
    python -m psync audit JOB [--target ...]                its sync audit (JSON)
    python -m psync --version

`--target` defaults to $PSYNC_TARGET, else localhost:7070; a comma-separated list of replicas
goes to the job's owner. Exit codes, as psyncctl's: 0 ok; 1 the answer is bad (status: the job
ABORTED or DEGRADED; audit: a double release, checksum mismatch, early or repeated sync over the
whole job); 2 a usage error or a refused query (its gRPC code and message on stderr).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from typing import Any, Dict, List, Optional

import psync

_BAD_STATES = ("ABORTED", "DEGRADED")
_VIOLATIONS = ("doubleReleases", "checksumMismatches", "earlySyncs", "repeatedSyncs")


def _bad(command: str, answer: Dict[str, Any]) -> bool:
    if command == "status":
        return answer.get("state") in _BAD_STATES
    totals = answer.get("jobTotals") or answer.get("totals") or {}
    return any(int(totals.get(name, 0)) > 0 for name in _VIOLATIONS)


def main(argv: Optional[List[str]] = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m psync", description=__doc__.split("\n")[0])
    parser.add_argument("--version", action="version", version=f"psync {psync.__version__}")
    parser.add_argument("command", choices=["status", "audit"])
    parser.add_argument("job")
    parser.add_argument("--target", default=os.environ.get("PSYNC_TARGET", "localhost:7070"))
    parser.add_argument("--timeout", type=float, default=10.0)
    args = parser.parse_args(argv)
    query = psync.get_job_status if args.command == "status" else psync.get_audit
    try:
        answer = query(args.target, args.job, timeout=args.timeout)
    except psync.PsyncError as e:
        print(f"psync: {e}", file=sys.stderr)
        return 2
    print(json.dumps(answer, indent=2, sort_keys=True))
    return 1 if _bad(args.command, answer) else 0


if __name__ == "__main__":
    sys.exit(main())
