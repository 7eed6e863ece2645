"""TDL9xx: the tool's own findings. The engine and the runner report these; they have
no ``check`` of their own, but they are documented like every other rule."""

from __future__ import annotations

from typing import Iterable

from ..model import Violation
from .base import Context, Rule


class _ToolError(Rule):
    fixable = "never"
    fix_safety = "There is no fix: the file is left exactly as it is."

    def check(self, ctx: Context) -> Iterable[Violation]:
        return ()


class SyntaxErrorFinding(_ToolError):
    code = "TDL900"
    name = "syntax-error"
    summary = "the file is not valid Python for this interpreter, so it was not analysed"
    what = """
        A file that Python's own parser (and then LibCST) rejects: Python 2 syntax such
        as `print "x"`, `x.cuda(async=True)` (a keyword since Python 3.7), nesting deeper
        than CPython accepts, NUL bytes. The finding gives Python's message and position.
    """
    why = """
        A file that does not parse cannot be analysed: the other files still are, and
        the run does not crash. Files that mention no CUDA API are never parsed (the
        prefilter skips them), so syntax errors there are left to a general linter.
    """
    example = 'x.cuda(async=True)  # `async` is a keyword'
    use_instead = "x.cuda(non_blocking=True)"
    fixable = "sometimes"
    fix_summary = ("torch 0.3's `async=` of `.cuda()`, `.to()`, `.copy_()`, `.type()` as `non_blocking=` (safe); "
                   "else none")
    fix_safety = """
        Where all that keeps the file from parsing is torch 0.3's `async=` keyword
        argument of a tensor or module method (`.cuda(async=True)`, `.to(device,
        async=True)`, `.copy_(src, async=True)`, `.type(T, async=True)`), the fix
        spells it `non_blocking=`, the name torch 0.4 gave it (**safe**: the meaning
        torch gave it, and nothing else changes; the rules then see the file, in the
        same `fix`). Any other syntax error has no fix: the file is left as it is.
    """


class EncodingError(_ToolError):
    code = "TDL901"
    name = "encoding-error"
    summary = "the file's bytes cannot be decoded with its declared (or default UTF-8) encoding"
    what = """
        Bytes that are not valid in the file's encoding: the PEP 263 declaration
        (`# -*- coding: latin-1 -*-`) when there is one, else UTF-8; or an unknown
        encoding name in the declaration.
    """
    why = "Python itself refuses to import such a file; the linter reports where."
    example = "# a latin-1 byte 0xe9 in a file without a coding declaration"
    use_instead = "# -*- coding: latin-1 -*-   (or re-save the file as UTF-8)"


class InternalError(_ToolError):
    code = "TDL902"
    name = "internal-error"
    summary = "a rule failed on this file; the other rules and files were still checked"
    what = """
        An unexpected exception inside a rule, in the shared analysis or in LibCST's parser,
        or fixes that did not settle.
    """
    why = "A bug in torchdevlint (or LibCST): please report it with the file that triggers it."
    example = "# any file on which a rule raised"
    use_instead = "# nothing to change in your code"


class FixRejected(_ToolError):
    code = "TDL903"
    name = "fix-rejected"
    summary = "a fix was computed but not written: its result failed verification"
    what = """
        Before writing, `fix` compiles the fixed module and compares its AST with the
        original's everywhere except at the rewritten statements and the inserted
        definitions. When either check fails, nothing is written.
    """
    why = "A codemod must never damage a file; this finding says which fix was held back."
    example = "# a fix whose output would not compile"
    use_instead = "# fix that site by hand"


class IOErrorFinding(_ToolError):
    code = "TDL904"
    name = "io-error"
    summary = "the file could not be read or written, or changed while it was being fixed"
    what = "A permission error, a file that vanished, or one modified between read and write."
    why = "The file was skipped; the run went on with the others."
    example = "# a file without read permission"
    use_instead = "# make the file readable/writable and run again"
