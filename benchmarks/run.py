"""Benchmark: torchdevlint beside ruff, TorchFix and flake8, side by side in one run.

    python benchmarks/run.py [--repeat 5] [--jobs N]

Downloads the pinned corpus sources from PyPI (no dependencies) into
benchmarks/corpus/ (git-ignored), installs the pinned tools when they are missing,
then runs, alternating, several times: torchdevlint check cold (no cache) and warm
(cache primed), ruff check --select E,F,B on the whole corpus, TorchFix on fairseq,
and flake8 with and without the TDL plugin on fairseq. It prints medians, the ratios
the goals are stated in, and each tool's peak RSS. Not run in CI.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time
import zipfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
CORPUS = HERE / "corpus"
PACKAGES = {"transformers": "5.23.0", "fairseq": "0.12.2", "mmdet": "3.3.0", "yolov5": "7.0.14"}
TOOLS = {"ruff": "ruff==0.17.0", "torchfix": "torchfix==0.7.0", "flake8": "flake8"}
PY = sys.executable

# flake8 with every plugin but TDL: the "without" side of the flake8 overhead figure
FLAKE8_WITHOUT = (
    "import sys\n"
    "import flake8.plugins.finder as f\n"
    "orig = f._find_importlib_plugins\n"
    "f._find_importlib_plugins = lambda: (p for p in orig() if p.entry_point.name != 'TDL')\n"
    "from flake8.main.cli import main\n"
    "sys.exit(main())\n"
)
PEAK = (
    "import resource, subprocess, sys\n"
    "r = subprocess.run(sys.argv[1:], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)\n"
    "print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)\n"
)


def fetch() -> Path:
    src = CORPUS / "src"
    if src.exists() and all((src / name).exists() for name in PACKAGES):
        return src
    download = CORPUS / "download"
    download.mkdir(parents=True, exist_ok=True)
    specs = [f"{name}=={version}" for name, version in PACKAGES.items()]
    subprocess.run([PY, "-m", "pip", "download", "--no-deps", "-q", "-d", str(download), *specs], check=True)
    for archive in download.iterdir():
        name = next(n for n in PACKAGES if archive.name.lower().replace("-", "_").startswith(n))
        target = src / name
        if target.exists():
            continue
        target.mkdir(parents=True)
        if archive.suffix == ".whl" or archive.suffix == ".zip":
            with zipfile.ZipFile(archive) as z:
                z.extractall(target)
        else:
            with tarfile.open(archive) as t:
                t.extractall(target, filter="data")
    return src


def ensure_tools() -> None:
    missing = [spec for tool, spec in TOOLS.items() if shutil.which(tool) is None
               and subprocess.run([PY, "-c", f"import {tool}"], capture_output=True).returncode != 0]
    if missing:
        subprocess.run([PY, "-m", "pip", "install", "-q", *missing], check=True)


def count_lines(root: Path) -> tuple:
    files = lines = 0
    for path in root.rglob("*.py"):
        files += 1
        with open(path, "rb") as fh:
            lines += fh.read().count(b"\n")
    return files, lines


def timed(cmd, cwd) -> tuple:
    start = time.perf_counter()
    r = subprocess.run([PY, "-c", PEAK, *cmd], cwd=cwd, capture_output=True, text=True)
    elapsed = time.perf_counter() - start
    peak_mb = int(r.stdout.strip() or 0) / 1024
    return elapsed, peak_mb


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 1)
    args = parser.parse_args()
    src = fetch()
    ensure_tools()
    files, lines = count_lines(src)
    fairseq = src / "fairseq"
    print(f"corpus: {files} files, {lines} lines ({', '.join(f'{k} {v}' for k, v in PACKAGES.items())}); "
          f"{os.cpu_count()} CPUs; jobs={args.jobs}")
    cache_home = Path(tempfile.mkdtemp(prefix="tdl-bench-"))
    tdl = [PY, "-m", "torchdevlint", "check", str(src), "-q", "--exit-zero", "--jobs", str(args.jobs)]
    commands = {
        "torchdevlint cold": tdl + ["--no-cache"],
        "torchdevlint warm": tdl,
        "torchdevlint fairseq": [PY, "-m", "torchdevlint", "check", str(fairseq), "-q", "--exit-zero",
                                 "--no-cache", "--jobs", str(args.jobs)],
        "ruff E,F,B": [PY, "-m", "ruff", "check", "--select", "E,F,B", "--exit-zero", "--no-cache", str(src)],
        "torchfix fairseq": [PY, "-m", "torchfix", str(fairseq)],
        "flake8+TDL fairseq": [PY, "-m", "flake8", "--exit-zero", "-j", str(args.jobs), str(fairseq)],
        "flake8 fairseq": [PY, "-c", FLAKE8_WITHOUT, "--exit-zero", "-j", str(args.jobs), str(fairseq)],
    }
    subprocess.run(tdl, cwd=cache_home, capture_output=True)  # prime the warm cache
    times = {name: [] for name in commands}
    peaks = {name: 0.0 for name in commands}
    for i in range(args.repeat):
        for name, cmd in commands.items():  # alternating: one of each per round
            elapsed, peak = timed(cmd, cache_home)
            times[name].append(elapsed)
            peaks[name] = max(peaks[name], peak)
        print(f"round {i + 1}/{args.repeat} done", file=sys.stderr)
    med = {name: statistics.median(v) for name, v in times.items()}
    for name in commands:
        print(f"{name:<22} median {med[name]:7.2f}s  (runs: {', '.join(f'{t:.2f}' for t in times[name])})"
              f"  peak RSS {peaks[name]:.0f} MB")
    print("goals (ratios of medians):")
    print(f"  cold check / ruff            = {med['torchdevlint cold'] / med['ruff E,F,B']:.2f}  (goal <= 1.0)")
    print(f"  torchfix / torchdevlint      = {med['torchfix fairseq'] / med['torchdevlint fairseq']:.1f}x "
          "on fairseq (goal >= 20x)")
    print(f"  flake8 with / without TDL    = {med['flake8+TDL fairseq'] / med['flake8 fairseq']:.2f}  (goal <= 1.10)")
    print(f"  warm / cold                  = {med['torchdevlint warm'] / med['torchdevlint cold']:.2f}  (goal <= 0.10)")
    print(f"  torchdevlint peak RSS        = {max(peaks['torchdevlint cold'], peaks['torchdevlint warm']):.0f} MB"
          "  (goal <= 300 MB)")
    shutil.rmtree(cache_home, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
