"""The MoE example end to end on CPU (Gloo, 4 ranks, EP 2, 20 steps): coordinated equals reference
at every step and in its final weights, and naive is caught by the ranks and by the coordinator's
audit."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).absolute().parent


def test_coordinated_equals_reference_and_naive_is_caught():
    with tempfile.TemporaryDirectory(dir=os.environ.get("TEST_TMPDIR")) as d:
        summary_path = Path(d) / "summary.json"
        run = subprocess.run(
            [sys.executable, str(HERE / "launch.py"), "--steps=20", "--overlap=both",
             f"--workdir={d}/work", f"--summary_json={summary_path}", "--run_timeout=400"],
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=1500)
        print(run.stdout)
        assert run.returncode == 0, run.stdout[-3000:]
        summary = json.loads(summary_path.read_text())
        runs = summary["runs"]
        for name in ("coordinated", "coordinated+overlap"):
            assert runs[name]["loss_equal"] and runs[name]["weights_equal"], name
            audit = runs[name]["audit"]
            assert audit["records"] == 20 * 4 and audit["released_once"] == 80
            assert audit["early_syncs"] == 0 and audit["repeated_syncs"] == 0
        ref = runs["reference"]["losses"]
        assert ref[-1] < 0.5 * ref[0]
        assert runs["naive"]["codes"] == [1, 1, 1, 1]
        # Each rank's expert syncs ran early on every chunk of every step, and each chunk was
        # synced twice: the coordinator saw every one of them.
        assert runs["naive"]["audit"]["early_syncs"] >= 20 * 4 * 4
        assert runs["naive"]["audit"]["repeated_syncs"] == 20 * 4 * 4
        assert summary["naive_caught"]
        for chunk in range(4):
            assert f"rank 0 chunk {chunk} expert weights: garbage" in run.stdout
            assert f"rank 0 chunk {chunk} dense weights: zeros" in run.stdout
        assert runs["naive"]["losses"] != ref
