"""Where one cold `check` spends its time, stage by stage, per line (in-process).

    python benchmarks/stages.py DIR [DIR ...]

Reads every .py file under the folders and times, for each: read (bytes from disk),
decode, prefilter (the selected rules' substring test); for the files that pass it,
CPython's parse and the gate on its tree (``words``); for the files that pass that,
LibCST's parse, the shared analysis, the rules, and the output (rendering the findings
as the default text format), each as the engine runs it (``parse_valid``, the cyclic
collector paused while one file is analysed). Prints one JSON object:
seconds per stage, the lines each stage saw, and microseconds per line. Used by
benchmarks/run.py; not a test.
"""

from __future__ import annotations

import ast
import json
import sys
import time
from pathlib import Path

import gc

from torchdevlint import report
from torchdevlint.analysis import Analysis
from torchdevlint.analysis.treewalk import parse_valid
from torchdevlint.screen import statement_starts
from torchdevlint.engine import RULES, _one_applicability_per_statement, gate, may_match
from torchdevlint.rules.base import Context
from torchdevlint.settings import Settings
from torchdevlint.source import decode


def main(roots) -> dict:
    codes = Settings().enabled_codes()
    rules = [r for r in RULES if r.code in codes]
    t = dict.fromkeys(("read", "decode", "prefilter", "ast_parse", "gate", "libcst_parse", "analysis", "rules",
                       "output"), 0.0)
    lines_all = lines_passed = gated_lines = files = passed = findings = 0
    for root in roots:
        for path in sorted(Path(root).rglob("*.py")):
            files += 1
            s = time.perf_counter()
            data = path.read_bytes()
            t["read"] += time.perf_counter() - s
            s = time.perf_counter()
            try:
                text = decode(data).text
            except Exception:
                continue
            t["decode"] += time.perf_counter() - s
            n = text.count("\n") + 1
            lines_all += n
            s = time.perf_counter()
            hit = may_match(text, codes)
            t["prefilter"] += time.perf_counter() - s
            if not hit:
                continue
            s = time.perf_counter()
            try:
                tree = ast.parse(text)
            except (SyntaxError, ValueError, RecursionError, MemoryError):
                continue
            t["ast_parse"] += time.perf_counter() - s
            s = time.perf_counter()
            passing = gate([r for r in rules if r.may_fire(text)], tree, text)
            t["gate"] += time.perf_counter() - s
            gated_lines += n
            if not passing:
                continue
            gc.disable()  # (as the engine does while it analyses a file)
            try:
                s = time.perf_counter()
                try:
                    module = parse_valid(text)  # the engine's parse
                except Exception:
                    continue
                t["libcst_parse"] += time.perf_counter() - s
                passed += 1
                lines_passed += n
                s = time.perf_counter()
                analysis = Analysis(module, "device", text, starts=statement_starts(tree))
                t["analysis"] += time.perf_counter() - s
                s = time.perf_counter()
                found = []
                for rule in passing:
                    found.extend(rule.check(Context(analysis, rule)))
                found = _one_applicability_per_statement(found, text)
                t["rules"] += time.perf_counter() - s
            finally:
                gc.enable()
            findings += len(found)
            s = time.perf_counter()
            report.render("full", found, False)
            t["output"] += time.perf_counter() - s
    seen = {"read": lines_all, "decode": lines_all, "prefilter": lines_all, "ast_parse": gated_lines,
            "gate": gated_lines}
    per_line = {k: 1e6 * v / max(seen.get(k, lines_passed), 1) for k, v in t.items()}
    return {"files": files, "lines": lines_all, "lines_prefiltered": gated_lines,
            "files_analysed": passed, "lines_analysed": lines_passed,
            "findings": findings, "seconds": t, "us_per_line": per_line}


if __name__ == "__main__":
    sys.setrecursionlimit(50_000)
    print(json.dumps(main(sys.argv[1:] or ["."])))
