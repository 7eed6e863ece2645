"""The ast gate changes nothing: findings with and without it, over whole trees.

    python benchmarks/gate_check.py DIR [DIR ...]

Checks every .py file under the folders twice in-process, with the gate (``Rule.needs``
on CPython's ast, ``words.py``) and with every rule let through it, and prints each
file whose findings (codes, positions, messages, fixes) differ, the totals, and the time
of each path. Exit status 1 when any file differs. Not a test (the corpus is large);
tests/test_gate.py does the same on every fixture and rule example.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

from torchdevlint import engine
from torchdevlint.engine import check_source


def _key(found):
    return [(v.code, v.start, v.end, v.message, v.fix) for v in found]


def main(roots) -> int:
    sys.setrecursionlimit(50_000)
    gate = engine.gate
    differing = files = findings = 0
    with_gate = without = 0.0
    for root in roots:
        for path in sorted(Path(root).rglob("*.py")):
            try:
                text = path.read_text(encoding="utf-8")
            except (OSError, UnicodeDecodeError):
                continue
            files += 1
            start = time.perf_counter()
            gated = check_source(text, str(path))
            with_gate += time.perf_counter() - start
            engine.gate = lambda rules, tree, text=None: list(rules)
            try:
                start = time.perf_counter()
                ungated = check_source(text, str(path))
                without += time.perf_counter() - start
            finally:
                engine.gate = gate
            findings += len(ungated)
            if _key(gated) != _key(ungated):
                differing += 1
                print(f"DIFFERS {path}: {len(gated)} findings with the gate, {len(ungated)} without", flush=True)
    print(f"{files} files, {findings} findings, {differing} differing; "
          f"with the gate {with_gate:.1f}s, without {without:.1f}s")
    return 1 if differing else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:] or ["."]))
