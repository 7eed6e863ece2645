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
        if report == "json":
            sys.stderr.write(json.dumps(data, indent=2) + "\n")
        else:
            sys.stderr.write(format_report(data))
            if report != "text":  # a file for tools, beside the picture for people
                try:
                    with open(report, "w", encoding="utf-8") as fh:
                        json.dump(data, fh, indent=2)
                        fh.write("\n")
                except OSError as exc:
                    print(f"torchdevlint: error: cannot write the report to {report}: {exc.strerror}",
                          file=sys.stderr)
                    return status or 2
    return status


BAR_WIDTH = 30


def device_bars(data: dict) -> List[str]:
    """One bar per simulated GPU (idle ones too: an idle GPU beside a full one is the
    picture of a wrong placement), scaled to the busiest by bytes."""
    if not data["devices"]:
        return []
    full, empty = ("\u2588", "\u00b7") if _unicode_ok() else ("#", ".")
    gpus = max([data["gpus"]] + [int(d.split(":")[1]) + 1 for d in data["devices"]])
    most = max(s["bytes"] for s in data["devices"].values()) or 1
    out = []
    for i in range(gpus):
        stats = data["devices"].get(f"cuda:{i}", {"tensors": 0, "bytes": 0})
        n = round(BAR_WIDTH * stats["bytes"] / most) if stats["bytes"] else 0
        if stats["tensors"] and not n:
            n = 1
        bar = full * n + empty * (BAR_WIDTH - n)
        out.append(f"  cuda:{i} {bar} {stats['tensors']} tensor{'s' if stats['tensors'] != 1 else ''}, "
                   f"{_size(stats['bytes'])}")
    return out


def _size(n: int) -> str:
    for unit in ("B", "KiB", "MiB", "GiB"):
        if n < 1024 or unit == "GiB":
            return f"{n} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024  # type: ignore[assignment]
    return f"{n} B"  # pragma: no cover


def _unicode_ok() -> bool:
    encoding = (getattr(sys.stderr, "encoding", None) or "").lower().replace("-", "")
    return encoding in ("utf8", "utf16", "utf32")


def format_report(data: dict, indent: str = "") -> str:
    lines = [f"torchdevlint sim: placement report ({data['gpus']} simulated GPU"
             f"{'s' if data['gpus'] != 1 else ''})"]
    if "process" in data:
        lines = [f"process {data['process']} (a simulated child, {data['gpus']} GPU"
                 f"{'s' if data['gpus'] != 1 else ''} visible)"]
    if not data["devices"]:
        lines.append("  no tensor was placed on a simulated GPU")
    lines += device_bars(data)
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
    children = data.get("children", [])
    quiet = [child for child in children if _placed_nothing(child)]
    if len(quiet) < 2:
        quiet = []
    for child in children:
        if child not in quiet:
            text += format_report(child, indent + "  ")
    if quiet:  # a DataLoader's workers, forked with the simulator: one line, not one report each
        text += (f"{indent}  {len(quiet)} simulated child processes placed nothing on a simulated GPU "
                 f"(processes {_ranges([child['process'] for child in quiet])})\n")
    return text


def _placed_nothing(data: dict) -> bool:
    """A child process with nothing to report: no tensor, thread, group or warning of
    its own, and no children of its own."""
    visible = data.get("visible_devices") or {}
    return not (data["devices"] or data["threads"] or data["suspicious"] or data.get("process_groups")
                or data.get("unbound_process_groups") or visible.get("changed_after_init")
                or data.get("children"))


def _ranges(numbers: List[int]) -> str:
    """``1-3, 5`` for [1, 2, 3, 5]."""
    spans: List[List[int]] = []
    for n in sorted(numbers):
        if spans and spans[-1][1] == n - 1:
            spans[-1][1] = n
        else:
            spans.append([n, n])
    return ", ".join(str(a) if a == b else f"{a}-{b}" for a, b in spans)
