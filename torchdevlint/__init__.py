"""torchdevlint: find and fix implicit CUDA device placement in PyTorch code.

The linter never imports torch; only :mod:`torchdevlint.sim` (the CUDA simulator
used to verify rewrites) does, lazily.
"""

__version__ = "0.1.0"

from .model import Applicability, Edit, Fix, Violation  # noqa: E402,F401
