"""Benchmark: torchdevlint beside ruff, TorchFix and flake8, side by side in one run.

    python benchmarks/run.py [--repeat 5] [--jobs N]

Downloads the pinned corpus sources from PyPI (no dependencies) into
benchmarks/corpus/ (git-ignored), installs the pinned tools when they are missing
(TorchFix in a virtual environment of its own there: it pins an older LibCST),
then runs, alternating, several times: torchdevlint check cold (no cache) and warm
(cache primed), ruff check --select E,F,B on the whole corpus, TorchFix on fairseq,
flake8 with and without the TDL plugin on fairseq (TDL selected, and only E9 selected),
one ~300-line file through torchdevlint and ruff (and Python's bare startup), and a
file with 1,000 findings against the same file with none. torchdevlint's bytecode is
written first, as an installed copy has it. It prints medians of wall time and of
CPU time (user + system: steadier on a busy machine; the goals stay on wall time), each
tool's peak RSS, a per-stage time-per-line table of one in-process cold check
(stages.py) beside ruff's and TorchFix's, and the ratios the goals are stated in,
each marked met or MISSED. Not run in CI.
"""

from __future__ import annotations

import argparse
import json
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
TOOLS = {"ruff": "ruff==0.17.0", "flake8": "flake8"}
# TorchFix pins an older LibCST (0.7.0: libcst 1.5.1); in torchdevlint's environment it
# would downgrade the LibCST torchdevlint is measured with, and its flake8 plugin would
# join flake8's runs. It gets an environment of its own.
TORCHFIX = "torchfix==0.7.0"
TORCHFIX_ENV = CORPUS / "torchfix-env"
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
# a command's peak RSS (KiB) and its CPU time (user + system, its children included)
PEAK = (
    "import resource, subprocess, sys\n"
    "r = subprocess.run(sys.argv[1:], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)\n"
    "u = resource.getrusage(resource.RUSAGE_CHILDREN)\n"
    "print(u.ru_maxrss, u.ru_utime + u.ru_stime)\n"
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


def compile_bytecode() -> None:
    """Write torchdevlint's bytecode, as `pip install` does for an installed package.
    A checkout run with PYTHONDONTWRITEBYTECODE=1 (as on this machine) would otherwise
    recompile its ~40 modules on every start: ~0.12 s of every short run, which no
    installed copy pays."""
    import compileall

    compileall.compile_dir(str(HERE.parent / "torchdevlint"), quiet=1)


def ensure_tools() -> str:
    """Install the pinned tools that are missing; TorchFix in its own environment.
    Returns that environment's Python."""
    missing = [spec for tool, spec in TOOLS.items() if shutil.which(tool) is None
               and subprocess.run([PY, "-c", f"import {tool}"], capture_output=True).returncode != 0]
    if missing:
        subprocess.run([PY, "-m", "pip", "install", "-q", *missing], check=True)
    python = TORCHFIX_ENV / ("Scripts/python.exe" if os.name == "nt" else "bin/python")
    if not python.exists():
        subprocess.run([PY, "-m", "venv", str(TORCHFIX_ENV)], check=True)
        subprocess.run([str(python), "-m", "pip", "install", "-q", TORCHFIX], check=True)
    return str(python)


RUFF = "ruff"


def ruff_binary() -> str:
    """ruff's own executable: `python -m ruff` would add a Python start-up to its time."""
    from ruff.__main__ import find_ruff_bin

    return find_ruff_bin()


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
    peak, cpu = (r.stdout.split() + ["0", "0"])[:2]
    return elapsed, int(peak) / 1024, float(cpu)


def pick_file(root: Path, lines: int = 300) -> Path:
    """The file under ``root`` closest to ``lines`` lines that calls ``.cuda(``: one file
    a pre-commit hook or an editor would check, through the whole pipeline."""
    best = None
    for path in sorted(root.rglob("*.py")):
        text = path.read_text(encoding="utf-8", errors="replace")
        if ".cuda(" in text:
            score = abs(text.count("\n") - lines)
            if best is None or score < best[0]:
                best = (score, path)
    assert best is not None, "no file calls .cuda("
    return best[1]


def many_findings(folder: Path, n: int = 1000) -> tuple:
    """A script with ``n`` bare ``.cuda()`` findings, and the same script with none: the
    same calls inside ``with torch.cuda.device(0):``, where each is what the block chose
    (the same code through the same pipeline -- the gate, LibCST, the analysis and every
    verdict -- with nothing to report; ``.cuda(0)`` would now stop at the gate)."""
    head = "import torch\n\n\ndef main(x):\n    with torch.cuda.device(0):\n"
    tail = "\n\nif __name__ == '__main__':\n    main(torch.zeros(1))\n"
    many, none = folder / "many_findings.py", folder / "no_findings.py"
    many.write_text(head.replace("with torch.cuda.device(0)", "if x is not None") +
                    "".join(f"        y{i} = x.cuda()\n" for i in range(n)) + tail)
    none.write_text(head + "".join(f"        y{i} = x.cuda()\n" for i in range(n)) + tail)
    return many, none


def stage_table(src: Path, med: dict, lines: int, fairseq_lines: int) -> None:
    """Per-stage time per line of one cold in-process check, beside ruff's and
    TorchFix's whole-run time per line from the same run."""
    out = subprocess.run([PY, str(HERE / "stages.py"), str(src)], capture_output=True, text=True, check=True)
    data = json.loads(out.stdout)
    print(f"per-stage time of one cold in-process check (no pool): {data['files']} files, {data['lines']} lines; "
          f"{data['lines_prefiltered']} lines pass the prefilter; {data['files_analysed']} files / "
          f"{data['lines_analysed']} lines pass the gate and reach LibCST; {data['findings']} findings")
    print(f"  {'stage':<14} {'seconds':>8} {'us/line':>9}  (per line of what the stage sees)")
    for stage, secs in data["seconds"].items():
        print(f"  {stage:<14} {secs:8.2f} {data['us_per_line'][stage]:9.1f}")
    total = sum(data["seconds"].values())
    print(f"  {'total':<14} {total:8.2f} {1e6 * total / data['lines']:9.1f}  (per corpus line)")
    print(f"  {'ruff E,F,B':<14} {med['ruff E,F,B']:8.2f} {1e6 * med['ruff E,F,B'] / lines:9.1f}  (wall, per corpus line)")
    print(f"  {'torchfix':<14} {med['torchfix fairseq']:8.2f} {1e6 * med['torchfix fairseq'] / fairseq_lines:9.1f}"
          "  (wall, per fairseq line)")


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 1)
    args = parser.parse_args()
    src = fetch()
    torchfix_python = ensure_tools()
    compile_bytecode()
    files, lines = count_lines(src)
    fairseq = src / "fairseq"
    _, fairseq_lines = count_lines(fairseq)
    print(f"corpus: {files} files, {lines} lines ({', '.join(f'{k} {v}' for k, v in PACKAGES.items())}); "
          f"{os.cpu_count()} CPUs; jobs={args.jobs}")
    cache_home = Path(tempfile.mkdtemp(prefix="tdl-bench-"))
    global RUFF
    RUFF = ruff_binary()
    one = pick_file(fairseq)
    many, none = many_findings(cache_home)
    print(f"one file: {one.relative_to(src)} ({one.read_text(encoding='utf-8', errors='replace').count(chr(10))} "
          "lines); many findings: 1,000 bare .cuda() in one function, against the same in a `with torch.cuda.device(0):`")
    tdl = [PY, "-m", "torchdevlint", "check", str(src), "-q", "--exit-zero", "--jobs", str(args.jobs)]
    check_one = [PY, "-m", "torchdevlint", "check", "-q", "--exit-zero", "--no-cache"]
    commands = {
        "torchdevlint cold": tdl + ["--no-cache"],
        "torchdevlint warm": tdl,
        "torchdevlint fairseq": [PY, "-m", "torchdevlint", "check", str(fairseq), "-q", "--exit-zero",
                                 "--no-cache", "--jobs", str(args.jobs)],
        "ruff E,F,B": [RUFF, "check", "--select", "E,F,B", "--exit-zero", "--no-cache", str(src)],
        "torchfix fairseq": [torchfix_python, "-m", "torchfix", str(fairseq)],
        "flake8+TDL fairseq": [PY, "-m", "flake8", "--exit-zero", "-j", str(args.jobs), str(fairseq)],
        "flake8 fairseq": [PY, "-c", FLAKE8_WITHOUT, "--exit-zero", "-j", str(args.jobs), str(fairseq)],
        "flake8+TDL E9": [PY, "-m", "flake8", "--select", "E9", "--exit-zero", "-j", str(args.jobs), str(fairseq)],
        "flake8 E9": [PY, "-c", FLAKE8_WITHOUT, "--select", "E9", "--exit-zero", "-j", str(args.jobs), str(fairseq)],
        "torchdevlint one": check_one + [str(one)],
        "ruff one": [RUFF, "check", "--select", "E,F,B", "--exit-zero", "--no-cache", str(one)],
        "python startup": [PY, "-c", "pass"],
        "torchdevlint 1000": check_one + [str(many)],
        "torchdevlint 0 of 1000": check_one + [str(none)],
    }
    subprocess.run(tdl, cwd=cache_home, capture_output=True)  # prime the warm cache
    times = {name: [] for name in commands}
    peaks = {name: 0.0 for name in commands}
    cpus = {name: [] for name in commands}  # CPU seconds: steadier than wall time on a busy machine
    for i in range(args.repeat):
        for name, cmd in commands.items():  # alternating: one of each per round
            elapsed, peak, cpu = timed(cmd, cache_home)
            times[name].append(elapsed)
            cpus[name].append(cpu)
            peaks[name] = max(peaks[name], peak)
        print(f"round {i + 1}/{args.repeat} done", file=sys.stderr)
    med = {name: statistics.median(v) for name, v in times.items()}
    cpu_med = {name: statistics.median(v) for name, v in cpus.items()}
    for name in commands:
        print(f"{name:<24} median {med[name]:7.3f}s  (runs: {', '.join(f'{t:.3f}' for t in times[name])})"
              f"  CPU {cpu_med[name]:7.3f}s  peak RSS {peaks[name]:.0f} MB")
    stage_table(src, med, lines, fairseq_lines)
    goals = [
        ("cold check / ruff", med["torchdevlint cold"] / med["ruff E,F,B"], "<=", 0.5),
        ("1,000 findings / none", med["torchdevlint 1000"] / med["torchdevlint 0 of 1000"], "<=", 2.0),
        ("one file / ruff", med["torchdevlint one"] / med["ruff one"], "<=", 5.0),
        ("  (python startup / ruff)", med["python startup"] / med["ruff one"], "", None),
        ("flake8 E9: with / without TDL", med["flake8+TDL E9"] / med["flake8 E9"], "<=", 1.02),
        ("  (the same in CPU time)", cpu_med["flake8+TDL E9"] / cpu_med["flake8 E9"], "", None),
        ("flake8: with / without TDL", med["flake8+TDL fairseq"] / med["flake8 fairseq"], "<=", 1.10),
        ("  (the same in CPU time)", cpu_med["flake8+TDL fairseq"] / cpu_med["flake8 fairseq"], "", None),
        ("warm / cold", med["torchdevlint warm"] / med["torchdevlint cold"], "<=", 0.10),
        ("peak RSS (MB)", max(peaks["torchdevlint cold"], peaks["torchdevlint warm"]), "<=", 300),
        ("torchfix / torchdevlint on fairseq", med["torchfix fairseq"] / med["torchdevlint fairseq"], ">=", 50),
    ]
    print("goals (ratios of medians):")
    for label, value, op, goal in goals:
        if goal is None:
            print(f"  {label:<36} {value:8.2f}")
            continue
        met = value <= goal if op == "<=" else value >= goal
        print(f"  {label:<36} {value:8.2f}  (goal {op} {goal}: {'met' if met else 'MISSED'})")
    shutil.rmtree(cache_home, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
