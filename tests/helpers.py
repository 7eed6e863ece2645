"""Shared helpers for the tests: golden fixtures, and running the CLI."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import List, Sequence

from torchdevlint.engine import check_source, fix_source
from torchdevlint.model import Violation
from torchdevlint.settings import Settings

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = ROOT / "fixtures"
UPDATE = os.environ.get("TDL_UPDATE_GOLDENS") == "1"


def fixture_programs() -> List[Path]:
    """Every fixture program (negative fixtures for the proof harness excluded)."""
    return sorted(p for p in FIXTURES.rglob("*.py") if "negative" not in p.parts)


ALL = Settings(select=("ALL",))  # every rule, opt-in ones included


def settings_for_code(code: str) -> Settings:
    """The default settings, plus ``code`` when it is an opt-in rule (which runs only
    when selected by name)."""
    from torchdevlint.catalogue import OPT_IN

    return Settings(extend_select=(code,)) if code in OPT_IN else Settings()


def settings_for(path: Path) -> Settings:
    """A fixture's settings: its folder names its rule (``fixtures/tdl007/...``)."""
    return settings_for_code(path.parent.name.upper())


def describe(violations: Sequence[Violation]) -> str:
    """One line per finding: position, code, applicability, message and fix message."""
    lines = []
    for v in violations:
        applicability = v.fix.applicability.value if v.fix else "none"
        if v.fix is not None and v.fix.safe is not None:  # `fix` alone applies its safe variant
            applicability += "; safe variant"
        fix_message = f" -- {v.fix.message}" if v.fix else ""
        lines.append(f"{v.row}:{v.column} {v.code} [{applicability}] {v.message}{fix_message}")
    return "\n".join(lines) + ("\n" if lines else "")


def findings(text: str, filename: str = "x.py", settings: Settings = Settings()) -> List[Violation]:
    return check_source(text, filename, settings)


def fixed(text: str, unsafe: bool = True, settings: Settings = Settings()) -> str:
    return fix_source(text, "x.py", settings, unsafe=unsafe).text


def golden(path: Path, actual: str) -> str:
    """The expected text stored at ``path`` (rewritten when TDL_UPDATE_GOLDENS=1)."""
    if UPDATE or not path.exists():
        if not UPDATE:
            raise AssertionError(f"missing golden file {path}; run with TDL_UPDATE_GOLDENS=1 and review it")
        path.write_bytes(actual.encode("utf-8"))
    return path.read_bytes().decode("utf-8") if path.exists() else ""


def cli(*args: str, cwd: Path = ROOT, stdin: bytes = b"", env_extra=None) -> subprocess.CompletedProcess:
    env = dict(os.environ)
    env.update(env_extra or {})
    return subprocess.run(
        [sys.executable, "-m", "torchdevlint", *args],
        cwd=str(cwd), input=stdin, capture_output=True, env=env, timeout=300,
    )
