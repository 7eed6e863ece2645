"""Renderings of findings: one model, many formats. Columns are 1-based everywhere."""

from __future__ import annotations

import json
import os
import re
from collections import Counter
from pathlib import Path
from typing import Dict, Iterable, List, Optional, Sequence

from . import __version__
from .model import Applicability, Violation
from .catalogue import RULES, url_for
from .source import DecodeError, LineIndex, apply_edits, decode, shown, split_lines

FORMATS = ("concise", "text", "full", "grouped", "json", "github", "sarif")


def marker(v: Violation, unsafe: bool) -> str:
    return "[*] " if v.fix is not None and v.fix.applies(unsafe) else ""


def concise(violations: Sequence[Violation], unsafe: bool) -> str:
    return "".join(
        f"{shown(v.filename)}:{v.where}: {v.code} {marker(v, unsafe)}{shown(v.message)}\n"
        for v in violations
    )


def grouped(violations: Sequence[Violation], unsafe: bool) -> str:
    """By file, as ruff's grouped format: the file once, then its findings indented."""
    out: List[str] = []
    current = None
    for v in violations:
        if v.filename != current:
            if current is not None:
                out.append("\n")
            current = v.filename
            out.append(f"{shown(v.filename)}:\n")
        out.append(f"  {v.where} {v.code} {marker(v, unsafe)}{shown(v.message)}\n")
    return "".join(out) + ("\n" if out else "")


def full(violations: Sequence[Violation], unsafe: bool) -> str:
    out: List[str] = []
    texts: Dict[str, Optional[str]] = {}
    for v in violations:
        out.append(f"{shown(v.filename)}:{v.where}: {v.code} {marker(v, unsafe)}{shown(v.message)}\n")
        if v.filename not in texts:
            texts[v.filename] = _read_text(v.filename)
        text = texts[v.filename]
        if v.cell is not None:  # a notebook: the fix's words only
            if v.fix is not None:
                out.append(f"  = {v.fix.applicability.value} fix: {v.fix.message}\n\n")
            continue
        if text is None:
            continue
        index = LineIndex(text)
        line = index.line_text(v.row)
        width = max(1, (v.end[1] - v.start[1]) if v.end[0] == v.row else len(line) - v.start[1])
        out.append(f"  {v.row:>4} | {line}\n       | {' ' * v.start[1]}{'^' * width}\n")
        if v.fix is not None:
            fix = v.fix.chosen(unsafe) or v.fix  # what this run's `fix` would apply
            label = {"safe": "fix", "unsafe": "unsafe fix", "display": "suggestion"}[fix.applicability.value]
            out.append(f"  = {label}: {fix.message}\n")
            if fix is v.fix.safe:
                out.append(f"  = with --unsafe-fixes: {v.fix.message}\n")
            if fix.edits:
                after = apply_edits(text, fix.edits)
                out.extend(_fix_preview(text, after))
        out.append("\n")
    return "".join(out)


def _fix_preview(before: str, after: str) -> List[str]:
    import difflib

    old, new = split_lines(before), split_lines(after)
    lines = []
    for line in difflib.unified_diff(old, new, lineterm="", n=0):
        if line.startswith(("---", "+++", "@@")):
            continue
        lines.append(f"    {line}\n")
    return lines


def _read_text(path: str) -> Optional[str]:
    try:
        return decode(Path(path).read_bytes()).text
    except (OSError, DecodeError):
        return None


def as_json(violations: Sequence[Violation]) -> str:
    return json.dumps([v.to_json() for v in violations], indent=2) + "\n"


def github(violations: Sequence[Violation]) -> str:
    def esc(s: str, prop: bool = False) -> str:
        s = s.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")
        return s.replace(":", "%3A").replace(",", "%2C") if prop else s

    return "".join(
        f"::error file={esc(v.filename, True)},line={v.row},col={v.column},"
        f"endLine={v.end[0]},endColumn={v.end[1] + 1},title={v.code}::"
        f"{esc(f'{v.code} {v.message}')}\n"
        for v in violations
    )


def sarif(violations: Sequence[Violation], root: str = ".") -> str:
    from .rules import ALL_RULES  # the rules' full descriptions: only SARIF needs them

    rules = []
    for rule in ALL_RULES:
        rules.append({
            "id": rule.code,
            "name": rule.name,
            "shortDescription": {"text": rule.summary},
            "fullDescription": {"text": " ".join(rule.what.split())},
            "help": {"text": " ".join(rule.why.split()), "markdown": rule.docs()},
            "helpUri": url_for(rule.code),
            "defaultConfiguration": {"level": "error" if rule.code.startswith("TDL9") else "warning"},
            "properties": {"fixable": rule.fixable},
        })
    index = {r["id"]: i for i, r in enumerate(rules)}
    results = []
    for v in violations:
        result = {
            "ruleId": v.code,
            "ruleIndex": index[v.code],
            "level": "error" if v.code.startswith("TDL9") else "warning",
            "message": {"text": v.message},
            "locations": [{
                "physicalLocation": {
                    "artifactLocation": {"uri": _uri(v.filename, root), "uriBaseId": "%SRCROOT%"},
                    "region": {
                        "startLine": v.row, "startColumn": v.column,
                        "endLine": v.end[0], "endColumn": v.end[1] + 1,
                    },
                }
            }],
        }
        variants = [f for f in ((v.fix.safe, v.fix) if v.fix is not None else ())
                    if f is not None and f.edits and f.applicability is not Applicability.DISPLAY]
        if variants:  # the safe variant first, then the fix itself
            result["fixes"] = [{
                "description": {"text": f"{fix.message} [{fix.applicability.value}]"},
                "artifactChanges": [{
                    "artifactLocation": {"uri": _uri(v.filename, root), "uriBaseId": "%SRCROOT%"},
                    "replacements": [{
                        "deletedRegion": {
                            "startLine": e.start[0], "startColumn": e.start[1] + 1,
                            "endLine": e.end[0], "endColumn": e.end[1] + 1,
                        },
                        "insertedContent": {"text": e.content},
                    } for e in fix.edits],
                }],
            } for fix in variants]
        results.append(result)
    doc = {
        "$schema": "https://json.schemastore.org/sarif-2.1.0.json",
        "version": "2.1.0",
        "runs": [{
            "tool": {"driver": {
                "name": "torchdevlint",
                "version": __version__,
                "informationUri": "https://pypi.org/project/torchdevlint/",
                "rules": rules,
            }},
            "results": results,
        }],
    }
    return json.dumps(doc, indent=2) + "\n"


def _uri(path: str, root: str) -> str:
    if path == "-":
        return "stdin"
    rel = os.path.relpath(os.path.abspath(path), os.path.abspath(root))
    return Path(rel).as_posix()


def render(fmt: str, violations: Sequence[Violation], unsafe: bool) -> str:
    if fmt in ("concise", "text"):
        return concise(violations, unsafe)
    if fmt == "full":
        return full(violations, unsafe)
    if fmt == "grouped":
        return grouped(violations, unsafe)
    if fmt == "json":
        return as_json(violations)
    if fmt == "github":
        return github(violations)
    if fmt == "sarif":
        return sarif(violations)
    raise ValueError(fmt)


def summary(violations: Sequence[Violation], unsafe: bool) -> str:
    if not violations:
        return "All checks passed!\n"
    fixable = sum(1 for v in violations if v.fix and v.fix.applies(unsafe))
    hidden = sum(1 for v in violations if v.fix and not v.fix.applies(unsafe) and v.fix.applies(True))
    n = len(violations)
    line = f"Found {n} finding{'s' if n != 1 else ''}"
    extra = []
    if fixable:
        extra.append(f"{fixable} fixable with `torchdevlint fix`" + (" --unsafe-fixes" if unsafe else ""))
    if hidden:
        extra.append(f"{hidden} more with `--unsafe-fixes`")
    return line + (f" ({'; '.join(extra)})" if extra else "") + ".\n"


def why_left(v: Violation, unsafe: bool) -> str:
    """Why a finding is still there after `fix`, in one normalised phrase (line numbers
    and quoted code folded, so that equal reasons group together)."""
    fix = v.fix
    if fix is None:
        reason = "no rewrite for this rule: change it by hand (`torchdevlint rule " + v.code + "`)"
    elif fix.applies(True) and not unsafe:
        reason = "needs --unsafe-fixes: " + (_parenthetical(fix.message) or "may change behaviour")
    elif fix.applicability is Applicability.DISPLAY or not fix.edits:
        inner = _parenthetical(fix.message) or fix.message
        inner = re.sub(r"^(display only|Not rewritten): ", "", inner)
        reason = "display only: " + (inner or "no safe rewrite")
    else:
        reason = "not applied: another fix of the same statement or block was rejected"
    reason = re.sub(r"\bline \d+", "line N", reason)
    reason = re.sub(r"`[^`]*`", lambda m: m.group(0) if len(m.group(0)) <= 30 else "`…`", reason)
    return reason


def _parenthetical(message: str) -> str:
    """The reason in a fix message: the text of its last top-level parentheses."""
    if "(" not in message or not message.endswith(")"):
        m = re.match(r"^(Not rewritten|display only): (.*)$", message)
        return m.group(2) if m else ""
    depth, i = 0, len(message) - 1
    while i >= 0:
        depth += {")": 1, "(": -1}.get(message[i], 0)
        if depth == 0:
            return message[i + 1:-1]
        i -= 1
    return ""


# what a migration (`fix --unsafe-fixes`) whose rules were chosen leaves alone unless an
# opt-in rule is named
_OPT_IN_HINTS = {
    "TDL007": "GPUs the code names itself (`torch.device(\"cuda:0\")`, `.cuda(0)`, `.to(\"cuda\")`) still "
              "need CUDA: `--extend-select TDL007` gives them a CPU fallback",
    "TDL008": "`torch.cuda` calls that raise without CUDA (`torch.cuda.synchronize()`) still need it: "
              "`--extend-select TDL008` runs them only when CUDA is available",
}


def migration_report(applied: Counter, remaining: Sequence[Violation], unsafe: bool,
                     dry_run: bool = False, not_selected: Optional[Counter] = None) -> str:
    """What `fix` converted (or, with --diff, would convert), and what is left and why,
    per rule and per reason; for a migration (``--unsafe-fixes``) whose rules were
    chosen, what the opt-in rules left out would find (``not_selected``: code -> findings)."""
    lines = []
    if applied:
        lines.append(("Would convert: " if dry_run else "Converted: ") + ", ".join(f"{code} {n}" for code, n in sorted(applied.items())) + "\n")
    left = Counter((v.code, why_left(v, unsafe)) for v in remaining)
    if left:
        lines.append("Left, by rule and reason:\n")
        for (code, reason), n in sorted(left.items(), key=lambda kv: (kv[0][0], -kv[1], kv[0][1])):
            lines.append(f"  {code} {n:>5}  {reason}\n")
    found = sorted((code, n) for code, n in (not_selected or Counter()).items() if n and code in _OPT_IN_HINTS)
    if unsafe and found:
        lines.append("Not selected (opt-in), would find:\n")
        lines += [f"  {code} {n:>5}  {_OPT_IN_HINTS[code]}\n" for code, n in found]
    return "".join(lines)


def statistics(violations: Sequence[Violation], unsafe: bool) -> str:
    counts = Counter(v.code for v in violations)
    fixable = Counter(v.code for v in violations if v.fix and v.fix.applies(unsafe))
    lines = []
    for code, n in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0])):
        mark = "[*]" if fixable[code] == n else ("[-]" if fixable[code] else "   ")
        lines.append(f"{n:>5}  {code}  {mark} {RULES[code][0]}\n")
    if fixable:
        lines.append("[*] every finding of the code has a fix that `fix` applies"
                     + (" (--unsafe-fixes)" if unsafe else "") + "; [-] some do\n")
    return "".join(lines)
