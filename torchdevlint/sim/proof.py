"""Proof by running torch: run a fixture program for real on CPU torch and under the
simulator with several GPU counts, and compare an original with its rewrite.

``python -m torchdevlint.sim.proof PROGRAM`` prints one JSON object: for the real CPU
run and for each simulated GPU count, either the error (type and message) or the
placement and a hash of the value of every parameter, buffer and tensor that
``main()`` returns. Each program runs in a subprocess of its own.
"""

from __future__ import annotations

import hashlib
import json
import os
import runpy
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from typing import Dict, List, Optional

GPU_COUNTS = (1, 2, 4)


def _collect(obj, prefix: str, out: Dict[str, List[str]]) -> None:
    import torch

    from . import device_of

    def record(name: str, t) -> None:
        data = t.detach()
        with torch._C.DisableTorchFunction():
            raw = data.contiguous().view(torch.uint8) if data.dim() else data.reshape(1).view(torch.uint8)
            digest = hashlib.sha256(bytes(raw.reshape(-1).tolist())).hexdigest()[:16]  # no numpy needed
        out[name] = [device_of(t), str(t.dtype), str(tuple(t.shape)), digest]

    if isinstance(obj, torch.nn.Module):
        for name, p in obj.named_parameters():
            record(f"{prefix}.{name}", p)
        for name, b in obj.named_buffers():
            record(f"{prefix}.{name}", b)
    elif isinstance(obj, torch.Tensor):
        record(prefix, obj)
    elif isinstance(obj, dict):
        for k, v in obj.items():
            _collect(v, f"{prefix}.{k}", out)
    elif isinstance(obj, (list, tuple)):
        for i, v in enumerate(obj):
            _collect(v, f"{prefix}[{i}]", out)


def run_once(path: str, gpus: Optional[int]) -> dict:
    """Run ``main()`` of ``path``: for real (gpus=None) or under the simulator."""
    import torch

    from . import Simulator

    torch.manual_seed(0)
    out: Dict[str, List[str]] = {}
    sim = None
    try:
        if gpus is None:
            result = runpy.run_path(path, run_name="__tdl_fixture__")["main"]()
        else:
            sim = Simulator(gpus)
            with sim:
                result = runpy.run_path(path, run_name="__tdl_fixture__")["main"]()
    except Exception as exc:  # the program's failure is data here
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
        return {"error": f"{type(exc).__name__}: {first}"}
    _collect(result, "main()", out)  # outside the try: a harness bug must not look like data
    report = {"values": out}
    if sim is not None:  # process-level setup, checked apart from the values
        data = sim.report()
        report["setup"] = {"unbound_process_groups": len(data["unbound_process_groups"]),
                           "visible_devices_changed_late": len(data["visible_devices"]["changed_after_init"])}
    return report


def run_program(path: str) -> dict:
    report = {"cpu": run_once(path, None)}
    for n in GPU_COUNTS:
        report[f"sim{n}"] = run_once(path, n)
    return report


def run_in_subprocess(path: str, timeout: int = 120) -> dict:
    """Run ``path`` under the proof runner; what the program (and torch: elastic agents,
    error files) writes in the temporary folder goes with a folder of its own."""
    with tempfile.TemporaryDirectory(prefix="torchdevlint-proof-") as scratch:
        r = subprocess.run([sys.executable, "-m", "torchdevlint.sim.proof", path],
                           capture_output=True, text=True, timeout=timeout, env={**os.environ, "TMPDIR": scratch})
    if r.returncode != 0:
        raise RuntimeError(f"proof runner failed on {path}: {r.stderr.strip()[-2000:]}")
    return json.loads(r.stdout.strip().splitlines()[-1])


@dataclass
class Verdict:
    ok: bool
    problems: List[str]
    original: dict
    fixed: dict


def compare(original: dict, fixed: dict, original_fails_on_cpu: bool = True,
            fixed_runs_on_cpu: bool = True, same_on_cpu: bool = False, fixes_placement: bool = False) -> Verdict:
    """Checks (d), (e) and (f) of the proof: see tests/test_proof.py. ``same_on_cpu``
    (a safe fix: behaviour unchanged) replaces (d) and (e): on CPU torch both fail with
    the same kind of error (``_failure``), or both run to bit-equal values.
    ``fixes_placement`` (a fix of a placement bug, DataParallel's module off its
    device_ids[0]): with some GPU count the original fails under the simulator and the
    rewrite runs; with every other count both fail alike or run alike."""
    problems = []
    if same_on_cpu:
        a, b = _compared(original["cpu"]), _compared(fixed["cpu"])
        if _failure(a) != _failure(b) or ("error" not in a and a != b):
            problems.append("on CPU torch: " + _difference(a, b))
    else:
        if original_fails_on_cpu and "error" not in original["cpu"]:
            problems.append("the original was expected to fail on CPU torch but ran")
        if fixed_runs_on_cpu and "error" in fixed["cpu"]:
            problems.append(f"the rewrite does not run on CPU torch: {fixed['cpu']['error']}")
    mended = []  # the GPU counts where the original failed and the rewrite ran
    for n in GPU_COUNTS:
        a, b = _compared(original[f"sim{n}"]), _compared(fixed[f"sim{n}"])
        if fixes_placement and "error" in a and "error" not in b:
            mended.append(n)
        elif a != b:
            problems.append(f"with {n} simulated GPU{'s' if n > 1 else ''}: " + _difference(a, b))
    if fixes_placement and not mended:
        problems.append("the rewrite was expected to mend a placement the original fails on under the simulator, "
                        "but with no GPU count did the original fail where the rewrite ran")
    if not fixes_placement and all("error" in original[f"sim{n}"] for n in GPU_COUNTS):
        problems.append("the original fails under every simulated GPU count: nothing was compared")
    return Verdict(not problems, problems, original, fixed)


def _failure(run: dict) -> Optional[str]:
    """The kind of a run's error: its exception's name, or "no CUDA" for any of CPU torch's
    refusals of CUDA (a legacy ``torch.cuda.FloatTensor``'s TypeError and ``.to("cuda")``'s
    AssertionError both say "Torch not compiled with CUDA enabled"); None when it ran."""
    if "error" not in run:
        return None
    return "no CUDA" if "not compiled with CUDA enabled" in run["error"] else run["error"].split(":")[0]


def _compared(run: dict) -> dict:
    """What must be equal between an original and its rewrite: the error or the values
    (process-level setup is what a rewrite may legitimately change)."""
    return {k: v for k, v in run.items() if k in ("error", "values")}


def _difference(a: dict, b: dict) -> str:
    if "error" in a or "error" in b:
        return f"original -> {a.get('error', 'ran')}; rewrite -> {b.get('error', 'ran')}"
    va, vb = a["values"], b["values"]
    for key in sorted(set(va) | set(vb)):
        if va.get(key) != vb.get(key):
            return f"{key}: original {va.get(key)} vs rewrite {vb.get(key)}"
    return "different results"


def prove(original_path: str, fixed_path: str, **expectations) -> Verdict:
    """Run both programs (a subprocess each) and compare them."""
    return compare(run_in_subprocess(original_path), run_in_subprocess(fixed_path), **expectations)


if __name__ == "__main__":
    print(json.dumps(run_program(sys.argv[1])))
