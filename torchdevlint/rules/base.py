"""What a rule is, and the helpers that build fixes.

A rule is a class with its code, kebab-case name, docs (what it finds / why it is a
problem / example / use instead / fix safety), VALID and INVALID examples that the test
suite runs, the trigger substrings the prefilter uses, and ``check``.
"""

from __future__ import annotations

import re
import textwrap
from dataclasses import dataclass, replace
from typing import ClassVar, Dict, Iterable, List, Optional, Sequence, Tuple

import libcst as cst

from ..analysis import Analysis, CallSite, is_docstring
from ..catalogue import passes
from ..words import Needs
from ..model import Applicability, Edit, Fix, Position, Violation


# why a library module (no script entry point) gets no module-level device definition
_LIBRARY = ("this looks like a library module (no script entry point): a device defined at import "
            "would query CUDA in every importer; pass a device in")


def one_line(text: str) -> str:
    """``text`` on one line: code that a message quotes (``assert (\\n    cond\\n)``) as it
    would read written on one, every finding one line in every front (flake8's, a
    terminal's, a JSON consumer's)."""
    if "\n" not in text:
        return text
    text = re.sub(r"([([{])\s*\n\s*", r"\1", text)  # an opened bracket: the content follows it
    text = re.sub(r",?\s*\n\s*([)\]}])", r"\1", text)  # a closing bracket (and a trailing comma)
    return re.sub(r"\s*\\?\n\s*", " ", text)  # a continuation: one space


# the comment `fix` writes above the device it defines, `torch.device("cuda")`: the rewrite
# that gives that line its CPU fallback (TDL007's, in a later `--unsafe-fixes` pass) drops it
FALLBACK_COMMENT = "# the device of `.cuda()`; for a CPU fallback: "


class Uninsertable(Exception):
    """No place in the module where inserted lines would run as the fix needs (the
    reason is the message): the fix becomes display-only."""


@dataclass(frozen=True)
class Example:
    """An INVALID example: code, and (optionally) the text ``fix --unsafe-fixes`` gives."""

    code: str
    fixed: Optional[str] = None


class Rule:
    code: ClassVar[str]
    name: ClassVar[str]
    summary: ClassVar[str]  # one line, for `rules`
    what: ClassVar[str]
    why: ClassVar[str]
    example: ClassVar[str]
    use_instead: ClassVar[str]
    fix_safety: ClassVar[str]
    # The prefilter: substrings without which the rule cannot fire. ``triggers`` are
    # alternatives (any one suffices); ``also_requires``, when set, must match too.
    triggers: ClassVar[Tuple[str, ...]] = ()
    also_requires: ClassVar[Tuple[str, ...]] = ()
    # The gate on the code (see ``words``): groups of alternative tokens, all of which
    # CPython's ast of the module must show for the rule to fire (none: no gate)
    needs: ClassVar[Needs] = ()
    # an opt-in rule runs only when selected by its own code or ALL (catalogue.OPT_IN)
    opt_in: ClassVar[bool] = False
    fixable: ClassVar[str] = "never"  # always | sometimes | never
    # the fix and its applicability in words, as the README's rule table says it
    fix_summary: ClassVar[str] = "none"
    fix_priority: ClassVar[int] = 1  # lower applies first when fixes overlap
    VALID: ClassVar[Sequence[str]] = ()
    INVALID: ClassVar[Sequence[Example]] = ()

    def check(self, ctx: "Context") -> Iterable[Violation]:  # pragma: no cover - abstract
        raise NotImplementedError

    @classmethod
    def may_fire(cls, data) -> bool:
        """The prefilter on raw text (str or bytes): False means this rule cannot fire."""
        return passes(cls.triggers, cls.also_requires, data)

    @classmethod
    def docs(cls) -> str:
        def block(title: str, body: str) -> str:
            return f"## {title}\n{textwrap.dedent(body).strip()}\n"

        return "\n".join(
            [
                f"# {cls.code} `{cls.name}`\n\n{cls.summary}\n",
                block("What it finds", cls.what),
                block("Why is this a problem?", cls.why),
                block("Example", "```python\n" + textwrap.dedent(cls.example).strip() + "\n```"),
                block("Use instead", "```python\n" + textwrap.dedent(cls.use_instead).strip() + "\n```"),
                block("Fix safety", cls.fix_safety),
            ]
        )


class Context:
    """What a rule sees: the analysis, and a way to report."""

    def __init__(self, analysis: Analysis, rule: Rule):
        self.analysis = analysis
        self.rule = rule

    def violation(self, node: cst.CSTNode, message: str, fix: Optional[Fix] = None) -> Violation:
        rng = self.analysis.range(node)
        if fix is not None and "\n" in fix.message:
            fix = replace(fix, message=one_line(fix.message))
        return Violation(
            code=self.rule.code,
            name=self.rule.name,
            message=one_line(message),
            start=(rng.start.line, rng.start.column),
            end=(rng.end.line, rng.end.column),
            fix=fix,
        )

    # ------------------------------------------------------------ edit helpers
    def start(self, node: cst.CSTNode) -> Position:
        r = self.analysis.range(node)
        return (r.start.line, r.start.column)

    def end(self, node: cst.CSTNode) -> Position:
        r = self.analysis.range(node)
        return (r.end.line, r.end.column)

    def replace(self, node: cst.CSTNode, text: str) -> Edit:
        return Edit(self.start(node), self.end(node), text, self.seen(node))

    def remove_lines(self, stmt: cst.BaseStatement) -> Optional[Edit]:
        """The edit that deletes the lines of ``stmt`` (and one blank line beside it where
        it stands between blank lines, or first in the file before one); None where its
        line holds other statements too."""
        a = self.analysis
        first, last = a.first_line(stmt), a.range(stmt).end.line
        if isinstance(stmt, cst.SimpleStatementLine) and len(stmt.body) > 1:
            return None
        if last < len(a.lines) and not a.lines[last].strip() and (first == 1 or not a.lines[first - 2].strip()):
            last += 1  # between blank lines (or first in the file, before one): one of them goes too
        return Edit((first, 0), (last + 1, 0), "", "\n".join(a.lines[first - 1:last]))

    def seen(self, node: cst.CSTNode) -> str:
        """The text of ``node`` as the rule saw it (its range excludes its own parens)."""
        if getattr(node, "lpar", None) or getattr(node, "rpar", None):
            node = node.with_changes(lpar=[], rpar=[])
        return self.analysis.code(node)

    def rename_call(self, call: cst.Call, method: str, args: List[cst.Arg]) -> Edit:
        """Replace ``.cuda(...)`` (from the method name to the closing paren)."""
        assert isinstance(call.func, cst.Attribute)
        new = call.with_changes(func=cst.Name(method), args=_commas(args), lpar=[], rpar=[])
        seen = call.with_changes(func=call.func.attr, lpar=[], rpar=[])
        return Edit(self.start(call.func.attr), self.end(call), self.analysis.code(new), self.analysis.code(seen))

    def add_keyword(self, call: cst.Call, text: str) -> Optional[List[Edit]]:
        """Append a keyword argument (``text`` is ``name=value``) to a call, in its own
        layout: on a line of its own when the call puts one argument per line with a
        trailing comma; None when the call's layout is unusual."""
        a = self.analysis
        if call.args:
            last = call.args[-1]
            at = self.end(last.value)
            comma = last.comma
            line, col = self.start(last)
            own_line = not a.lines[line - 1][:col].strip()
            if (isinstance(comma, cst.Comma) and isinstance(comma.whitespace_after, cst.ParenthesizedWhitespace)
                    and own_line):  # one argument per line, with a trailing comma: one more line
                return [Edit(at, at, f",{a.module.default_newline}{' ' * col}{text}")]
            return [Edit(at, at, ", " + text)]
        if any(not (isinstance(ws, cst.SimpleWhitespace) and ws.value == "")
               for ws in (call.whitespace_after_func, call.whitespace_before_args)):
            return None
        line, col = self.end(call.func)
        return [Edit((line, col + 1), (line, col + 1), text)]

    def cuda_to_device(self, call: cst.Call, device_code: str) -> Edit:
        """``x.cuda(non_blocking=True)`` -> ``x.to(<device>, non_blocking=True)``; the
        second positional argument of ``cuda`` is ``non_blocking`` (``to``'s is ``dtype``),
        so it is passed by keyword."""
        kept = []
        for i, a in enumerate(call.args):
            if (a.keyword is None and not a.star and i == 0) or (a.keyword and a.keyword.value == "device"):
                continue
            if a.keyword is None and not a.star and i == 1:
                a = a.with_changes(keyword=cst.Name("non_blocking"), equal=cst.AssignEqual(
                    whitespace_before=cst.SimpleWhitespace(""), whitespace_after=cst.SimpleWhitespace("")))
            kept.append(a)
        parsed = self.analysis.memo.setdefault("expressions", {})
        if device_code not in parsed:
            parsed[device_code] = cst.parse_expression(device_code)
        device_arg = cst.Arg(parsed[device_code])
        if is_storage(self.analysis, call):  # a storage's `.to` takes the device as a keyword only
            device_arg = device_arg.with_changes(keyword=cst.Name("device"), equal=cst.AssignEqual(
                whitespace_before=cst.SimpleWhitespace(""), whitespace_after=cst.SimpleWhitespace("")))
        return self.rename_call(call, "to", [device_arg] + kept)

    def device_definition(self, anchor: int) -> Tuple[Optional[str], List[Edit], str]:
        """A device definition for uses that have no device in scope, where the script's
        own execution starts: (name, edits, where) or (None, [], why not). It falls back
        to the CPU (``--unsafe-fixes``); ``exact_definition`` is its safe twin.

        Never in a library module (it would query CUDA at import in every importer), nor
        in a module that sets ``CUDA_VISIBLE_DEVICES`` (the query would freeze it first);
        in a script, after the imports that precede the first use. ``anchor`` is the order of the first use, so that every fix of
        the module inserts the very same text at the same place.
        """
        return self._definition(anchor, exact=False)

    def exact_definition(self, anchor: int) -> List[Edit]:
        """The same definition, at the same place, of the device `.cuda()` itself uses:
        ``device = torch.device("cuda")`` resolves CUDA's current device at each use and
        queries nothing, so rewriting ``.cuda()`` to ``.to(device)`` with it changes no
        behaviour (what ``fix`` applies without ``--unsafe-fixes``). A comment above it
        says how to get the CPU fallback. Call only when ``device_definition`` gave a name."""
        return self._definition(anchor, exact=True)[1]

    def _definition(self, anchor: int, exact: bool) -> Tuple[Optional[str], List[Edit], str]:
        memo = self.analysis.memo.setdefault("device_definition", {})
        if (anchor, exact) not in memo:
            memo[anchor, exact] = self._device_definition(anchor, exact)
        name, edits, why = memo[anchor, exact]
        return name, list(edits), why

    def _device_definition(self, anchor: int, exact: bool) -> Tuple[Optional[str], List[Edit], str]:
        a = self.analysis
        if a.devices.entry_point(anchor) is None:
            return None, [], _LIBRARY
        name = a.free_name(a.device_name)
        in_guard = a.devices.guard_torch_import(anchor) if a.guarded_torch_import is not None else None
        torch = in_guard[0] if in_guard is not None else (a.torch_alias or "torch")
        fallback = f'{torch}.device("cuda" if {torch}.cuda.is_available() else "cpu")'
        if exact:
            lines = [f"{FALLBACK_COMMENT}{fallback}", f'{name} = {torch}.device("cuda")']
        else:
            lines = [f"{name} = {fallback}"]
        after, hazard = self.module_query_place(anchor)
        if hazard:  # a write this process makes must come before any CUDA query
            return None, [], hazard
        if not exact and not a.devices.is_script and not self._initialises_at_import(anchor):
            return None, [], _LIBRARY  # a library's import-time use under a condition (SRU's kernel setup)
        if in_guard is not None:  # torch is imported where the script's work starts: define it there
            return name, self._insert_after(a.devices.main_guard.body.body, in_guard[1], lines), (  # type: ignore[union-attr]
                "a device defined where the script starts (falls back to the CPU)")
        first = a.devices.starts_in_main_guard(anchor) if a.torch_alias is not None else None
        if first is not None:  # every use runs in the main guard: define it there, not at every import
            return name, [self._lines_at(a.first_line(first), first, lines)], (
                "a device defined where the script starts (falls back to the CPU)")
        try:
            edits = self.insert_module_lines(lines, anchor, need_torch=a.torch_alias is None, after=after)
        except Uninsertable as exc:
            return None, [], str(exc)
        return name, edits, "a device defined where the script starts (falls back to the CPU)"

    def module_query_place(self, anchor: int) -> Tuple[Optional[cst.CSTNode], Optional[str]]:
        """Where module-level lines that query CUDA may go for a first use at ``anchor``:
        (None, None) where the module writes no ``CUDA_VISIBLE_DEVICES``; (the top-level
        statement they must follow, None) where every write is module-level code above
        the first use (``os.environ['CUDA_VISIBLE_DEVICES'] = args.gpu_id`` once the
        options are parsed, as pytorch-classification's scripts do): after the last, the
        query sees the variable; else (None, why not)."""
        hazard = self.module_query_hazard()
        if hazard is None:
            return None, None
        after = self._after_module_writes(anchor)
        return (after, None) if after is not None else (None, hazard)

    def function_query_place(self, node: cst.CSTNode) -> Optional[cst.CSTNode]:
        """Where lines that query CUDA may go for a use at ``node`` in a function that
        writes ``CUDA_VISIBLE_DEVICES`` itself (``def main(): args = parse_args();
        os.environ['CUDA_VISIBLE_DEVICES'] = args.gpu_id; ...``): the statement of that
        function's body that holds ``node``, where every write of the module is in the
        same body above it -- lines placed before it run after the writes. Else None."""
        a = self.analysis
        process = a.process
        writes = process.env_writes
        owners = {process.owner_node(w.node) for w in writes}
        fn = next(iter(owners)) if len(owners) == 1 else None
        if not isinstance(fn, cst.FunctionDef) or not isinstance(fn.body, cst.IndentedBlock):
            return None
        body = list(fn.body.body)
        line = self.start(node)[0]
        use = self._holder(body, line)
        if use >= len(body) or a.first_line(body[0]) > line \
                or any(self._holder(body, self.start(w.node)[0]) >= use for w in writes):
            return None
        return body[use]

    def _holder(self, block: Sequence[cst.CSTNode], line: int) -> int:
        """The index of the statement of ``block`` that holds ``line`` (its length when
        none does: the line is past the block)."""
        return next((i for i, stmt in enumerate(block) if self.analysis.range(stmt).end.line >= line), len(block))

    def _after_module_writes(self, anchor: int) -> Optional[cst.CSTNode]:
        a = self.analysis
        process = a.process
        body = list(a.module.body)
        use = _top_level_index(a, anchor)
        last = -1
        for write in process.env_writes:
            if process.owner_node(write.node) is not None:
                return None  # written when a function runs
            index = self._holder(body, self.start(write.node)[0])
            if index >= use:
                return None
            last = max(last, index)
        if last < 0 or isinstance(body[last], (cst.FunctionDef, cst.ClassDef)):
            return None
        return body[last]

    def _initialises_at_import(self, anchor: int) -> bool:
        """Whether the module's import asks CUDA anyway where the use at ``anchor`` is: a
        statement of its own top level, run whatever happens, or one under a top-level
        ``if`` that asks (``if torch.cuda.is_available():``, or a flag that did). There a
        device defined first adds no query of its own; elsewhere (SRU's kernel set up
        under its own test) it would."""
        a = self.analysis
        site = next((s for s in a.calls if s.order == anchor), None)
        if site is None or site.line is None:
            return False
        top = a.devices.top_statement(anchor)
        return top is site.line or bool(a.devices.cuda_assured(site)) or (isinstance(top, cst.If) and re.search(
            r"\.(?:is_available|device_count)\(", a.code(top.test)) is not None)

    def _own_torch_import(self, fn: cst.FunctionDef) -> Optional[Tuple[str, cst.SimpleStatementLine]]:
        """A function that imports torch itself, in a statement of its body's own (``def
        main(): import torch``): the name it binds, only ever by that import, and the line
        (once per function: every site of the function asks)."""
        memo = self.analysis.memo.setdefault("own_torch_import", {})
        if fn not in memo:
            info = self.analysis.functions.get(fn)
            memo[fn] = (None if info is None or not isinstance(fn.body, cst.IndentedBlock)
                        else self.analysis.devices.block_torch_import(fn.body.body, info.scope.bindings))
        return memo[fn]

    def _insert_after(self, block: Sequence[cst.BaseStatement], line: cst.SimpleStatementLine,
                      lines: List[str]) -> List[Edit]:
        """``lines`` at the indentation of ``line`` (an import of ``block``: the main
        guard's, a function's), after it and the imports that directly follow it (a use is
        never among them)."""
        i = list(block).index(line)
        while i + 1 < len(block) and _is_import_line(block[i + 1]):
            i += 1
        return [self._lines_at(self.analysis.range(block[i]).end.line + 1, line, lines)]

    def lines_before(self, stmt: cst.CSTNode, lines: List[str]) -> Edit:
        """``lines`` inserted before the statement ``stmt``, at its indentation."""
        return self._lines_at(self.analysis.first_line(stmt), stmt, lines)

    def _lines_at(self, row: int, like: cst.CSTNode, lines: List[str]) -> Edit:
        """``lines`` inserted before line ``row``, at the indentation of the statement ``like``."""
        a = self.analysis
        text = a.lines[a.first_line(like) - 1]
        indent = text[:len(text) - len(text.lstrip())]
        return Edit((row, 0), (row, 0), "".join(indent + x + a.module.default_newline for x in lines))

    def local_device_definition(self, site: CallSite, exact: bool = False) -> Tuple[Optional[str], List[Edit], str]:
        """In a library module, which gets no module-level definition, a device defined
        as the first statement of the ``def`` that holds ``site`` (after its docstring),
        with the CPU fallback: ``--unsafe-fixes`` only. It queries CUDA when the function
        runs, where the `.cuda()` it replaces initialised CUDA anyway, never at import.
        Every site of one function gets the same line: (name, edits, where), or (None, [],
        why not) at module or class level, in a one-line body, where torch is imported
        only conditionally, or in a module that sets ``CUDA_VISIBLE_DEVICES``. A module
        that imports nothing of torch but names (``from torch import tensor``) gets
        ``import torch`` with it. ``exact``: its safe twin at the same place, as
        ``exact_definition`` is at a script's start (``torch.device("cuda")``, the device
        `.cuda()` uses, under a comment that gives the fallback)."""
        a = self.analysis
        fn = self.defining_function(site)
        if fn is None:
            return None, [], _LIBRARY
        memo = a.memo.setdefault("local_device_definition", {})
        if (fn, exact) not in memo:
            memo[fn, exact] = self._local_device_definition(fn, exact)
        name, edits, why = memo[fn, exact]
        if (name is not None and a.torch_alias is None and a.torch_name_at(site.scope, site.order) is None
                and self._own_torch_import(fn) is not None):
            return None, [], "display only: the function imports `torch` after this line"
        return name, list(edits), why

    @staticmethod
    def defining_function(site: CallSite) -> Optional[cst.FunctionDef]:
        """The ``def`` whose first statement ``local_device_definition`` defines the device
        in for ``site`` (the innermost around it, a lambda's own ``def``); None at module
        or class level."""
        scope = site.scope
        while scope is not None and not (scope.function is not None and isinstance(scope.node, cst.FunctionDef)):
            scope = scope.parent
        return scope.node if scope is not None else None  # type: ignore[return-value]

    def _local_device_definition(self, fn: cst.FunctionDef, exact: bool) -> Tuple[Optional[str], List[Edit], str]:
        a = self.analysis
        hazard = self.module_query_hazard()
        if hazard:
            return None, [], hazard

        def definition(torch: str) -> List[str]:
            fallback = f'{torch}.device("cuda" if {torch}.cuda.is_available() else "cpu")'
            return ([f"{FALLBACK_COMMENT}{fallback}", f'{name} = {torch}.device("cuda")'] if exact
                    else [f"{name} = {fallback}"])

        own = self._own_torch_import(fn)
        if own is not None:  # `def main(): import torch`: the device goes after that import
            torch, line = own
            name = a.free_name(a.device_name)
            return name, self._insert_after(fn.body.body, line, definition(torch)), (  # type: ignore[attr-defined]
                "a device defined in the function after its `import torch` (falls back to the CPU)")
        torch, imports = a.torch_alias, []
        if torch is None:  # `from torch import tensor` only (TorchKGE), or no torch import at all
            if a.guarded_torch_import is not None or "torch" in a.names_used:
                return None, [], f"{_LIBRARY} (and no module-level `import torch` for a definition in the function)"
            torch, imports = "torch", self.import_torch()
        if self.torchscript(fn):  # TorchScript: leave it as it is
            return None, [], f"{_LIBRARY} (and the function is compiled by TorchScript)"
        head = self.function_head(fn)
        if head is None:
            return None, [], f"{_LIBRARY} (and the function's body is on its `def` line)"
        line, indent = head
        name = a.free_name(a.device_name)
        text = "".join(indent + x + a.module.default_newline for x in definition(torch))
        return name, imports + [Edit((line, 0), (line, 0), text)], (
            "a device defined in the function (falls back to the CPU): a library module gets no "
            "device at import" + ("; `import torch` added" if imports else ""))

    def torchscript(self, fn: cst.CSTNode) -> bool:
        """Whether a decorator hands the function to TorchScript (``@torch.jit.script``,
        ``@jit.ignore``...): what a fix may write in it is not plain Python."""
        return isinstance(fn, cst.FunctionDef) and any("jit" in self.analysis.code(d.decorator)
                                                        for d in fn.decorators)

    def function_head(self, fn: cst.FunctionDef) -> Optional[Tuple[int, str]]:
        """Where a line goes to run first in ``fn``: the line of its first statement after
        the docstring, and that statement's indentation; None for a body on the ``def`` line."""
        if not isinstance(fn.body, cst.IndentedBlock):
            return None
        body = list(fn.body.body)
        first = body[1] if is_docstring(body[0]) and len(body) > 1 else body[0]
        line = self.analysis.first_line(first)
        text = self.analysis.lines[line - 1]
        return line, text[:len(text) - len(text.lstrip())]

    def defined_device_fix(self, applicability: Applicability, message: str, safe_message: str,
                           definition: List[Edit], anchor: int, edits: Sequence[Edit], name: str) -> Fix:
        """A fix that uses a device defined where the script starts (``device_definition``
        gave ``definition``): the CPU fallback with ``--unsafe-fixes`` (or safe where a guard
        makes CUDA certain), and, for ``fix`` alone, the exact definition -- unless every
        placement of the module is so guarded, when the fallback is the safe text too. One
        definition text per pass, whatever rule asks: a module never gets two."""
        names = frozenset({name})
        if self.analysis.devices.all_assured:  # the fallback is never taken: it is the safe text too
            return Fix(applicability, message, tuple(definition) + tuple(edits), names)
        safe = Fix(Applicability.SAFE, safe_message, tuple(self.exact_definition(anchor)) + tuple(edits), names)
        return Fix(applicability, message, tuple(definition) + tuple(edits), names, safe=safe)

    def move_to(self, site: CallSite, device_code: str, fix_message: str, message: str) -> Violation:
        """A finding on a bare ``.cuda()`` whose fix is ``.to(<device_code>)`` (unsafe:
        it changes placement on purpose), display-only beside a local ``cuda()``."""
        fix = Fix(Applicability.UNSAFE, fix_message, (self.cuda_to_device(site.node, device_code),))
        return self.violation(site.node, message, self.guarded(fix))

    def guarded(self, fix: Fix) -> Fix:
        """The fix, made display-only when a class of this file defines its own ``cuda``
        (a rewrite to ``.to`` would skip what that method does)."""
        if fix.applicability is Applicability.DISPLAY:
            return fix
        own = self.analysis.classes_defining_cuda
        if not own:
            return fix
        names = ", ".join(f"`{c.name}`" for c in own)
        return Fix(Applicability.DISPLAY,
                   f"{fix.message} (display only: {names} in this file defines its own `cuda()`)")

    def module_query_hazard(self, at: Optional[cst.CSTNode] = None) -> Optional[str]:
        """Why a module-level CUDA query (``is_available()``, ``device_count()``) must not be
        inserted here, or None. It would initialise CUDA at import, before the module's
        own ``CUDA_VISIBLE_DEVICES`` assignment, which then silently stops working. A
        query written in place of module-level code ``at`` a node is after every write
        that is module-level code above it (straight-line code runs top down)."""
        process = self.analysis.process
        writes = process.env_writes
        if at is not None:
            where = self.start(at)
            writes = [w for w in writes if not (process.owner_node(w.node) is None and self.start(w.node) < where)]
        if not writes:
            return None
        line = min(self.start(w.node)[0] for w in writes)
        return (f"this module sets `CUDA_VISIBLE_DEVICES` (line {line}): a module-level CUDA query "
                "would initialise CUDA first and make that assignment ineffective")

    def torch_for(self, site: CallSite) -> Tuple[str, List[Edit]]:
        """The name that reaches ``torch`` at ``site`` (an import on every path before it,
        or the name the call itself is written through), and the edits that import it when
        nothing does (raises ``Uninsertable`` where an import cannot be added)."""
        a = self.analysis
        name = a.torch_name_at(site.scope, site.order)
        if name is not None:
            return name, []
        in_guard = a.devices.guard_torch_import(site.order) if a.guarded_torch_import is not None else None
        if in_guard is not None:  # `if __name__ == "__main__": import torch` bound it before the site
            return in_guard[0], []
        root = site.node.func if isinstance(site.node, cst.Call) else None  # (TDL007's sites: a string too)
        while isinstance(root, cst.Attribute):
            root = root.value
        if isinstance(root, cst.Name) and a.lookup(root.value, site.scope)[1] == "torch":
            # the call itself reaches torch by that name (`torch.distributed.init_process_group`
            # under `if is_torch_available(): import torch`, transformers 2.x): bound where it runs
            return root.value, []
        return "torch", self.import_torch()

    def import_torch(self) -> List[Edit]:
        """``import torch`` at module level, after the module's leading imports (before its
        first other statement, so before anything that could use it): one place per
        module, whichever fix asks, so that fixes of one pass add one import. Raises
        ``Uninsertable`` where torch is imported only conditionally."""
        body = self.analysis.module.body
        first = next((i for i, stmt in enumerate(body)
                      if not (_is_import_line(stmt) or (i == 0 and is_docstring(stmt)))), len(body) - 1)
        return self.insert_module_lines([], self.analysis.order[body[first]] if body else 0, need_torch=True)

    def insert_module_lines(self, lines: List[str], anchor: int, need_torch: bool,
                            after: Optional[cst.CSTNode] = None) -> List[Edit]:
        """Insert lines at module level where they run before the first use (at order
        ``anchor``) and after the unconditional import that binds torch: after the
        imports (and the module docstring) that precede the top-level statement of the
        first use, or just after ``import torch`` when that comes later; after the
        top-level statement ``after`` where one is given; else just before the first
        use's statement. ``need_torch``: the lines start with ``import torch``. Raises
        ``Uninsertable`` when no such place exists. Every fix of a module asks for the
        same insertion: it is computed once."""
        key = (tuple(lines), anchor, need_torch, after)
        cache = self.analysis.memo.setdefault("insert_module_lines", {})
        if key not in cache:
            try:
                cache[key] = self._insert_module_lines(lines, anchor, need_torch, after)
            except Uninsertable as exc:
                cache[key] = exc
        found = cache[key]
        if isinstance(found, Uninsertable):
            raise found
        return list(found)

    def _insert_module_lines(self, lines: List[str], anchor: int, need_torch: bool,
                             after: Optional[cst.CSTNode]) -> List[Edit]:
        a = self.analysis
        module = a.module
        newline = module.default_newline
        body = list(module.body)
        anchor_index = _top_level_index(a, anchor)
        insert_after: Optional[cst.CSTNode] = None
        for i, stmt in enumerate(body[:anchor_index]):
            if _is_import_line(stmt) or (i == 0 and is_docstring(stmt)):
                insert_after = stmt
        guarded = a.guarded_torch_import
        if need_torch and guarded is not None:
            raise Uninsertable(
                f"`torch` is imported only conditionally or inside a function (line "
                f"{self.start(guarded)[0]}): a module-level `import torch` would change what "
                "importing this module does")
        _, torch_stmt = a.torch_import
        if not need_torch and torch_stmt is not None:
            torch_index = body.index(torch_stmt)
            if torch_index == anchor_index:
                raise Uninsertable("the first use shares its line with `import torch`: "
                                   "split the line first")
            if insert_after is None or body.index(insert_after) < torch_index:
                insert_after = torch_stmt  # never above the import that binds torch
        if after is not None and (insert_after is None or body.index(insert_after) < body.index(after)):
            insert_after = after
        if need_torch:
            lines = ["import torch"] + lines
        text = "".join(line + newline for line in lines)
        if insert_after is None:
            if anchor_index < len(body):
                return [Edit(self._line_start(body[anchor_index]), self._line_start(body[anchor_index]), text)]
            return [Edit((1, 0), (1, 0), text)]
        line = self.analysis.range(insert_after).end.line
        pos = (line + 1, 0)
        if line >= self._last_line():
            # the import is on the last line: there may be no newline after it
            if not self.analysis.text.endswith(("\n", "\r")):
                return [Edit(self.end(insert_after), self.end(insert_after), newline + text.rstrip("\r\n"))]
        return [Edit(pos, pos, text)]

    def _line_start(self, stmt: cst.CSTNode) -> Position:
        return (self.analysis.first_line(stmt), 0)

    def _last_line(self) -> int:
        return len(self.analysis.lines)


def is_storage(analysis: Analysis, call: cst.Call) -> bool:
    """``t.storage().cuda()``, ``t.untyped_storage().cuda()``, ``torch.FloatStorage(n).cuda()``,
    and the storage a load hands its ``map_location`` function (``map_location=lambda
    storage, loc: storage.cuda()``)."""
    func = call.func
    if not isinstance(func, cst.Attribute):
        return False
    receiver = func.value
    if isinstance(receiver, cst.Call):
        inner = receiver.func
        # `torch.FloatStorage(n)`, `FloatStorage(n)`; a factory of another shape
        # (`models[name]()`, `make()()`) is no storage
        name = (inner.attr.value if isinstance(inner, cst.Attribute)
                else inner.value if isinstance(inner, cst.Name) else "")
        return name in ("storage", "untyped_storage", "_storage", "_typed_storage") or name.endswith("Storage")
    return isinstance(receiver, cst.Name) and receiver.value == _map_location_storages(analysis).get(call)


def _map_location_storages(analysis: Analysis) -> Dict[cst.Call, str]:
    """The calls in the body of a ``map_location=lambda storage, loc: ...``, each with the
    name of that lambda's storage parameter (once per module)."""
    memo = analysis.memo
    if "map_location_storages" not in memo:
        out: Dict[cst.Call, str] = {}
        for site in analysis.calls:
            arg = site.keyword("map_location")
            fn = arg.value if arg is not None else None
            if isinstance(fn, cst.Lambda) and fn.params.params:
                storage = fn.params.params[0].name.value
                for inner in analysis.calls:
                    if analysis.inside(inner.scope, fn):
                        out[inner.node] = storage
        memo["map_location_storages"] = out
    return memo["map_location_storages"]


def _commas(args: List[cst.Arg]) -> List[cst.Arg]:
    """Give every argument but the last a comma; keep the last one's own comma."""
    out = []
    for i, arg in enumerate(args):
        if i < len(args) - 1 and arg.comma is cst.MaybeSentinel.DEFAULT:
            arg = arg.with_changes(comma=cst.Comma(whitespace_after=cst.SimpleWhitespace(" ")))
        out.append(arg)
    return out


def _top_level_index(analysis: Analysis, order: int) -> int:
    """Index in the module body of the top-level statement that holds the node at ``order``."""
    index = 0
    for i, stmt in enumerate(analysis.module.body):
        if analysis.order[stmt] > order:
            break
        index = i
    return index


def _is_import_line(stmt: cst.CSTNode) -> bool:
    return isinstance(stmt, cst.SimpleStatementLine) and all(
        isinstance(s, (cst.Import, cst.ImportFrom)) for s in stmt.body
    )


def applicability(*conditions: Tuple[bool, str]) -> Tuple[Applicability, List[str]]:
    """SAFE unless a condition fails; returns the reasons that made it unsafe."""
    reasons = [why for ok, why in conditions if not ok]
    return (Applicability.SAFE if not reasons else Applicability.UNSAFE), reasons
