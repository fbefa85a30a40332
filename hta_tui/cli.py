"""Command line: `hta-tui PATH` opens the app, `hta-tui report PATH` prints the analyses,
`hta-tui check PATH` gives CI a verdict."""

from __future__ import annotations

import argparse
import atexit
import contextlib
import os
import shutil
import sys
import tempfile
import textwrap
from pathlib import Path
from typing import Any, NoReturn

from hta_tui.printable import printable

EXIT_OK, EXIT_NO_TRACE, EXIT_USAGE = 0, 1, 2


def _common(p: argparse.ArgumentParser) -> None:
    p.add_argument("--no-cache", action="store_true", help="parse again; keep nothing afterwards")
    p.add_argument("--workers", type=int, default=None, help="parser processes (default: cores)")
    p.add_argument(
        "--dask",
        metavar="ADDRESS",
        help="parse and analyse on a Dask cluster: a scheduler (tcp://host:8786) or local[:N] "
        "(N worker processes here); needs pip install 'hta-tui[dask]'",
    )
    p.add_argument(
        "--log",
        type=Path,
        metavar="FILE",
        help="append what went wrong, with full tracebacks, to FILE (or $HTA_TUI_LOG)",
    )
    p.add_argument(
        "--max-file-mb",
        type=float,
        metavar="MB",
        help="the most JSON (uncompressed) held in memory at once: larger files are read in "
        "pieces, those that cannot be are skipped (default 4000; $HTA_TUI_MAX_FILE_MB)",
    )
    p.add_argument(
        "--file-timeout",
        type=float,
        metavar="S",
        help="give up on a file after S seconds per GB of it on disk (default 300; "
        "$HTA_TUI_FILE_TIMEOUT)",
    )


def _apply_common(args: argparse.Namespace, parser: argparse.ArgumentParser) -> None:
    """The log file and the per-file limits (as environment, so parser workers see them)."""
    from hta_tui import logfile

    logfile.quiet_warnings()
    try:
        args.log = logfile.setup(args.log)
    except OSError as exc:
        parser.error(f"--log: {exc}")
    for value, name in (
        (args.max_file_mb, "HTA_TUI_MAX_FILE_MB"),
        (args.file_timeout, "HTA_TUI_FILE_TIMEOUT"),
    ):
        if value is not None:
            if value <= 0:
                parser.error(f"{name.lower()} must be positive")
            os.environ[name] = str(value)


def app_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="hta-tui",
        description="Explore PyTorch profiler (Kineto) traces in the terminal. "
        "`hta-tui report PATH --json` runs the same analyses headless; "
        "`hta-tui check PATH` turns the findings into a CI verdict (exit 0 / 1 / 2).",
    )
    p.add_argument("path", nargs="?", type=Path, help="trace folder or file")
    p.add_argument("--demo", action="store_true", help="open a generated 4-rank demo trace")
    p.add_argument("--poll", action="store_true", help="poll for changes (NFS, Lustre)")
    p.add_argument("--no-watch", action="store_true", help="do not watch for new files")
    p.add_argument("--no-mouse", action="store_true", help="leave mouse reporting off")
    p.add_argument("--theme", default=None, help="colour theme")
    diff = p.add_argument_group("comparing two runs")
    diff.add_argument(
        "--compare", type=Path, metavar="TEST", help="open the diff of PATH (control) with TEST"
    )
    diff.add_argument("--rank", type=int, help="control rank (default: its smallest)")
    diff.add_argument("--test-rank", type=int, help="test rank (default: its smallest)")
    _common(p)
    return p


def report_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="hta-tui report", description="Headless analyses.")
    p.add_argument("path", type=Path, help="trace folder or file")
    p.add_argument("--json", action="store_true", help="one JSON object on stdout")
    csv = p.add_mutually_exclusive_group()
    csv.add_argument(
        "--csv",
        type=Path,
        metavar="DIR",
        help="write one CSV per table into DIR, for spreadsheets: a text cell starting with "
        "= + - @ tab or CR gets a leading ' so it is never run as a formula",
    )
    csv.add_argument(
        "--csv-raw",
        type=Path,
        metavar="DIR",
        help="as --csv, every value exactly as in the data (for programs, not spreadsheets)",
    )
    p.add_argument(
        "--only",
        metavar="NAME[,NAME]",
        help="run only these analyses, or print only these tables (see --list)",
    )
    p.add_argument(
        "--rows",
        type=int,
        default=None,
        metavar="N",
        help="text output: rows per table (default 50; 0 shows every row)",
    )
    p.add_argument(
        "--width",
        type=int,
        default=None,
        metavar="N",
        help="text output: line width (default: the terminal's, or $COLUMNS, or 120)",
    )
    p.add_argument("--list", action="store_true", help="list the analyses and exit")
    p.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="an analysis parameter, HTA's name (operator_name=aten::linear, top_k=10, "
        "runtime_cutoff_us=20, ...; --list shows them all); repeatable",
    )
    diff = p.add_argument_group("comparing two runs")
    diff.add_argument("--compare", type=Path, metavar="TEST", help="diff PATH (control) with TEST")
    diff.add_argument("--rank", type=int, help="control rank (default: its smallest)")
    diff.add_argument("--test-rank", type=int, help="test rank (default: its smallest)")
    diff.add_argument("--device", choices=["ALL", "CPU", "GPU"], default="ALL")
    diff.add_argument("--short-names", action="store_true", help="match on shortened names")
    p.add_argument(
        "--hta-compat",
        action="store_true",
        help="round fractional timestamps to whole microseconds as HTA does",
    )
    _common(p)
    return p


def check_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="hta-tui check",
        description="The findings as a CI verdict: exit 0 pass, 1 fail, 2 no verdict (nothing "
        "loaded, a bad config, or every rule the config requires abstained).",
    )
    p.add_argument("path", type=Path, help="trace folder or file")
    p.add_argument(
        "--config",
        type=Path,
        metavar="FILE",
        help="TOML: fail_on, required, disabled, [rules.ID] thresholds, [baseline] gates",
    )
    p.add_argument(
        "--baseline",
        type=Path,
        metavar="PATH",
        help="fail when the step time, or any op or kernel, got slower than in PATH",
    )
    p.add_argument("--rank", type=int, help="the run's rank for the baseline gates")
    p.add_argument("--baseline-rank", type=int, help="the baseline's rank (default: smallest)")
    p.add_argument("--json", action="store_true", help="one JSON object on stdout")
    p.add_argument("--junit", type=Path, metavar="FILE", help="write JUnit XML to FILE")
    _common(p)
    return p


def _check(argv: list[str]) -> int:
    parser = check_parser()
    args = parser.parse_args(argv)
    _apply_common(args, parser)
    for path in (args.path, args.baseline, args.config):
        if path is not None and not path.exists():
            print(f"hta-tui check: {printable(path)}: no such file or folder", file=sys.stderr)
            return EXIT_USAGE
    from hta_tui.check import EXIT_NO_VERDICT, main_check

    try:
        return main_check(
            args.path,
            config_path=args.config,
            baseline=args.baseline,
            rank=args.rank,
            baseline_rank=args.baseline_rank,
            as_json=args.json,
            junit=args.junit,
            no_cache=args.no_cache,
            workers=args.workers,
        )
    except BrokenPipeError:
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return EXIT_NO_VERDICT
    except Exception as exc:  # no verdict, never a traceback on the terminal
        import logging

        logging.getLogger("hta_tui.cli").exception("check failed")
        print(f"hta-tui check: internal error: {type(exc).__name__}: {exc}"[:300], file=sys.stderr)
        return EXIT_NO_VERDICT


#: The demo's GPU memory events: a loss that keeps a tensor every step (a leak to find).
DEMO_MEMORY: dict[str, Any] = {"leak_op": "aten::nll_loss_forward"}


def demo_dir() -> Path:
    """A fresh synthetic 4-rank trace folder in the temp dir (never the user's folders)."""
    from hta_tui.synth import MemoryOptions, write_trace_dir

    out = Path(tempfile.mkdtemp(prefix="hta-tui-demo-"))
    write_trace_dir(out, ranks=4, steps=6, seed=0, memory=MemoryOptions(**DEMO_MEMORY))
    return out


def _report(run_report: Any, args: argparse.Namespace, only: list[str] | None, options: Any) -> int:
    if args.compare is not None:
        from hta_tui.report import run_compare_report

        return run_compare_report(
            args.path,
            args.compare,
            control_rank=args.rank,
            test_rank=args.test_rank,
            device_type=args.device,
            use_short_name=args.short_names,
            as_json=args.json,
            no_cache=args.no_cache,
            hta_compat=args.hta_compat,
            width=args.width,
            rows=args.rows,
        )
    return run_report(
        args.path,
        as_json=args.json,
        csv_dir=args.csv or args.csv_raw,
        csv_raw=args.csv_raw is not None,
        only=only,
        no_cache=args.no_cache,
        workers=args.workers,
        hta_compat=args.hta_compat,
        options=options,
        width=args.width,
        rows=args.rows,
        dask=args.dask,
    )


def _end_now(code: int) -> NoReturn:
    """The report's process ends once its output is out, without the teardown of what it
    imported (polars, numpy, the analyses: 0.1-0.3 s after the report's last byte, every
    module's objects freed one by one, which the shell and a reader of its pipe waited
    for): its streams flushed and the exit handlers run (the log's, multiprocessing's: its
    named semaphores and its workers), then `os._exit`."""
    _flush()
    atexit._run_exitfuncs()  # (no public way to run them without the teardown)
    _flush()  # (what a handler wrote)
    os._exit(code)


def _flush() -> None:
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(OSError, ValueError):  # (`| head`: the reader left)
            stream.flush()


def list_analyses(out: Any = None) -> None:
    """`report --list`: every declared analysis (analysis/registry.py), its cost class, the
    options it reads (HTA's names), the frames it reads besides events, its other tables."""
    from hta_tui.analysis.registry import ANALYSES, HTA_NAMES, TABLE_OWNER, parameters

    out = out or sys.stdout
    for a in ANALYSES:
        print(f"{a.name:34} {a.title}{'' if a.default else ' (only when named)'}", file=out)
        facts = [f"cost: {a.cost_class}"]
        if a.hta_options:
            facts.append(f"options: {', '.join(a.hta_options)}")
        reads = [*a.frames, *(["the files' metadata"] if a.meta else [])]
        if "trace_set" in a.inputs:
            reads.append("the files' summaries the loader kept")
        if reads:
            facts.append(f"reads: {', '.join(reads)}")
        # how it splits over ranks (hta_tui/exec): rank by rank on --dask's workers, or not
        split = {"rank": "rank by rank", "reduce": "rank by rank, reduced across ranks"}
        if a.scope == "job" and a.rank_part is not None:
            split["job"] = "on the other analyses' tables"
        facts.append(split.get(a.scope, "across ranks (not yet distributed)"))
        print(
            textwrap.fill("; ".join(facts), 88, initial_indent=" " * 4, subsequent_indent=" " * 6),
            file=out,
        )
    print("\ntables of the analyses above, also accepted by --only:", file=out)
    for table, owner in TABLE_OWNER.items():
        print(f"  {table:32} (from {owner})", file=out)
    print("\nparameters (--set NAME=VALUE, or HTA's name), with their defaults:", file=out)
    for name, value in parameters().items():
        hta = f"  (HTA: {HTA_NAMES[name]})" if name in HTA_NAMES else ""
        print(f"  {name}={value}{hta}", file=out)


def main(argv: list[str] | None = None) -> int:
    """The command line; `argv` None: this process's own (the program: `hta-tui`, `python -m
    hta_tui`), whose report ends it once written (`_end_now`)."""
    program = argv is None
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv and argv[0] == "check":
        return _check(argv[1:])
    if argv and argv[0] == "report":
        parser = report_parser()
        if "--list" in argv[1:]:
            try:
                list_analyses()
            except BrokenPipeError:  # `| head`
                os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
            return EXIT_OK
        args = parser.parse_args(argv[1:])
        _apply_common(args, parser)  # (the limits in the environment: the workers' too)
        if args.compare is None and not args.dask:
            # the workers' imports on the other core while this process makes its own
            from hta_tui.exec.backends import start_early
            from hta_tui.trace.cache_root import default_root

            start_early(args.path, None if args.no_cache else default_root())
        only = [n.strip() for n in args.only.split(",") if n.strip()] if args.only else None
        if only:
            from hta_tui.analysis.registry import known

            unknown = [n for n in only if not known(n)]
            if unknown:
                parser.error(f"unknown analysis: {', '.join(unknown)} (see --list)")
        from hta_tui.analysis.registry import options_with

        if any("=" not in item for item in args.set):
            parser.error("--set wants NAME=VALUE")
        try:
            options = options_with(dict(item.partition("=")[::2] for item in args.set))
        except ValueError as exc:
            parser.error(f"--set: {exc}")
        for path in (args.path, args.compare):
            if path is not None and not path.exists():
                print(f"hta-tui: {printable(path)}: no such file or folder", file=sys.stderr)
                return EXIT_USAGE
        from hta_tui.report import run_report

        try:
            code = _report(run_report, args, only, options)
        except BrokenPipeError:  # `| head`: the reader left, which is not an error
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
            return EXIT_OK
        except Exception as exc:  # the traceback goes to the log, never the terminal
            import logging

            logging.getLogger("hta_tui.cli").exception("report failed")
            hint = f" (details in {args.log})" if args.log else " (--log FILE for details)"
            print(
                f"hta-tui: internal error: {type(exc).__name__}: {exc}"[:300] + hint,
                file=sys.stderr,
            )
            return EXIT_NO_TRACE
        if program:
            _end_now(code)
        return code
    parser = app_parser()
    args = parser.parse_args(argv)
    _apply_common(args, parser)
    if args.demo:
        path = demo_dir()
    elif args.path is None:
        parser.print_usage(sys.stderr)
        print("hta-tui: give a trace folder or file, or --demo", file=sys.stderr)
        return EXIT_USAGE
    else:
        path = args.path
    for p in (path, args.compare):
        if p is not None and not p.exists():
            print(f"hta-tui: {printable(p)}: no such file or folder", file=sys.stderr)
            return EXIT_USAGE
    if args.compare is None and (args.rank is not None or args.test_rank is not None):
        parser.error("--rank and --test-rank choose the ranks of a comparison (with --compare)")
    from hta_tui.app.app import run_app
    from hta_tui.trace.cache import Cache

    if args.demo:  # the demo lives in a temporary folder: remove it on the way out
        atexit.register(shutil.rmtree, path, True)
    return run_app(
        path,
        cache=Cache(enabled=not args.no_cache),
        poll=args.poll,
        watch=not args.no_watch,
        mouse=not args.no_mouse,
        theme=args.theme,
        workers=args.workers,
        compare=args.compare,
        control_rank=args.rank,
        test_rank=args.test_rank,
        dask=args.dask,
    )
