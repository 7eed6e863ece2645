"""The resource cases of the attack issue (#16), timed side by side.

    python benchmarks/resources.py [OTHER_CHECKOUT]

Builds (in a temp folder) 100 files under a config with 500 per-file-ignores patterns,
and one 50,000-line module, then times `torchdevlint check` on each, for this checkout
and, when given, another checkout of the repository (e.g. an older commit made with
`git worktree add /tmp/old <rev>`), in the same run. Prints wall seconds and peak RSS.
Not part of the test suite.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent.parent


def build(root: Path) -> None:
    patterns = "\n".join(f'"pkg{i}/*.py" = ["TDL001"]' for i in range(500))
    (root / "many").mkdir()
    (root / "many" / "pyproject.toml").write_text(
        f"[tool.torchdevlint]\n[tool.torchdevlint.per-file-ignores]\n{patterns}\n")
    for i in range(100):
        (root / "many" / f"m{i}.py").write_text("import torch\nx = torch.zeros(1).cuda()\n")
    lines = ["import torch", "device = torch.device('cuda')"]
    for i in range(5000):
        lines += [f"def f{i}(x):", "    y = x + 1", "    z = y * 2", "    w = z - 1", "    v = w / 3",
                  "    u = v ** 2", "    t = u + y", "    s = t.sum()", "    return s"]
        lines.append(f"a{i} = torch.zeros(2).cuda()" if i % 100 == 0 else f"a{i} = {i}")
    (root / "big").mkdir()
    (root / "big" / "big.py").write_text("\n".join(lines) + "\n")


def timed(checkout: Path, folder: Path) -> tuple:
    """Wall seconds, peak RSS in MB (of this run alone: a fresh child per run, measured
    by a wrapper that reports its own child's ru_maxrss) and the exit code."""
    env = dict(os.environ, PYTHONPATH=str(checkout))
    wrapper = ("import resource, subprocess, sys; r = subprocess.run(sys.argv[1:]);"
               "print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss, file=sys.stderr);"
               "sys.exit(r.returncode)")
    start = time.perf_counter()
    r = subprocess.run([sys.executable, "-c", wrapper, sys.executable, "-m", "torchdevlint", "check",
                        "--no-cache", "-q", "-j", "1", "."], cwd=folder, env=env, capture_output=True)
    wall = time.perf_counter() - start
    peak = int(r.stderr.decode().strip().splitlines()[-1]) / 1024
    return wall, peak, r.returncode


def main() -> None:
    checkouts = [HERE] + [Path(p).resolve() for p in sys.argv[1:]]
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        build(root)
        print(f"{'case':<40} {'checkout':<30} {'wall s':>8} {'peak MB':>9}")
        for case in ("many", "big"):
            for checkout in checkouts:
                wall, peak, rc = timed(checkout, root / case)
                label = {"many": "100 files x 500 per-file-ignores", "big": "one 50,000-line module"}[case]
                print(f"{label:<40} {str(checkout)[-30:]:<30} {wall:>8.2f} {peak:>9.0f}  (exit {rc})")


if __name__ == "__main__":
    main()
