"""Every rule's code, name and prefilter text, without importing a rule (or LibCST).

The flake8 plugin and the CLI decide from this table alone which codes are selected and
whether a file can match at all; the rules (and LibCST with them) are imported only for
a file that may. Each rule file declares its own ``name``, ``triggers``,
``also_requires`` and ``needs``; tests/test_fronts.py checks that this table says the same.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Dict, FrozenSet, Optional, Tuple

from . import names as N
from .model import DOCS_URL, Violation
from .words import TEXT_TEST_SCANS, TEXT_TESTS, CodeWords, Needs

# the gate of TDL101 and TDL102, as they spell it: a call that resolves to a set_device
_SET_DEVICE_NEEDS: Needs = (tuple(f"qual:{q}" for q in sorted(N.SET_DEVICE)),)

# code: (name, triggers (any one), also_requires (any one, when given), the gate on the code)
RULES: Dict[str, Tuple[str, Tuple[str, ...], Tuple[str, ...], Needs]] = {
    'TDL001': ('bare-cuda-call', ('@bare-cuda',), (), (('bare:cuda',),)),
    'TDL002': ('cuda-call-ignores-input-device', ('@bare-cuda',), (), (('bare:cuda',),)),
    'TDL003': ('rank-code-on-fixed-device',
               ('@gpu-use', '@gpu-ordinal'),
               ('@rank-launch',),
               (('bare:cuda', 'place:cuda'),
                ('name:Pool', 'name:ProcessPoolExecutor', 'name:spawn', 'name:start_processes',
                 *(f'call:{n}' for n in sorted(N.LAUNCHERS)), 'qual:torch.distributed.rpc.init_rpc',
                 *(f'qual:{q}' for q in sorted(N.INIT_PROCESS_GROUP)), 'text:rank', 'target:Process'))),
    'TDL004': ('cuda-call-bypasses-device', ('@bare-cuda',), (), (('bare:cuda',),)),
    'TDL005': ('legacy-cuda-tensor-type',
               ('FloatTensor', 'DoubleTensor', 'HalfTensor', 'BFloat16Tensor', 'ByteTensor', 'CharTensor',
                'ShortTensor', 'IntTensor', 'LongTensor', 'BoolTensor'),
               ('@cuda-type',),
               (('qual:torch.cuda.FloatTensor',
                 'qual:torch.cuda.DoubleTensor',
                 'qual:torch.cuda.HalfTensor',
                 'qual:torch.cuda.BFloat16Tensor',
                 'qual:torch.cuda.ByteTensor',
                 'qual:torch.cuda.CharTensor',
                 'qual:torch.cuda.ShortTensor',
                 'qual:torch.cuda.IntTensor',
                 'qual:torch.cuda.LongTensor',
                 'qual:torch.cuda.BoolTensor',
                 'str^torch.cuda.'),)),
    'TDL006': ('load-without-map-location',
               ('@load',),
               ('torch',),
               (('nomap@1:torch.load',
                 'nomap@1:torch.serialization.load',
                 'nomap@1:torch.jit.load',
                 'nomap@2:torch.hub.load_state_dict_from_url'),)),
    'TDL007': ('hardcoded-gpu-device', ('cuda', '@rank-device', 'add_argument', '@gpu-ordinal'),
               ('cuda', '@rank-device', 'cpu', 'CPU', '@gpu-ordinal'),
               (('call:cuda', 'str^cuda', 'place:rank', 'help~cpu', 'place:cuda'),)),
    'TDL008': ('cuda-only-call',
               ('cuda', 'nccl', 'SyncBatchNorm', 'pin_memory', 'nn.parallel'),
               ('synchronize', 'Event', 'Stream', 'current_device', 'get_device_', 'current_stream',
                'default_stream', 'CUDAGraph', 'reset_', 'ipc_collect', 'get_rng_state', 'mem_get_info',
                'memory_summary', 'init', 'set_per_process_memory_fraction', 'nvtx', 'device(', 'set_device',
                'convert_sync_batchnorm', 'spawn', 'start_processes', 'pin_memory', 'is_available',
                'device_count', 'replicate', 'scatter', 'gather', 'parallel_apply', 'data_parallel',
                'utilization', 'temperature', 'power_draw', 'clock_rate', 'memory_usage'),
               (tuple(f"qual:{q}" for q in sorted(N.CUDA_ONLY | {"torch.cuda.device", "torch.cuda.set_device",
                                                                 N.CONVERT_SYNC_BATCHNORM, "torch.multiprocessing.spawn",
                                                                 "torch.multiprocessing.start_processes"}
                                                   | N.INIT_PROCESS_GROUP_TORCH))
                + ("call:pin_memory", "name:pin_memory", "stmt:torch.cuda.is_available", "factor:count"),)),
    'TDL009': ('discarded-tensor-move', ('@dropped-move',), (), (('drop:cuda', 'drop:to'),)),
    'TDL101': ('global-set-device',
               ('set_device',),
               (),
               _SET_DEVICE_NEEDS),
    'TDL102': ('set-device-in-thread',
               ('set_device',),
               (),
               _SET_DEVICE_NEEDS),
    'TDL103': ('device-context-not-entered',
               ('@device-context',),
               (),
               (('expr:torch.accelerator.device_index',
                 'expr:torch.cuda.device',
                 'expr:torch.cuda.device_of'),)),
    'TDL104': ('thread-uses-implicit-device',
               ('Thread', 'Executor', 'run_in_executor', 'to_thread'),
               ('.cuda(', "cuda'", 'cuda"'),
               (('name~Thread', 'name~Executor', 'name:to_thread', 'name:run_in_executor', 'name:Pool'),
                ('thread:cuda',))),
    'TDL105': ('cuda-visible-devices-after-init',
               ('CUDA_VISIBLE_DEVICES',),
               ('cuda', 'DataParallel', 'accelerator'),
               (('str~CUDA_VISIBLE_DEVICES', 'name:CUDA_VISIBLE_DEVICES'),)),
    'TDL106': ('process-group-without-device',
               ('init_process_group',),
               (),
               (('qual:torch.distributed.init_process_group',),)),
    'TDL201': ('data-parallel-implicit-devices',
               ('@data-parallel',),
               (),
               (('qual:torch.nn.parallel.DataParallel',), ('call:cuda', 'str^cuda'))),
    'TDL900': ('syntax-error', (), (), ()),
    'TDL901': ('encoding-error', (), (), ()),
    'TDL902': ('internal-error', (), (), ()),
    'TDL903': ('fix-rejected', (), (), ()),
    'TDL904': ('io-error', (), (), ())}
CODES: Tuple[str, ...] = tuple(RULES)
TOOL_CODES: FrozenSet[str] = frozenset(c for c in CODES if c.startswith("TDL9"))
# rules that run only when selected by their own code (or ALL), as flake8-bugbear's B9xx:
# a portability check that code meant only for GPUs need not hear about
OPT_IN: FrozenSet[str] = frozenset({"TDL007", "TDL008"})


def passes(triggers: Tuple[str, ...], also: Tuple[str, ...], data, seen: Optional[Dict] = None) -> bool:
    """The prefilter test (on str or bytes): one of ``triggers`` occurs, and one of
    ``also`` when it is given. A trigger ending in ``(`` matches without it: ``x.cuda ()``
    and ``x.cuda\\\n()`` are calls too. A trigger ``@NAME`` is a test of its own
    (``TEXT_TESTS``), for a word a substring cannot pin down. ``seen`` keeps each word's
    answer on this text across the rules of one prefilter (they share many)."""
    first, second = _plan(triggers, also, type(data))
    seen = {} if seen is None else seen
    return _found(first, data, seen) and (not second or _found(second, data, seen))


@lru_cache(maxsize=None)
def _plan(triggers: Tuple[str, ...], also: Tuple[str, ...], kind: type) -> Tuple[Tuple, Tuple]:
    """The two lists as the prefilter tests them, the cheaper first: fewer passes over a
    text that has none of them (a text test counts its substrings, ``TEXT_TEST_SCANS``),
    then plain substrings before text tests (most texts fail the first)."""
    def cost(words: Tuple[str, ...]) -> Tuple[int, bool]:
        scans = sum(TEXT_TEST_SCANS[w[1:]] if w.startswith("@") else 1 for w in words)
        return scans, any(w.startswith("@") for w in words)

    if not also or cost(triggers) <= cost(also):
        return _words(triggers, kind), _words(also, kind)
    return _words(also, kind), _words(triggers, kind)


def _found(words: Tuple, data, seen: Dict) -> bool:
    for w in words:
        hit = seen.get(w)
        if hit is None:
            hit = seen[w] = (w in data) if w.__class__ is not tuple else TEXT_TESTS[w[0]](data)
        if hit:
            return True
    return False


@lru_cache(maxsize=None)
def _words(words: Tuple[str, ...], kind: type) -> Tuple:
    """The words as the prefilter tests them on ``kind`` (str or bytes): substrings
    (encoded for bytes, a trailing "(" dropped), text tests as ``(NAME,)``; the cheap
    substrings first."""
    plain = tuple((w[:-1] if w.endswith("(") else w) for w in words if not w.startswith("@"))
    if kind is bytes:
        plain = tuple(w.encode("ascii") for w in plain)
    return plain + tuple((w[1:],) for w in words if w.startswith("@"))


def may_fire(code: str, data, seen: Optional[Dict] = None) -> bool:
    """Can the rule ``code`` fire on this text at all?"""
    _, triggers, also, _ = RULES[code]
    return passes(triggers, also, data, seen)


def may_match(data, codes) -> bool:
    """Can any of ``codes`` (tool codes aside) fire on this text?"""
    seen: Dict = {}
    return any(may_fire(c, data, seen) for c in codes if c not in TOOL_CODES)


def gated(codes, words: CodeWords) -> FrozenSet[str]:
    """The codes among ``codes`` whose gate the module's code passes (tool codes pass)."""
    return frozenset(c for c in codes if c in TOOL_CODES or words.satisfies(RULES[c][3]))


def url_for(code: str) -> str:
    """The rule's section in the generated reference."""
    entry = RULES.get(code)
    return f"{DOCS_URL}#{code.lower()}-{entry[0]}" if entry else f"{DOCS_URL}#{code.lower()}"


def tool_finding(code: str, message: str, line: int = 1, column: int = 0, filename: str = "-") -> Violation:
    """A finding of the tool itself (TDL9xx) at one point."""
    return Violation(code, RULES[code][0], message, (line, column), (line, column), None, filename)


def internal_error(what: str, exc: BaseException, filename: str = "-") -> Violation:
    """TDL902 for an exception raised on one file: "``what`` failed on this file: Type:
    message", the message on one line and at most 200 characters."""
    reason = " ".join(str(exc).split())
    reason = reason if len(reason) <= 200 else reason[:199] + "…"
    return tool_finding("TDL902", f"{what} failed on this file: {type(exc).__name__}: {reason}", filename=filename)
