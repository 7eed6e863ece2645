"""The flake8 plugin (code prefix ``TDL``): a thin adapter over the engine.

flake8 only runs a plugin that takes ``tree``; the plugin ignores it (flake8 builds it
for pyflakes anyway) and works on the lines, so files that cannot match cost one
substring test. flake8 applies ``# noqa``, ``--select`` and ``--ignore``
itself, and reports syntax errors as its own E999, so TDL900 is not repeated here.
The plugin never raises into flake8: an internal failure is reported as TDL902.
"""

from __future__ import annotations

from typing import Iterator, List, Tuple, Type

from . import __version__
from .engine import check_source
from .settings import Settings

_SKIP = frozenset({"TDL900"})


class Plugin:
    name = "torchdevlint"
    version = __version__
    settings = Settings()

    def __init__(self, tree, lines: List[str], filename: str = "-"):
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
        cls.settings = Settings(device_name=name if name.isidentifier() else "device")

    def run(self) -> Iterator[Tuple[int, int, str, Type["Plugin"]]]:
        text = "".join(self.lines)
        try:
            found = check_source(text, self.filename, self.settings, apply_noqa=False)
        except Exception as exc:  # never into flake8
            yield 1, 0, f"TDL902 torchdevlint failed on this file: {type(exc).__name__}: {exc}", type(self)
            return
        for v in found:
            if v.code not in _SKIP:
                # flake8 wants a 0-based column and adds 1 itself
                yield v.row, v.start[1], f"{v.code} {v.message}", type(self)
