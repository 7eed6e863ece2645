"""Each rule's VALID and INVALID examples are tests."""

from __future__ import annotations

import pytest

from helpers import describe, findings, fixed, settings_for_code
from torchdevlint.engine import RULES

VALID = [(r.code, i, code) for r in RULES for i, code in enumerate(r.VALID)]
INVALID = [(r.code, i, ex) for r in RULES for i, ex in enumerate(r.INVALID)]


def test_every_rule_has_examples_and_docs():
    for rule in RULES:
        assert rule.VALID and rule.INVALID, rule.code
        docs = rule.docs()
        for heading in ("What it finds", "Why is this a problem?", "Example", "Use instead", "Fix safety"):
            assert f"## {heading}" in docs, (rule.code, heading)
        # the rule's own docs example is an INVALID case too
        example = "import torch\nimport torch.nn as nn\nimport threading\n" + _dedent(rule.example)
        assert any(v.code == rule.code for v in findings(example, settings=settings_for_code(rule.code)))


def _dedent(code: str) -> str:
    import textwrap

    return textwrap.dedent(code).strip() + "\n"


@pytest.mark.parametrize("code,index,source", VALID, ids=[f"{c}-valid-{i}" for c, i, _ in VALID])
def test_valid(code, index, source):
    settings = settings_for_code(code)
    assert not [v for v in findings(source, settings=settings) if v.code == code], describe(findings(source, settings=settings))


@pytest.mark.parametrize("code,index,example", INVALID, ids=[f"{c}-invalid-{i}" for c, i, _ in INVALID])
def test_invalid(code, index, example):
    settings = settings_for_code(code)
    found = [v for v in findings(example.code, settings=settings) if v.code == code]
    assert found, f"{code} should fire on:\n{example.code}"
    for v in found:  # one line in every front, whatever code the message quotes
        assert "\n" not in v.message and (v.fix is None or "\n" not in v.fix.message), v
    result = fixed(example.code, settings=settings)
    if example.fixed is None:
        # this rule's finding has no applicable fix: it is still there after fixing
        assert [v for v in findings(result, settings=settings) if v.code == code], result
    else:
        assert result == example.fixed
        assert fixed(result, settings=settings) == result
