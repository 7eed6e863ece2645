"""Fix builders shared by the current-device rules (TDL101, TDL102).

Replacing ``torch.cuda.set_device(k)`` by an explicit device object is only right when
every current-device-dependent use in reach is rewritten with it in the same fix, and
those uses are all bare ``.cuda()`` calls that come after the call.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import List, Optional, Union

import libcst as cst

from ..analysis import CallSite, FunctionInfo, ImplicitUse
from ..model import Edit
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
    before = [u for u in uses if a.enclosing_function(u.site.scope) is same_scope and u.site.order < site.order]
    if before:
        return f"{describe_uses(ctx, before)} runs before it, on the previous device"
    fixed = [u for u in uses if u.rewritable]
    if len(fixed) != len(uses):
        others_ = [u for u in uses if not u.rewritable]
        return f"other uses depend on the current device too: {describe_uses(ctx, others_)}"
    if not uses:
        return "nothing in reach depends on it here (code in other modules may)"
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


def plan_device_block(ctx: Context, site: CallSite, fn: FunctionInfo) -> Union[Edit, str]:
    """Wrap the statements after ``set_device(k)`` in ``with torch.cuda.device(k):``."""
    a = ctx.analysis
    k = device_index_arg(site)
    node = fn.node
    if k is None or site.expr_stmt is None or not isinstance(node, cst.FunctionDef):
        return "the call is not a plain `set_device(k)` statement"
    if not isinstance(node.body, cst.IndentedBlock):
        return "the function body is on one line"
    body = list(node.body.body)
    line = site.line
    if line is None or line not in body or len(line.body) != 1:
        return "the call is not a top-level statement of the function"
    i = body.index(line)
    rest = body[i + 1:]
    if not rest:
        return "nothing follows the call in this function"
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
