"""Settings: which rules run, and options for fixes; read from ``[tool.torchdevlint]``."""

from __future__ import annotations

import keyword

import fnmatch
import re
import os
import sys
from dataclasses import dataclass, replace
from functools import lru_cache
from pathlib import Path
from typing import Dict, FrozenSet, Iterable, List, Optional, Tuple

from .catalogue import CODES, OPT_IN, TOOL_CODES



def _toml():
    """The TOML reader, imported only when a file that may hold our table is read."""
    if sys.version_info >= (3, 11):
        import tomllib
    else:  # pragma: no cover - exercised on Python < 3.11 only
        import tomli as tomllib
    return tomllib


class ConfigError(Exception):
    """A usage or configuration error: exit 2 with this one-line message."""


KNOWN_KEYS = ("select", "extend-select", "ignore", "per-file-ignores", "exclude", "device-name")
DEFAULT_EXCLUDE = (
    ".git", ".hg", ".svn", ".venv", "venv", ".tox", ".nox", "__pycache__", ".eggs",
    "build", "dist", "node_modules", ".mypy_cache", ".ruff_cache", ".pytest_cache",
    ".torchdevlint_cache",
)
_DEFAULT_EXCLUDE = frozenset(DEFAULT_EXCLUDE)


@dataclass(frozen=True)
class Settings:
    select: Tuple[str, ...] = ("TDL",)
    extend_select: Tuple[str, ...] = ()
    ignore: Tuple[str, ...] = ()
    per_file_ignores: Tuple[Tuple[str, Tuple[str, ...]], ...] = ()
    exclude: Tuple[str, ...] = ()
    device_name: str = "device"
    root: str = "."  # the folder the config came from: patterns are relative to it

    def enabled(self, code: str, filename: Optional[str] = None) -> bool:
        return code in self.enabled_codes(filename)

    def enabled_codes(self, filename: Optional[str] = None) -> FrozenSet[str]:
        """The codes that run on ``filename``: computed once per (settings, file), with
        every per-file-ignores pattern matched once (patterns sharing codes as one regex).
        Without per-file-ignores the file does not matter: one answer for the whole run."""
        return _enabled_codes(self, filename if self.per_file_ignores else None)

    def excluded(self, path: str) -> bool:
        # the folders on the path split as strings (a Path per file was a fifth of a warm run)
        folders = (path.replace(os.altsep, os.sep) if os.altsep else path).rstrip(os.sep).split(os.sep)[:-1]
        if not _DEFAULT_EXCLUDE.isdisjoint(folders):
            return True
        return bool(self.exclude) and _matches_any(path, self.exclude, self.root)

    def with_overrides(self, **changes) -> "Settings":
        return replace(self, **{k: v for k, v in changes.items() if v is not None})

    def fingerprint(self) -> str:
        return repr(self)


@lru_cache(maxsize=4096)
def _enabled_codes(settings: Settings, filename: Optional[str]) -> FrozenSet[str]:
    ignore = list(settings.ignore)
    if filename is not None:
        by_codes: Dict[Tuple[str, ...], List[str]] = {}
        for pattern, codes in settings.per_file_ignores:
            by_codes.setdefault(codes, []).append(pattern)
        for codes, patterns in by_codes.items():
            if _matches_any(filename, tuple(patterns), settings.root):
                ignore += codes
    select = list(settings.select) + list(settings.extend_select)
    return frozenset(c for c in CODES if (_longest(c, select) > _longest(c, ignore)
                                          # the tool's own errors (a file not read, not parsed, a rule
                                          # that failed): whatever is selected, unless ignored
                                          or (c in TOOL_CODES and not _longest(c, ignore)))
                     and (c not in OPT_IN or c in select or "ALL" in select))  # opt-in: named itself


def _longest(code: str, prefixes: Iterable[str]) -> int:
    best = 0
    for prefix in prefixes:
        if prefix == "ALL" or code.startswith(prefix):
            best = max(best, len(prefix) if prefix != "ALL" else 1)
    return best


def _matches_any(path: str, patterns: Tuple[str, ...], root: str) -> bool:
    """A gitignore-like match: a pattern against the path relative to ``root``, against
    any trailing part of it (``tests/*`` matches ``pkg/tests/x.py``), or against one of
    its parts. All patterns are one compiled regex: the cost does not grow with rules."""
    try:
        rel = os.path.relpath(os.path.abspath(path), os.path.abspath(root))
    except ValueError:  # pragma: no cover - other drive on Windows
        rel = path
    parts = rel.replace(os.sep, "/").split("/")
    match = _compiled(patterns)
    return any(match("/".join(parts[i:])) or match(parts[i]) for i in range(len(parts)))


@lru_cache(maxsize=256)
def _compiled(patterns: Tuple[str, ...]):
    alternatives = []
    for pattern in patterns:
        pattern = pattern.rstrip("/")
        alternatives += [fnmatch.translate(pattern), fnmatch.translate(pattern + "/*")]
    return re.compile("|".join(f"(?:{a})" for a in alternatives)).match


def validate_codes(codes: Iterable[str], where: str) -> Tuple[str, ...]:
    out = []
    for raw in codes:
        code = raw.strip().upper()
        if not code:
            continue
        if code != "ALL" and not any(c.startswith(code) for c in CODES):
            known = ", ".join(CODES)
            raise ConfigError(f"{where}: unknown rule code or prefix {raw!r} (known: {known})")
        out.append(code)
    return tuple(out)


def find_pyproject(start: str) -> Optional[Path]:
    """The nearest pyproject.toml at or above ``start`` that has [tool.torchdevlint]."""
    here = Path(start).resolve()
    for folder in [here] + list(here.parents):
        candidate = folder / "pyproject.toml"
        if candidate.is_file():
            try:
                raw = candidate.read_text(encoding="utf-8")
            except (OSError, UnicodeDecodeError) as exc:
                raise ConfigError(f"{candidate}: cannot read TOML: {exc}")
            if "torchdevlint" not in raw:
                continue  # no [tool.torchdevlint] can be in it (spelled with escapes: not supported)
            tomllib = _toml()
            try:
                data = tomllib.loads(raw)
            except tomllib.TOMLDecodeError as exc:
                raise ConfigError(f"{candidate}: cannot read TOML: {exc}")
            if "torchdevlint" in data.get("tool", {}):
                return candidate
    return None


def load(path: Optional[Path]) -> Settings:
    if path is None:
        return Settings()
    tomllib = _toml()
    try:
        data = tomllib.loads(Path(path).read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ConfigError(f"{path}: no such config file")
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise ConfigError(f"{path}: cannot read TOML: {exc}")
    section = data.get("tool", {}).get("torchdevlint", {})
    if not isinstance(section, dict):
        raise ConfigError(f"{path}: [tool.torchdevlint] must be a table")
    return from_mapping(section, f"{path} [tool.torchdevlint]", root=str(Path(path).parent))


def from_mapping(section: Dict, where: str, root: str = ".") -> Settings:
    unknown = sorted(set(section) - set(KNOWN_KEYS))
    if unknown:
        raise ConfigError(f"{where}: unknown key {unknown[0]!r} (known keys: {', '.join(KNOWN_KEYS)})")

    def str_list(key: str) -> List[str]:
        value = section.get(key, [])
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            raise ConfigError(f"{where}: {key!r} must be a list of strings")
        return value

    settings = Settings(root=root)
    changes: Dict = {}
    if "select" in section:
        changes["select"] = validate_codes(str_list("select"), f"{where} select")
    if "extend-select" in section:
        changes["extend_select"] = validate_codes(str_list("extend-select"), f"{where} extend-select")
    if "ignore" in section:
        changes["ignore"] = validate_codes(str_list("ignore"), f"{where} ignore")
    if "exclude" in section:
        changes["exclude"] = tuple(str_list("exclude"))
    if "per-file-ignores" in section:
        pfi = section["per-file-ignores"]
        if not isinstance(pfi, dict):
            raise ConfigError(f"{where}: 'per-file-ignores' must be a table of pattern = [codes]")
        items = []
        for pattern, codes in pfi.items():
            if not isinstance(codes, list) or not all(isinstance(c, str) for c in codes):
                raise ConfigError(f"{where}: per-file-ignores {pattern!r} must be a list of codes")
            items.append((pattern, validate_codes(codes, f"{where} per-file-ignores {pattern!r}")))
        changes["per_file_ignores"] = tuple(items)
    if "device-name" in section:
        name = section["device-name"]
        if not isinstance(name, str) or not name.isidentifier() or keyword.iskeyword(name):
            raise ConfigError(f"{where}: 'device-name' must be a Python identifier, got {name!r}")
        changes["device_name"] = name
    return replace(settings, **changes)
