"""Fuzzing, bounded for CI: generated Python (hypothesmith) with CUDA code spliced in,
and mutated fixture files. ``check`` never crashes; ``fix`` never changes a text without
applicable findings; every fixed text compiles and is stable under a second fix."""

from __future__ import annotations

import hypothesmith
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from helpers import fixture_programs
from torchdevlint.engine import check_source, fix_source

SNIPPETS = [
    "x = torch.zeros(2).cuda()\n",
    "torch.cuda.set_device(1)\n",
    "m = torch.nn.DataParallel(m).cuda()\n",
    "torch.cuda.device(0)\n",
    "t = threading.Thread(target=lambda: y.cuda())\n",
    "def w(k):\n    torch.cuda.set_device(k)\n    return q.cuda(non_blocking=True)\n",
    "with torch.cuda.device(1):\n    z = z.cuda()\n",
]
FIXTURE_LINES = [p.read_text(encoding="utf-8").splitlines(keepends=True) for p in fixture_programs()]

FUZZ = settings(max_examples=40, deadline=None, derandomize=True,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much,
                                       HealthCheck.data_too_large])


def _invariants(text: str) -> None:
    found = check_source(text, "fuzz.py")  # never raises
    outcome = fix_source(text, "fuzz.py", unsafe=True)
    applicable = [v for v in found if v.fix is not None and v.fix.applies(True)]
    if not applicable:
        assert outcome.text == text and not outcome.changed
    if outcome.changed:
        compile(outcome.text, "fuzz.py", "exec")
        assert fix_source(outcome.text, "fuzz.py", unsafe=True).text == outcome.text


@FUZZ
@given(hypothesmith.from_grammar(), st.lists(st.sampled_from(SNIPPETS), min_size=1, max_size=3))
def test_generated_python_with_cuda_code(source, snippets):
    _invariants("import torch, threading\n" + source.rstrip("\n") + "\n" + "".join(snippets))


@FUZZ
@given(st.integers(0, len(FIXTURE_LINES) - 1), st.data())
def test_mutated_fixtures(index, data):
    lines = list(FIXTURE_LINES[index])
    for _ in range(data.draw(st.integers(1, 4))):
        op = data.draw(st.sampled_from(["drop", "dup", "swap", "insert"]))
        i = data.draw(st.integers(0, len(lines) - 1))
        if op == "drop" and len(lines) > 1:
            del lines[i]
        elif op == "dup":
            lines.insert(i, lines[i])
        elif op == "swap":
            j = data.draw(st.integers(0, len(lines) - 1))
            lines[i], lines[j] = lines[j], lines[i]
        else:
            indent = data.draw(st.sampled_from(["", "    ", "        "]))
            lines.insert(i, indent + data.draw(st.sampled_from(SNIPPETS)).splitlines(keepends=True)[0])
    _invariants("".join(lines))
