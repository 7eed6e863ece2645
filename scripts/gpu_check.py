"""GPU check: run the fixture programs for real on CUDA and compare with the simulator.

    python scripts/gpu_check.py [--out REPORT.json]

For every rewrite fixture (original and fixed) it runs ``main()`` on the real GPUs of
this machine and under the simulator with the same GPU count, and compares the device
of every parameter, buffer and output (values are not compared: GPU kernels and the
CPU differ in the last bits). Exits 0 when every placement matches, 1 otherwise, and
77 (skipped) without CUDA. Each program runs in a subprocess of its own.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

CHILD = r"""
import json, runpy, sys
import torch
from torchdevlint.sim import Simulator
from torchdevlint.sim.proof import _collect
path, mode = sys.argv[1], sys.argv[2]
def run():
    out = {}
    try:
        torch.manual_seed(0)
        _collect(runpy.run_path(path, run_name="__tdl_fixture__")["main"](), "main()", out)
    except Exception as exc:
        return {"error": f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"}
    return {"devices": {k: v[0] for k, v in out.items()}}
if mode == "real":
    print(json.dumps(run()))
else:
    with Simulator(torch.cuda.device_count()):
        print(json.dumps(run()))
"""


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--out")
    args = parser.parse_args()
    import torch

    if not torch.cuda.is_available():
        print("gpu_check: no CUDA device here; skipped")
        return 77
    programs = []
    for original in sorted((ROOT / "fixtures").rglob("*.py")):
        if "negative" in original.parts:
            continue
        fixed = original.with_name(original.name + ".fixed")
        programs.append(original)
        if fixed.exists():
            programs.append(fixed)
    results, mismatches = {}, 0
    for program in programs:
        row = {}
        for mode in ("real", "sim"):
            r = subprocess.run([sys.executable, "-c", CHILD, str(program), mode],
                               capture_output=True, text=True, timeout=300, cwd=ROOT)
            lines = r.stdout.strip().splitlines()
            row[mode] = json.loads(lines[-1]) if lines else {"error": r.stderr.strip()[-300:]}
        real, sim = row["real"], row["sim"]
        same = real.get("devices") == sim.get("devices") and ("error" in real) == ("error" in sim)
        row["match"] = same
        mismatches += not same
        results[str(program.relative_to(ROOT))] = row
        print(f"{'ok  ' if same else 'DIFF'} {program.relative_to(ROOT)}"
              + ("" if same else f"\n     real: {real}\n     sim:  {sim}"))
    summary = {"gpus": torch.cuda.device_count(), "device": torch.cuda.get_device_name(0),
               "programs": len(programs), "mismatches": mismatches, "results": results}
    if args.out:
        Path(args.out).write_text(json.dumps(summary, indent=2))
    print(f"gpu_check: {len(programs) - mismatches}/{len(programs)} programs placed alike "
          f"on {summary['gpus']} real GPU(s) and the simulator")
    return 0 if mismatches == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
