"""Every fixture program: exact findings, exact fixed text, idempotence, compiles,
re-checks clean of applicable fixes."""

from __future__ import annotations

import pytest

from helpers import ALL, FIXTURES, describe, findings, fixed, fixture_programs, golden, settings_for
from torchdevlint.engine import fix_source

PROGRAMS = fixture_programs()
IDS = [str(p.relative_to(FIXTURES)) for p in PROGRAMS]


@pytest.mark.parametrize("path", PROGRAMS, ids=IDS)
def test_findings_are_exact(path):
    text = path.read_text(encoding="utf-8")
    actual = describe(findings(text, str(path), settings_for(path)))
    assert actual == golden(path.with_name(path.name + ".findings"), actual)


@pytest.mark.parametrize("path", PROGRAMS, ids=IDS)
def test_fixed_text_is_exact_and_stable(path):
    text, settings = path.read_text(encoding="utf-8"), settings_for(path)
    outcome = fix_source(text, str(path), settings, unsafe=True)
    assert not outcome.rejected, outcome.rejected
    expected_path = path.with_name(path.name + ".fixed")
    if not outcome.changed:
        assert not expected_path.exists(), "a .fixed golden exists but nothing was fixed"
        return
    assert outcome.text == golden(expected_path, outcome.text)
    # idempotence: a second fix changes nothing
    assert fixed(outcome.text, settings=settings) == outcome.text
    # the result compiles and no applicable fix is left
    compile(outcome.text, str(path), "exec")
    left = findings(outcome.text, str(path), settings)
    assert not [v for v in left if v.fix and v.fix.applies(True)], describe(left)


@pytest.mark.parametrize("path", PROGRAMS, ids=IDS)
def test_safe_fixes_are_a_subset(path):
    """Safe-only fixing applies only safe fixes (or safe variants), never more than
    --unsafe-fixes; where its text differs from the `.fixed` golden it is a golden of its
    own (`.safe`, proven behaviour-preserving in test_proof), and a second pass is a no-op."""
    text, settings = path.read_text(encoding="utf-8"), settings_for(path)
    before = findings(text, str(path), settings)
    safe = fix_source(text, str(path), settings, unsafe=False)
    assert not safe.rejected, safe.rejected
    n_safe = sum(1 for v in before if v.fix and v.fix.applies(False))
    assert sum(safe.applied.values()) >= n_safe if n_safe else not safe.changed
    assert sum(safe.applied.values()) <= sum(fix_source(text, str(path), settings, unsafe=True).applied.values())
    assert fixed(safe.text, unsafe=False, settings=settings) == safe.text
    safe_path = path.with_name(path.name + ".safe")
    unsafe_path = path.with_name(path.name + ".fixed")
    if not safe.changed or (unsafe_path.exists() and safe.text == unsafe_path.read_text(encoding="utf-8")):
        assert not safe_path.exists(), "a .safe golden exists but the safe pass adds nothing of its own"
        return
    assert safe.text == golden(safe_path, safe.text)
    compile(safe.text, str(path), "exec")


def test_the_prefilter_never_loses_a_finding(monkeypatch):
    """Findings with and without the prefilter are identical on every fixture and on
    every rule example."""
    from torchdevlint import engine
    from torchdevlint.engine import RULES

    # it is not a no-op: a torch file without CUDA device APIs is skipped by every rule
    plain = "import torch, threading\nx = torch.zeros(3, device=torch.device(d))\n"
    assert not engine.may_match(plain, frozenset(r.code for r in RULES))
    texts = [p.read_text(encoding="utf-8") for p in PROGRAMS]
    texts += list(v for r in RULES for v in r.VALID) + [e.code for r in RULES for e in r.INVALID]
    with_prefilter = [findings(t, settings=ALL) for t in texts]
    from torchdevlint.rules.base import Rule

    monkeypatch.setattr(Rule, "may_fire", classmethod(lambda cls, data: True))
    without = [findings(t, settings=ALL) for t in texts]
    assert with_prefilter == without


TRICKY = [
    "#!/usr/bin/env python\n# header comment\n\n\nimport torch\nx = a.cuda(); y = b.cuda()\n",
    "\n\n# only comments first\r\nimport torch\r\n\r\ndef f(x):\r\n    # inner\r\n    return x.cuda()\r\n",
    '"""Doc."""\nimport torch\nclass A:\n    def f(self):\n        return [t.cuda()\n                for t in self.x]\nz = q.cuda()',
]


@pytest.mark.parametrize("text", [p.read_text(encoding="utf-8") for p in PROGRAMS] + TRICKY)
def test_lazy_positions_equal_whole_module_positions(text):
    import libcst as cst

    from torchdevlint.analysis import Analysis

    analysis = Analysis(cst.parse_module(text), text=text)
    nodes = [s.node for s in analysis.calls] + [s.node.func for s in analysis.calls]
    nodes += list(analysis.module.body)
    assert nodes
    for node in nodes:
        assert analysis.range(node) == analysis.positions[node]
