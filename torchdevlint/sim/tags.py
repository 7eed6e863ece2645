"""What the simulator's parts share: how a tensor carries its logical device."""

from __future__ import annotations

_TAG = "_tdl_sim_device"  # attribute on a tensor: its logical CUDA index (absent: cpu)


def device_of(t) -> str:
    """The logical device of a tensor under the simulator ("cpu" or "cuda:i")."""
    index = getattr(t, _TAG, None)
    return "cpu" if index is None else f"cuda:{index}"


def _invalid_ordinal() -> RuntimeError:
    return RuntimeError(
        "CUDA error: invalid device ordinal\n"
        "CUDA kernel errors might be asynchronously reported at some other API call, so the "
        "stacktrace below might be incorrect.")
