"""Compares run.sh's runs: losses bitwise per step, psync's gathers and audit, step times."""

import json
import statistics
import sys

runs = [json.loads(line) for line in open(sys.argv[1])]
by_mode = {}
for r in runs:
    by_mode.setdefault(r["mode"], []).append(r)
for mode, rs in by_mode.items():
    for r in rs:
        print(f"{mode}: optimizers {r['children']}, expert params {r['expert_params']}, "
              f"loss {r['losses'][0]:.6f} -> {r['losses'][-1]:.6f}, median step "
              f"{statistics.median(r['step_s'][3:]) * 1e3:.2f} ms"
              + (f", gathers {r['gathers']}, audit {r['audit_totals']}" if "gathers" in r else ""))
reference = by_mode["megatron"][0]["losses"]
same = all(r["losses"] == reference for rs in by_mode.values() for r in rs)
print("losses identical at every step in every run:", same)
m = statistics.median(s for r in by_mode["megatron"] for s in r["step_s"][3:])
p = statistics.median(s for r in by_mode["psync"] for s in r["step_s"][3:])
print(f"median step: megatron {m * 1e3:.2f} ms, psync {p * 1e3:.2f} ms, ratio {p / m:.3f}")
sys.exit(0 if same else 1)
