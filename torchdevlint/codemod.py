"""The fixes as a LibCST codemod, over the same engine.

    python -m libcst.tool codemod --no-format codemod.FixDevices PATH [--unsafe-fixes]

(``.libcst.codemod.yaml`` in this repository lists the ``torchdevlint`` package among
the codemod modules; in another repository add it there, or run
``python -m libcst.tool initialize .`` and add ``torchdevlint`` to ``modules``.)
"""

from __future__ import annotations

import argparse

import libcst as cst
from libcst.codemod import CodemodContext, SkipFile
from libcst.codemod import CodemodCommand

from .engine import fix_source
from .settings import Settings


class FixDevices(CodemodCommand):
    DESCRIPTION = "Rewrite implicit CUDA device placement into explicit .to(device) code (torchdevlint)."

    def __init__(self, context: CodemodContext, unsafe_fixes: bool = False, device_name: str = "device"):
        super().__init__(context)
        self.unsafe_fixes = unsafe_fixes
        self.settings = Settings(device_name=device_name)

    @staticmethod
    def add_args(arg_parser: argparse.ArgumentParser) -> None:
        arg_parser.add_argument("--unsafe-fixes", action="store_true",
                                help="also apply fixes that may change behaviour")
        arg_parser.add_argument("--device-name", default="device",
                                help="the variable name fixes use and look for")

    def transform_module_impl(self, tree: cst.Module) -> cst.Module:
        outcome = fix_source(tree.code, self.context.filename or "-", self.settings, unsafe=self.unsafe_fixes)
        for finding in outcome.rejected:
            self.warn(f"{finding.code} {finding.message}")
        if not outcome.changed:
            raise SkipFile("nothing to fix")
        return cst.parse_module(outcome.text)
