"""The engine: the only place that parses. Text in; findings (and fixed text) out.

It never touches the file system: the CLI, the flake8 plugin, pre-commit and the LibCST
codemod are thin layers over ``check_source`` and ``fix_source``.

Pipeline: prefilter (substring test, derived from the selected rules' triggers) ->
CPython's own parser (exact syntax errors, and protection from inputs that crash
LibCST's native parser) -> the gate on its tree (the identifiers and strings each rule
needs, ``words``) -> one LibCST parse, for the rules that passed -> shared analysis ->
rules -> ``# noqa`` -> sorted findings.
"""

from __future__ import annotations

import ast
import bisect
import dataclasses
import gc
import io
import re
import sys
import threading
import tokenize
from collections import Counter
from dataclasses import dataclass, field
from typing import Callable, Dict, FrozenSet, List, Optional, Sequence, Tuple, TypeVar

import libcst as cst

from .analysis import Analysis
from .analysis.treewalk import parse_valid
from .catalogue import internal_error, tool_finding  # noqa: F401 - the fronts take it from here too
from .model import Applicability, Edit, Fix, Violation
from .noqa import noqa_map, suppressed
from .rules import ALL_RULES, BY_CODE, TOOL_CODES
from .rules.base import Context, Rule
from .settings import Settings
from .source import LineIndex, Outline, split_lines
from .screen import python_parse, statement_starts
from .words import CodeWords

RULES: List[Rule] = [cls() for cls in ALL_RULES if cls.code not in TOOL_CODES]
MAX_FIX_ROUNDS = 8
_STACK_SIZE = 512 * 1024 * 1024
_RECURSION_LIMIT = 50_000
T = TypeVar("T")


def may_match(data, codes: FrozenSet[str]) -> bool:
    """The prefilter (on str or bytes): can any selected rule fire on this text at all?"""
    return any(r.may_fire(data) for r in RULES if r.code in codes)


def run_big_stack(fn: Callable[..., T], *args) -> T:
    """Run ``fn`` on a thread with a large stack: deep (valid) code needs it."""
    out: Dict[str, object] = {}

    def target() -> None:
        try:
            out["value"] = fn(*args)
        except BaseException as exc:  # re-raised in the caller's thread
            out["error"] = exc

    old_limit = sys.getrecursionlimit()
    old = threading.stack_size()
    threading.stack_size(_STACK_SIZE)
    try:
        sys.setrecursionlimit(max(old_limit, _RECURSION_LIMIT))
        worker = threading.Thread(target=target, name="torchdevlint-engine")
        worker.start()
        worker.join()
    finally:
        threading.stack_size(old)
        sys.setrecursionlimit(old_limit)
    if "error" in out:
        raise out["error"]  # type: ignore[misc]
    return out["value"]  # type: ignore[return-value]


# ---------------------------------------------------------------------- check
def check_source(text: str, filename: str = "-", settings: Settings = Settings(),
                 apply_noqa: bool = True, project=None, passed: Optional[FrozenSet[str]] = None,
                 starts: Optional[List[Tuple[int, int]]] = None, asked: Optional[set] = None) -> List[Violation]:
    """Findings for one module's text, sorted, with ``# noqa`` applied (flake8 applies
    its own, so its plugin passes ``apply_noqa=False``). ``project`` (a CLI run's index
    of its files) may make fixes surer; it never changes what is found. ``passed`` are
    the codes the caller's screen let through (the text parses: no second parse), with
    ``starts``, where CPython saw each statement start (``statement_starts``). ``asked``
    gets every question the analysis put to ``project`` (or would have, with none:
    ``ProjectIndex.module_kind``)."""
    codes = settings.enabled_codes(filename)
    rules = [r for r in RULES if r.code in codes and r.may_fire(text)]  # rules that need less get less
    if not rules:
        return []
    # CPython's own parser first, at the normal recursion limit: exact syntax errors,
    # and inputs too deep for it never reach LibCST (whose parser crashes on them)
    if passed is not None:
        rules = [r for r in rules if r.code in passed]
        error = None
    else:
        starts = None  # where CPython's parser saw each statement (LibCST's positions are placed by it)
        tree, error = python_parse(text)
        if error is None:
            rules = gate(rules, tree, text)  # what the code can match (text tests read the text)
            if rules:
                starts = statement_starts(tree)
            del tree  # not alive beside LibCST's tree
    if error is not None:
        found = [error]
    else:
        if not rules:
            return []
        found = run_big_stack(_analyse, text, rules, settings.device_name, project, starts, asked)
    found = [v for v in found if v.code in codes]
    noqa = noqa_map(text) if found and apply_noqa else {}
    kept = [
        Violation(v.code, v.name, v.message, v.start, v.end, v.fix, filename)
        for v in found
        if v.code in TOOL_CODES or not suppressed(noqa.get(v.start[0]), v.code)
    ]
    return sorted(kept, key=Violation.sort_key)


def _analyse(text: str, rules: Sequence[Rule], device_name: str, project=None,
             starts: Optional[List[Tuple[int, int]]] = None, asked: Optional[set] = None) -> List[Violation]:
    # LibCST's tree and the analysis' facts are hundreds of thousands of objects that all
    # live until the file is done: the cyclic collector's passes over them while they are
    # built free nothing and cost 13-14% of parse, analysis and rules (benchmark corpus,
    # src25). It is paused for one file; what the file leaves behind is collected after.
    was_collecting = gc.isenabled()
    gc.disable()
    try:
        return _analyse_one(text, rules, device_name, project, starts, asked)
    finally:
        if was_collecting:
            gc.enable()


def _analyse_one(text: str, rules: Sequence[Rule], device_name: str, project,
                 starts: Optional[List[Tuple[int, int]]], asked: Optional[set]) -> List[Violation]:
    try:
        module = parse_valid(text)  # (CPython's parser accepted the text)
    except cst.ParserSyntaxError as exc:
        line, col = _libcst_position(exc)
        return [tool_finding("TDL900", f"LibCST cannot parse this file: {exc.message}", line, col)]
    except RecursionError:
        return [tool_finding("TDL902", "the file is nested too deeply for LibCST's parser")]
    except Exception as exc:  # a bug of LibCST's on valid code: this file only
        return [internal_error("LibCST", exc)]
    try:
        analysis = Analysis(module, device_name, text, project, starts)
    except RecursionError:
        return [tool_finding("TDL902", "the file is nested too deeply to analyse")]
    except Exception as exc:  # a bug in the analysis: this file's rules cannot run, the others' files can
        return [internal_error("the analysis", exc)]
    found: List[Violation] = []
    for rule in rules:
        try:
            found.extend(rule.check(Context(analysis, rule)))
        except RecursionError:
            found.append(tool_finding("TDL902", f"{rule.code} gave up: the file is nested too deeply"))
        except Exception as exc:  # a bug in one rule must not hide the others
            found.append(internal_error(rule.code, exc))
    if asked is not None:
        asked.update(analysis.project_questions)
    return _one_applicability_per_statement(found, text, lambda: analysis.statement_lines)


_STRENGTH = {Applicability.DISPLAY: 0, Applicability.UNSAFE: 1, Applicability.SAFE: 2}


def _one_applicability_per_statement(found: List[Violation], text: str,
                                     statement_lines: Callable[[], List[int]] = list) -> List[Violation]:
    """The placement fixes of one statement (however many lines it spans), and of one
    CUDA-guarded block (`if cuda:`, `if torch.cuda.is_available():`, `if args.cuda:`),
    share the weakest applicability: `fix` never half-converts `yield inputs.cuda(),
    labels.cuda()`, a comprehension over two lines, or a block. ``statement_lines``
    gives the line every statement starts on, in order (asked only when two fixes may
    share one; empty: each line its own)."""
    candidates = [i for i, v in enumerate(found) if v.fix is not None and v.code.startswith("TDL00")]
    if len(candidates) < 2:
        return found
    outline = Outline(split_lines(text))
    starts = statement_lines()
    by_group: Dict[Tuple[str, int], List[int]] = {}
    for i in candidates:
        line = found[i].start[0]
        block = _cuda_block(outline, line)
        if block is None:  # the statement's: the last that starts on or above the line
            at = bisect.bisect_right(starts, line)
            line = starts[at - 1] if at else line
        key = ("block", block) if block is not None else ("line", line)
        by_group.setdefault(key, []).append(i)
    for group in by_group.values():
        # a site inside another's edit is rewritten with it (`torch.device("cuda",
        # torch.cuda.current_device())`: TDL007's fallback guards TDL008's query)
        group = [i for i in group if not any(j != i and _inside(found[i], found[j]) for j in group)]
        if len(group) < 2:
            continue
        weakest = min((found[i].fix.strength for i in group), key=_STRENGTH.__getitem__)  # type: ignore[union-attr]
        if weakest is Applicability.SAFE:
            continue  # every site has something `fix` applies
        for i in group:
            v = found[i]
            fix = v.fix
            assert fix is not None
            if fix.strength is not weakest:  # down to the weakest, and no safe variant
                note = f" ({weakest.value}: another site of this statement or `if cuda:` block is {weakest.value})"
                found[i] = dataclasses.replace(v, fix=dataclasses.replace(
                    fix, applicability=weakest, message=fix.message + note, safe=None))
    return found


def _inside(inner: Violation, outer: Violation) -> bool:
    """Whether one of ``outer``'s edits replaces all of ``inner``'s span (and more)."""
    fix = outer.fix
    return fix is not None and (inner.start, inner.end) != (outer.start, outer.end) and any(
        e.start <= inner.start and inner.end <= e.end for e in fix.edits)


def _cuda_block(outline: Outline, line: int) -> Optional[int]:
    """The line of the nearest enclosing `if`/`elif` whose test mentions cuda, if any
    (read by indentation: cheap, and only walks up through enclosing headers)."""
    for number, text in outline.headers(line):
        if text.startswith(("if ", "elif ")) and "cuda" in text.lower():
            return number
    return None


def gate(rules: Sequence[Rule], tree: ast.AST, text: Optional[str] = None) -> List[Rule]:
    """The rules whose gate (``Rule.needs``, see ``words``) this module's code passes:
    only they need LibCST, and a module that none passes is never parsed by it."""
    if not any(r.needs for r in rules):
        return list(rules)
    words = CodeWords(tree, text)
    return [r for r in rules if words.satisfies(r.needs)]


def _libcst_position(exc: cst.ParserSyntaxError) -> Tuple[int, int]:
    m = re.search(r"error at (\d+):(\d+)", exc.message)
    if m:
        return int(m.group(1)), max(int(m.group(2)) - 1, 0)
    return exc.raw_line, exc.raw_column


# ------------------------------------------------------------------------ fix
@dataclass
class FixOutcome:
    text: str
    applied: Counter = field(default_factory=Counter)  # code -> fixes applied
    remaining: List[Violation] = field(default_factory=list)
    rejected: List[Violation] = field(default_factory=list)  # TDL903 findings
    looked: Counter = field(default_factory=Counter)  # code -> findings of the `look` codes

    @property
    def changed(self) -> bool:
        return bool(self.applied)


def fix_source(text: str, filename: str = "-", settings: Settings = Settings(),
               unsafe: bool = False, project=None, look: FrozenSet[str] = frozenset(),
               asked: Optional[set] = None) -> FixOutcome:
    """Apply fixes, re-check, repeat until stable (bounded); verify every round. The
    findings of the ``look`` codes (enabled in ``settings``) are only counted, in the
    text as it ends: never fixed, never among what remains. ``asked``: as
    ``check_source``'s, over every round."""
    original = text
    outcome = FixOutcome(text)
    for _ in range(MAX_FIX_ROUNDS):
        found = check_source(text, filename, settings, project=project, asked=asked)
        if look:
            outcome.looked = Counter(v.code for v in found if v.code in look)
            found = [v for v in found if v.code not in look]
        chosen = _choose(found, text, unsafe)
        if not chosen:
            outcome.remaining = found
            break
        edits = _shared_guards(sorted({e for v in chosen for e in v.fix.edits}))  # identical edits merge
        problem = misplaced(text, chosen)
        if problem is None:
            new_text, regions = apply_edits_mapped(text, edits)
            problem = verify(text, new_text, regions, filename)
        if problem is not None:
            codes = ", ".join(sorted({v.code for v in chosen}))
            outcome.rejected.append(tool_finding(
                "TDL903", f"fixes for {codes} not written: {problem}",
                chosen[0].start[0], chosen[0].start[1], filename))
            outcome.remaining = found
            break
        text = new_text
        outcome.applied.update(v.code for v in chosen)
    else:
        outcome.remaining = [v for v in check_source(text, filename, settings, project=project, asked=asked)
                             if v.code not in look]
        if any(v.fix and v.fix.applies(unsafe) for v in outcome.remaining):
            # fixes that keep finding more to fix are a bug: nothing of it is written
            outcome.rejected.append(tool_finding(
                "TDL903", f"fixes did not settle after {MAX_FIX_ROUNDS} rounds: nothing written",
                1, 0, filename))
            outcome.remaining = [v for v in check_source(original, filename, settings, project=project,
                                                         asked=asked) if v.code not in look]
            outcome.applied = Counter()
            text = original
    outcome.text = text if text != original else original
    return outcome


_GUARD = re.compile(r"if ([\w.]+\.cuda\.is_available\(\)):(\r?\n)([ \t]*)")


def _shared_guards(edits: List[Edit]) -> List[Edit]:
    """Statements in a row that fixes each put under ``if torch.cuda.is_available():``
    (``guard_statement``: TDL008's ``set_device(args.gpu)``, then TDL007's
    ``model.cuda(args.gpu)``) share the first one's block: each next one is only indented
    under it. Sorted edits in; the same edits out, but for those."""
    out = list(edits)
    header, row, column = None, -1, -1  # the block being extended: its test, last row, column
    for i, e in enumerate(out):
        m = _GUARD.match(e.content)
        if m is None:
            header = None
            continue
        if m.group(1) == header and e.start == (row + 1, column):
            out[i] = dataclasses.replace(e, content=m.group(3)[column:] + e.content[m.end():])
        else:
            header, column = m.group(1), e.start[1]
        row = e.end[0]
    return out


def _choose(found: List[Violation], text: str, unsafe: bool) -> List[Violation]:
    """Non-overlapping fixes for one round; higher-priority rules first."""
    index = LineIndex(text)
    candidates = sorted(  # each with the variant this run applies as its fix
        (dataclasses.replace(v, fix=v.fix.chosen(unsafe)) for v in found if v.fix is not None and v.fix.applies(unsafe)),
        key=lambda v: (BY_CODE[v.code].fix_priority, v.start, v.code),
    )
    taken: List[Tuple[int, int]] = []  # sorted, disjoint: overlap tests are bisections
    taken_set = set()
    defined: Dict[str, Fix] = {}
    chosen = []
    for v in candidates:
        fix = v.fix
        assert fix is not None
        spans = [(index.offset(e.start), index.offset(e.end)) for e in fix.edits if e not in taken_set]
        if any(_conflicts(span, taken) for span in spans) or _self_overlap(spans):
            continue
        rewrites = tuple(e for e in fix.edits if e.start != e.end)
        if rewrites and all(e in taken_set for e in rewrites):
            # a chosen fix makes the same rewrites, with its own definitions: this one's
            # insertions (another definition of the name) would be dead code
            chosen.append(dataclasses.replace(v, fix=dataclasses.replace(fix, edits=rewrites)))
            continue
        if any(n in defined and _defining(defined[n], n) != _defining(fix, n) for n in fix.defines):
            continue  # two different definitions of one name: the later waits a round
        chosen.append(v)
        for span in spans:
            bisect.insort(taken, span)
        taken_set.update(fix.edits)
        for n in fix.defines:
            defined.setdefault(n, fix)
    return chosen


def _defining(fix: Fix, name: str) -> FrozenSet[Edit]:
    """The edits of ``fix`` that bind ``name`` (``name = ...`` at a line start)."""
    pattern = re.compile(rf"(?m)^[ \t]*{re.escape(name)}\s*=")
    return frozenset(e for e in fix.edits if pattern.search(e.content))


def _conflicts(span: Tuple[int, int], taken: List[Tuple[int, int]]) -> bool:
    i = bisect.bisect_left(taken, span)
    return any(_overlap(span, taken[j]) for j in (i - 1, i, i + 1) if 0 <= j < len(taken))


def _self_overlap(spans: List[Tuple[int, int]]) -> bool:
    ordered = sorted(spans)
    return any(_overlap(a, b) for a, b in zip(ordered, ordered[1:]))


def _overlap(a: Tuple[int, int], b: Tuple[int, int]) -> bool:
    (s1, e1), (s2, e2) = a, b
    if s1 == e1 and s2 == e2:
        return s1 == s2
    if s1 == e1:
        return s2 < s1 < e2
    if s2 == e2:
        return s1 < s2 < e1
    return s1 < e2 and s2 < e1


def apply_edits_mapped(text: str, edits: Sequence[Edit]) -> Tuple[str, List[Tuple[int, int, int, int]]]:
    """Apply sorted, non-overlapping edits; return the text and, per edit, its span in
    the old text and in the new one."""
    index = LineIndex(text)
    spans = sorted((index.offset(e.start), index.offset(e.end), e.content) for e in edits)
    out: List[str] = []
    regions = []
    cursor = 0
    length = 0
    for start, end, content in spans:
        out.append(text[cursor:start])
        length += start - cursor
        regions.append((start, end, length, length + len(content)))
        out.append(content)
        length += len(content)
        cursor = end
    out.append(text[cursor:])
    return "".join(out), regions


# ------------------------------------------------------------------ verification
def misplaced(text: str, chosen: Sequence[Violation]) -> Optional[str]:
    """Why an edit would land on bytes other than those its rule saw, or None (the
    comparison ignores how whitespace is laid out, nothing else)."""
    index = LineIndex(text)
    for v in chosen:
        for e in v.fix.edits:  # type: ignore[union-attr]
            if e.expected is None:
                continue
            found = text[index.offset(e.start):index.offset(e.end)]
            # LibCST regenerates a multi-line node without its enclosing block's
            # indentation: whitespace may differ, every other character may not
            if found != e.expected and found.split() != e.expected.split():
                return (f"the {v.code} edit at {e.start[0]}:{e.start[1] + 1} targets {_clip(found)} "
                        f"where the rule saw {_clip(e.expected)} (a position bug; please report it)")
    return None


def _clip(s: str, width: int = 40) -> str:
    return repr(s if len(s) <= width else s[:width] + "…")


def split_token(text: str, regions: Sequence[Tuple[int, int, int, int]]) -> Optional[str]:
    """Why an edit would start or end inside a token of ``text`` (a string, a name, a
    comment), or None. Tokens are Python's; the scan stops after the last edit."""
    bounds = sorted({b for s, e, _, _ in regions for b in (s, e)})
    if not bounds:
        return None
    index = LineIndex(text)
    last = bounds[-1]
    try:
        for tok in tokenize.generate_tokens(io.StringIO(text, newline=None).readline):
            if tok.type in (tokenize.NEWLINE, tokenize.NL, tokenize.DEDENT, tokenize.INDENT,
                            tokenize.ENDMARKER):
                continue
            s, e = index.offset(tok.start), index.offset(tok.end)
            if s > last:
                break
            i = bisect.bisect_right(bounds, s)
            if i < len(bounds) and bounds[i] < e:
                line, col = index.position(bounds[i])
                return f"an edit at {line}:{col + 1} falls inside the token {_clip(tok.string)}"
    except (tokenize.TokenError, SyntaxError):
        return "the original text cannot be tokenized"
    return None


def verify(old: str, new: str, regions: Sequence[Tuple[int, int, int, int]], filename: str) -> Optional[str]:
    """None when ``new`` compiles, no edit splits a token of ``old``, and ``new`` equals
    ``old`` (as an AST) outside the rewritten statements."""
    problem = split_token(old, regions)
    if problem is not None:
        return problem
    try:
        compile(new, filename, "exec", dont_inherit=True)
    except (SyntaxError, ValueError) as exc:
        return f"the fixed text does not compile ({exc})"
    except (RecursionError, MemoryError):
        return "the fixed text is nested too deeply to compile"
    try:
        ast.parse(old)
    except (SyntaxError, ValueError):  # (TDL900's fix: what made it unparsable)
        if _tokens_outside(old, [(s, e) for s, e, _, _ in regions]) != \
                _tokens_outside(new, [(s, e) for _, _, s, e in regions]):
            return "the fixed text's tokens differ from the original's outside the edits"
        return None
    except (RecursionError, MemoryError):
        return "the file is nested too deeply to compare before and after"
    try:
        deleted = [(s, e) for s, e, ns, ne in regions if ns == ne]  # statements a fix removed
        before = _masked_dump(old, [(s, e) for s, e, _, _ in regions], deleted)
        inserted = [(ns, ne) for s, e, ns, ne in regions if s == e]
        after = _masked_dump(new, [(s, e) for _, _, s, e in regions], inserted)
    except (RecursionError, MemoryError):
        return "the file is nested too deeply to compare before and after"
    if before != after:
        return "the fixed module's AST differs from the original outside the rewritten statements"
    return None


_MASK = "<torchdevlint:rewritten>"


def _tokens_outside(text: str, regions: List[Tuple[int, int]]) -> List[Tuple[int, str]]:
    """The tokens of ``text`` (kind and text) outside the character ranges ``regions``,
    each region one marker: what a fix of a file CPython cannot parse must leave alone."""
    index = LineIndex(text)
    ordered, out = sorted(regions), []
    for tok in tokenize.generate_tokens(io.StringIO(text, newline=None).readline):
        s = index.offset(tok.start)
        hit = next((i for i, (rs, re_) in enumerate(ordered) if rs <= s < max(re_, rs + 1)), None)
        if hit is None:
            out.append((tok.type, tok.string))
        elif not out or out[-1] != (-1, str(hit)):
            out.append((-1, str(hit)))
    return out


def _masked_dump(text: str, regions: List[Tuple[int, int]], inserted: List[Tuple[int, int]]) -> str:
    """The AST with every statement a region touches replaced by one marker (runs of
    them collapse), and the statements lying inside pure insertions (or, on the old
    side, pure deletions) dropped."""
    tree = ast.parse(text)
    index = LineIndex(text)

    def offset(line: int, byte_col: int) -> int:
        raw = index.line_text(line).encode("utf-8")[:byte_col]
        return index.offset((line, len(raw.decode("utf-8", errors="replace"))))

    def span(stmt: ast.stmt) -> Tuple[int, int]:
        return offset(stmt.lineno, stmt.col_offset), offset(stmt.end_lineno, stmt.end_col_offset)

    def touches(s: int, e: int, rs: int, re_: int) -> bool:
        if rs == re_:
            return s < rs < e
        return rs < e and s < re_

    inserted_sorted = sorted(inserted)

    def inserted_hits(s: int, e: int) -> List[Tuple[int, int]]:
        i = bisect.bisect_right(inserted_sorted, (s, len(text) + 1))
        return inserted_sorted[max(i - 1, 0):i]

    ordered = sorted(regions)
    ends = [re_ for _, re_ in ordered]  # disjoint regions: ends are sorted too

    def hits_of(s: int, e: int) -> List[Tuple[int, int]]:
        out = []
        for j in range(max(bisect.bisect_left(ends, s) - 1, 0), len(ordered)):
            rs, re_ = ordered[j]
            if rs > e:
                break
            if touches(s, e, rs, re_):
                out.append((rs, re_))
        return out

    def rewrite(body: List[ast.stmt]) -> List[ast.stmt]:
        out: List[ast.stmt] = []
        for stmt in body:
            s, e = span(stmt)
            hits = hits_of(s, e)
            if not hits:
                out.append(stmt)
                continue
            if any(is_ <= s and e <= ie for is_, ie in inserted_hits(s, e)):
                continue  # a statement the fix inserted (or removed)
            # a block ends with its last line's line break (a line a fix deletes ends after it)
            blocks = [(span(b[0])[0], max(span(b[-1])[1], index.offset((b[-1].end_lineno + 1, 0))))
                      for b in _child_blocks(stmt)]
            if isinstance(stmt, ast.If) and stmt.orelse:  # an `elif`/`else` header is its block's (TDL008's
                blocks[-1] = (span(stmt.body[-1])[1], blocks[-1][1])  # `elif is_available(): ... else: stop`)
            if blocks and all(any(_within(rs, re_, *blk) for blk in blocks) for rs, re_ in hits):
                for name in ("body", "orelse", "finalbody"):
                    if isinstance(getattr(stmt, name, None), list):
                        setattr(stmt, name, rewrite(getattr(stmt, name)))
                for handler in getattr(stmt, "handlers", []) or []:
                    handler.body = rewrite(handler.body)
                for case in getattr(stmt, "cases", []) or []:
                    case.body = rewrite(case.body)
                out.append(stmt)
                continue
            if out and isinstance(out[-1], ast.Expr) and getattr(out[-1].value, "value", None) == _MASK:
                continue  # consecutive rewritten statements collapse into one
            out.append(ast.Expr(ast.Constant(_MASK)))
        return out

    tree.body = rewrite(tree.body)
    return ast.dump(tree, include_attributes=False)


def _within(rs: int, re_: int, s: int, e: int) -> bool:
    return s <= rs and re_ <= e and (rs != re_ or s < rs < e)


def _child_blocks(stmt: ast.stmt) -> List[List[ast.stmt]]:
    """The statement lists nested in a compound statement (bodies, else, handlers...)."""
    out: List[List[ast.stmt]] = []
    for name in ("body", "orelse", "finalbody"):
        value = getattr(stmt, name, None)
        if isinstance(value, list) and value and isinstance(value[0], ast.stmt):
            out.append(value)
    for handler in getattr(stmt, "handlers", []) or []:
        out.append(handler.body)
    for case in getattr(stmt, "cases", []) or []:
        out.append(case.body)
    return out
