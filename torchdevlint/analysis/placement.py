"""Placement: device expressions that are the current device, and the uses that depend on
CUDA's current device."""

from __future__ import annotations

from typing import Iterator, List

import libcst as cst

from .facts import (  # noqa: F401
    CallSite,
    ImplicitUse,
    Scope,
    _CURRENT_DEVICE_QUERIES,
    _is_cuda_string,
    is_bare_cuda,
)


class PlacementMixin:
    # ------------------------------------------------------------ device inference
    def is_current_device_expr(self, expr: cst.BaseExpression, scope: Scope) -> bool:
        """``"cuda"``, ``torch.device("cuda")``, ``... if torch.cuda.is_available() else "cpu"``."""
        if isinstance(expr, cst.SimpleString):
            return expr.evaluated_value == "cuda"
        if isinstance(expr, cst.IfExp):
            test = expr.test
            return (isinstance(test, cst.Call) and not test.args
                    and self.qualname(test.func, scope) == "torch.cuda.is_available"
                    and self.is_current_device_expr(expr.body, scope))
        if isinstance(expr, cst.Call) and self.qualname(expr.func, scope) == "torch.device":
            args = [a for a in expr.args if not a.star]
            if len(args) == 1 and args[0].keyword is None:
                return self.is_current_device_expr(args[0].value, scope)
            if len(args) == 2 and isinstance(args[1].value, cst.Call):
                inner = args[1].value
                return (self.qualname(inner.func, scope) == "torch.cuda.current_device"
                        and isinstance(args[0].value, cst.SimpleString)
                        and args[0].value.evaluated_value == "cuda")
        return False

    # ------------------------------------------------------------ implicit devices
    def implicit_uses(self, scope_node: cst.CSTNode, include_nested: bool) -> List[ImplicitUse]:
        """Current-device-dependent uses in a function (or the module) body."""
        uses: List[ImplicitUse] = []
        for site in self.calls:
            if site.in_device_context:
                continue
            fn = self.enclosing_function(site.scope)
            owner = fn.node if fn is not None else self.module
            if owner is not scope_node and not (include_nested and self.inside(site.scope, scope_node)):
                continue
            uses.extend(self.implicit_uses_of(site))
        return uses

    def implicit_uses_of(self, site: CallSite) -> Iterator[ImplicitUse]:
        q = site.qualname
        call = site.node
        if is_bare_cuda(call):
            yield ImplicitUse(call, "bare-cuda", site, True)
        elif q in _CURRENT_DEVICE_QUERIES and not [a for a in call.args if a.keyword is None or a.keyword.value == "device"]:
            yield ImplicitUse(call, "current-device-query", site, False)
        elif q == "torch.device" and site.positional(0) is not None and len(call.args) == 1:
            if _is_cuda_string(site.positional(0).value):
                yield ImplicitUse(call, "device-string", site, False)
            return
        for arg in call.args:
            value = arg.value
            kw = arg.keyword.value if arg.keyword is not None else None
            if (kw == "device" or (kw is None and site.method == "to")) and _is_cuda_string(value):
                yield ImplicitUse(arg, "device-string", site, False)
            elif (kw == "device" or (kw is None and site.method == "to")) and isinstance(value, cst.Name):
                values = self.values_of(value.value, site.scope)
                if values and all(self.is_current_device_expr(v, s) for v, s in values):
                    yield ImplicitUse(arg, "device-object", site, False)
