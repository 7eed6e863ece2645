"""The gate between the text prefilter and LibCST: which identifiers and strings the
module's *code* uses, read from CPython's own ``ast`` (one walk, no LibCST).

The text prefilter sees ``.cuda(`` in a comment, ``load`` in ``download`` and
``Tensor`` in a type hint. The gate sees code: each rule declares ``needs``, groups of
alternative tokens that must all be present for it to fire at all (every group needs
one of its tokens). A token is one of:

- ``call:NAME``: a call whose function ends in the identifier NAME (``x.cuda()``,
  ``Thread(...)``);
- ``name:NAME``: NAME used as an identifier anywhere: a name, an attribute, an
  imported name or its alias, a keyword argument, a def/class or parameter name;
- ``name~PART``: an identifier that contains PART;
- ``qual:DOTTED``: a name or attribute chain that may resolve to the qualified name
  DOTTED through the module's imports (every import of its first name is tried, with
  torch's re-exports folded as the analysis folds them: a superset of what it resolves);
- ``str^PREFIX`` / ``str~PART``: a string constant that starts with PREFIX / contains
  PART (constants of up to 200 characters: device strings and environment keys, not
  docstrings).

A gate may only ever say "cannot fire" when the rule indeed finds nothing: each is a
necessary condition of its rule's detection, and tests compare every fixture, every
rule example and the corpus with and without the gate.
"""

from __future__ import annotations

import ast
from typing import Dict, FrozenSet, Iterable, Optional, Sequence, Set, Tuple

from .names import canonical

Needs = Tuple[Tuple[str, ...], ...]
_LONGEST = 200


class CodeWords:
    """The tokens of one module's code (see the module docstring)."""

    __slots__ = ("called", "names", "strings", "_tree", "_quals")

    def __init__(self, tree: ast.AST):
        called: Set[str] = set()
        names: Set[str] = set()
        strings: Set[str] = set()
        for node in ast.walk(tree):
            kind = type(node)
            if kind is ast.Name:
                names.add(node.id)  # type: ignore[attr-defined]
            elif kind is ast.Attribute:
                names.add(node.attr)  # type: ignore[attr-defined]
            elif kind is ast.Call:
                last = _last(node.func)  # type: ignore[attr-defined]
                if last:
                    called.add(last)
            elif kind is ast.Constant:
                value = node.value  # type: ignore[attr-defined]
                if type(value) is str and len(value) <= _LONGEST:
                    strings.add(value)
            elif kind is ast.alias:
                imported = node.name.rpartition(".")[2]  # type: ignore[attr-defined]
                names.add(imported)
                if node.asname:  # type: ignore[attr-defined]
                    names.add(node.asname)  # type: ignore[attr-defined]
            elif kind is ast.keyword:
                if node.arg:  # type: ignore[attr-defined]
                    names.add(node.arg)  # type: ignore[attr-defined]
            elif kind in (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef):
                names.add(node.name)  # type: ignore[attr-defined]
            elif kind is ast.arg:
                names.add(node.arg)  # type: ignore[attr-defined]
        self.called: FrozenSet[str] = frozenset(called)
        self.names: FrozenSet[str] = frozenset(names)
        self.strings: FrozenSet[str] = frozenset(strings)
        self._tree = tree
        self._quals: Optional[FrozenSet[str]] = None

    @property
    def quals(self) -> FrozenSet[str]:
        """Every qualified name a name or attribute chain may resolve to (computed on
        first use: only rules that resolve names ask)."""
        if self._quals is None:
            self._quals = _qualnames(self._tree)
        return self._quals

    def has(self, token: str) -> bool:
        if token.startswith("call:"):
            return token[5:] in self.called
        if token.startswith("name:"):
            return token[5:] in self.names
        if token.startswith("name~"):
            return any(token[5:] in n for n in self.names)
        if token.startswith("qual:"):
            return token[5:] in self.quals
        if token.startswith("str^"):
            return any(s.startswith(token[4:]) for s in self.strings)
        if token.startswith("str~"):
            return any(token[4:] in s for s in self.strings)
        raise ValueError(f"unknown gate token {token!r}")

    def satisfies(self, needs: Needs) -> bool:
        """Every group has one of its tokens (no groups: always)."""
        return all(any(self.has(t) for t in group) for group in needs)


def _qualnames(tree: ast.AST) -> FrozenSet[str]:
    """The qualified names the module's names and attribute chains may stand for: as
    the analysis binds imports (``import a.b`` binds ``a``; ``import a.b as x`` and
    ``from a import b as x`` bind ``x``; relative and star imports bind nothing it can
    resolve), with every import of a name tried, whatever its scope."""
    imports: Dict[str, Set[str]] = {}
    for node in ast.walk(tree):
        if type(node) is ast.Import:
            for alias in node.names:  # type: ignore[attr-defined]
                local = alias.asname or alias.name.split(".")[0]
                imports.setdefault(local, set()).add(alias.name if alias.asname else local)
        elif type(node) is ast.ImportFrom and node.module and not node.level:  # type: ignore[attr-defined]
            for alias in node.names:  # type: ignore[attr-defined]
                if alias.name != "*":
                    imports.setdefault(alias.asname or alias.name, set()).add(f"{node.module}.{alias.name}")  # type: ignore[attr-defined]
    if not imports:
        return frozenset()
    out: Set[str] = set()
    for node in ast.walk(tree):
        kind = type(node)
        if kind is ast.Name:
            for target in imports.get(node.id, ()):  # type: ignore[attr-defined]
                out.add(canonical(target))
        elif kind is ast.Attribute:
            parts = []
            expr = node
            while type(expr) is ast.Attribute:
                parts.append(expr.attr)  # type: ignore[attr-defined]
                expr = expr.value  # type: ignore[attr-defined]
            if type(expr) is ast.Name:
                tail = ".".join(reversed(parts))
                for target in imports.get(expr.id, ()):  # type: ignore[attr-defined]
                    out.add(canonical(f"{target}.{tail}"))
    return frozenset(out)


def _last(func: ast.AST) -> str:
    """The identifier a call's function ends in: ``a.b.c(...)`` -> ``c``."""
    if type(func) is ast.Attribute:
        return func.attr  # type: ignore[attr-defined]
    if type(func) is ast.Name:
        return func.id  # type: ignore[attr-defined]
    return ""


def check_tokens(needs: Iterable[Sequence[str]]) -> None:
    """Raise ValueError on a malformed ``needs`` (a rule's declaration is checked once)."""
    probe = CodeWords(ast.Module(body=[], type_ignores=[]))
    for group in needs:
        if not group:
            raise ValueError("an empty group of alternatives can never be satisfied")
        for token in group:
            probe.has(token)
