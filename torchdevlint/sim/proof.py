"""Proof by running torch: run a fixture program for real on CPU torch and under the
simulator with several GPU counts, and compare an original with its rewrite.

``python -m torchdevlint.sim.proof PROGRAM`` prints one JSON object: for the real CPU
run and for each simulated GPU count, either the error (type and message) or the
placement and a hash of the value of every parameter, buffer and tensor that
``main()`` returns. Each program runs in a process of its own: a fork of a warm server
that imported torch once (a fresh interpreter where there is no fork).
"""

from __future__ import annotations

import atexit
import hashlib
import importlib
import json
import os
import runpy
import signal
import subprocess
import sys
import tempfile
import threading
import traceback
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


# A program run is a fork of a warm server that imported these once: it starts in
# milliseconds instead of the seconds torch (and, at the first optimizer, torch._dynamo)
# takes to import. Each fork is a process of its own, as a fresh interpreter would be.
_PRELOAD = ("torch", "torch._dynamo", "torch.optim", "torchdevlint.sim")
_IDLE: List[subprocess.Popen] = []  # warm servers not serving a run now
_IDLE_LOCK = threading.Lock()


def _serve() -> None:
    """``python -m torchdevlint.sim.proof --serve``: import torch once, then for each line
    on stdin (``[program, scratch folder, timeout]``) fork, run the program in the fork as
    ``python -m torchdevlint.sim.proof PROGRAM`` would, and answer with its exit status."""
    for module in _PRELOAD:
        importlib.import_module(module)
    for line in sys.stdin:
        path, scratch, timeout = json.loads(line)
        pid = os.fork()
        if pid == 0:  # the run: never returns to the loop
            status = 1
            try:
                _redirect(path, scratch)
                signal.alarm(timeout)  # a run past its time ends as a subprocess past its timeout would
                report = json.dumps(run_program(path))
                with open(os.path.join(scratch, "report.json"), "w", encoding="utf-8") as f:
                    f.write(report)
                status = 0
            except BaseException:  # the program's SystemExit too: no report, as in a fresh interpreter
                traceback.print_exc()
            finally:
                atexit._run_exitfuncs()  # what interpreter exit runs: multiprocessing joins children
                sys.stdout.flush()
                sys.stderr.flush()
                os._exit(status)
        _, wait_status = os.waitpid(pid, 0)
        print(json.dumps(os.waitstatus_to_exitcode(wait_status)), flush=True)


def _redirect(path: str, scratch: str) -> None:
    """What the program sees in the fork: the argv and TMPDIR of ``python -m
    torchdevlint.sim.proof PROGRAM`` with a scratch folder, no stdin, and its output in a
    file (the server's stdout carries the answers)."""
    os.environ["TMPDIR"] = scratch
    tempfile.tempdir = None  # gettempdir() reads TMPDIR again
    sys.argv = [os.path.abspath(__file__), path]
    output = os.open(os.path.join(scratch, "output.txt"), os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
    null = os.open(os.devnull, os.O_RDONLY)
    sys.stdout.flush()
    os.dup2(null, 0)
    os.dup2(output, 1)
    os.dup2(output, 2)


def _run_forked(path: str, scratch: str, timeout: int) -> int:
    """Run ``path`` in a fork of an idle warm server (one is started when none is idle,
    with this process's environment as it is then)."""
    with _IDLE_LOCK:
        server = _IDLE.pop() if _IDLE else None
    if server is None:
        server = subprocess.Popen([sys.executable, "-m", "torchdevlint.sim.proof", "--serve"],
                                  stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        atexit.register(_stop, server)
    server.stdin.write(json.dumps([path, scratch, timeout]) + "\n")
    server.stdin.flush()
    answer = server.stdout.readline()
    if not answer:
        raise RuntimeError(f"the proof server stopped (exit status {server.wait()})")
    with _IDLE_LOCK:
        _IDLE.append(server)
    status = json.loads(answer)
    if status == -signal.SIGALRM:
        raise subprocess.TimeoutExpired(f"proof of {path}", timeout)
    return status


def _stop(server: subprocess.Popen) -> None:
    server.stdin.close()  # the server's loop ends at end of input
    server.wait()
    server.stdout.close()


def run_in_subprocess(path: str, timeout: int = 120) -> dict:
    """Run ``path`` under the proof runner in a process of its own (a fork of a warm
    server, or a fresh interpreter where there is no fork); what the program (and torch:
    elastic agents, error files) writes in the temporary folder goes with a folder of its own."""
    with tempfile.TemporaryDirectory(prefix="torchdevlint-proof-") as scratch:
        if hasattr(os, "fork"):
            status = _run_forked(path, scratch, timeout)
            output, report = _read(os.path.join(scratch, "output.txt")), _read(os.path.join(scratch, "report.json"))
        else:
            r = subprocess.run([sys.executable, "-m", "torchdevlint.sim.proof", path],
                               capture_output=True, text=True, timeout=timeout, env={**os.environ, "TMPDIR": scratch})
            status, output, report = r.returncode, r.stderr, (r.stdout.strip().splitlines() or [""])[-1]
    if status != 0 or not report:
        raise RuntimeError(f"proof runner failed on {path}: {output.strip()[-2000:]}")
    return json.loads(report)


def _read(path: str) -> str:
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            return f.read()
    except FileNotFoundError:
        return ""


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
    """Run both programs (a process each) and compare them."""
    return compare(run_in_subprocess(original_path), run_in_subprocess(fixed_path), **expectations)


if __name__ == "__main__":
    if sys.argv[1:] == ["--serve"]:
        _serve()
    else:
        print(json.dumps(run_program(sys.argv[1])))
