"""Fix builders shared by the current-device rules (TDL101, TDL102).

Replacing ``torch.cuda.set_device(k)`` by an explicit device object is only right when
every current-device-dependent use in reach is rewritten with it in the same fix, and
those uses are all bare ``.cuda()`` calls that come after the call -- and when the call
runs wherever those uses do (not only under an ``if``), and nothing it calls later runs
code of the program's other modules, or of this file's functions, that follows the
current device (a model's own ``.cuda()``): there the device block keeps it. Where the call sits under the
code's own test that its GPU choice holds a GPU (``if len(opt.gpu_ids) > 0:``), the
choice itself can fall back to the CPU instead (``plan_cpu_fallback``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import List, Optional, Sequence, Tuple, Union

import libcst as cst

from ..analysis import CallSite, FunctionInfo, ImplicitUse
from ..model import Edit
from ..project import outside_program
from ..source import LineIndex
from .base import Context, Uninsertable


@dataclass
class Plan:
    edits: List[Edit]
    name: str
    rewritten: int


def describe_uses(ctx: Context, uses: List[ImplicitUse], limit: int = 3) -> str:
    parts = []
    for use in uses[:limit]:
        node = use.node
        if isinstance(node, cst.Arg):  # an argument: without its comma
            node = node.with_changes(comma=cst.MaybeSentinel.DEFAULT)
        code = ctx.analysis.code(node).strip()
        code = code if len(code) <= 40 else code[:37] + "..."
        parts.append(f"`{code}` (line {ctx.start(use.node)[0]})")
    more = f" and {len(uses) - limit} more" if len(uses) > limit else ""
    return ", ".join(parts) + more


def device_index_arg(site: CallSite) -> Optional[cst.BaseExpression]:
    if site.has_star_args or len(site.node.args) != 1:
        return None
    arg = site.node.args[0]
    if arg.keyword is not None and arg.keyword.value != "device":
        return None
    return arg.value


def plan_explicit_device(ctx: Context, site: CallSite, owner: cst.CSTNode,
                         include_nested: bool) -> Union[Plan, str]:
    """The explicit-device rewrite of ``set_device(k)``, or why there is none."""
    a = ctx.analysis
    k = device_index_arg(site)
    if site.expr_stmt is None or k is None:
        return "the call is not a plain `set_device(k)` statement"
    others = [s for s in a.set_device_sites if s is not site and a.inside(s.scope, owner)]
    if others:
        return f"`set_device` is also called on line {ctx.start(others[0].node)[0]}"
    uses = a.implicit_uses(owner, include_nested)
    same_scope = a.enclosing_function(site.scope)
    branch = _branch(a, site)
    if branch and any(a.enclosing_function(u.site.scope) is not same_scope or u.site.cond[:len(branch)] != branch
                      for u in uses):
        return (f"it runs only under a condition (line {_branch_line(ctx, site)}), and code "
                "outside that block depends on it too")
    before = [u for u in uses if a.enclosing_function(u.site.scope) is same_scope and u.site.order < site.order]
    if before:
        return f"{describe_uses(ctx, before)} runs before it, on the previous device"
    fixed = [u for u in uses if u.rewritable]
    if len(fixed) != len(uses):
        others_ = [u for u in uses if not u.rewritable]
        return f"other uses depend on the current device too: {describe_uses(ctx, others_)}"
    if not uses:
        return "nothing in reach depends on it here (code in other modules may)"
    callee = _dependent_call(a, site, owner, {u.node for u in uses})
    if callee is not None:  # its implicit uses follow the current device, and would lose it
        return (f"`{a.code(callee.node.func)}(...)` (line {ctx.start(callee.node)[0]}) runs later, and code it "
                "runs may depend on the current device too")
    name = a.free_name(a.device_name)
    try:
        torch, edits = ctx.torch_for(site)
    except Uninsertable as exc:
        return str(exc)
    index = a.code(k)
    if isinstance(k, cst.SimpleString) or (isinstance(k, cst.Call) and a.qualname(k.func, site.scope) == "torch.device"):
        device = f"{torch}.device({index})"
    else:
        device = f'{torch}.device("cuda", {index})'
    edits.append(ctx.replace(site.node, f'{name} = {device} if {torch}.cuda.is_available() else {torch}.device("cpu")'))
    edits += [ctx.cuda_to_device(u.node, name) for u in uses]
    return Plan(edits, name, len(uses))


def _dependent_call(a, site: CallSite, owner: cst.CSTNode, rewritten: set) -> Optional[CallSite]:
    """The first call after ``site`` in ``owner`` that runs code the explicit device
    would not reach: a function or class of the program's other modules (``from model
    import Net``: its ``.cuda()`` follows the current device), or one of this file's
    whose body uses the implicit device where the plan does not rewrite it (not in
    ``rewritten``). Method calls and torch's, the standard library's and common
    packages' are not followed."""
    unreached: dict = {}  # a local function's or class's node -> whether it has uses the plan leaves
    for other in a.calls:
        if other.order <= site.order or not a.inside(other.scope, owner):
            continue
        q = other.qualname
        if q is not None:
            if not q.startswith("torch.") and not outside_program(q):
                return other
            continue
        func = other.node.func
        local = a.local_function(func, other.scope)
        body = local.node if local is not None else getattr(a.local_class(func, other.scope), "node", None)
        if body is None or body is owner:
            continue
        if body not in unreached:
            unreached[body] = any(u.node not in rewritten for u in a.implicit_uses(body, include_nested=True))
        if unreached[body]:
            return other
    return None


def plan_device_block(ctx: Context, site: CallSite, fn: FunctionInfo) -> Union[Edit, str]:
    """Wrap the statements after ``set_device(k)`` in ``with torch.cuda.device(k):``;
    after ``if torch.cuda.current_device() != k: set_device(k)`` too (mmcv's ops switch to
    their input's GPU so): the block is a no-op where ``k`` is current already, so it
    replaces the ``if``."""
    a = ctx.analysis
    k = device_index_arg(site)
    node = fn.node
    if k is None or site.expr_stmt is None or not isinstance(node, cst.FunctionDef):
        return "the call is not a plain `set_device(k)` statement"
    if not isinstance(node.body, cst.IndentedBlock):
        return "the function body is on one line"
    body = list(node.body.body)
    line = site.line
    if line is not None and len(line.body) == 1 and line not in body:
        line = next((stmt for stmt in body if _switches_unless_current(a, stmt, line, k, site)), line)
    if line is None or line not in body or (isinstance(line, cst.SimpleStatementLine) and len(line.body) != 1):
        return "the call is not a top-level statement of the function"
    i = body.index(line)
    rest = body[i + 1:]
    if not rest:
        return "nothing follows the call in this function"
    # the block opens on the next line: blank lines that parted the call from the rest go
    rest[0] = rest[0].with_changes(leading_lines=[ln for ln in rest[0].leading_lines if ln.comment is not None])
    torch = a.torch_name_at(site.scope, site.order)
    if torch is None:
        return "`torch` is not imported by name in this module"
    context = cst.parse_expression(f"{torch}.cuda.device({a.code(k)})")
    block = cst.With(
        items=[cst.WithItem(context)],
        body=cst.IndentedBlock(body=rest),
        leading_lines=line.leading_lines,
    )
    new_fn = node.with_changes(body=node.body.with_changes(body=body[:i] + [block]))
    old = a.text
    if old != a.module.code:
        return "LibCST does not reproduce this file exactly (a form feed before a statement)"
    new = a.module.deep_replace(node, new_fn).code  # type: ignore[union-attr]
    index = LineIndex(old)
    # the edit runs from the set_device statement to the end of the function, so that
    # it covers whole statements (what the fix verification compares)
    start = index.offset(ctx.start(line))
    tail = len(old) - index.offset(ctx.end(node))
    return Edit(index.position(start), index.position(len(old) - tail), new[start:len(new) - tail],
                old[start:len(old) - tail])


def _switches_unless_current(a, stmt: cst.CSTNode, line: cst.CSTNode, k: cst.BaseExpression,
                             site: CallSite) -> bool:
    """``stmt`` is ``if <current_device()> != k:`` (either side) holding only ``line``,
    with no ``else``."""
    if not (isinstance(stmt, cst.If) and stmt.orelse is None and isinstance(stmt.body, cst.IndentedBlock)
            and list(stmt.body.body) == [line] and isinstance(stmt.test, cst.Comparison)
            and len(stmt.test.comparisons) == 1 and isinstance(stmt.test.comparisons[0].operator, cst.NotEqual)):
        return False
    sides = (stmt.test.left, stmt.test.comparisons[0].comparator)
    current = [s for s in sides if isinstance(s, cst.Call) and not s.args and a.qualname(s.func, site.scope)
               in ("torch.cuda.current_device", "torch.accelerator.current_device_index")]
    return len(current) == 1 and a.code(sides[1] if current[0] is sides[0] else sides[0]) == a.code(k)


def _branch(a, site: CallSite) -> Tuple[Tuple[int, str], ...]:
    """The branches ``site`` runs under in its scope, the script's main guard aside (an
    importer never runs it; the script always does)."""
    guard = a.devices.main_guard
    return tuple(c for c in site.cond if guard is None or c[0] != id(guard))


def _branch_line(ctx: Context, site: CallSite) -> int:
    tests = ctx.analysis.devices.guard_tests(site)
    line = ctx.start(site.node)[0]
    for i in range(line - 1, 0, -1):  # the innermost enclosing header above the call
        if tests and ctx.analysis.lines[i - 1].strip() == tests[0].strip():
            return i
    return line


@dataclass
class Fallback:
    edits: List[Edit]
    choice: str  # the code's own GPU choice: `opt.gpu_ids`, `args.gpu`
    empty: str  # what it holds for "no GPU": `[]`, `None`, `-1`


# A test that the GPU choice holds a GPU, and the value that means "none": `{c}` is the
# choice's code (whitespace removed). A list of ids is indexed `[0]`; an index is not.
_LIST_TESTS = ("len({c})>0", "len({c})>=1", "len({c})!=0", "len({c})", "{c}", "{c}!=[]")
_INDEX_TESTS = (("{c}isnotNone", "None"), ("{c}>=0", "-1"), ("{c}>-1", "-1"), ("{c}!=-1", "-1"))


def plan_cpu_fallback(ctx: Context, site: CallSite, owner: cst.CSTNode) -> Union[Fallback, str]:
    """Make the code's own GPU choice fall back to the CPU, or why not.

    The pix2pix family of trainers (and many scripts) parse a list of GPU ids from the
    command line, default ``"0"``, and call ``set_device(opt.gpu_ids[0])`` under
    ``if len(opt.gpu_ids) > 0:``; every later placement follows that list (``self.device
    = ... if self.gpu_ids else cpu``, ``net.to(gpu_ids[0])``, ``DataParallel(net,
    gpu_ids)``). On a CPU-only machine the program dies at ``set_device``. Emptying the
    list there, just before the test, is the program's own "run on the CPU" (what
    ``--gpu_ids -1`` asks for): every later placement follows it. The same for an index
    tested ``is not None`` or ``>= 0``. The inserted test queries CUDA only where the
    original's ``set_device`` would have initialised it anyway.
    """
    a = ctx.analysis
    k = device_index_arg(site)
    if k is None or site.expr_stmt is None:
        return "the call is not a plain `set_device(k)` statement"
    if (isinstance(k, cst.Call) and isinstance(k.func, cst.Name) and k.func.value == "int"
            and len(k.args) == 1 and k.args[0].keyword is None and not k.args[0].star):
        k = k.args[0].value  # set_device(int(opt.gpu_ids[0])): ids kept as strings
    is_list = (isinstance(k, cst.Subscript) and len(k.slice) == 1 and isinstance(k.slice[0].slice, cst.Index)
               and isinstance(k.slice[0].slice.value, cst.Integer) and k.slice[0].slice.value.value == "0")
    choice = k.value if is_list else k  # type: ignore[union-attr]
    if not _is_dotted(choice):
        return "its index is not a name the code chose its GPU by"
    code = a.code(choice)
    fn = a.enclosing_function(site.scope)
    if isinstance(choice, cst.Name) and fn is not None:
        if choice.value in fn.params:
            return f"`{code}` is a parameter: the caller's own `{code}` would still name the GPU"
        if choice.value not in fn.scope.bindings or choice.value in fn.scope.declared:
            return (f"`{code}` is not this function's own variable: assigning it here would "
                    "make it one (an UnboundLocalError) or change it for everyone")
    found = _enclosing_if(owner, site.line)
    if found is None:
        return "it does not run under a test of the GPU choice"
    test, block = found
    bare = "".join(code.split())
    conjunct, empty = None, ""
    for part in _conjuncts(test.test):
        text = "".join(a.code(part).split())
        if is_list and text in {t.format(c=bare) for t in _LIST_TESTS}:
            conjunct, empty = part, "[]"
        for pattern, value in (() if is_list else _INDEX_TESTS):
            if text == pattern.format(c=bare):
                conjunct, empty = part, value
        if conjunct is not None:
            break
    if conjunct is None:
        return "it does not run under a test of the GPU choice"
    before = block[:block.index(test)]
    assigns = re.compile(rf"(?m)^[ \t]*{re.escape(code)}[ \t]*=(?!=)")
    for stmt in before:
        text = a.code(stmt)
        if assigns.search(text) and "is_available" in text:
            return f"`{code}` already falls back to the CPU (line {ctx.start(stmt)[0]})"
    try:
        torch, edits = ctx.torch_for(site)
    except Uninsertable as exc:
        return str(exc)
    backend = (site.qualname or "torch.cuda.set_device").split(".")[1]
    line, col = ctx.start(test)
    indent = a.lines[line - 1][:col]
    unit = a.module.default_indent
    newline = a.module.default_newline
    text = (f"{indent}if {a.code(conjunct)} and not {torch}.{backend}.is_available():"
            f"  # no GPU here: run on the CPU{newline}{indent}{unit}{code} = {empty}{newline}")
    return Fallback(edits + [Edit((line, 0), (line, 0), text)], code, empty)


def _is_dotted(expr: cst.BaseExpression) -> bool:
    while isinstance(expr, cst.Attribute):
        expr = expr.value
    return isinstance(expr, cst.Name)


def _conjuncts(test: cst.BaseExpression) -> List[cst.BaseExpression]:
    if isinstance(test, cst.BooleanOperation) and isinstance(test.operator, cst.And) and not test.lpar:
        return _conjuncts(test.left) + _conjuncts(test.right)
    return [test]


def _enclosing_if(owner: cst.CSTNode, line: Optional[cst.CSTNode]) -> Optional[Tuple[cst.If, Sequence[cst.CSTNode]]]:
    """The ``if`` whose own body holds the statement ``line`` (not its ``else``), with the
    block the ``if`` sits in; searched through the compound statements of ``owner``."""
    if line is None:
        return None
    stack: List[Sequence[cst.CSTNode]] = [_block(owner)]
    while stack:
        block = stack.pop()
        for stmt in block:
            if isinstance(stmt, cst.If) and line in _block(stmt):
                return stmt, block
            for part in _parts(stmt):
                stack.append(_block(part))
    return None


def _block(node: cst.CSTNode) -> Sequence[cst.CSTNode]:
    body = getattr(node, "body", None)
    if isinstance(body, cst.IndentedBlock):
        return body.body
    return body if isinstance(body, (list, tuple)) else ()


def _parts(stmt: cst.CSTNode) -> List[cst.CSTNode]:
    """The blocks of a compound statement, nested function and class bodies excluded."""
    if isinstance(stmt, (cst.FunctionDef, cst.ClassDef)) or not isinstance(stmt, cst.BaseCompoundStatement):
        return []
    parts: List[cst.CSTNode] = [stmt]
    orelse = getattr(stmt, "orelse", None)
    while orelse is not None:
        parts.append(orelse)
        orelse = getattr(orelse, "orelse", None) if isinstance(orelse, cst.If) else None
    parts += list(getattr(stmt, "handlers", ()) or ())
    final = getattr(stmt, "finalbody", None)
    if final is not None:
        parts.append(final)
    return parts
