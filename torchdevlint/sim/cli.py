"""``torchdevlint sim [--gpus N] SCRIPT [ARGS ...]``: run a script under the simulator.

It runs as ``python SCRIPT ARGS`` would (``__main__``, ``sys.argv``), exits with the
script's status, and prints a placement report to stderr at exit.
"""

from __future__ import annotations

import json
import os
import runpy
import sys
import traceback
from typing import List


def run_script(script: str, args: List[str], gpus: int = 2, report: str = "text") -> int:
    from . import Simulator

    if not os.path.isfile(script):
        print(f"torchdevlint: error: {script}: no such file", file=sys.stderr)
        return 2
    if gpus < 1:
        print("torchdevlint: error: --gpus must be at least 1", file=sys.stderr)
        return 2
    old_argv, old_path = sys.argv[:], sys.path[:]
    sys.argv = [script] + list(args)
    sys.path.insert(0, os.path.dirname(os.path.abspath(script)))
    status = 0
    sim = Simulator(gpus, record=True)
    try:
        with sim:
            runpy.run_path(script, run_name="__main__")
    except SystemExit as exc:
        code = exc.code
        status = code if isinstance(code, int) else (0 if code is None else 1)
        if code is not None and not isinstance(code, int):
            print(code, file=sys.stderr)
    except BaseException:  # the script's own error, as Python would print it
        traceback.print_exc()
        status = 1
    finally:
        sys.argv, sys.path = old_argv, old_path
    if report != "none":
        data = sim.report()
        sys.stderr.write(json.dumps(data, indent=2) + "\n" if report == "json" else format_report(data))
    return status


def format_report(data: dict, indent: str = "") -> str:
    lines = [f"torchdevlint sim: placement report ({data['gpus']} simulated GPU"
             f"{'s' if data['gpus'] != 1 else ''})"]
    if "process" in data:
        lines = [f"process {data['process']} (a simulated child, {data['gpus']} GPU"
                 f"{'s' if data['gpus'] != 1 else ''} visible)"]
    if not data["devices"]:
        lines.append("  no tensor was placed on a simulated GPU")
    for device, stats in data["devices"].items():
        lines.append(f"  {device}: {stats['tensors']} tensors, {stats['bytes']} bytes")
    for thread, devices in data["threads"].items():
        lines.append(f"  thread {thread!r} used {', '.join(devices)}")
    for s in data["suspicious"]:
        lines.append(f"  warning: {s['where']}: thread {s['thread']!r} put a tensor on {s['device']} "
                     f"through the implicit current device while the main thread was on "
                     f"{s['main_thread_device']} (a new thread starts on cuda:0)")
    visible = data.get("visible_devices") or {}
    for late in visible.get("changed_after_init", []):
        lines.append(f"  warning: {late['where']}: CUDA_VISIBLE_DEVICES set to {late['value']!r} after CUDA "
                     f"was initialised at {late['initialised_at']}: it has no effect, this process "
                     f"still sees {late['visible']} GPU{'s' if late['visible'] != 1 else ''}")
    for group in data.get("process_groups", []):
        device = group["device"] or "not yet used"
        how = {"device_id": "bound by device_id=", "set_device": "bound by set_device"}.get(
            group["bound"], "NO DEVICE BOUND")
        lines.append(f"  process group ({group['backend']}) rank {group['rank']} of {group['world_size']} "
                     f"at {group['where']}: communicator on {device} ({how})")
    for w in data.get("unbound_process_groups", []):
        lines.append(f"  warning: {w['where']}: rank {w['rank']}'s NCCL process group has no device bound: "
                     f"its communicator is on {w['device']}, as every unbound rank's is "
                     "(call torch.cuda.set_device(local_rank) or pass device_id=)")
    text = "".join(indent + line + "\n" for line in lines)
    for child in data.get("children", []):
        text += format_report(child, indent + "  ")
    return text
