"""The gate between the text prefilter and LibCST: which identifiers and strings the
module's *code* uses, read from CPython's own ``ast`` (one walk, no LibCST).

The text prefilter sees ``.cuda(`` in a comment, ``load`` in ``download`` and
``Tensor`` in a type hint. The gate sees code: each rule declares ``needs``, groups of
alternative tokens that must all be present for it to fire at all (every group needs
one of its tokens). A token is one of:

- ``call:NAME``: a call whose function ends in the identifier NAME (``x.cuda()``,
  ``Thread(...)``);
- ``name:NAME``: NAME used as an identifier anywhere: a name, an attribute, an
  imported name or its alias, a keyword argument, a def/class or parameter name;
- ``name~PART``: an identifier that contains PART;
- ``qual:DOTTED``: a name or attribute chain that may resolve to the qualified name
  DOTTED through the module's imports (every import of its first name is tried, with
  torch's re-exports folded as the analysis folds them: a superset of what it resolves);
- ``str^PREFIX`` / ``str~PART``: a string constant that starts with PREFIX / contains
  PART (constants of up to 200 characters: device strings and environment keys, not
  docstrings);
- ``place:cuda``: a placement on a GPU that literals name, as
  ``devices.gpu_placements`` reads them: ``x.cuda(0)`` (or ``device=0``), or a ``"cuda"``
  / ``"cuda:N"`` string (either side of a conditional expression included) as a call's
  first positional argument (``torch.device("cuda")``, ``x.to("cuda:0")``, whatever the
  function's name), its ``device=`` or its ``map_location=`` (a dict's values too);
- ``place:rank``: a process's GPU index as a device (``names.RANK_INDEX_NAMES``): a
  call's first positional argument (of ``.to(...)``, ``device(...)``), ``device=``,
  ``map_location=`` or DDP's
  ``device_ids=``/``output_device=`` that is (or holds) a name or an attribute so called
  (``.to(rank)``, ``device=args.local_rank``, ``device_ids=[rank]``), whatever the
  function's name;
- ``help~cpu``: a ``help=`` argument whose string names the CPU, in any case (a
  command-line option that says how to run on the CPU: "use -1 for CPU");
- ``thread:cuda``: a function that may run on a thread uses CUDA's implicit device, as
  TDL104 reads it: a ``def`` named in (or a lambda in) the arguments of what hands
  functions to threads (``Thread``, an executor method, ``run_in_executor``,
  ``to_thread``; a class of the module or an import alias, which may be one), or any
  ``run`` method, whose body has a ``.cuda(...)`` call, the string ``"cuda"``, or a
  name as ``device=`` or as ``.to(...)``'s first argument (a device object bound
  elsewhere);
- ``target:Process``: what may start a process running a function of this file, as
  ``analysis.concurrency`` reads a ``Process``: a class whose base is a ``Process``, or a
  ``Process(...)`` call (an alias included) handed a ``target`` that may be a function of
  the file (not a plain name that no ``def`` binds: a parameter, an import);
- ``bare:NAME``: a call of a method NAME with no device: no positional argument (or
  ``None``), no ``device=`` but ``None``, no ``*args``/``**kwargs`` (``x.cuda()``,
  ``x.cuda(non_blocking=True)``; not ``x.cuda(0)``), as ``facts.is_bare_cuda`` reads it;
  ``bare:cuda`` not where every such call is inside a class's own ``cuda()`` method (a
  lambda or function nested in it included), which places where its caller asked;
- ``factor:count``: a GPU count multiplied or divided by (``*``, ``/``, ``//``, ``%``): a call
  of a function named ``device_count`` as an operand, or a name so bound (``n =
  ...device_count()``) used as one;
- ``stmt:DOTTED``: a call that is a statement of its own (or an assertion's whole
  test, or what an ``if not`` tests, directly or through a name bound to it, or the
  whole test of an ``if``/``elif`` with an ``else``) and whose
  function may resolve to DOTTED (as ``qual:`` resolves);
- ``expr:DOTTED``: a call that is a whole expression statement (``torch.cuda.device(1)``
  alone on its line: not entered, assigned, returned or tested) and whose function may
  resolve to DOTTED (as ``qual:`` resolves);
- ``drop:NAME``: a call of a method NAME that is a whole expression statement, on a
  name, ``self.<attr>`` or an item of either (``x.cuda()``, ``self.mean.to(d)``: not
  ``torch.zeros(1).cuda()`` nor ``args.x.cuda()``) that some binding of the module may
  make a tensor (not only ``model = Net()``), as ``receivers.discarded_moves`` reads it;
- ``nomap@N:DOTTED``: a call whose function may resolve to DOTTED, with neither
  ``map_location=`` nor more than N positional arguments, nor ``*args``/``**kwargs``;
- ``text:TEST``: the module's text passes ``TEXT_TESTS[TEST]`` (for what the analysis
  itself reads from text, comments included: the rank markers of a per-rank script).
  The same tests serve the prefilter as ``@TEST`` triggers (see ``catalogue.passes``).

A gate may only ever say "cannot fire" when the rule indeed finds nothing: each is a
necessary condition of its rule's detection, and tests compare every fixture, every
rule example and the corpus with and without the gate.
"""

from __future__ import annotations

import ast
import keyword
import re
from typing import Callable, Dict, FrozenSet, Iterable, List, Optional, Sequence, Set, Tuple

from .names import DTYPE_NAMES, EXECUTOR_METHODS, LAUNCHERS, RANK_INDEX_NAMES, RANK_MARKERS, canonical

Needs = Tuple[Tuple[str, ...], ...]
_LONGEST = 200

# (a literal first: the search jumps from one "load" to the next; the word start is checked by hand)
_LOAD = {str: re.compile(r"load(?:_state_dict_from_url)?\b"), bytes: re.compile(rb"load(?:_state_dict_from_url)?\b")}
_WORD = re.compile(r"\w")
_FACTOR_OPS = (ast.Mult, ast.Div, ast.FloorDiv, ast.Mod)
_IMPORT_LIST = {str: re.compile(r"[\w\s,()\\]*"), bytes: re.compile(rb"[\w\s,()\\\x80-\xff]*")}
_COMMENT = {str: re.compile(r"#[^\n]*"), bytes: re.compile(rb"#[^\n]*")}
_RANK = {str: RANK_MARKERS, bytes: re.compile(RANK_MARKERS.pattern.encode())}
_DATA_PARALLEL = {str: re.compile(r"\bDataParallel\b"), bytes: re.compile(rb"\bDataParallel\b")}
_SP = r"[\s\\]*"  # spaces, line breaks, continuations
# Python's regex engine jumps from one occurrence of a pattern's leading literal to the
# next (a fast substring search) only when the pattern starts with one: a leading `\b`,
# class or alternation makes it try every position of the text, 10-15x slower over a
# corpus. So each pattern of a text test starts with its literal, and what must stand
# before it (no identifier character, `word`; a quote, `quote`) is checked at each match.
# a `.cuda(` call with no device first (`bare:cuda`): `)`, `None`, or a keyword first
# (`non_blocking=True`; `device=` too: a superset), comments between allowed
_BARE_CUDA = (rf"\.cuda{_SP}\({_SP}(?:#[^\n]*\n{_SP})*(?:\)|None\b|\w+{_SP}=(?!=))", "")
# what `place:cuda` reads: a "cuda"/"cuda:N" string, `.cuda(0)`, `device=0`; the last
# alone (`gpu-ordinal`) where the text has no "cuda" (`pipeline(task, device=0)`)
_GPU_ORDINAL = (rf"device{_SP}={_SP}\d", "word")
_GPU_PLACE = ((r"""cuda(?::\d+)?['"]""", "quote"), (rf"\.cuda{_SP}\({_SP}(?:#[^\n]*\n{_SP})*\d", ""), _GPU_ORDINAL)
# what TDL005's gate resolves: `cuda.FloatTensor` (any prefix: `torch.`, an alias, a
# string), `from torch.cuda import ...`, `torch.cuda as X` / `cuda as X`, a string that
# starts with "torch.cuda."
_CUDA_TYPE = ((rf"cuda{_SP}(?:\.{_SP}(?:Float|Double|Half|BFloat16|Byte|Char|Short|Int|Long|Bool)Tensor|as)\b", "word"),
              (rf"from{_SP}torch{_SP}\.{_SP}cuda{_SP}import\b", "word"), (r"torch\.cuda\.", "quote"))
# what TDL003's gate reads of processes: the identifiers of what starts them and of what
# sets up distributed work, as words (not `MaxPool2d`, `Processor`), or a rank marker
_LAUNCH_WORDS = tuple(sorted(LAUNCHERS | {"Process", "Pool", "ProcessPoolExecutor", "init_rpc", "init_process_group",
                                          "init_distributed", "init_device_mesh"}))
_MARKER_WORDS = ("RANK", "WORLD_SIZE", "SLURM_LOCALID", "local_rank", "local-rank")
# name -> (substrings that must all be there, a cheap test first; then the pattern)
# a process's GPU index as a device (`place:rank`, read as text): `.to(rank)`,
# `torch.device(local_rank)`, `device=args.gpu`, `device_ids=[rank]`, across lines too
_RANK_NAME = r"(?i:(?:[\w.]*\.)?(?:local_?rank|rank|device_id|gpu(?:_id)?|local_gpu)\b)"
_RANK_DEVICE = ((rf"\.to\(\s*{_RANK_NAME}", ""),
                (rf"device(?:\(\s*|(?:_ids)?\s*=\s*[\[(]?\s*){_RANK_NAME}", "word"),
                (rf"(?:map_location|output_device)\s*=\s*[\[(]?\s*{_RANK_NAME}", "word"))
# the words of `_RANK_NAME`, in the cases code spells them: one must occur before the pattern runs
_RANK_WORDS = ("rank", "Rank", "RANK", "gpu", "Gpu", "GPU", "device_id", "Device_id", "DEVICE_ID")


def _rank_device(data) -> bool:
    """``_RANK_DEVICE`` in the text, tried only where one of its words occurs (most texts
    have none: no regex scan of them)."""
    kind = type(data)
    words = _RANK_WORDS if kind is str else tuple(w.encode() for w in _RANK_WORDS)
    return any(w in data for w in words) and _led_by_literal(_RANK_DEVICE_RE, data)


def _compiled(patterns: Sequence[Tuple[str, str]]) -> Tuple[Tuple[Dict[type, "re.Pattern"], str], ...]:
    """Each (pattern, what precedes it) compiled for str and for bytes."""
    return tuple(({str: re.compile(pattern), bytes: re.compile(pattern.encode())}, before)
                 for pattern, before in patterns)


_RANK_DEVICE_RE = _compiled(_RANK_DEVICE)
_TESTS_RE = {name: ({str: words, bytes: tuple(w.encode() for w in words)}, _compiled(patterns))
             for name, words, patterns in (
                 ("bare-cuda", (".cuda",), (_BARE_CUDA,)),
                 ("gpu-use", ("cuda",), (_BARE_CUDA, *_GPU_PLACE)),
                 ("gpu-ordinal", ("device",), (_GPU_ORDINAL,)),
                 ("cuda-type", ("cuda", "Tensor"), _CUDA_TYPE))}
_QUOTES = {str: ("'", '"'), bytes: (b"'", b'"')}


def _led_by_literal(patterns, data) -> bool:
    """Whether one of ``patterns`` (see ``_compiled``) matches ``data`` (str or bytes)
    where what precedes the match is as the pattern asks: anything (``""``), no
    identifier character (``"word"``), a quote (``"quote"``)."""
    kind = type(data)
    for compiled, before in patterns:
        for m in compiled[kind].finditer(data):
            k = m.start()
            if (not before or (before == "quote" and data[k - 1:k] in _QUOTES[kind])
                    or (before == "word" and not _is_word_char(data[k - 1:k] if k else data[:0]))):
                return True
    return False


def _load_reference(data) -> bool:
    """Whether the text may reach ``torch.load`` (``jit.load``, ``load_state_dict_from_url``)
    at all: the word ``load`` after a dot (``torch.load``, ``th . load``, across a line
    break) or in an import list (``from torch import (jit, load)``, comments allowed).
    Not ``load_state_dict``, ``download``, ``def load(``: most torch files only have those;
    nor ``json.load``, ``np.load``, ``Builder().load()``: what stands before the dot must
    be able to be torch (``torch.hub.load`` loads a model: ``hub`` only before
    ``load_state_dict_from_url``); nor ``from mmengine.fileio import load``; nor a call
    given ``map_location=``, nor one in a comment or a doctest."""
    kind = type(data)
    dot, space, imp = (".", " \t\r\n\\", "import") if kind is str else (b".", b" \t\r\n\\", b"import")
    text = None  # the data as str (ASCII in place), decoded once at the first word `load`
    for m in _LOAD[kind].finditer(data):
        k = m.start() - 1
        before = data[k:k + 1]
        if k >= 0 and (_WORD.match(before if kind is str else before.decode("latin-1"))):
            continue  # `download`, `reload`: not the word `load`
        if text is None:
            text = data if kind is str else data.decode("latin-1")
        if _not_code(text, m.start()):
            continue
        while k >= 0 and data[k:k + 1] in space:
            k -= 1
        if k >= 0 and data[k:k + 1] == dot:
            receivers = _TORCH_RECEIVERS if m.end() - m.start() > 4 else _LOAD_RECEIVERS
            if _may_be_torch(text, k, receivers) and not _maps_location(text, m.end()):
                return True
        at = data.rfind(imp, 0, m.start())
        if (at >= 0 and _IMPORT_LIST[kind].fullmatch(_COMMENT[kind].sub(data[:0], data[at + 6:m.start()]))
                and _may_import_from_torch(text, at)):
            return True
    return False


_FROM_MODULE = re.compile(r"\bfrom[ \t\\\r\n]+([\w.]+)[ \t\\\r\n]+$")


def _may_import_from_torch(text: str, at: int) -> bool:
    """Whether the ``import`` at ``text[at]`` may import from torch: not ``from
    mmengine.fileio import load`` (a module that is not torch's, spelled out before it)."""
    m = _FROM_MODULE.search(text, max(0, at - 300), at)
    return m is None or m.group(1).split(".")[0] == "torch"


# the names that ``torch.load``, ``torch.jit.load``, ``torch.hub.load_state_dict_from_url``
# and ``torch.serialization.load`` are reached through, as the gate resolves them: an
# import binds one of these, or an alias the text spells out
_TORCH_RECEIVERS = frozenset({"torch", "jit", "hub", "serialization"})
_LOAD_RECEIVERS = _TORCH_RECEIVERS - {"hub"}  # (`torch.hub.load` loads a model, not a checkpoint)
_ASCII_WORD = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_")
_WS = r"(?:[ \t]|\\\r?\n)"  # a space within a statement (a backslash continues the line)


def _not_code(text: str, at: int) -> bool:
    """Whether ``text[at]`` certainly is not code: after a ``#`` on a line with no quote
    before it (a comment, or a line of a multi-line string: either way no code), or on a
    line that starts with a doctest prompt (``>>> x = torch.load(f)`` in a docstring:
    ``>>>`` is never valid code)."""
    line = text[text.rfind("\n", 0, at) + 1:at]
    if "#" in line and "'" not in line and '"' not in line:
        return True
    return line.lstrip().startswith(">>>")


_MAP_LOCATION = re.compile(r"map_location[ \t]*=(?!=)")
_SCAN = 4096  # characters of a call's arguments read before giving up


def _maps_location(text: str, at: int) -> bool:
    """Whether ``text[at:]`` is the argument list of a call given ``map_location=`` (at its
    own level, not in a nested call): ``(path, map_location="cpu")``. False wherever
    that is not certain: no call, an f-string or triple-quoted string, a long or
    unterminated list. Strings and comments are skipped, so a ``)`` in them ends
    nothing. (The common call in a loader that already maps: it cannot fire TDL006.)"""
    n = len(text)
    j = at
    while j < n and text[j] in " \t\\":
        j += 1
    if j >= n or text[j] != "(":
        return False
    depth, found, end = 0, False, min(n, j + _SCAN)
    while j < end:
        ch = text[j]
        if ch in "([{":
            depth += 1
        elif ch in ")]}":
            depth -= 1
            if depth == 0:
                return found
        elif ch == "#":
            j = text.find("\n", j)
            if j < 0:
                return False
            continue
        elif ch in "'\"":
            if text.startswith(ch * 3, j) or "f" in text[max(at, j - 2):j].lower():
                return False  # (an f-string's fields may hold anything)
            close = j + 1
            while close < end and text[close] != ch:
                if text[close] in "\\\n":
                    return False  # an escape, or a line ends inside: not worth reading
                close += 1
            j = close + 1
            continue
        elif depth == 1 and ch == "m" and _MAP_LOCATION.match(text, j) and not _WORD.match(text[j - 1]):
            found = True
        j += 1
    return False


def _may_be_torch(text: str, dot: int, receivers: FrozenSet[str] = _TORCH_RECEIVERS) -> bool:
    """Whether the receiver ending before ``text[dot]`` (a ``.``) may resolve to torch or
    one of its loader modules: a torch name (``torch``, ``jit``, ``hub``,
    ``serialization``), or a name the text imports from torch under an alias (``import
    torch as th``, ``from torch import jit as J``). Anything but a plain ASCII word before
    the dot (a bracket: ``(torch).load``; a non-ASCII name) may be. Bytes are read as
    latin-1: every ASCII character stays in place."""
    k = dot - 1
    while k >= 0 and text[k] in " \t\r\n\\":
        k -= 1
    end = k + 1
    while k >= 0 and text[k] in _ASCII_WORD:
        k -= 1
    word = text[k + 1:end]
    if not word and end > 0 and text[end - 1] == ")":
        return not _is_call(text, end - 1)  # `Builder().load()`: a call's result is no module
    if not word or word[0].isdigit() or (k >= 0 and not text[k].isascii()):
        return True
    if word in receivers:
        return True
    name = re.escape(word)
    if not re.search(rf"\bas{_WS}+{name}\b", text):
        return False  # never an alias: the common case (json.load, pickle.load), and cheap
    dotted = rf"torch(?:{_WS}*\.{_WS}*\w+)*"
    return bool(re.search(rf"\b{dotted}{_WS}+as{_WS}+{name}\b", text) or re.search(
        rf"\bfrom{_WS}+{dotted}{_WS}+import{_WS}*(?:\([\s\S]*?|(?:[^\n;\\]|\\\r?\n)*?)\bas\s+{name}\b", text))


def _is_call(text: str, close: int) -> bool:
    """Whether the ``)`` at ``text[close]`` certainly closes a call's arguments (``f(x)``,
    ``a.b()``, ``f()()``), not a parenthesised expression (``(torch)``): the bracket that
    opens it follows a name or a closing bracket. Unsure (False) where a string or a
    comment stands between, or the opening bracket is more than 1,000 characters back."""
    depth = 0
    for k in range(close, max(-1, close - 1000), -1):
        ch = text[k]
        if ch in "'\"#":
            return False
        if ch in ")]}":
            depth += 1
        elif ch in "([{":
            depth -= 1
            if depth == 0:
                j = k - 1
                while j >= 0 and text[j] in " \t":
                    j -= 1
                return j >= 0 and (text[j] in _NAME_OR_CLOSE or not text[j].isascii()) and not _keyword_before(text, j)
    return False


def _keyword_before(text: str, end: int) -> bool:
    """Whether the identifier ending at ``text[end]`` is a keyword (``return (torch).load``:
    its bracket opens an expression, not a call)."""
    k = end
    while k >= 0 and text[k] in _ASCII_WORD:
        k -= 1
    return keyword.iskeyword(text[k + 1:end + 1])


def _data_parallel(data) -> bool:
    """The word ``DataParallel`` (not inside ``DistributedDataParallel``): the gate of
    TDL201 resolves that identifier."""
    word = "DataParallel" if type(data) is str else b"DataParallel"
    return word in data and _DATA_PARALLEL[type(data)].search(data) is not None  # (the substring test is fast)


# what TDL103's gate reads (``expr:``): a call of `device(`, `device_of(` or `device_index(`
# (a literal first), and the imports that bind one by its name
_DEVICE_CALL = re.compile(r"device(?:_of|_index)?[ \t]*(?:\\\r?\n[ \t]*)*\(")
_IMPORT_WORD = re.compile(r"import\b")
_DEVICE_NAME = re.compile(r"\bdevice(?:_of|_index)?\b(\s+as\b)?")
_DEVICE_RENAMED = re.compile(r"device(?:_of|_index)?[ \t\\\r\n]+as\b")  # (then read as an import)
_TO_LINE_END = re.compile(r"(?:[^\n\\]|\\\r?\n|\\.)*")
# what may stand, on its line, before a call that starts a statement: nothing (after
# spaces and opening brackets), a `;` or a compound statement's `:`; else something
# that makes the call part of an expression (`with`, `x =`, `return`, `f(a, `)
_STATEMENT_BEFORE = ("", ";", ":")
_NAME_OR_CLOSE = _ASCII_WORD | frozenset(")]}'\"")


def _device_context(data) -> bool:
    """Whether a call of ``device``, ``device_of`` or ``device_index`` (``torch.cuda.device
    (1)``, through any dotted chain) may stand as a statement of its own, as TDL103's gate
    (``expr:``) reads it: the chain starts the line's code, or follows a ``;`` or a
    ``:``. Not ``with torch.cuda.device(1):``, ``d = torch.device("cuda")``,
    ``torch.cuda.device_count()``, one in a comment or doctest, nor a bare ``device(``
    where no import binds that name (``device (str): ...`` in a docstring). An import
    that renames one (``from torch.cuda import device as cuda_device``) lets any text
    through."""
    if (b"device" if type(data) is bytes else "device") not in data:
        return False
    text = data if type(data) is str else data.decode("latin-1")  # (ASCII stays in place)
    imported = None  # whether an import binds one of the names: None until a bare call asks
    if _DEVICE_RENAMED.search(text) is not None:
        imported = _imports_device_names(text)
        if imported == "renamed":
            return True
    for m in _DEVICE_CALL.finditer(text):
        k = m.start()
        if k and _is_word_char(text[k - 1]):
            continue  # `cuda_device(`, `get_device(`: another name
        if _not_code(text, k):
            continue
        start = _chain_start(text, k)
        if start == k:  # a bare name: only an import binds it
            if imported is None:
                imported = _imports_device_names(text)  # (never "renamed": tested above)
            if not imported:
                continue
        line = text[text.rfind("\n", 0, start) + 1:start].rstrip(" \t(")
        if line[-1:] in _STATEMENT_BEFORE:
            return True
    return False


def _imports_device_names(text: str):
    """Whether an import statement's list names ``device``, ``device_of`` or
    ``device_index``: ``"renamed"`` when one takes another name (``device as d``: any call
    may be it), True when one keeps its own, else False. An import list is read to its
    closing parenthesis or to the end of its line (comments dropped first)."""
    found = False
    for m in _IMPORT_WORD.finditer(text):
        k = m.start()
        if k and _is_word_char(text[k - 1]):
            continue
        rest = _COMMENT[str].sub("", text[m.end():m.end() + 4096])
        body = rest.lstrip(" \t\\\r\n")
        if body.startswith("("):
            close = body.find(")")
            names = body if close < 0 else body[:close]
        else:
            names = _TO_LINE_END.match(rest).group()
        for name in _DEVICE_NAME.finditer(names):
            if name.group(1):
                return "renamed"
            found = True
    return found


def _chain_start(text: str, at: int) -> int:
    """Where the dotted chain that ends with the name at ``text[at]`` starts (``torch .
    cuda . device``, across backslash continuations): what stands before a dot is taken
    as one more name (identifier characters, and closing brackets and quotes: ``f().``,
    ``x[0].``, which no import resolves; the line's text before it says what it is)."""
    start = at
    while True:
        k = _skip_spaces_back(text, start - 1)
        if k < 0 or text[k] != ".":
            return start
        k = _skip_spaces_back(text, k - 1)
        end = k
        while k >= 0 and (text[k] in _NAME_OR_CLOSE or not text[k].isascii()):
            k -= 1
        if k == end:  # `).device(`, `].device(`: no name to take; stop at the dot's left
            return end + 1
        start = k + 1


def _skip_spaces_back(text: str, k: int) -> int:
    """The last index at or before ``k`` that is not a space, a tab or a backslash
    continuation (a plain line break stops it)."""
    while k >= 0:
        ch = text[k]
        if ch in " \t":
            k -= 1
        elif ch == "\n" and text[k - 1:k] == "\\":
            k -= 2
        elif ch == "\n" and text[k - 2:k] == "\\\r":
            k -= 3
        else:
            break
    return k


def _rank_marker(data) -> bool:
    """What marks a script launched once per rank (``names.RANK_MARKERS``), anywhere in
    the text: the analysis reads it from code text, comments included. (Its words
    first: the pattern starts with a class and so tries every position of the text.)"""
    kind = type(data)
    markers = _MARKER_WORDS if kind is str else tuple(w.encode() for w in _MARKER_WORDS)
    return any(m in data for m in markers) and _RANK[kind].search(data) is not None


def _rank_launch(data) -> bool:
    """What TDL003's gate reads of processes (``target:Process``, ``call:spawn``, an
    ``init_process_group``, ``text:rank``): one of ``_LAUNCH_WORDS`` as a whole word, or a
    rank marker. Found by substring, then its edges checked: no regex scan of the text.
    A word in a comment or a doctest is no identifier (``# 2. Process the logits``)."""
    kind = type(data)
    words = _LAUNCH_WORDS if kind is str else tuple(w.encode() for w in _LAUNCH_WORDS)
    text = None  # the data as str (ASCII in place), decoded at the first whole word
    for w in words:
        i = data.find(w)
        while i >= 0:
            end = i + len(w)
            before = data[i - 1:i] if i else (b"" if kind is bytes else "")
            after = data[end:end + 1]
            if not _is_word_char(before) and not _is_word_char(after):
                if text is None:
                    text = data if kind is str else data.decode("latin-1")
                if not _not_code(text, i):
                    return True
            i = data.find(w, end)
    return _rank_marker(data)


def _is_word_char(c) -> bool:
    """Whether the one character (str or bytes, maybe empty) may be part of an identifier."""
    if not c:
        return False
    ch = c if type(c) is str else chr(c[0])
    return ch == "_" or ch.isalnum() or ord(ch) > 127


def _searcher(name: str) -> Callable[..., bool]:
    """The text test ``name`` of ``_TESTS_RE``, on str or bytes: substrings first (most
    texts stop there), then its patterns."""
    words, patterns = _TESTS_RE[name]

    def test(data) -> bool:
        return all(w in data for w in words[type(data)]) and _led_by_literal(patterns, data)

    test.__name__ = f"_{name.replace('-', '_')}"
    return test


# what TDL009's gate reads (``drop:``): a move called on a chain of names, attributes and
# items, at the start of a statement (a literal first: each pattern jumps from one to the next)
_MOVE_WORDS = {str: (".cuda", ".to"), bytes: (b".cuda", b".to")}
_MOVE_CALLS = tuple(re.compile(rf"\.{name}{_SP}\(") for name in ("cuda", "to"))
# what `.to(` may be given that moves nothing TDL009 reads (``words._moves_to_device``): a
# dtype of torch's (an alias's) first, the CPU first, a dtype alone
_NO_MOVE = re.compile(rf"""\s*(?:[A-Za-z_]\w*\.(?:{'|'.join(sorted(DTYPE_NAMES))})\s*[,)]"""
                      r"""|(['"])cpu\1\s*[,)]|dtype\s*=\s*[\w.]*\s*\))""")
_OPENER = {")": "(", "]": "[", "}": "{"}


def _dropped_move(data) -> bool:
    """Whether a ``.cuda(`` or ``.to(`` call may be a whole statement, as TDL009's gate
    (``drop:``) reads it: what stands before the dot is a chain of names, attributes and
    bracketed parts (``x``, ``self.mean``, ``state["avg"]``, ``f(a)``), parentheses
    aside, on its line or continued from the line above (``(x\\n    .to(d))``), and before
    that chain a new statement starts: the line's indentation where the line above does
    not leave a bracket or a list open (ends in ``(``, ``[``, ``{`` or ``,``), a ``;``, or
    a compound statement's ``:`` (not one after a bracket the line opened: a dict's
    ``{k: v.to(d)}``, a lambda's or a slice's). Not ``y = x.cuda()``, ``f(x.to(d))``,
    ``return (x).cuda()``, an item of a list written over several lines, one in a comment;
    nor a ``.to(`` given a dtype of torch's first or alone, or the CPU first. A bracketed
    part that is not closed in the text, or holds a string over several lines, is not
    read: it lets the text through."""
    kind = type(data)
    if not any(w in data for w in _MOVE_WORDS[kind]):
        return False
    text = data if kind is str else data.decode("latin-1")  # (ASCII stays in place)
    for pattern in _MOVE_CALLS:
        for m in pattern.finditer(text):
            k = m.start()
            if _not_code(text, k) or (text[k + 1] == "t" and _NO_MOVE.match(text, m.end())):
                continue
            start = _receiver_start(text, k)
            if start == k:  # nothing before the dot on its line: a chain from the line above, or no receiver
                j = _skip_spaces_back(text, k - 1)
                end = _previous_code_end(text, k) if j < 0 or text[j] == "\n" else -1
                if end < 0 or not (_is_word_char(text[end]) or text[end] in ")]"):
                    continue
                start = _receiver_start(text, end + 1)
            if start is None or _starts_statement(text, start):
                return True
    return False


def _receiver_start(text: str, dot: int) -> Optional[int]:
    """Where the chain of names, attributes and bracketed parts that ends just before
    ``text[dot]`` starts (``dot`` itself when none ends there); None where a bracketed
    part is not closed in the text or holds a ``#`` or an unmatched quote (not read). A
    name stands before a bracketed part only right against it (``f(a)``, ``x[i]``; not
    ``return (x)``)."""
    j = _skip_spaces_back(text, dot - 1)
    start = dot
    while j >= 0:
        ch = text[j]
        if ch in _OPENER:  # a bracketed part: back to its opener
            depth = 0
            while j >= 0:
                c = text[j]
                if c == "#":
                    return None
                if c == "\n":  # onto the line before: its comment is no code
                    begin = text.rfind("\n", 0, j) + 1
                    cut = _comment_start(text, begin, j)
                    if cut >= 0:
                        j = cut
                elif c in "'\"":  # a string on the line: back over it
                    j = text.rfind(c, text.rfind("\n", 0, j) + 1, j)
                    if j < 0:
                        return None
                elif c in _OPENER:
                    depth += 1
                elif c in "([{":
                    depth -= 1
                    if depth == 0:
                        break
                j -= 1
            if j < 0:
                return None
            start = j
            if j and _is_word_char(text[j - 1]) or text[j - 1:j] in _OPENER:
                j -= 1  # `f(a)`, `x[i][j]`: more of the chain right before it
                continue
            return start
        if _is_word_char(ch):
            while j >= 0 and _is_word_char(text[j]):
                j -= 1
            start = j + 1
            j = _skip_spaces_back(text, j)
            if j >= 0 and text[j] == ".":
                j = _skip_spaces_back(text, j - 1)
                continue
            return start
        return start
    return start


def _comment_start(text: str, begin: int, end: int) -> int:
    """Where the comment of the line ``text[begin:end]`` starts (its strings skipped), or -1."""
    if "#" not in text[begin:end]:
        return -1
    quote = ""
    for k in range(begin, end):
        ch = text[k]
        if quote:
            if ch == quote:
                quote = ""
        elif ch in "'\"":
            quote = ch
        elif ch == "#":
            return k
    return -1


def _starts_statement(text: str, start: int) -> bool:
    """Whether a statement may start at ``text[start]`` (parentheses before it aside): see
    ``_dropped_move``."""
    j = _skip_spaces_back(text, start - 1)
    while j >= 0 and text[j] == "(":  # `(x).cuda()`, `(x\n .cuda())`: a parenthesized statement
        j = _skip_spaces_back(text, j - 1)
    if j < 0 or text[j] == ";":
        return True
    if text[j] == "\n":
        line = j + 1
    elif text[j] == ":":
        line = text.rfind("\n", 0, j) + 1
        if _opens(text[line:j]):
            return False  # `{k: v.to(d)}`, `f(lambda: x.cuda())`, `x[:, i.to(d)]`
    else:
        return False
    end = _previous_code_end(text, line)
    return end < 0 or text[end] not in "([{,"


def _previous_code_end(text: str, at: int) -> int:
    """The index of the last code character on the lines before the one ``text[at]`` is on
    (blank lines and comment lines skipped, a comment cut off where its line has no
    quote); -1 where there is none."""
    stop = text.rfind("\n", 0, at)
    while stop > 0:
        begin = text.rfind("\n", 0, stop) + 1
        line = text[begin:stop]
        if "#" in line and "'" not in line and '"' not in line:
            line = line[:line.index("#")]
        code = line.rstrip(" \t\r")
        if code:
            return begin + len(code) - 1
        stop = begin - 1
    return -1


def _opens(line: str) -> bool:
    """Whether ``line`` leaves a bracket open (strings on it skipped)."""
    depth, quote = 0, ""
    for ch in line:
        if quote:
            if ch == quote:
                quote = ""
        elif ch in "'\"":
            quote = ch
        elif ch in "([{":
            depth += 1
        elif ch in ")]}":
            depth -= 1
    return depth > 0


# str or bytes -> whether a rule may fire, for what a substring cannot pin down: a bare
# `.cuda()` (TDL001, TDL002, TDL004), a GPU use and what starts processes (TDL003: bare or
# named; launchers, markers), a typed CUDA tensor (TDL005)
TEXT_TESTS: Dict[str, Callable[..., bool]] = {"load": _load_reference, "rank": _rank_marker,
                                              "data-parallel": _data_parallel, "rank-launch": _rank_launch,
                                              "rank-device": _rank_device, "device-context": _device_context,
                                              "dropped-move": _dropped_move,
                                              **{name: _searcher(name) for name in _TESTS_RE}}
# how many substrings each text test looks for in a text that passes none (one for
# one pattern): what it costs the prefilter beside a plain substring (``catalogue._plan``)
TEXT_TEST_SCANS: Dict[str, int] = {"load": 1, "rank": len(_MARKER_WORDS), "data-parallel": 1,
                                   "rank-launch": len(_LAUNCH_WORDS) + len(_MARKER_WORDS),
                                   "rank-device": len(_RANK_WORDS), "device-context": 1, "dropped-move": 2,
                                   **{name: len(words[str]) for name, (words, _) in _TESTS_RE.items()}}


# the fields of each node type that may hold nodes a gate reads: not the expression
# contexts (`Load`, `Store`) nor the operators (read from their parent: `BinOp.op`), nor
# plain values (identifiers, constants' values); filled per type as the walk meets it
_CHILD_FIELDS: Dict[type, Tuple[str, ...]] = {}
_SKIPPED_FIELDS = frozenset({"ctx", "op", "ops", "id", "attr", "name", "asname", "arg", "module", "kind",
                             "type_comment", "level", "conversion"})


def walk(tree: ast.AST) -> Iterable[ast.AST]:
    """Every node under ``tree`` (itself included) but contexts and operators, breadth
    first as ``ast.walk``: 1.8x as fast on the benchmark corpus (``ast.walk`` builds two
    generators per node to find its children, and a third of its nodes are contexts and
    operators)."""
    todo = [tree]
    fields = _CHILD_FIELDS
    node_type, list_type = ast.AST, list
    i = 0
    while i < len(todo):
        node = todo[i]
        i += 1
        yield node
        kind = type(node)
        names = fields.get(kind)
        if names is None:
            names = fields[kind] = tuple(f for f in kind._fields if f not in _SKIPPED_FIELDS)
        for name in names:
            value = getattr(node, name, None)
            if type(value) is list_type:
                todo.extend(v for v in value if isinstance(v, node_type))
            elif isinstance(value, node_type):
                todo.append(value)


class CodeWords:
    """The tokens of one module's code (see the module docstring)."""

    __slots__ = ("called", "names", "strings", "bare", "placed", "ranked", "cpu_help", "factor", "_imports", "_ids",
                 "_attributes", "_quals", "_text", "_statements", "_exprs", "_unmapped", "_call_quals", "_tree",
                 "_structural", "_drops")

    def __init__(self, tree: ast.AST, text: Optional[str] = None):
        called: Set[str] = set()
        names: Set[str] = set()
        strings: Set[str] = set()
        ids: Set[str] = set()  # the bare names (``Name`` nodes), for qualified names
        attributes: List[ast.Attribute] = []
        imports: List[ast.AST] = []
        bare: Set[str] = set()
        bare_cuda = 0  # bare `.cuda()` calls: those all inside `cuda()` overrides pass no gate
        overrides: List[ast.AST] = []  # the classes' own `cuda()` methods
        statements: List[ast.AST] = []  # the functions of calls that are statements
        exprs: List[ast.AST] = []  # the functions of calls that are whole expression statements
        drops: List[ast.Call] = []  # `.cuda()` / `.to()` calls that are whole expression statements
        unmapped: List[Tuple[ast.AST, int]] = []  # calls without map_location: (function, positionals)
        placed = False  # a GPU placement with literals (``place:cuda``)
        ranked = False  # a rank's index as a device (``place:rank``)
        cpu_help = False  # a `help=` string that names the CPU (``help~cpu``)
        factors: Set[str] = set()  # names multiplied or divided by; "()" for a count call so used
        counts: Set[str] = {"()"}  # names bound to a count call (``factor:count``)
        held: Dict[str, List[ast.AST]] = {}  # name -> the functions of calls it is bound to
        asserted: Set[str] = set()  # names an assertion tests alone
        for node in walk(tree):  # the one walk: qualified names are resolved from what it keeps
            kind = type(node)
            if kind is ast.Name:
                ids.add(node.id)  # type: ignore[attr-defined]
            elif kind is ast.Attribute:
                names.add(node.attr)  # type: ignore[attr-defined]
                attributes.append(node)  # type: ignore[arg-type]
            elif kind is ast.Call:
                func = node.func  # type: ignore[attr-defined]
                last = _last(func)
                if last:
                    called.add(last)
                args, keywords = node.args, node.keywords  # type: ignore[attr-defined]
                if not placed:
                    placed = _places_on_gpu(last, args, keywords)
                if not ranked:
                    ranked = _rank_as_device(last, args, keywords)
                if not cpu_help:
                    cpu_help = any(k.arg == "help" and _names_cpu(k.value) for k in keywords)
                if any(type(a) is ast.Starred for a in args) or any(k.arg is None for k in keywords):
                    continue  # *args / **kwargs may carry anything
                if type(func) is ast.Attribute and _no_device(args, keywords):
                    bare.add(last)
                    bare_cuda += last == "cuda"
                if not any(k.arg == "map_location" for k in keywords):
                    unmapped.append((func, len(args)))
            elif kind is ast.BinOp:
                if type(node.op) in _FACTOR_OPS:  # type: ignore[attr-defined]
                    for side in (node.left, node.right):  # type: ignore[attr-defined]
                        if type(side) is ast.Name:
                            factors.add(side.id)
                        elif type(side) is ast.Call and _last(side.func) == "device_count":
                            factors.add("()")
            elif kind is ast.Assign:
                targets, value = node.targets, node.value  # type: ignore[attr-defined]
                if len(targets) == 1 and type(targets[0]) is ast.Name and type(value) is ast.Call:
                    if _last(value.func) == "device_count":
                        counts.add(targets[0].id)
                    held.setdefault(targets[0].id, []).append(value.func)
            elif kind is ast.Expr or kind is ast.Assert:
                value = node.value if kind is ast.Expr else node.test  # type: ignore[attr-defined]
                if type(value) is ast.Call:
                    statements.append(value.func)  # type: ignore[attr-defined]
                    if kind is ast.Expr:
                        exprs.append(value.func)  # type: ignore[attr-defined]
                        if type(value.func) is ast.Attribute and value.func.attr in _MOVE_METHODS:  # type: ignore
                            drops.append(value)
                elif kind is ast.Assert:  # `assert use_cuda` (`is True`, `== True`): through a name
                    if (type(value) is ast.Compare and len(value.ops) == 1 and type(value.ops[0]) in (ast.Is, ast.Eq)
                            and type(value.comparators[0]) is ast.Constant and value.comparators[0].value is True):
                        value = value.left
                    if type(value) is ast.Name:
                        asserted.add(value.id)
            elif kind is ast.If:
                test = node.test  # type: ignore[attr-defined]
                if type(test) is ast.UnaryOp and type(test.op) is ast.Not and type(test.operand) is ast.Call:
                    statements.append(test.operand.func)
                elif type(test) is ast.UnaryOp and type(test.op) is ast.Not and type(test.operand) is ast.Name:
                    asserted.add(test.operand.id)  # `if not use_cuda:` (through a name, as an assertion)
                elif type(test) is ast.Call and node.orelse:  # type: ignore[attr-defined]
                    statements.append(test.func)  # `elif torch.cuda.is_available(): ... else: sys.exit(1)`
            elif kind is ast.Constant:
                value = node.value  # type: ignore[attr-defined]
                if type(value) is str and len(value) <= _LONGEST:
                    strings.add(value)
            elif kind is ast.alias:
                imported = node.name.rpartition(".")[2]  # type: ignore[attr-defined]
                names.add(imported)
                if node.asname:  # type: ignore[attr-defined]
                    names.add(node.asname)  # type: ignore[attr-defined]
            elif kind is ast.Import or kind is ast.ImportFrom:
                imports.append(node)
            elif kind is ast.keyword:
                if node.arg:  # type: ignore[attr-defined]
                    names.add(node.arg)  # type: ignore[attr-defined]
            elif kind in (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef):
                names.add(node.name)  # type: ignore[attr-defined]
                if kind is ast.ClassDef:
                    overrides.extend(m for m in node.body  # type: ignore[attr-defined]
                                     if type(m) in (ast.FunctionDef, ast.AsyncFunctionDef) and m.name == "cuda")
            elif kind is ast.arg:
                names.add(node.arg)  # type: ignore[attr-defined]
        names |= ids
        for name in asserted & set(held):  # an assertion's (or `if not`'s) test through a name (``stmt:``)
            statements.extend(held[name])
        self.called: FrozenSet[str] = frozenset(called)
        self.names: FrozenSet[str] = frozenset(names)
        self.strings: FrozenSet[str] = frozenset(strings)
        if bare_cuda and overrides and _bare_cuda_calls(overrides) == bare_cuda:
            bare.discard("cuda")  # each places where its caller asked (``devices.in_cuda_override``)
        self.bare: FrozenSet[str] = frozenset(bare)
        self.placed = placed
        self.ranked = ranked
        self.cpu_help = cpu_help
        self.factor = bool(factors & counts)
        self._imports, self._ids, self._attributes = imports, ids, attributes
        self._statements, self._exprs, self._unmapped = statements, exprs, unmapped
        self._drops = drops
        self._quals: Optional[FrozenSet[str]] = None
        self._call_quals: Dict[str, FrozenSet[str]] = {}
        self._text = text  # None: text tests cannot rule anything out
        self._tree: Optional[ast.AST] = tree  # for the structural tokens, asked for last
        self._structural: Dict[str, bool] = {}  # token -> its answer, once asked

    @property
    def quals(self) -> FrozenSet[str]:
        """Every qualified name a name or attribute chain may resolve to (computed on
        first use: only rules that resolve names ask)."""
        if self._quals is None:
            self._quals = _qualnames(self._imports, self._ids, self._attributes)
            self._attributes = []  # kept only for this
        return self._quals

    def has(self, token: str) -> bool:
        if token.startswith("call:"):
            return token[5:] in self.called
        if token.startswith("name:"):
            return token[5:] in self.names
        if token.startswith("name~"):
            return any(token[5:] in n for n in self.names)
        if token.startswith("qual:"):
            return token[5:] in self.quals
        if token.startswith("bare:"):
            return token[5:] in self.bare
        if token == "place:cuda":
            return self.placed
        if token == "place:rank":
            return self.ranked
        if token == "help~cpu":
            return self.cpu_help
        if token == "factor:count":
            return self.factor
        if token in _STRUCTURAL:
            found = self._structural.get(token)
            if found is None:  # (no tree: a probe, which cannot rule anything out)
                found = self._structural[token] = _STRUCTURAL[token](self) if self._tree is not None else True
            return found
        if token.startswith("stmt:"):
            return token[5:] in self._quals_of("stmt", self._statements)
        if token.startswith("expr:"):
            return token[5:] in self._quals_of("expr", self._exprs)
        if token.startswith("drop:"):
            held = [c.func.value for c in self._drops  # type: ignore[attr-defined]
                    if c.func.attr == token[5:] and _held_key(c.func.value) is not None  # type: ignore[attr-defined]
                    and (token != "drop:to" or _moves_to_device(c))]
            if not held or self._tree is None:
                return bool(held)  # (no tree: a probe, which cannot rule anything out)
            bound = self._structural.get("drop:bound")
            if bound is None:
                bound = self._structural["drop:bound"] = _maybe_tensors(self._tree)  # type: ignore[assignment]
            return any(_held_key(r) in bound for r in held)  # type: ignore[operator]
        if token.startswith("nomap@"):
            most, _, qual = token[6:].partition(":")
            return qual in self._quals_of(f"nomap@{most}", [f for f, n in self._unmapped if n <= int(most)])
        if token.startswith("str^"):
            return any(s.startswith(token[4:]) for s in self.strings)
        if token.startswith("str~"):
            return any(token[4:] in s for s in self.strings)
        if token.startswith("text:"):
            test = TEXT_TESTS.get(token[5:])
            if test is None:
                raise ValueError(f"unknown text test in gate token {token!r}")
            return self._text is None or test(self._text)
        raise ValueError(f"unknown gate token {token!r}")

    def _quals_of(self, key: str, funcs: List[ast.AST]) -> FrozenSet[str]:
        """The qualified names these call functions may resolve to (computed once per kind)."""
        if key not in self._call_quals:
            self._call_quals[key] = _qualnames(self._imports, {f.id for f in funcs if type(f) is ast.Name},  # type: ignore[attr-defined]
                                               [f for f in funcs if type(f) is ast.Attribute])  # type: ignore[misc]
        return self._call_quals[key]

    def satisfies(self, needs: Needs) -> bool:
        """Every group has one of its tokens (no groups: always)."""
        return all(any(self.has(t) for t in group) for group in needs)


def _qualnames(import_nodes: List[ast.AST], ids: Set[str], attributes: List[ast.Attribute]) -> FrozenSet[str]:
    """The qualified names the module's names and attribute chains may stand for: as
    the analysis binds imports (``import a.b`` binds ``a``; ``import a.b as x`` and
    ``from a import b as x`` bind ``x``; relative and star imports bind nothing it can
    resolve), with every import of a name tried, whatever its scope."""
    imports: Dict[str, Set[str]] = {}
    for node in import_nodes:
        if type(node) is ast.Import:
            for alias in node.names:  # type: ignore[attr-defined]
                local = alias.asname or alias.name.split(".")[0]
                imports.setdefault(local, set()).add(alias.name if alias.asname else local)
        elif node.module and not node.level:  # type: ignore[attr-defined]
            for alias in node.names:  # type: ignore[attr-defined]
                if alias.name != "*":
                    imports.setdefault(alias.asname or alias.name, set()).add(f"{node.module}.{alias.name}")  # type: ignore[attr-defined]
    if not imports:
        return frozenset()
    out: Set[str] = set()
    for name in ids & imports.keys():
        for target in imports[name]:
            out.add(canonical(target))
    for node in attributes:
        parts = []
        expr: ast.AST = node
        while type(expr) is ast.Attribute:
            parts.append(expr.attr)  # type: ignore[attr-defined]
            expr = expr.value  # type: ignore[attr-defined]
        if type(expr) is ast.Name and expr.id in imports:  # type: ignore[attr-defined]
            tail = ".".join(reversed(parts))
            for target in imports[expr.id]:  # type: ignore[attr-defined]
                out.add(canonical(f"{target}.{tail}"))
    return frozenset(out)


def _process_target(words: "CodeWords") -> bool:
    """The ``target:Process`` token (see the module docstring): a superset of what
    ``analysis.concurrency`` takes for a process's target: a class whose base is a
    ``Process`` (its ``run``), or a ``Process(...)`` call (an import or assignment alias
    included) handed a ``target`` (keyword, or second positional) that may be a function
    of this file: anything but a plain name that no ``def`` of the module binds
    (``ctx.Process(target=target_func)`` with a parameter: no function of the file)."""
    if "Process" not in words.names:
        return False
    procs = {"Process"}
    defs: Set[str] = set()
    calls: List[ast.Call] = []
    bases: List[ast.AST] = []
    for node in walk(words._tree):  # type: ignore[arg-type]
        kind = type(node)
        if kind is ast.Call:
            calls.append(node)  # type: ignore[arg-type]
        elif kind is ast.FunctionDef or kind is ast.AsyncFunctionDef:
            defs.add(node.name)  # type: ignore[attr-defined]
        elif kind is ast.ClassDef:
            bases.extend(node.bases)  # type: ignore[attr-defined]
        elif kind is ast.alias:
            if node.asname and node.name.rpartition(".")[2] == "Process":  # type: ignore[attr-defined]
                procs.add(node.asname)  # type: ignore[attr-defined]
        elif kind is ast.Assign and _last(node.value) == "Process":  # type: ignore[attr-defined]
            procs.update(t.id for t in node.targets if type(t) is ast.Name)  # type: ignore[attr-defined]
    if any(_last(base) in procs for base in bases):
        return True
    for call in calls:
        if _last(call.func) not in procs:
            continue
        if any(type(a) is ast.Starred for a in call.args) or any(k.arg is None for k in call.keywords):
            return True  # *args / **kwargs may carry a target
        target = next((k.value for k in call.keywords if k.arg == "target"), None)
        if target is None and len(call.args) > 1:
            target = call.args[1]
        if target is not None and (type(target) is not ast.Name or target.id in defs):  # type: ignore[attr-defined]
            return True
    return False


def _thread_uses_cuda(tree: ast.AST) -> bool:
    """The ``thread:cuda`` token (see the module docstring): a superset of the functions
    ``analysis.concurrency`` takes for thread targets (what a ``Thread``, an executor
    method, ``run_in_executor`` or ``to_thread`` is handed, also through ``partial`` or
    a lambda; what a class of this file or an import alias is called with; any ``run``
    method), tested for TDL104's implicit uses."""
    local: Set[str] = set()  # what may be a Thread: a class of the module, an import alias
    calls: List[ast.Call] = []
    defs: List[ast.AST] = []
    for node in walk(tree):  # one walk; the calls are read once every local name is known
        kind = type(node)
        if kind is ast.Call:
            calls.append(node)  # type: ignore[arg-type]
        elif kind is ast.FunctionDef or kind is ast.AsyncFunctionDef:
            defs.append(node)
        elif kind is ast.ClassDef:
            local.add(node.name)  # type: ignore[attr-defined]
        elif kind is ast.alias and node.asname:  # type: ignore[attr-defined]
            local.add(node.asname)  # type: ignore[attr-defined]
    handed: Set[str] = {"run"}  # a Thread subclass's run, whatever its base resolves to
    lambdas: List[ast.AST] = []
    for call in calls:
        last = _last(call.func)
        if last not in _HANDS_TO_THREADS and last not in local:
            continue
        for value in list(call.args) + [k.value for k in call.keywords]:
            for part in walk(value):  # `f`, `self.f`, `partial(f, x)`, `lambda: f(x)`
                if type(part) is ast.Name:
                    handed.add(part.id)  # type: ignore[attr-defined]
                elif type(part) is ast.Attribute:
                    handed.add(part.attr)  # type: ignore[attr-defined]
                elif type(part) is ast.Lambda:
                    lambdas.append(part)
    return any(_implicit_cuda(f) for f in lambdas) or any(
        _implicit_cuda(d) for d in defs if d.name in handed)  # type: ignore[attr-defined]


# what hands a function to a thread (or a process: a superset) in analysis.concurrency
_HANDS_TO_THREADS = EXECUTOR_METHODS | {"Thread", "Process", "spawn", "start_processes", "to_thread",
                                        "run_in_executor"}


def _implicit_cuda(fn: ast.AST) -> bool:
    """Whether a function's subtree may hold one of TDL104's implicit uses."""
    for node in walk(fn):
        kind = type(node)
        if kind is ast.Call:
            last = _last(node.func)  # type: ignore[attr-defined]
            if last == "cuda":
                return True
            args = node.args  # type: ignore[attr-defined]
            if last == "to" and args and type(args[0]) is ast.Name:
                return True
        elif kind is ast.keyword:
            if node.arg == "device" and type(node.value) is ast.Name:  # type: ignore[attr-defined]
                return True
        elif kind is ast.Constant and node.value == "cuda":  # type: ignore[attr-defined]
            return True
    return False


def _places_on_gpu(last: Optional[str], args: Sequence[ast.AST], keywords: Sequence[ast.keyword]) -> bool:
    """A call that places on a GPU named with literals (the ``place:cuda`` token): a
    superset of what ``devices.gpu_placements`` finds, whatever the function resolves to."""
    positional = [a for a in args if type(a) is not ast.Starred]
    device = next((k.value for k in keywords if k.arg == "device"), None)
    if last == "cuda":
        index = positional[0] if positional else device
        if type(index) is ast.Constant and type(index.value) is int:  # type: ignore[attr-defined]
            return True
    return (bool(positional) and _gpu_literal(positional[0])) or any(
        k.arg in ("device", "map_location") and _gpu_literal(k.value) or k.arg == "device" and _ordinal(k.value)
        for k in keywords) or any(
        k.arg == "map_location" and type(k.value) is ast.Dict and any(
            v is not None and _gpu_literal(v) for v in k.value.values) for k in keywords)  # type: ignore[attr-defined]


def _names_cpu(node: ast.AST) -> bool:
    """A string (or implicitly concatenated strings) that contains "cpu", in any case."""
    value = node.value if type(node) is ast.Constant else None  # type: ignore[attr-defined]
    return type(value) is str and "cpu" in value.lower()


_RANK_KEYWORDS = frozenset({"device", "map_location", "device_ids", "output_device"})


def _rank_as_device(last: Optional[str], args: Sequence[ast.AST], keywords: Sequence[ast.keyword]) -> bool:
    """A call whose first positional argument (of ``.to(...)`` or ``device(...)``),
    ``device=``, ``map_location=`` (a dict's values too) or DDP's
    ``device_ids=``/``output_device=`` (a list's items too) is a name or attribute called
    as a process's GPU index (the ``place:rank`` token): a superset
    of what TDL007 reads as one."""
    def rank(node: Optional[ast.AST]) -> bool:
        if type(node) in (ast.List, ast.Tuple):
            return any(rank(e) for e in node.elts)  # type: ignore[union-attr]
        if type(node) is ast.Dict:
            return any(rank(v) for v in node.values)  # type: ignore[union-attr]
        leaf = node.id if type(node) is ast.Name else node.attr if type(node) is ast.Attribute else None  # type: ignore[union-attr]
        return leaf is not None and leaf.lower() in RANK_INDEX_NAMES

    return (bool(args) and last in ("to", "device") and rank(args[0])) or any(
        k.arg in _RANK_KEYWORDS and rank(k.value) for k in keywords)


def _ordinal(node: ast.AST) -> bool:
    """A GPU's ordinal as a device: a non-negative integer (``device=0``)."""
    return type(node) is ast.Constant and type(node.value) is int  # type: ignore[attr-defined]


def _gpu_literal(node: ast.AST) -> bool:
    """``"cuda"`` or ``"cuda:N"``, or a conditional expression with one on either side."""
    if type(node) is ast.IfExp:
        return _gpu_literal(node.body) or _gpu_literal(node.orelse)  # type: ignore[attr-defined]
    value = node.value if type(node) is ast.Constant else None  # type: ignore[attr-defined]
    return type(value) is str and (value == "cuda" or (value[:5] == "cuda:" and value[5:].isdigit()))


def _no_device(args: List[ast.expr], keywords: List[ast.keyword]) -> bool:
    """No device among a call's arguments: no first positional but ``None``, no
    ``device=`` but ``None`` (what ``facts.is_bare_cuda`` accepts)."""
    def none(expr: ast.expr) -> bool:
        return type(expr) is ast.Constant and expr.value is None  # type: ignore[attr-defined]

    return (not args or none(args[0])) and all(k.arg != "device" or none(k.value) for k in keywords)


def _bare_cuda_calls(methods: List[ast.AST]) -> int:
    """How many bare ``.cuda()`` calls (as ``bare:cuda`` counts them) the methods hold,
    the functions and lambdas nested in them included, not a class nested in them (its
    own methods are no ``cuda()`` override)."""
    count = 0
    todo = list(methods)
    while todo:
        node = todo.pop()
        if type(node) is ast.Call:
            func, args, keywords = node.func, node.args, node.keywords  # type: ignore[attr-defined]
            if (type(func) is ast.Attribute and func.attr == "cuda" and _no_device(args, keywords)
                    and not any(type(a) is ast.Starred for a in args) and all(k.arg for k in keywords)):
                count += 1
        todo.extend(c for c in ast.iter_child_nodes(node) if type(c) is not ast.ClassDef)
    return count


# the tokens that walk the tree again, asked for last (after every cheaper one of a group)
_STRUCTURAL: Dict[str, Callable[["CodeWords"], bool]] = {
    "thread:cuda": lambda words: _thread_uses_cuda(words._tree),  # type: ignore[arg-type]
    "target:Process": _process_target,
}


_MOVE_METHODS = frozenset({"cuda", "to"})


def _moves_to_device(call: ast.Call) -> bool:
    """A ``.to(...)`` that may move to a device, as ``receivers.discarded_moves`` reads it:
    not one given a dtype only (``x.to(torch.float16)``, ``x.to(dtype=d)``), nor one to
    the CPU (``x.to("cpu")``, ``x.to(torch.device("cpu"))``)."""
    first = call.args[0] if call.args else next((k.value for k in call.keywords if k.arg == "device"), None)
    if first is None:
        return any(k.arg is None for k in call.keywords)  # (`**kw` may hold a device)
    if type(first) is ast.Starred:
        return True
    if type(first) is ast.Attribute and first.attr in DTYPE_NAMES and type(first.value) is ast.Name:  # type: ignore
        return False
    if type(first) is ast.Call and _last(first.func) == "device" and first.args:  # type: ignore[attr-defined]
        first = first.args[0]  # type: ignore[attr-defined]
    return not (type(first) is ast.Constant and first.value == "cpu")  # type: ignore[attr-defined]


def _held_key(expr: ast.AST) -> Optional[str]:
    """What a receiver that ``receivers.torch_kind`` may prove a tensor is bound as: a
    name (``x``, ``x[i]``) or ``self.<attr>`` (``self.mean``, ``self.buf[i]``); None for
    anything else (``args.x``, ``f(a)``), which it never proves."""
    while type(expr) is ast.Subscript:
        expr = expr.value  # type: ignore[attr-defined]
    if type(expr) is ast.Name:
        return expr.id  # type: ignore[attr-defined]
    if type(expr) is ast.Attribute and type(expr.value) is ast.Name and expr.value.id == "self":  # type: ignore
        return "self." + expr.attr  # type: ignore[attr-defined]
    return None


# what a capitalized callable makes is an object of a class (a module, a config), never a
# tensor but for torch's tensor classes and their legacy wrappers
_TENSOR_CLASS_ENDS = ("Tensor", "Parameter", "Variable")


def _maybe_tensors(tree: ast.AST) -> FrozenSet[str]:
    """The names and ``self.<attr>`` attributes (as ``_held_key`` spells them) that some
    binding of the module may make a tensor: a loop or ``with`` target, an unpacking, an
    augmented assignment, or an assignment of anything but a literal or what a
    capitalized callable makes (``model = Net()``, ``self.fc = nn.Linear(2, 2).to(d)``:
    the chain's first call decides). A superset of what ``receivers.torch_kind`` proves:
    it proves a tensor only through a binding."""
    found: Set[str] = set()
    for node in ast.walk(tree):
        kind = type(node)
        if kind is ast.Assign or kind is ast.AnnAssign or kind is ast.NamedExpr:
            value = node.value  # type: ignore[attr-defined]
            if value is None:
                continue
            targets = node.targets if kind is ast.Assign else [node.target]  # type: ignore[attr-defined]
            plain = _may_be_tensor(value)
            for target in targets:
                if type(target) in (ast.Name, ast.Attribute):
                    key = _held_key(target)
                    if key is not None and plain:
                        found.add(key)
                else:  # an unpacking, an item: any name in it
                    found.update(k for k in map(_held_key, ast.walk(target)) if k is not None)
        elif kind in (ast.For, ast.AsyncFor, ast.comprehension, ast.AugAssign):
            found.update(k for k in map(_held_key, ast.walk(node.target)) if k is not None)  # type: ignore
        elif kind is ast.withitem and node.optional_vars is not None:  # type: ignore[attr-defined]
            found.update(k for k in map(_held_key, ast.walk(node.optional_vars)) if k is not None)  # type: ignore
    return frozenset(found)


def _may_be_tensor(value: ast.AST) -> bool:
    """Not a literal, nor what a capitalized callable makes (see ``_maybe_tensors``)."""
    if type(value) in (ast.Constant, ast.List, ast.Tuple, ast.Dict, ast.Set, ast.JoinedStr, ast.Lambda):
        return False
    while type(value) is ast.Call:
        func = value.func  # type: ignore[attr-defined]
        if type(func) is ast.Attribute and type(func.value) is ast.Call:
            value = func.value  # `Net().to(d)`: the chain's first call
            continue
        name = _last(func)
        return not (name[:1].isupper() and not name.endswith(_TENSOR_CLASS_ENDS))
    return True


def _last(func: ast.AST) -> str:
    """The identifier a call's function ends in: ``a.b.c(...)`` -> ``c``."""
    if type(func) is ast.Attribute:
        return func.attr  # type: ignore[attr-defined]
    if type(func) is ast.Name:
        return func.id  # type: ignore[attr-defined]
    return ""


def check_tokens(needs: Iterable[Sequence[str]]) -> None:
    """Raise ValueError on a malformed ``needs`` (a rule's declaration is checked once)."""
    probe = CodeWords(ast.Module(body=[], type_ignores=[]))
    for group in needs:
        if not group:
            raise ValueError("an empty group of alternatives can never be satisfied")
        for token in group:
            probe.has(token)
