"""The rule registry: every rule, in code order."""

from __future__ import annotations

from typing import Dict, List, Type

from .base import Rule
from .tdl001_bare_cuda_call import BareCudaCall
from .tdl002_cuda_call_ignores_input_device import CudaCallIgnoresInputDevice
from .tdl003_rank_code_on_fixed_device import RankCodeOnFixedDevice
from .tdl004_cuda_call_bypasses_device import CudaCallBypassesDevice
from .tdl005_legacy_cuda_tensor_type import LegacyCudaTensorType
from .tdl006_load_without_map_location import LoadWithoutMapLocation
from .tdl007_hardcoded_gpu_device import HardcodedGpuDevice
from .tdl008_cuda_only_call import CudaOnlyCall
from .tdl009_discarded_tensor_move import DiscardedTensorMove
from .tdl101_global_set_device import GlobalSetDevice
from .tdl102_set_device_in_thread import SetDeviceInThread
from .tdl103_device_context_not_entered import DeviceContextNotEntered
from .tdl104_thread_uses_implicit_device import ThreadUsesImplicitDevice
from .tdl105_cuda_visible_devices_after_init import CudaVisibleDevicesAfterInit
from .tdl106_process_group_without_device import ProcessGroupWithoutDevice
from .tdl201_data_parallel_implicit_devices import DataParallelImplicitDevices
from .tdl9xx_tool_errors import (
    EncodingError,
    FixRejected,
    InternalError,
    IOErrorFinding,
    SyntaxErrorFinding,
)

ALL_RULES: List[Type[Rule]] = sorted(
    [
        BareCudaCall,
        CudaCallIgnoresInputDevice,
        RankCodeOnFixedDevice,
        CudaCallBypassesDevice,
        LegacyCudaTensorType,
        LoadWithoutMapLocation,
        HardcodedGpuDevice,
        CudaOnlyCall,
        DiscardedTensorMove,
        GlobalSetDevice,
        SetDeviceInThread,
        DeviceContextNotEntered,
        ThreadUsesImplicitDevice,
        CudaVisibleDevicesAfterInit,
        ProcessGroupWithoutDevice,
        DataParallelImplicitDevices,
        SyntaxErrorFinding,
        EncodingError,
        InternalError,
        FixRejected,
        IOErrorFinding,
    ],
    key=lambda r: r.code,
)
BY_CODE: Dict[str, Type[Rule]] = {r.code: r for r in ALL_RULES}
BY_NAME: Dict[str, Type[Rule]] = {r.name: r for r in ALL_RULES}
TOOL_CODES = frozenset(code for code in BY_CODE if code.startswith("TDL9"))
from ..catalogue import url_for  # noqa: E402,F401 - one address for every rule's reference


def find(code_or_name: str) -> Type[Rule]:
    key = code_or_name.strip()
    if key.upper() in BY_CODE:
        return BY_CODE[key.upper()]
    if key in BY_NAME:
        return BY_NAME[key]
    raise KeyError(code_or_name)
