"""Files: discovery, reading, writing (atomically), parallelism, the cache, progress.

Everything here is about the file system; the engine never touches it.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import stat
import sys
import tempfile
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Dict, FrozenSet, List, Optional, Sequence, Tuple

from . import __version__
from .catalogue import RULES, internal_error, may_match, tool_finding
from .model import Applicability, Edit, Fix, Violation
from .project import ProjectIndex, build_index
from .screen import screen
from .settings import ConfigError, Settings
from .source import DecodeError, decode, shown

PY_SUFFIXES = (".py", ".pyi", ".ipynb")
CACHE_DIR = ".torchdevlint_cache"


@dataclass
class Job:
    path: str
    mode: str  # check | fix | diff
    unsafe: bool
    settings: Settings
    data: Optional[bytes] = None  # pre-read bytes (stdin, or read by the parent)
    stdin: bool = False  # fixed text goes back to the caller instead of the file
    # real paths of what the run was asked to fix: a symlink whose target lies outside
    # them is reported, not written (None: no limit)
    roots: Optional[Tuple[str, ...]] = None
    project: Optional[ProjectIndex] = None  # the run's index of its files (fix applicability)
    look: FrozenSet[str] = frozenset()  # fix/diff: codes whose findings are only counted


@dataclass
class FileResult:
    path: str
    violations: List[Violation] = field(default_factory=list)
    applied: Counter = field(default_factory=Counter)
    changed: bool = False
    diff: str = ""
    fixed_text: Optional[str] = None  # for stdin
    parsed: bool = False
    digest: Optional[str] = None
    looked: Counter = field(default_factory=Counter)  # the `look` codes' findings, by code
    # the questions the analysis put to the run's index (``ProjectIndex.module_kind``);
    # None where not known (a cached or notebook result): the whole-run pass reads them
    asked: Optional[FrozenSet[tuple]] = None


# ------------------------------------------------------------------ discovery
def discover(paths: Sequence[str], settings: Settings, force_exclude: bool = False) -> List[str]:
    """Python files under ``paths``, sorted; a missing path is a ConfigError (exit 2)."""
    found: List[str] = []
    seen = set()
    for raw in paths:
        path = os.path.normpath(raw)
        if not os.path.lexists(path):
            raise ConfigError(f"{raw}: no such file or directory")
        if os.path.isdir(path):
            unlistable: List[str] = []
            for folder, dirs, files in os.walk(path, onerror=lambda e: unlistable.append(e.filename),
                                               followlinks=False):
                dirs[:] = sorted(
                    d for d in dirs
                    if not settings.excluded(os.path.join(folder, d, "x"))
                )
                for name in sorted(files):
                    full = os.path.normpath(os.path.join(folder, name))
                    if name.endswith(PY_SUFFIXES) and not settings.excluded(full) and full not in seen:
                        seen.add(full)
                        found.append(full)
            found.extend(os.path.normpath(u) for u in unlistable if u not in seen)  # reported as TDL904
        else:
            if force_exclude and settings.excluded(path):
                continue
            if path not in seen:
                seen.add(path)
                found.append(path)
    return _one_name_per_file(sorted(found))


def _one_name_per_file(paths: List[str]) -> List[str]:
    """Each file once, under the first of its names: a symlink to a file of the run, or
    a second hard link, would otherwise be fixed twice (the second write would find
    the file changed under it)."""
    seen = set()
    out = []
    for path in paths:
        try:
            st = os.stat(path)
            key = (st.st_dev, st.st_ino) if stat.S_ISREG(st.st_mode) else None
        except OSError:
            key = None  # reported when read
        if key is not None and key in seen:
            continue
        if key is not None:
            seen.add(key)
        out.append(path)
    return out


# ------------------------------------------------------------------ one file
MAX_SOURCE_BYTES = 64 * 1024 * 1024


def read_source(path: str) -> bytes:
    """A source file's bytes. Only regular files are read (a FIFO would block forever, a
    device never ends), and at most ``MAX_SOURCE_BYTES``: both are OSErrors saying why."""
    st = os.stat(path)  # follows symlinks: the target is what gets read
    if not stat.S_ISREG(st.st_mode):
        kind = ("a FIFO" if stat.S_ISFIFO(st.st_mode) else "a socket" if stat.S_ISSOCK(st.st_mode)
                else "a device" if stat.S_ISCHR(st.st_mode) or stat.S_ISBLK(st.st_mode) else "not a file")
        raise OSError(0, f"not a regular file ({kind}): skipped")
    if st.st_size > MAX_SOURCE_BYTES:
        raise OSError(0, f"larger than {MAX_SOURCE_BYTES // 2**20} MiB ({st.st_size} bytes): skipped")
    with open(path, "rb") as fh:
        return fh.read(MAX_SOURCE_BYTES + 1)


def process(job: Job) -> FileResult:
    """One file's result; an exception raised on it (a bug) is that file's TDL902, as the
    flake8 plugin reports it, and the run goes on with the others."""
    try:
        return _process(job)
    except Exception as exc:
        found = internal_error("torchdevlint", exc, job.path)
        result = FileResult(job.path, [found] if found.code in job.settings.enabled_codes(job.path) else [])
        result.parsed = True
        return result


def _process(job: Job) -> FileResult:
    result = FileResult(job.path)
    data = job.data
    if data is None:
        try:
            if os.path.isdir(job.path):
                os.listdir(job.path)  # raises the real reason it could not be walked
                raise IsADirectoryError(21, "is a folder that could not be walked")
            data = read_source(job.path)
        except OSError as exc:
            result.violations = [tool_finding("TDL904", f"cannot read: {_os_reason(exc)}", filename=job.path)]
            result.parsed = True
            return result
    codes = job.settings.enabled_codes(job.path)
    if not may_match(data, codes):
        return result  # the prefilter: nothing in this file can match
    if job.path.endswith(".ipynb"):
        return _process_notebook(job, data, result)
    try:
        source = decode(data)
    except DecodeError as exc:
        if "TDL901" in codes:
            result.violations = [tool_finding("TDL901", exc.message, exc.line, 0, job.path)]
        return result
    result.parsed = True
    if job.mode == "check":
        screened = screen(source.text, codes)
        if screened is not None and not screened.codes:
            return result  # screened without the engine: no rule can fire on this code
    from .engine import check_source, fix_source  # LibCST comes with it: only for what may match

    asked: set = set()
    if job.mode == "check":
        passed, starts = (screened.codes, screened.starts) if screened is not None else (None, None)
        result.violations = check_source(source.text, job.path, job.settings, project=job.project,
                                         passed=passed, starts=starts, asked=asked)
        result.asked = frozenset(asked)
        return result
    outcome = fix_source(source.text, job.path, job.settings, unsafe=job.unsafe, project=job.project,
                         look=job.look, asked=asked)
    result.asked = frozenset(asked)
    result.violations = sorted(outcome.remaining + outcome.rejected, key=Violation.sort_key)
    result.looked = outcome.looked
    if not outcome.changed:
        return result
    result.applied = outcome.applied
    result.changed = True
    if job.stdin and job.mode == "fix":
        result.fixed_text = outcome.text
        return result
    if job.mode == "diff":
        result.diff = unified_diff(source.text, outcome.text, job.path)
        return result
    try:
        new_data = source.encode(outcome.text)
    except UnicodeEncodeError as exc:
        result.violations.append(tool_finding(
            "TDL904", f"not written: the fix cannot be encoded as {source.encoding} ({exc.reason})",
            filename=job.path))
        result.changed, result.applied = False, Counter()
        return result
    problem = write_atomic(job.path, data, new_data, job.roots)
    if problem is not None:
        result.violations.append(tool_finding("TDL904", problem, filename=job.path))
        result.changed, result.applied = False, Counter()
    return result


def _process_notebook(job: Job, data: bytes, result: FileResult) -> FileResult:
    """A notebook: its code cells as one module; findings per cell; fixes written into
    the changed cells' sources only (see ``notebook``)."""
    from .notebook import Notebook, NotebookError

    result.parsed = True
    try:
        raw = data.decode("utf-8")  # nbformat: notebooks are UTF-8 JSON
        nb = Notebook(raw)
    except UnicodeDecodeError as exc:
        result.violations = [tool_finding("TDL901", f"a notebook must be UTF-8: {exc.reason}",
                                          filename=job.path)]
        return result
    except NotebookError as exc:
        result.violations = [tool_finding("TDL900", str(exc), filename=job.path)]
        return result
    from .engine import check_source, fix_source

    if job.mode == "check":
        result.violations = [_in_cell(nb, v) for v in check_source(nb.module, job.path, job.settings,
                                                                   project=job.project)]
        return result
    outcome = fix_source(nb.module, job.path, job.settings, unsafe=job.unsafe, project=job.project,
                         look=job.look)
    result.looked = outcome.looked
    new_raw = nb.with_module(outcome.text) if outcome.changed else raw
    after = Notebook(new_raw) if new_raw != raw else nb  # where what is left now lies
    result.violations = [_in_cell(after, v) for v in sorted(outcome.remaining + outcome.rejected,
                                                             key=Violation.sort_key)]
    if new_raw == raw:
        return result
    result.applied, result.changed = outcome.applied, True
    if job.stdin and job.mode == "fix":
        result.fixed_text = new_raw
    elif job.mode == "diff":
        result.diff = unified_diff(raw, new_raw, job.path)
    else:
        problem = write_atomic(job.path, data, new_raw.encode("utf-8"), job.roots)
        if problem is not None:
            result.violations.append(tool_finding("TDL904", problem, filename=job.path))
            result.changed, result.applied = False, Counter()
    return result


def _in_cell(nb, v: Violation) -> Violation:
    """A finding of the notebook's module, located by cell and line in that cell."""
    cell, row = nb.locate(v.start[0])
    if cell == 0:
        return dataclasses.replace(v, filename=v.filename)  # a tool finding about the file
    _, end_row = nb.locate(v.end[0])
    fix = v.fix
    if fix is not None and fix.edits:
        fix = dataclasses.replace(fix, edits=tuple(
            dataclasses.replace(e, start=(nb.locate(e.start[0])[1], e.start[1]),
                                end=(nb.locate(e.end[0])[1], e.end[1])) for e in fix.edits))
    return dataclasses.replace(v, start=(row, v.start[1]), end=(end_row, v.end[1]), fix=fix, cell=cell)


def write_atomic(path: str, expected: bytes, new_data: bytes,
                 roots: Optional[Sequence[str]] = None) -> Optional[str]:
    """Replace the contents of ``path`` by ``new_data`` unless it changed since it was
    read; None when written, else why not. Nothing is ever left half-written or behind.

    - A symlink is written through: its target changes, the link stays (a target
      outside ``roots`` is reported, not written).
    - Usually: a temp file in the target's folder with the original's mode, owner and
      extended attributes, then one rename (a reader sees the old file or the new one).
    - A file with hard links, or whose owner or attributes cannot be copied, is
      rewritten in place after re-checking its contents, so that every link and all
      metadata are kept.
    - The temp file is removed on every exit path (errors, Ctrl-C, SIGTERM: the CLI
      turns it into an exception)."""
    real = os.path.realpath(path)
    if roots is not None and not any(_within(real, root) for root in roots):
        return f"not written: it links to {real}, outside the paths being fixed"
    try:
        with open(real, "rb") as fh:
            current = fh.read()
        if current != expected:
            return "not written: the file changed while it was being fixed; run again"
        st = os.stat(real)
    except OSError as exc:
        return f"not written: {_os_reason(exc)}"
    if st.st_nlink > 1:
        return _write_in_place(real, expected, new_data)
    tmp: Optional[str] = None
    try:
        fd, tmp = tempfile.mkstemp(prefix=".torchdevlint-", suffix=".tmp", dir=os.path.dirname(real))
        with os.fdopen(fd, "wb") as fh:
            fh.write(new_data)
        if not _copy_metadata(st, real, tmp):
            os.unlink(tmp)
            tmp = None
            return _write_in_place(real, expected, new_data)
        os.replace(tmp, real)
        tmp = None
    except OSError as exc:
        return f"not written: {_os_reason(exc)}"
    finally:
        if tmp is not None:
            try:
                os.unlink(tmp)
            except OSError:
                pass
    return None


def _within(path: str, root: str) -> bool:
    try:
        return os.path.commonpath([path, root]) == root
    except ValueError:  # different drives
        return False


def _copy_metadata(st: os.stat_result, src: str, dst: str) -> bool:
    """Give ``dst`` the mode, owner and extended attributes of ``src``; False when any
    of them cannot be copied (the caller then writes in place instead)."""
    os.chmod(dst, stat.S_IMODE(st.st_mode))
    new = os.stat(dst)
    if (new.st_uid, new.st_gid) != (st.st_uid, st.st_gid):
        try:
            os.chown(dst, st.st_uid, st.st_gid)
        except OSError:
            return False
    if hasattr(os, "listxattr"):
        try:
            for name in os.listxattr(src):
                os.setxattr(dst, name, os.getxattr(src, name))
        except OSError:
            return False
    return True


def _write_in_place(path: str, expected: bytes, new_data: bytes) -> Optional[str]:
    """Rewrite the file's own inode (hard links and metadata stay). Not atomic: the
    contents are re-checked under the open handle just before writing."""
    try:
        with open(path, "r+b") as fh:
            if fh.read() != expected:
                return "not written: the file changed while it was being fixed; run again"
            fh.seek(0)
            fh.write(new_data)
            fh.truncate()
            fh.flush()
            os.fsync(fh.fileno())
    except OSError as exc:
        return f"not written: {_os_reason(exc)}"
    return None


def _os_reason(exc: OSError) -> str:
    if exc.errno == 0 and exc.strerror:  # our own reasons (read_source) are already phrased
        return exc.strerror
    return exc.strerror.lower() if exc.strerror else str(exc)


def unified_diff(old: str, new: str, path: str) -> str:
    """A patch that ``git apply`` and ``patch`` accept for any text: lines are what they
    split on (``\n`` only; a lone ``\r``, a form feed or U+2028 stays inside its line)."""
    import difflib

    lines = difflib.unified_diff(
        _patch_lines(old), _patch_lines(new), fromfile=_patch_name("a/", path), tofile=_patch_name("b/", path),
    )
    out = []
    for line in lines:
        out.append(line if line.endswith("\n") else line + "\n\\ No newline at end of file\n")
    return "".join(out)


def _patch_name(prefix: str, path: str) -> str:
    """As git writes names: C-quoted when they hold control characters or quotes."""
    name = prefix + path
    if shown(name) == name and '"' not in name and "\\" not in name:
        return name
    return '"' + shown(name.replace("\\", "\\\\").replace('"', '\\"')) + '"'


def _patch_lines(text: str) -> List[str]:
    lines = text.split("\n")
    return [line + "\n" for line in lines[:-1]] + ([lines[-1]] if lines[-1] else [])


# ------------------------------------------------------------------ the cache
_PROJECT_KEY = "\0project:"  # cache entries of the whole-run pass (no path starts with NUL)


class Cache:
    """Check results keyed by content hash, tool version and effective settings; each
    entry keeps its file's stamp (``stamp``), so that an unchanged file is not read.

    One JSON file per settings fingerprint in ``.torchdevlint_cache/``, which ignores
    itself for git (like ruff's)."""

    def __init__(self, root: str, settings: Settings, enabled: bool = True):
        self.enabled = enabled
        stamp = f"{__version__}|{_code_stamp()}|{settings.fingerprint()}"
        key = hashlib.sha256(stamp.encode()).hexdigest()[:16]
        self.folder = Path(root) / CACHE_DIR
        self.file = self.folder / f"{__version__}-{key}.json"
        self.entries: Dict[str, dict] = {}
        self.dirty = False
        if enabled:
            try:
                loaded = json.loads(self.file.read_text(encoding="utf-8"))
            except (OSError, ValueError):
                loaded = {}
            self.entries = loaded if isinstance(loaded, dict) else {}

    @staticmethod
    def digest(data: bytes) -> str:
        """A keyed hash of the contents: the key lives in the user's own cache folder,
        so a cache shipped with (or planted in) a repository cannot vouch for a file."""
        return hashlib.blake2b(data, digest_size=16, key=_secret()).hexdigest()

    @staticmethod
    def stamp(path: str) -> Optional[str]:
        """A keyed hash of what ``stat`` says of the file (size, change times, inode), so
        that a warm run need not read and hash an unchanged file (as git's index does);
        None where it cannot vouch: not a regular file, or changed in the last
        ``_RACY_NS`` (a second write within the file system's clock tick would leave the
        same stat behind: such a file is read again next time, like git's racily clean
        entries)."""
        try:
            st = os.stat(path)
        except OSError:
            return None
        if not stat.S_ISREG(st.st_mode) or time.time_ns() - max(st.st_mtime_ns, st.st_ctime_ns) < _RACY_NS:
            return None
        facts = f"{path}\0{st.st_size}\0{st.st_mtime_ns}\0{st.st_ctime_ns}\0{st.st_ino}\0{st.st_dev}"
        return Cache.digest(facts.encode("utf-8", "surrogateescape"))

    def vouched(self, path: str, stamp: Optional[str]) -> Optional[str]:
        """The digest of the contents cached for ``path`` when its entry was stored with
        this same ``stamp`` (the file is as it was then), else None: read and hash it."""
        entry = self.entries.get(path)
        if stamp is None or not self.enabled or not isinstance(entry, dict) or entry.get("stamp") != stamp:
            return None
        digest = entry.get("digest")
        return digest if isinstance(digest, str) else None

    def get(self, path: str, digest: str, whole_run: bool = False,
            tree: Optional[str] = None) -> Optional[List[Violation]]:
        """The cached findings, or None: a missing, stale or malformed entry is a miss
        (and is rewritten by this run). ``whole_run``: the answer of the whole-run pass,
        valid for ``digest`` (the file's and its index's), or for ``tree`` (every file of
        the run unchanged: the index need not even be built to know it is the same)."""
        entry = self.entries.get(_PROJECT_KEY + path if whole_run else path)
        if not self.enabled or not isinstance(entry, dict) or not (
                entry.get("digest") == digest or (tree is not None and entry.get("tree") == tree)):
            return None
        try:
            found = entry["violations"]
            if not isinstance(found, list):
                return None
            return [_violation_from_json(v, path) for v in found]
        except (KeyError, TypeError, ValueError, AttributeError, IndexError):
            return None

    def put(self, path: str, digest: str, violations: List[Violation], whole_run: bool = False,
            tree: Optional[str] = None, stamp: Optional[str] = None) -> None:
        """``stamp``: the file's ``Cache.stamp``, taken before its contents were read."""
        if self.enabled:
            key = _PROJECT_KEY + path if whole_run else path
            self.entries[key] = {"digest": digest, "violations": [v.to_json() for v in violations]}
            if tree is not None:
                self.entries[key]["tree"] = tree
            if stamp is not None:
                self.entries[key]["stamp"] = stamp
            self.dirty = True

    def save(self) -> None:
        if not (self.enabled and self.dirty):
            return
        try:
            self.folder.mkdir(exist_ok=True)
            gitignore = self.folder / ".gitignore"
            if not gitignore.exists():
                gitignore.write_text("# Automatically created by torchdevlint.\n*\n")
            tmp = self.file.with_suffix(".tmp")
            tmp.write_text(json.dumps(self.entries), encoding="utf-8")
            os.replace(tmp, self.file)
        except OSError:
            pass  # a read-only tree simply runs without a cache


_SECRET: Optional[bytes] = None
_RACY_NS = 2_000_000_000  # FAT's clock tick is 2 s; most file systems' are far finer


def _secret() -> bytes:
    """This user's cache key (``$XDG_CACHE_HOME/torchdevlint/cache-key``, made on first
    use); a random one for this process when it cannot be stored (no reuse, no harm)."""
    global _SECRET
    if _SECRET is None:
        base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
        path = os.path.join(base, "torchdevlint", "cache-key")
        try:
            with open(path, "rb") as fh:
                key = fh.read()
            if len(key) != 32:
                raise ValueError("bad key")
        except (OSError, ValueError):
            key = os.urandom(32)
            try:
                os.makedirs(os.path.dirname(path), exist_ok=True)
                fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
                with os.fdopen(fd, "wb") as fh:
                    fh.write(key)
            except FileExistsError:  # another process made it first: use theirs
                try:
                    with open(path, "rb") as fh:
                        stored = fh.read()
                    key = stored if len(stored) == 32 else key
                except OSError:
                    pass
            except OSError:
                pass
        _SECRET = key
    return _SECRET


def _code_stamp() -> str:
    """Size and mtime of the linter's own files: an edited install invalidates the cache."""
    package = Path(__file__).parent
    parts = []
    for path in sorted(package.rglob("*.py")):
        st = path.stat()
        parts.append(f"{path.relative_to(package)}:{st.st_size}:{st.st_mtime_ns}")
    return hashlib.sha256("|".join(parts).encode()).hexdigest()


def _fix_from_json(f: dict) -> Fix:
    return Fix(Applicability(f["applicability"]), f["message"], tuple(
        Edit((e["location"]["row"], e["location"]["column"] - 1),
             (e["end_location"]["row"], e["end_location"]["column"] - 1), e["content"])
        for e in f["edits"]), frozenset(f.get("defines", ())), frozenset(f.get("blocked_by", ())),
        _fix_from_json(f["safe"]) if f.get("safe") is not None else None)


def _violation_from_json(d: dict, path: str) -> Violation:
    """A cached finding; raises (KeyError, TypeError, ValueError) on any other shape."""
    if d["code"] not in RULES or not all(
            isinstance(x, int) and not isinstance(x, bool) and x >= 0 for x in (
                d["location"]["row"], d["location"]["column"],
                d["end_location"]["row"], d["end_location"]["column"])):
        raise ValueError("not a finding")
    if not isinstance(d["message"], str) or not isinstance(d["name"], str):
        raise ValueError("not a finding")
    fix = _fix_from_json(d["fix"]) if d["fix"] is not None else None
    cell = d.get("cell")
    if cell is not None and (not isinstance(cell, int) or isinstance(cell, bool) or cell < 1):
        raise ValueError("not a cell")
    return Violation(d["code"], d["name"], d["message"],
                     (d["location"]["row"], d["location"]["column"] - 1),
                     (d["end_location"]["row"], d["end_location"]["column"] - 1), fix, path, cell)


# ------------------------------------------------------------------ progress
class Progress:
    """A one-line progress bar on stderr, only when stderr is a terminal."""

    def __init__(self, total: int, label: str, enabled: bool):
        self.total = total
        self.label = label
        self.enabled = enabled and total > 0 and sys.stderr.isatty()
        self.done = 0
        self.last = 0.0

    def advance(self, n: int = 1) -> None:
        self.done += n
        if not self.enabled:
            return
        now = time.monotonic()
        if now - self.last < 0.1 and self.done < self.total:
            return
        self.last = now
        width = 30
        filled = int(width * self.done / self.total)
        sys.stderr.write(f"\r{self.label} [{'#' * filled}{'.' * (width - filled)}] {self.done}/{self.total} files")
        sys.stderr.flush()

    def close(self) -> None:
        if self.enabled:
            sys.stderr.write("\r" + " " * 70 + "\r")
            sys.stderr.flush()


# ------------------------------------------------------------------ many files
def run(paths: List[str], mode: str, settings: Settings, unsafe: bool = False, jobs: int = 1,
        cache: Optional[Cache] = None, progress: bool = False,
        roots: Optional[Sequence[str]] = None, look: FrozenSet[str] = frozenset()) -> List[FileResult]:
    """Process files; results come back in the order of ``paths`` whatever ``jobs`` is.
    ``look`` (fix and diff): codes enabled in ``settings`` whose findings are only
    counted, per file (``FileResult.looked``)."""
    results: Dict[str, FileResult] = {}
    pending: List[Job] = []
    digests: Dict[str, str] = {}  # every file read for the cache -> its digest
    stamps: Dict[str, Optional[str]] = {}  # and its stamp, taken before the read
    misses: List[str] = []  # the files this run analyses and caches
    bar = Progress(len(paths), "torchdevlint " + mode, progress)
    real_roots = tuple(os.path.realpath(r) for r in roots) if roots is not None else None
    for path in paths:
        job = Job(path, mode, unsafe, settings, roots=real_roots, look=look)
        if mode == "check" and cache is not None and cache.enabled:
            stamp = stamps[path] = Cache.stamp(path)
            vouched = digest = cache.vouched(path, stamp)  # unchanged since cached: not even read
            hit = cache.get(path, digest) if digest is not None else None
            if hit is None:
                try:
                    data = read_source(path)
                except OSError:
                    pending.append(job)
                    continue
                digest = Cache.digest(data)
                hit = cache.get(path, digest)  # first: a warm run does not even prefilter
            digests[path] = digest
            if hit is not None:
                results[path] = FileResult(path, hit)
                if stamp is not None and vouched is None:  # same contents, new stat: keep the new stamp
                    cache.put(path, digest, hit, stamp=stamp)
                bar.advance()
                continue
            if not may_match(data, settings.enabled_codes(path)):
                results[path] = FileResult(path)
                cache.put(path, digest, [], stamp=stamp)
                bar.advance()
                continue
            misses.append(path)
            job.data = data
        pending.append(job)
    workers = _Workers(jobs)
    try:
        for result in workers.process_all(pending):
            results[result.path] = result
            bar.advance()
        bar.close()
        if cache is not None:  # single-file knowledge only: what every front would say
            for path in misses:
                cache.put(path, digests[path], results[path].violations, stamp=stamps[path])
        _with_project(paths, results, mode, unsafe, settings, real_roots, workers,
                      (cache, digests) if mode == "check" and cache is not None else None, look)
    finally:
        workers.close()
    if cache is not None:
        cache.save()
    return [results[p] for p in paths]


def _index_may_change(result: FileResult, project: ProjectIndex, importees: Tuple[str, ...]) -> bool:
    """Whether analysing a file again with the run's index may change its result: it waits
    on what the index tells of its importers or of the run's constructors, or the index
    answers one of the questions its analysis asked without it otherwise than no index
    did (given the same answers, the analysis takes the same path and asks nothing new).
    Unknown questions (a cached or notebook result): it may."""
    if result.asked is None or result.path in importees or any(
            v.fix is not None and "constructors" in v.fix.blocked_by for v in result.violations):
        return True
    return any(project.module_kind(q) is not None for q in result.asked)


# files per task handed to a worker: a few large files dominate a run, and chunks of a
# sixteenth of the run kept one worker busy alone at the end (0.5 s of 5 s on the
# benchmark corpus); smaller chunks cost a little more to hand out
_CHUNK = 32


class _Workers:
    """The run's worker processes: started when a batch is first big enough for them and
    kept for the whole-run pass (a second pool would start, and import the engine, again)."""

    def __init__(self, jobs: int) -> None:
        self.jobs = jobs
        self.pool = None

    def process_all(self, pending: List[Job]):
        if self.jobs > 1 and len(pending) >= 2 * self.jobs:
            if self.pool is None:
                from concurrent.futures import ProcessPoolExecutor  # only a many-file run pays for it

                self.pool = ProcessPoolExecutor(max_workers=self.jobs)
            chunk = max(1, min(_CHUNK, len(pending) // (self.jobs * 8)))
            yield from self.pool.map(process, pending, chunksize=chunk)
        else:
            for job in pending:
                yield process(job)

    def close(self) -> None:
        if self.pool is not None:
            self.pool.shutdown(cancel_futures=True)


def _with_project(paths: List[str], results: Dict[str, FileResult], mode: str, unsafe: bool,
                  settings: Settings, roots, workers: _Workers,
                  cached: Optional[Tuple[Cache, Dict[str, str]]] = None,
                  look: FrozenSet[str] = frozenset()) -> None:
    """The whole-run pass: files whose fixes stayed unsafe only because a receiver was
    not provably torch are looked at again with an index of the classes their imports
    reach among the run's files (``project``), files whose fixes would ask about
    CUDA at a library's module level with whether only the run's scripts import them,
    and files whose default tensor type waits on the run's `torch.Tensor(...)` calls.
    Only fixes can change, never findings.
    In ``check``, its results are cached (``cached``: the cache, and the digest of every
    file the first pass read) under the file's digest and the index's own fingerprint:
    a warm run re-analyses nothing."""
    if len(paths) < 2:
        return
    needy = [p for p in paths if any(
        v.fix is not None and ((v.fix.applicability is Applicability.UNSAFE and "receiver" in v.fix.blocked_by)
                               or not v.fix.blocked_by.isdisjoint(("importers", "constructors")))
        for v in results[p].violations)]
    if not needy:
        return
    cache, digests = cached if cached is not None else (None, {})
    tree = None  # every file of the run, as read: unchanged, the whole-run answers are too
    if cache is not None and cache.enabled and all(p in digests for p in paths):
        tree = hashlib.blake2b("\0".join(f"{p}\0{digests[p]}" for p in sorted(paths)).encode(),
                               digest_size=16).hexdigest()
        for path in list(needy):
            hit = cache.get(path, "", whole_run=True, tree=tree)  # ("": by the tree only)
            if hit is not None:
                results[path] = FileResult(path, hit)
                needy.remove(path)
        if not needy:
            return  # a warm run: no index to build
    importees = tuple(p for p in needy if any(v.fix is not None and "importers" in v.fix.blocked_by
                                              for v in results[p].violations))
    constructors = any(v.fix is not None and "constructors" in v.fix.blocked_by
                       for p in needy for v in results[p].violations)
    project = build_index(paths, read_source, seeds=needy, importees=importees, constructors=constructors)
    if not any(project.classes.values()) and not project.script_modules and not constructors:
        if tree is not None:  # nothing the index could prove: the first pass's answers stand
            for path in needy:
                cache.put(path, "", results[path].violations, whole_run=True, tree=tree)  # type: ignore[union-attr]
        return
    keys: Dict[str, str] = {}
    stamp = project.fingerprint() if cache is not None and cache.enabled else ""
    for path in [p for p in needy if not _index_may_change(results[p], project, importees)]:
        needy.remove(path)  # its first answer stands: nothing it asked gets another answer
        if path in digests:
            cache.put(path, f"{digests[path]}|{stamp}", results[path].violations,  # type: ignore[union-attr]
                      whole_run=True, tree=tree)
    if cache is not None and cache.enabled:
        for path in list(needy):
            if path not in digests:
                continue
            keys[path] = f"{digests[path]}|{stamp}"
            hit = cache.get(path, keys[path], whole_run=True)
            if hit is not None:
                results[path] = FileResult(path, hit)
                needy.remove(path)
                cache.put(path, keys[path], hit, whole_run=True, tree=tree)  # (this tree too, now)
    again = [Job(p, mode, unsafe, settings, roots=roots, project=project.for_file(p), look=look) for p in needy]
    if not again:
        return
    for result in workers.process_all(again):
        if result.path in keys:
            cache.put(result.path, keys[result.path], result.violations, whole_run=True, tree=tree)  # type: ignore[union-attr]
        first = results[result.path]
        if mode == "fix" and not result.fixed_text:  # the first pass is already written
            result.applied = first.applied + result.applied
            result.changed = first.changed or result.changed
        results[result.path] = result
