"""The command line: ``torchdevlint check|fix|rule|rules|sim``.

Exit codes: 0 nothing found (or everything fixed), 1 findings remain / ``--diff`` would
change files, 2 usage, configuration or internal error (one line, no traceback).
"""

from __future__ import annotations

import argparse
import keyword
import os
import signal
import sys
import threading
from collections import Counter
from pathlib import Path
from typing import List, Optional, Sequence

from . import __version__
from . import report
from .catalogue import OPT_IN
from .settings import ConfigError, Settings, find_pyproject, load, validate_codes


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # one line, exit 2
        self.exit(2, f"torchdevlint: error: {message}\n")


def _codes(value: str) -> List[str]:
    return [c for c in value.split(",") if c.strip()]


_EXAMPLES = {
    "check": """\
examples:
  torchdevlint check .                         every rule, every *.py/*.pyi/*.ipynb below .
  torchdevlint check --ignore TDL001 src/      the bugs only (CI profile)
  torchdevlint check --select TDL1 --select TDL2 train.py
  torchdevlint check --output-format grouped .
  torchdevlint check --add-noqa .              adopt in CI: mark today's findings
  git diff --name-only | xargs torchdevlint check --force-exclude

markers: [*] `fix` applies this finding's fix (with --unsafe-fixes: unsafe ones too).
statistics: [*] every finding of the code is fixable, [-] some are, blank: none.""",
    "fix": """\
examples:
  torchdevlint fix --diff .                    show the safe rewrites; write nothing
  torchdevlint fix .                           apply the safe fixes
  torchdevlint fix --unsafe-fixes --diff legacy/   review the fixes that may change behaviour
  torchdevlint fix - < train.py > fixed.py     a formatter pipeline (the input comes back
                                               unchanged when nothing can be fixed)""",
    "rule": """\
examples:
  torchdevlint rule TDL001
  torchdevlint rule bare-cuda-call""",
    "rules": """\
examples:
  torchdevlint rules""",
    "sim": """\
Runs SCRIPT as `python SCRIPT ARGS` would, with torch pretending that N CUDA GPUs
exist (computing on the CPU): every tensor is tagged with the GPU it would be on,
CUDA's per-thread current device is kept, mixing devices raises torch's own error,
and at exit a report tells how many tensors and bytes landed on each GPU, per thread
and per (spawned) process. Use it to see that a script puts each rank's work on its
own GPU, before and after `torchdevlint fix`. Needs torch (any CPU build).

examples:
  torchdevlint sim --gpus 2 train.py --epochs 1
  torchdevlint sim --gpus 4 --report placement.json ddp_script.py""",
    "server": """\
Speaks the Language Server Protocol on stdin/stdout: diagnostics as you type (the same
engine and pyproject.toml settings as `check`), quick fixes labelled with their
applicability, "fix all safe", `# noqa` insertion, and rule docs on hover.
Needs pygls: pip install 'torchdevlint[lsp]'.

examples:
  torchdevlint server                          (started by your editor)""",
}


def _sub(sub, name: str, help: str) -> argparse.ArgumentParser:
    return sub.add_parser(name, help=help, description=help[0].upper() + help[1:] + ".",
                          epilog=_EXAMPLES.get(name), formatter_class=argparse.RawDescriptionHelpFormatter)


def _common(p: argparse.ArgumentParser, verb: str) -> None:
    p.add_argument("paths", nargs="*", default=["."],
                   help="files or folders (default: .); '-' reads stdin")
    p.add_argument("--select", type=_codes, action="extend", metavar="CODES",
                   help="codes or prefixes to check, comma-separated; replaces the config's "
                        "select; may be repeated (the lists add up)")
    p.add_argument("--extend-select", type=_codes, action="extend", metavar="CODES",
                   help="codes or prefixes to check in addition (repeatable)")
    p.add_argument("--ignore", type=_codes, action="extend", metavar="CODES",
                   help="codes or prefixes to skip (repeatable)")
    p.add_argument("--config", metavar="FILE", help="a pyproject.toml to read [tool.torchdevlint] from")
    p.add_argument("--isolated", action="store_true", help="ignore every configuration file")
    p.add_argument("--stdin-filename", metavar="NAME",
                   help="the name to report for '-' (and to match the config against)")
    p.add_argument("--force-exclude", action="store_true",
                   help="apply excludes to files named on the command line too (for pre-commit)")
    p.add_argument("--device-name", metavar="NAME",
                   help="the variable name fixes use and look for (default: device)")
    p.add_argument("--unsafe-fixes", action="store_true",
                   help=f"also {verb} fixes that may change behaviour (marked [*] too)")
    p.add_argument("--jobs", "-j", type=int, default=0, metavar="N",
                   help="worker processes (default and maximum: one per CPU)")
    p.add_argument("--no-cache", action="store_true", help="neither read nor write .torchdevlint_cache/")
    p.add_argument("--quiet", "-q", action="store_true", help="no progress bar and no summary")
    p.add_argument("--exit-zero", action="store_true", help="exit 0 even when findings remain")


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="torchdevlint", description="Find and fix implicit CUDA device placement in PyTorch code.",
                     epilog="Run `torchdevlint COMMAND --help` for a command's options and examples.")
    parser.add_argument("--version", action="version", version=f"torchdevlint {__version__}")
    sub = parser.add_subparsers(dest="command", parser_class=_Parser, metavar="COMMAND")
    check = _sub(sub, "check", "report findings; exit 1 when any remain")
    _common(check, "show")
    check.add_argument("--output-format", choices=report.FORMATS, default="concise",
                       help="concise/text: one line per finding; full: with the source line and "
                            "the fix; grouped: by file; json, sarif: for tools; github: "
                            "workflow annotations (default: concise)")
    check.add_argument("--statistics", action="store_true",
                       help="one line per code with its count instead of the findings")
    check.add_argument("--add-noqa", action="store_true",
                       help="append `# noqa: CODE` to every line with findings (merging with "
                            "existing noqa comments) so that only new code is held to the rules")
    fix = _sub(sub, "fix", "apply fixes (safe ones; --unsafe-fixes adds more)")
    _common(fix, "apply")
    fix.add_argument("--diff", action="store_true",
                     help="write nothing: print the changes as a unified diff (for `git apply`), "
                          "and exit 1 when there are any")
    fix.add_argument("--exit-non-zero-on-fix", action="store_true",
                     help="exit 1 when a file was changed (pre-commit's convention)")
    rule = _sub(sub, "rule", "print a rule's documentation")
    rule.add_argument("code", help="a code (TDL001) or name (bare-cuda-call)")
    _sub(sub, "rules", "list every rule with its fixability")
    sim = _sub(sub, "sim", "run a script under the CUDA simulator (needs torch)")
    sim.add_argument("--gpus", type=int, default=2, metavar="N", help="how many GPUs to pretend (default: 2)")
    sim.add_argument("--report", default="text", metavar="text|json|none|FILE.json",
                     help="the placement report at exit: text (per-GPU bars) or json on stderr, "
                          "none, or text on stderr and json into FILE.json (default: text)")
    sim.add_argument("script", help="the Python script to run")
    sim.add_argument("args", nargs=argparse.REMAINDER, help="the script's own arguments")
    _sub(sub, "server", "run the language server (LSP over stdio) for editors")
    return parser


class _Sink:
    """A stream that never raises: once its reader is gone (a closed pipe, ``2>&-``),
    writes are dropped, so that output problems never change the exit code."""

    def __init__(self, stream, binary: bool = False):
        self._stream = stream
        self._binary = binary
        self.dead = stream is None

    def write(self, data):
        if not self.dead:
            try:
                return self._stream.write(data)
            except (OSError, ValueError):
                self.dead = True
        return len(data)

    def flush(self) -> None:
        if not self.dead:
            try:
                self._stream.flush()
            except (OSError, ValueError):
                self.dead = True

    @property
    def buffer(self) -> "_Sink":
        return _Sink(None if self.dead else getattr(self._stream, "buffer", None), binary=True)

    def isatty(self) -> bool:
        try:
            return not self.dead and self._stream.isatty()
        except (OSError, ValueError):
            return False

    def __getattr__(self, name: str):
        return getattr(self._stream, name)


def _settle(stream) -> None:
    """Flush a real stream at the end; if its reader is gone, point its descriptor at
    /dev/null so that Python's own flush at exit cannot fail (exit status 120)."""
    if stream is None:
        return
    try:
        stream.flush()
    except (OSError, ValueError):
        try:
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, stream.fileno())
            os.close(devnull)
        except (OSError, ValueError):
            pass


def _on_sigterm(signum, frame) -> None:
    raise KeyboardInterrupt  # unwinds like Ctrl-C: temp files are removed on the way out


def main(argv: Optional[Sequence[str]] = None) -> int:
    out, err = sys.stdout, sys.stderr
    sys.stdout, sys.stderr = _Sink(out), _Sink(err)
    previous = None
    if threading.current_thread() is threading.main_thread():
        previous = signal.signal(signal.SIGTERM, _on_sigterm)
    try:
        return _main(argv)
    finally:
        sys.stdout, sys.stderr = out, err
        if previous is not None:
            signal.signal(signal.SIGTERM, previous)
        _settle(out)
        _settle(err)


def _main(argv: Optional[Sequence[str]] = None) -> int:
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:  # --help, --version, usage errors
        return exc.code if isinstance(exc.code, int) else 2
    try:
        if args.command in ("check", "fix"):
            return _lint(args)
        if args.command == "rule":
            return _rule(args.code)
        if args.command == "rules":
            return _rules()
        if args.command == "server":
            try:
                from .server import main as serve
            except ImportError as exc:
                raise ConfigError(f"the language server needs pygls ({exc}): pip install 'torchdevlint[lsp]'")
            return serve()
        if args.command == "sim":
            from .sim.cli import run_script

            return run_script(args.script, args.args, gpus=args.gpus, report=args.report)
        parser.print_help()
        return 2
    except ConfigError as exc:
        print(f"torchdevlint: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("torchdevlint: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        return 1
    except Exception as exc:  # never a traceback: one line, exit 2
        print(f"torchdevlint: internal error: {type(exc).__name__}: {exc}", file=sys.stderr)
        return 2


def settings_from(args: argparse.Namespace, migration: bool = False) -> Settings:
    """The run's settings: the config (or none, ``--isolated``), then the command line.
    A ``migration`` (``fix --unsafe-fixes``) where nobody chose the rules -- no
    ``--select``, the default ``select`` -- also selects the opt-in rules (TDL007,
    TDL008): every fix of theirs is a CPU fallback, which is what a migration is for."""
    if args.isolated:
        settings = Settings()
    elif args.config:
        settings = load(Path(args.config))
    else:
        settings = load(find_pyproject(os.getcwd()))
    if args.select is not None:
        select = validate_codes(args.select, "--select")
        if not select:
            raise ConfigError("--select needs at least one rule code or prefix (e.g. TDL, TDL0, TDL101)")
        settings = settings.with_overrides(select=select)
    if args.extend_select:
        settings = settings.with_overrides(
            extend_select=settings.extend_select + validate_codes(args.extend_select, "--extend-select"))
    if args.ignore:
        settings = settings.with_overrides(ignore=settings.ignore + validate_codes(args.ignore, "--ignore"))
    if args.device_name is not None:
        if not args.device_name.isidentifier() or keyword.iskeyword(args.device_name):
            raise ConfigError(f"--device-name must be a Python identifier, got {args.device_name!r}")
        settings = settings.with_overrides(device_name=args.device_name)
    if migration and args.select is None and settings.select == Settings.select:
        settings = settings.with_overrides(extend_select=settings.extend_select + tuple(sorted(OPT_IN)))
    return settings


def _lint(args: argparse.Namespace) -> int:
    from .runner import Cache, Job, discover, process, run

    mode = "check" if args.command == "check" else ("diff" if args.diff else "fix")
    unsafe = args.unsafe_fixes
    settings = settings_from(args, migration=mode != "check" and unsafe)
    skipped: Counter = Counter()  # a migration: what the opt-in rules not selected would find
    if args.jobs < 0:
        raise ConfigError("--jobs must be 0 (one per CPU) or more")
    if "-" in args.paths:
        if len(args.paths) > 1:
            raise ConfigError("'-' (stdin) cannot be combined with other paths")
        name = args.stdin_filename or "-"
        data = sys.stdin.buffer.read()
        if mode == "fix":  # a formatter pipeline: whatever happens, the input comes back
            try:
                result = process(Job(name, mode, unsafe, settings, data=data, stdin=True))
                fixed = _encoded_fix(result, data, settings)
            except BaseException:
                sys.stdout.buffer.write(data)
                sys.stdout.flush()
                raise
            sys.stdout.buffer.write(data if fixed is None else fixed)
            sys.stdout.flush()
            results = [result]
            if not args.quiet:  # stdout carries the code: what is left goes to stderr
                sys.stderr.write(report.concise(result.violations, unsafe))
            _summaries(results, unsafe, args, to_stdout=False)
            remaining = result.violations
            return 0 if args.exit_zero or not remaining else 1
        results = [process(Job(name, mode, unsafe, settings, data=data, stdin=True))]
    else:
        files = discover(args.paths, settings, args.force_exclude)
        cpus = os.cpu_count() or 1
        jobs = min(args.jobs or cpus, cpus)  # more processes than CPUs only cost memory
        cache = Cache(".", settings, enabled=not args.no_cache) if mode == "check" else None
        # a migration whose rules were chosen also counts what the opt-in rules left out
        # would find (not those ignored by name), in the same pass (their findings are
        # never fixed nor reported: see `fix_source`)
        look = (frozenset(c for c in OPT_IN - settings.enabled_codes() if c not in settings.ignore)
                if mode != "check" and unsafe and not args.quiet else frozenset())
        run_settings = settings.with_overrides(extend_select=settings.extend_select + tuple(sorted(look)))
        results = run(files, mode, run_settings, unsafe, jobs, cache, progress=not args.quiet, roots=args.paths,
                      look=look)
        for r in results:
            skipped.update(r.looked)
    violations = [v for r in results for v in r.violations]
    out = sys.stdout
    if mode == "check" and args.add_noqa:
        return _add_noqa(results, args)
    if mode == "check":
        if args.statistics:
            out.write(report.statistics(violations, unsafe))
        else:
            out.write(report.render(args.output_format, violations, unsafe))
            if args.output_format in ("concise", "text", "full") and not args.quiet:
                out.write(report.summary(violations, unsafe))
        return 0 if args.exit_zero or not violations else 1
    if mode == "diff":
        for r in results:
            out.write(r.diff)
        _summaries(results, unsafe, args, to_stdout=False)
        _migration(results, violations, unsafe, args, dry_run=True, skipped=skipped)
        changed = any(r.changed for r in results)
        return 1 if changed and not args.exit_zero else 0
    out.write(report.concise(violations, unsafe))
    _summaries(results, unsafe, args, to_stdout=False)
    _migration(results, violations, unsafe, args, dry_run=False, skipped=skipped)
    changed = any(r.changed for r in results)
    if args.exit_zero:
        return 0
    if violations or (changed and args.exit_non_zero_on_fix):
        return 1
    return 0


def _migration(results, violations, unsafe: bool, args: argparse.Namespace, dry_run: bool,
               skipped: Counter) -> None:
    if args.quiet:
        return
    applied: Counter = Counter()
    for r in results:
        applied.update(r.applied)
    sys.stderr.write(report.migration_report(applied, violations, unsafe, dry_run, not_selected=skipped))


def _add_noqa(results, args: argparse.Namespace) -> int:
    """``check --add-noqa``: mark every finding's line so that only new code is held to
    the rules. Tool findings (TDL9xx) cannot be silenced and are printed; exit 1 then."""
    from .noqa import add_noqa
    from .runner import read_source, write_atomic
    from .source import decode

    added = files = 0
    left: List = []
    for r in results:
        marks = [(v.row, v.code) for v in r.violations if not v.code.startswith("TDL9")]
        left += [v for v in r.violations if v.code.startswith("TDL9")]
        if not marks or r.path == "-":
            continue
        try:
            data = read_source(r.path)
            if r.path.endswith(".ipynb"):  # the cells' module, marked, written back into the cells
                from .notebook import Notebook

                nb = Notebook(data.decode("utf-8"))
                text, n = add_noqa(nb.module, [(nb.module_line(v.cell or 0, v.row), v.code)
                                               for v in r.violations if not v.code.startswith("TDL9")])
                new_data = nb.with_module(text).encode("utf-8")
            else:
                source = decode(data)
                text, n = add_noqa(source.text, marks)
                new_data = source.encode(text)
            problem = write_atomic(r.path, data, new_data) if n else None
        except (OSError, ValueError) as exc:
            problem = f"not written: {exc}"
        if problem is not None:
            from .engine import tool_finding

            left.append(tool_finding("TDL904", problem, filename=r.path))
            continue
        added += n
        files += 1 if n else 0
    sys.stdout.write(report.concise(left, False))
    if not args.quiet:
        sys.stderr.write(f"Added {added} noqa directive{'s' if added != 1 else ''} "
                         f"in {files} file{'s' if files != 1 else ''}.\n")
    return 0 if args.exit_zero or not left else 1


def _encoded_fix(result, data: bytes, settings: Settings) -> Optional[bytes]:
    """The fixed text of stdin as bytes in its own encoding, or None (the input stands;
    a fix that cannot be encoded becomes a TDL904 finding beside the input's own)."""
    from .engine import check_source, tool_finding
    from .source import decode

    if result.fixed_text is None:
        return None
    source = decode(data)
    try:
        return source.encode(result.fixed_text)
    except UnicodeEncodeError as exc:
        result.violations = check_source(source.text, result.path, settings) + [tool_finding(
            "TDL904", f"not fixed: the fix cannot be encoded as {source.encoding} ({exc.reason})",
            filename=result.path)]
        result.changed, result.applied = False, Counter()
        return None


def _summaries(results, unsafe: bool, args: argparse.Namespace, to_stdout: bool) -> None:
    if args.quiet:
        return
    stream = sys.stdout if to_stdout else sys.stderr
    applied: Counter = Counter()
    for r in results:
        applied.update(r.applied)
    changed = sum(1 for r in results if r.changed)
    remaining = [v for r in results for v in r.violations]
    verb = "would fix" if args.diff else "fixed"
    files_verb = "would change" if args.diff else "changed"
    stream.write(
        f"{len(results)} file{'s' if len(results) != 1 else ''} scanned, {changed} {files_verb}, "
        f"{len(results) - changed} unchanged; {sum(applied.values())} {verb}"
        + (" (" + ", ".join(f"{c}: {n}" for c, n in sorted(applied.items())) + ")" if applied else "")
        + f"; {len(remaining)} finding{'s' if len(remaining) != 1 else ''} left"
        + (f" ({sum(1 for v in remaining if v.fix and v.fix.applies(True) and not unsafe)} fixable with --unsafe-fixes)"
           if not unsafe and any(v.fix and v.fix.applies(True) for v in remaining) else "")
        + ".\n"
    )


def _rule(code: str) -> int:
    from .rules import find

    try:
        rule = find(code)
    except KeyError:
        raise ConfigError(f"unknown rule {code!r}; `torchdevlint rules` lists them")
    sys.stdout.write(rule.docs())
    return 0


def _rules() -> int:
    from .rules import ALL_RULES

    width = max(len(r.name) for r in ALL_RULES)
    sys.stdout.write(f"{'code':<7} {'name':<{width}}  summary\n{'':<7} {'':<{width}}  fix: ...\n")
    for r in ALL_RULES:
        sys.stdout.write(f"{r.code:<7} {r.name:<{width}}  {r.summary}\n{'':<7} {'':<{width}}  fix: {r.fix_summary}\n")
    sys.stdout.write("\nEvery rule is on by default. Fixes: safe = applied by `fix`; unsafe = applied with "
                     "--unsafe-fixes (may change behaviour); display = shown, never applied. "
                     "`torchdevlint rule CODE` explains each rule's fix safety.\n")
    return 0
