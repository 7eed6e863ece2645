"""The flake8 plugin (code prefix ``TDL``): a thin adapter over the engine.

flake8 only runs a plugin that takes ``tree``; the plugin ignores it (flake8 builds it
for pyflakes anyway) and works on the lines. flake8 applies ``# noqa``, ``--select`` and
``--ignore`` itself, and reports syntax errors as its own E999, so TDL900 is not
repeated here. The plugin never raises into flake8: an internal failure is reported as
TDL902.

Cost: loading the plugin imports only the rule catalogue, never the rules or LibCST.
``parse_options`` asks flake8's own decision engine which TDL codes the run selects;
when none is (``flake8 --select E9``), ``run`` returns at once. Otherwise a file pays
one substring test per selected rule, then one walk of the ast flake8 already built
(the gate, ``words``); only a file that passes both imports the engine and is
analysed, by the selected rules alone, without a second CPython parse.
"""

from __future__ import annotations

from typing import FrozenSet, Iterator, List, Tuple, Type

from . import __version__
from .catalogue import CODES, OPT_IN, TOOL_CODES, gated, internal_error, may_match
from .screen import statement_starts
from .words import CodeWords

_SKIP = frozenset({"TDL900"})


class Plugin:
    name = "torchdevlint"
    version = __version__
    device_name = "device"
    selected: FrozenSet[str] = frozenset(c for c in CODES if c not in TOOL_CODES and c not in OPT_IN)

    def __init__(self, tree, lines: List[str], filename: str = "-"):
        self.tree = tree
        self.lines = lines
        self.filename = filename

    @classmethod
    def add_options(cls, manager) -> None:
        manager.add_option(
            "--tdl-device-name", default="device", parse_from_config=True,
            help="torchdevlint: the variable name fixes use and look for (default: device)",
        )

    @classmethod
    def parse_options(cls, options) -> None:
        name = getattr(options, "tdl_device_name", "device") or "device"
        cls.device_name = name if name.isidentifier() else "device"
        cls.selected = _selected(options)

    def run(self) -> Iterator[Tuple[int, int, str, Type["Plugin"]]]:
        if not self.selected:
            return
        text = "".join(self.lines)
        if not may_match(text, self.selected):
            return
        passed = None  # (no tree: the engine parses, and reports, itself)
        if self.tree is not None:
            passed = gated(self.selected, CodeWords(self.tree, text)) - TOOL_CODES
            if not passed:
                return  # flake8's own tree: no selected rule's tokens in the code
        try:
            from .engine import check_source
            from .settings import Settings

            # the tool codes stay on: flake8 drops what it did not select
            settings = Settings(select=tuple(sorted(self.selected | TOOL_CODES)), device_name=self.device_name)
            found = check_source(text, self.filename, settings, apply_noqa=False, passed=passed,
                                 starts=statement_starts(self.tree) if passed else None)
        except Exception as exc:  # never into flake8
            yield 1, 0, f"TDL902 {internal_error('torchdevlint', exc).message}", type(self)
            return
        for v in found:
            if v.code not in _SKIP:
                # flake8 wants a 0-based column and adds 1 itself
                yield v.row, v.start[1], f"{v.code} {v.message}", type(self)


def _selected(options) -> FrozenSet[str]:
    """The TDL codes this flake8 run reports, by flake8's own rules (``--select``,
    ``--extend-select``, ``--ignore``, ``--extend-ignore``); all of them when the options
    cannot be read (an older flake8): flake8 still filters what it is given."""
    try:
        from flake8.style_guide import Decision, DecisionEngine

        engine = DecisionEngine(options)
        named = set(getattr(options, "select", None) or ()) | set(getattr(options, "extend_select", None) or ())
        return frozenset(c for c in CODES if c not in TOOL_CODES and engine.decision_for(c) is Decision.Selected
                         and (c not in OPT_IN or c in named))  # an opt-in rule: selected by its own code
    except Exception:
        return frozenset(c for c in CODES if c not in TOOL_CODES and c not in OPT_IN)
