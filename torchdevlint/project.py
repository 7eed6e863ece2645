"""Whole-run knowledge: the classes of every file of a run, so that a receiver built from
a class of a sibling file (``from models import *``, ``from .nets import Generator``, a
package's ``__init__`` that re-exports it) is provably a torch module.

Built once per CLI run, from the class headers and imports of the files that define
classes, and
handed to every worker. It changes only how sure a fix is (its applicability), never
what is found: the flake8 plugin sees one file at a time and reports the same findings.
"""

from __future__ import annotations

import os
import re
import sys
from dataclasses import dataclass, field, replace
from functools import lru_cache
from typing import Dict, Iterable, List, Optional, Set, Tuple

from .names import canonical, is_module_constructor

# names a module key can hold, and what each class is: (is an nn.Module, defines cuda)
ClassFacts = Tuple[bool, bool]


@dataclass
class ProjectIndex:
    classes: Dict[str, Optional[ClassFacts]] = field(default_factory=dict)  # "mod.Class" -> facts
    exports: Dict[str, Set[str]] = field(default_factory=dict)  # module key -> its class names
    # names a module imports, and so re-exports (a package's `__init__`: `from .networks
    # import Generator`): "models.Generator" -> "models.networks.Generator"
    aliases: Dict[str, str] = field(default_factory=dict)
    # the files of the run that only its scripts import (through package `__init__`s too):
    # their module level runs where a script starts (a yacs configuration's defaults)
    script_modules: Set[str] = field(default_factory=set)
    imported_by_scripts: bool = False  # ... the file this copy is handed with is one (``for_file``)
    # where the run's files call the legacy constructor `torch.Tensor(...)` (path -> first
    # line), read only when a fix asks (``build_index(constructors=True)``): it followed a
    # CUDA default tensor type, and does not follow a default device (TDL005)
    legacy_constructors: Optional[Dict[str, int]] = None
    path: str = ""  # the file this copy is handed with (``for_file``)

    def fingerprint(self) -> str:
        """What the index says, as a hash: a cached whole-run result holds while it is equal."""
        import hashlib
        import json

        data = [sorted(self.classes.items()), sorted((k, sorted(v)) for k, v in self.exports.items()),
                sorted(self.script_modules), sorted((self.legacy_constructors or {}).items()),
                sorted(self.aliases.items())]
        return hashlib.sha256(json.dumps(data).encode()).hexdigest()[:16]

    def for_file(self, path: str) -> "ProjectIndex":
        """The index as the analysis of ``path`` reads it."""
        return replace(self, imported_by_scripts=path in self.script_modules, path=path)

    def module_kind(self, question: Tuple) -> Optional[str]:
        """The index's answer to a question of the analysis (``torch_kind``): 'module'
        where the class is a torch module without its own ``cuda``, else None (as with
        no index). ``question`` is ("lookup", qualified name), or ("star", the modules
        of the file's star imports, name). The whole-run pass asks the questions a
        file's analysis asked without the index again: a file that gets no other answer
        is not analysed again."""
        facts = self.star(question[1], question[2]) if question[0] == "star" else self.lookup(question[1])
        return "module" if facts is not None and facts[0] and not facts[1] else None

    def constructors_elsewhere(self) -> Optional[List[Tuple[str, int]]]:
        """The run's other files that call ``torch.Tensor(...)`` (path, line); None when
        the index did not read them."""
        if self.legacy_constructors is None:
            return None
        return sorted((p, line) for p, line in self.legacy_constructors.items() if p != self.path)

    def lookup(self, qualname: str) -> Optional[ClassFacts]:
        """Facts for ``pkg.models.Generator`` or ``.models.Generator`` (a relative import):
        matched on the longest module suffix the index knows, through the modules that
        re-export it (``from models import Generator`` of a package whose ``__init__``
        imports it)."""
        qualname = self.defining(qualname)
        if _torch_module(qualname):  # re-exported from torch (`from torch.nn import Module as Base`)
            return True, False
        key = _suffix_hit(qualname, self.classes)
        return self.classes[key] if key is not None else None

    def defining(self, qualname: str, classes: Optional[Dict[str, object]] = None) -> str:
        """``qualname`` followed through re-exports to where a class of ``classes`` (the
        index's own by default) is defined, as far as the index knows (a few hops at
        most: a cycle ends it)."""
        classes = self.classes if classes is None else classes
        for _ in range(_HOPS):
            if _suffix_hit(qualname, classes) is not None:
                return qualname
            alias = _suffix_hit(qualname, self.aliases)
            if alias is None:
                return qualname
            qualname = self.aliases[alias]
        return qualname

    def star(self, modules: Iterable[str], name: str) -> Optional[ClassFacts]:
        """Facts for ``name`` brought in by ``from <module> import *`` (a class the
        module defines, or one it imports)."""
        for module in modules:
            key = module.lstrip(".")
            parts = key.split(".")
            for i in range(len(parts)):
                suffix = ".".join(parts[i:])
                if name in self.exports.get(suffix, ()):
                    return self.classes.get(f"{suffix}.{name}")
                if f"{suffix}.{name}" in self.aliases:
                    return self.lookup(self.aliases[f"{suffix}.{name}"])
        return None



MAX_FILES = 500  # files read to index one run: the seeds' imports, and their bases' imports
MAX_DEPTH = 4  # import hops from a seed (a package `__init__` that re-exports is not one)
_HOPS = 8  # re-exports followed from a name to its class


def build_index(paths: List[str], read, seeds: Optional[List[str]] = None,
                importees: Tuple[str, ...] = (), constructors: bool = False) -> ProjectIndex:
    """The index of the classes that ``seeds`` (default: every path) can reach through
    imports among ``paths`` (``read(path)`` gives bytes, raising OSError): the modules
    they import, and the modules those import (for base classes), at most ``MAX_FILES``.

    Class headers and imports are read with regular expressions over the text: the
    index must cost far less than the check it serves (Python's parser over every file
    of a 10,000-file corpus cost 60% more time); what they miss (a multi-line base
    list) only leaves a fix unsafe.

    ``importees``: files to tell whether only the run's scripts import them (the
    index's ``script_modules``); that reads the imports of every file of the run.
    ``constructors``: find every file of the run that calls ``torch.Tensor(...)`` (all of
    them, not only what the seeds reach: a module a deeper import reaches counts too)."""
    base = os.path.commonpath([os.path.abspath(os.path.dirname(p) or ".") for p in paths]) if paths else ""
    by_key: Dict[str, List[str]] = {}
    keys_of: Dict[str, List[str]] = {}
    for path in paths:
        if path.endswith(".py"):
            keys_of[path] = _module_keys(path, base)
            for key in keys_of[path]:
                by_key.setdefault(key, []).append(path)
    texts: Dict[str, Optional[str]] = {}  # every file read, once

    def text_of(path: str) -> Optional[str]:
        if path not in texts:
            try:
                texts[path] = read(path).decode("utf-8", errors="replace")
            except OSError:
                texts[path] = None
        return texts[path]

    queue: List[Tuple[str, int]] = [(p, 0) for p in (seeds if seeds is not None else list(keys_of))]
    seen: Set[str] = set()
    aliases: Dict[str, str] = {}
    files: List[Tuple[List[str], Dict[str, str], List[Tuple[str, List[str], bool]]]] = []
    while queue and len(seen) < MAX_FILES:
        path, depth = queue.pop(0)
        if path in seen or path not in keys_of:
            continue
        seen.add(path)
        text = text_of(path)
        if text is None:
            continue
        imports = _imports(text)
        classes = _classes(text) if "class " in text else []
        if classes:
            files.append((keys_of[path], imports, classes))
        package = _package(keys_of[path][0], path)
        for local, target in imports.items():
            if local not in {c for c, _, _ in classes}:
                for key in keys_of[path]:  # two files that disagree: unknown
                    name, absolute = f"{key}.{local}", _absolute(target, package)
                    aliases[name] = absolute if aliases.get(name, absolute) == absolute else ""
        if depth >= MAX_DEPTH or (seeds is None):
            continue
        hop = 0 if os.path.basename(path) == "__init__.py" else 1  # a package's re-exports: the same hop
        for target in list(imports.values()) + _stars(text):
            for candidate in _files_for(target, keys_of[path][0], by_key):
                if candidate not in seen:
                    queue.append((candidate, depth + hop))
    # which classes are nn.Modules: from torch's own bases, through the run's classes
    raw: Dict[str, List[Tuple[List[str], bool]]] = {}
    index = ProjectIndex(aliases={k: v for k, v in aliases.items() if v})
    for keys, imports, classes in files:
        local = {c for c, _, _ in classes}
        for name, bases, own_cuda in classes:
            resolved = [_resolve(b, imports, local, keys[0]) for b in bases]
            for key in keys:
                index.exports.setdefault(key, set()).add(name)
                raw.setdefault(f"{key}.{name}", []).append((resolved, own_cuda))
    derived: Dict[str, Set[str]] = {}  # a class of the run -> the classes deriving from it
    work: List[str] = []
    for qual, defs in raw.items():
        for bases, _ in defs:
            for b in bases:
                b = index.defining(b, raw)
                if _torch_module(b):
                    work.append(qual)
                else:
                    hit = _suffix_hit(b, raw)
                    if hit is not None and hit != qual:
                        derived.setdefault(hit, set()).add(qual)
    is_module = _descendants(work, derived)
    # a class that inherits its own `cuda()` (a subclass of gpytorch's MultivariateNormalPrior) has one
    own_cuda = _descendants([q for q, defs in raw.items() if any(own for _, own in defs)], derived)
    for qual, defs in raw.items():
        facts = {(qual in is_module, own or qual in own_cuda) for _, own in defs}
        index.classes[qual] = facts.pop() if len(facts) == 1 else None  # two files disagree: unknown
    if importees:
        index.script_modules = _script_modules(importees, keys_of, by_key, lambda p: text_of(p) or "")
    if constructors:
        index.legacy_constructors = {}
        for path in keys_of:
            text = text_of(path) or ""
            hit = _LEGACY_TENSOR.search(text) if "torch.Tensor(" in text else None
            if hit is not None:
                index.legacy_constructors[path] = text.count("\n", 0, hit.start()) + 1
    return index


def _descendants(roots: List[str], derived: Dict[str, Set[str]]) -> Set[str]:
    """``roots`` and every class of the run that derives from one of them."""
    out: Set[str] = set()
    work = list(roots)
    while work:
        qual = work.pop()
        if qual not in out:
            out.add(qual)
            work.extend(derived.get(qual, ()))
    return out


# the legacy constructor, called (not `isinstance(x, torch.Tensor)`, not a comment's)
_LEGACY_TENSOR = re.compile(r"^[^#\n]*?\btorch\.Tensor\(", re.M)

# modules that no program of a run defines and that build no tensor with the legacy
# constructor: torch's own family and common packages (the standard library too)
_OUTSIDE = frozenset({
    "__future__", "torch", "torchvision", "torchaudio", "torchtext", "numpy", "scipy", "PIL", "cv2",
    "matplotlib", "pandas", "tqdm", "yaml", "h5py", "skimage", "sklearn", "six", "tensorboardX",
})


def outside_program(module: str) -> bool:
    """``module`` (as an import names it; relative ones keep their dots) cannot be one
    of the program's own: the standard library, torch, numpy ... (Python 3.9 cannot
    tell the standard library: every other name may be the program's)."""
    head = module.split(".")[0]
    return bool(head) and (head in _OUTSIDE or head in getattr(sys, "stdlib_module_names", ()))


# a script's entry point
_MAIN = re.compile(r"""^if[ \t]+(?:__name__[ \t]*==[ \t]*['"]__main__['"]|['"]__main__['"][ \t]*==[ \t]*__name__)""",
                   re.M)


def _script_modules(targets: Tuple[str, ...], keys_of: Dict[str, List[str]], by_key: Dict[str, List[str]],
                    text) -> Set[str]:
    """The ``targets`` that some file of the run imports and that only scripts (files with
    an ``if __name__ == "__main__":`` that do not set ``CUDA_VISIBLE_DEVICES``) import,
    directly or through a package ``__init__`` that only scripts import in turn
    (``text(path)``: a file's text)."""
    importers: Dict[str, Set[str]] = {}
    for path, keys in keys_of.items():
        body = text(path)
        for target in list(_imports(body).values()) + _stars(body):
            for hit in _files_for(target, keys[0], by_key):
                if hit != path:
                    importers.setdefault(hit, set()).add(path)

    # one that sets CUDA_VISIBLE_DEVICES does so after its imports: a question asked as
    # they run would come first, and the variable would hide no GPU any more
    def script(path: str) -> bool:
        body = text(path)
        return _MAIN.search(body) is not None and "CUDA_VISIBLE_DEVICES" not in body

    def only_scripts(path: str, seen: Set[str]) -> bool:
        found = importers.get(path, set())
        return bool(found) and all(
            f in seen or script(f) or (os.path.basename(f) == "__init__.py" and only_scripts(f, seen | {f}))
            for f in found)

    return {p for p in targets if p in keys_of and only_scripts(p, {p})}


def _files_for(dotted: str, own_key: str, by_key: Dict[str, List[str]]) -> List[str]:
    """The run's files that ``dotted`` (a module, or a name in one; relative ones keep
    their dots) can mean, seen from the module ``own_key``."""
    level = len(dotted) - len(dotted.lstrip("."))
    name = dotted.lstrip(".")
    if level:
        package = own_key.split(".")[:-level]
        name = ".".join(package + ([name] if name else []))
    parts = name.split(".")
    for end in (len(parts), len(parts) - 1):  # the module itself, or the module holding a name
        if end <= 0:
            continue
        for start in range(end):
            found = by_key.get(".".join(parts[start:end]))
            if found:
                return found
    return []


def _package(key: str, path: str) -> str:
    """The package a module's relative imports start from: a package's ``__init__`` is
    its own, another module's is the one that holds it."""
    return key if os.path.basename(path) == "__init__.py" else key.rpartition(".")[0]


def _absolute(dotted: str, package: str) -> str:
    """``dotted`` as an import of a module of ``package`` names it, with its leading
    dots resolved (``.networks.Generator`` from ``models`` -> ``models.networks.Generator``)."""
    level = len(dotted) - len(dotted.lstrip("."))
    if not level:
        return dotted
    parts = package.split(".") if package else []
    parts = parts[:len(parts) - (level - 1)] if level > 1 else parts
    return ".".join(parts + [dotted.lstrip(".")])


def _stars(text: str) -> List[str]:
    return [m.group(1) for m in _FROM.finditer(text) if (m.group(3) or "").strip() == "*"]


def _module_keys(path: str, base: str) -> List[str]:
    """``a/b/models.py`` -> ["a.b.models", "b.models", "models"] (relative to the run's
    common folder; scripts import their siblings as top-level modules)."""
    rel = path
    if base:  # (every file lies under ``base``, their common folder: a prefix, not ``relpath``'s walk)
        full = os.path.abspath(path)
        rel = full[len(base):].lstrip(os.sep) if full.startswith(base) else os.path.relpath(full, base)
    parts = rel[:-3].replace(os.sep, "/").split("/")
    if parts[-1] == "__init__":
        parts = parts[:-1]
    parts = [p for p in parts if p not in ("", ".", "..")]
    return [".".join(parts[i:]) for i in range(len(parts))] or ["__main__"]


_IMPORT = re.compile(r"^import[ \t]+([\w., \t]+)$", re.M)
_FROM = re.compile(r"^from[ \t]+(\.*[\w.]*)[ \t]+import[ \t]+(?:\(([^)]*)\)|([^\n#(]+))", re.M)
_CLASS = re.compile(r"^class[ \t]+(\w+)[ \t]*(?:\(([^)]*)\))?[ \t]*:", re.M)
_TOP = re.compile(r"^\S", re.M)
_CUDA = re.compile(r"^[ \t]+def[ \t]+cuda[ \t]*\(", re.M)


def _imports(text: str) -> Dict[str, str]:
    """Top-level imports: local name -> dotted name (relative ones keep their dots)."""
    out: Dict[str, str] = {}
    for m in _IMPORT.finditer(text):
        for item in m.group(1).split(","):
            words = item.split()
            if len(words) == 3 and words[1] == "as":
                out[words[2]] = words[0]
            elif len(words) == 1:
                out[words[0].split(".")[0]] = words[0].split(".")[0]
    for m in _FROM.finditer(text):
        module = m.group(1)
        for item in (m.group(2) or m.group(3) or "").replace("\\", " ").split(","):
            words = item.split()
            if not words or words[0] == "*":
                continue
            local = words[2] if len(words) == 3 and words[1] == "as" else words[0]
            out[local] = f"{module}.{words[0]}" if module.strip(".") or module else words[0]
    return out


def _classes(text: str) -> List[Tuple[str, List[str], bool]]:
    """Top-level classes: (name, dotted bases, defines its own ``cuda``)."""
    out = []
    for m in _CLASS.finditer(text):
        bases = [b.strip() for b in (m.group(2) or "").split(",")]
        bases = [b for b in bases if b and "=" not in b and re.fullmatch(r"[\w.]+", b)]
        end = _TOP.search(text, m.end())
        body = text[m.end():end.start() if end else len(text)]
        out.append((m.group(1), bases, bool(_CUDA.search(body))))
    return out


def _resolve(base: str, imports: Dict[str, str], local: Set[str], module_key: str) -> str:
    head, _, rest = base.partition(".")
    if head in imports:
        return imports[head] + (f".{rest}" if rest else "")
    if head in local:
        return f"{module_key}.{base}"
    return base


@lru_cache(maxsize=None)
def _torch_module(qualname: str) -> bool:
    return is_module_constructor(canonical(qualname))


def _suffix_hit(qualname: str, raw: Dict[str, object]) -> Optional[str]:
    """The longest ``module.Class`` suffix of ``qualname`` that ``raw`` has as a key."""
    parts = qualname.lstrip(".").split(".")
    for i in range(len(parts) - 1):
        key = ".".join(parts[i:])
        if key in raw:
            return key
    return None
