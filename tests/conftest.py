"""Shared fixtures. Real traces live in ../shared beside the repo and are never copied here."""

from __future__ import annotations

import gc
import json
import os
import sys
from pathlib import Path
from typing import Any

import polars as pl
import pytest

REPO = Path(__file__).resolve().parents[1]
SHARED = Path(os.environ.get("HTA_TUI_SHARED", REPO.parent / "shared"))


@pytest.fixture(scope="session")
def shared() -> Path:
    """../shared (traces/ and oracle/); the test is skipped cleanly when it is absent."""
    if not (SHARED / "traces").is_dir():
        pytest.skip(f"shared traces not found at {SHARED}")
    return SHARED


def oracle_frame(path: Path) -> pl.DataFrame | None:
    """One of HTA's reference frames ({"columns", "data", ...}); None where HTA gave None."""
    doc: Any = json.loads(path.read_text())
    if doc is None:
        return None
    cols = doc["columns"]
    names = ["/".join(map(str, c)) if isinstance(c, list) else str(c) for c in cols]
    rows = [dict(zip(names, row, strict=False)) for row in doc["data"]]
    index_names = doc.get("index_names") or []
    if any(n is not None for n in index_names):
        for row, idx in zip(rows, doc["index"], strict=False):
            idx = idx if isinstance(idx, list) else [idx]
            for n, v in zip(index_names, idx, strict=False):
                row[str(n)] = v
    return pl.DataFrame(rows, infer_schema_length=None) if rows else pl.DataFrame()


#: Python's collector thresholds in the test processes: the apps, tables and parsed traces of
#: one process make millions of objects, and at the default (700, 10, 10) the collector ran
#: 2,000 times a module (a second of CPU in the idle/steps module's 25); at these, 35 times
#: (0.3 s). Only when it runs changes, not what it frees; the app's GC pacer sets and restores
#: its own around each app (tests/test_gc_pacing.py checks against whatever was set).
GC_THRESHOLD = (20_000, 50, 100)


#: A cache folder of the shared cases for every test process of one run (`shared_sets.trace_set`):
#: the first process to load a case parses it, the others read its frames (each of the three
#: parsed every case). Made by the first process (the workers inherit it), removed at its end.
CASES_CACHE = "HTA_TUI_TEST_CASES_CACHE"


def pytest_configure(config: pytest.Config) -> None:
    gc.set_threshold(*GC_THRESHOLD)
    if CASES_CACHE not in os.environ:  # the first process (the workers inherit it)
        import shutil
        import tempfile

        folder = tempfile.mkdtemp(prefix="hta-tui-test-cases-")
        os.environ[CASES_CACHE] = folder
        config.add_cleanup(lambda: shutil.rmtree(folder, ignore_errors=True))
        if sys.dont_write_bytecode and config.getoption("numprocesses", None):
            _share_bytecode(config)


def _share_bytecode(config: pytest.Config) -> None:
    """Where the environment says not to write bytecode (PYTHONDONTWRITEBYTECODE), every
    process of a run compiled the project and the tests again: each pytest-xdist worker
    ~4 s of CPU rewriting and compiling the test modules it collects (~7 s of collection
    against ~3 s with their bytecode), and each process the tests start (a pool's
    forkserver, Dask's workers, `python -m hta_tui`) the project's modules. Made here once,
    before the workers start, in the folders Python keeps bytecode in (`__pycache__`,
    ignored by git): the test modules as pytest rewrites them, the rest as Python compiles
    them; then read by every process of the run. (PYTHONPYCACHEPREFIX would keep them out
    of the tree, but every process would then compile the standard library and every
    installed package again: their bytecode is read from their own `__pycache__` only.)
    Only where bytecode is read from changes, never what runs."""
    import compileall
    import re

    os.environ.pop("PYTHONDONTWRITEBYTECODE", None)  # the workers and what they start
    sys.dont_write_bytecode = False
    compileall.compile_dir(REPO / "hta_tui", quiet=2)
    rewritten = re.compile(r"(test_[^/]*|conftest)\.py$")  # pytest's own, below
    compileall.compile_dir(REPO / "tests", quiet=2, maxlevels=0, rx=rewritten)
    try:  # pytest's own rewrite of the test modules (private: skipped if it moved)
        from _pytest.assertion import rewrite

        state = config.stash[rewrite.assertstate_key]
        for path in [*sorted((REPO / "tests").glob("test_*.py")), Path(__file__)]:
            pyc = rewrite.get_cache_dir(path) / (path.name[:-3] + rewrite.PYC_TAIL)
            if rewrite._read_pyc(path, pyc) is None:
                source, code = rewrite._rewrite_test(path, config)
                pyc.parent.mkdir(parents=True, exist_ok=True)
                rewrite._write_pyc(state, code, source, pyc)
    except Exception:  # each worker then rewrites them, as before
        pass


@pytest.fixture(autouse=True, scope="session")
def _share_parsed_css() -> None:
    """In the processes that run tests (not pytest-xdist's controller: no Textual there),
    every app a test starts parsed Textual's CSS from its text (the app's files and every
    widget's DEFAULT_CSS; Textual keeps parsed rules per stylesheet, and each app has its
    own), twice at start (the theme's restyle parses into a new stylesheet): about a tenth of
    an app's start. Kept here for the process, by everything the parse reads (the source,
    where it came from, its place in the cascade and the theme's variables), so the second
    app of a process gets the rules the first parsed from the same text with the same
    variables: what each app applies does not change (the snapshots say so), only how often
    it is parsed. Textual's stylesheet treats its parsed rules as read-only already (its own
    cache hands one list to every parse of a source). Skipped if Textual's private moved."""
    try:
        from textual.css.stylesheet import Stylesheet

        parse_rules = Stylesheet._parse_rules
    except (ImportError, AttributeError):  # each app parses, as before
        return
    parsed: dict[tuple[Any, ...], Any] = {}

    def shared(
        self: Any,
        css: str,
        read_from: Any,
        is_default_rules: bool = False,
        tie_breaker: int = 0,
        scope: str = "",
    ) -> Any:
        key = (css, read_from, is_default_rules, tie_breaker, scope, *self._variables.items())
        rules = parsed.get(key)
        if rules is None:  # an error raises, as it did, and is not kept
            rules = parsed[key] = parse_rules(
                self, css, read_from, is_default_rules, tie_breaker, scope
            )
        return rules

    Stylesheet._parse_rules = shared  # type: ignore[method-assign]


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """A test marked `shared` gets the `shared` fixture even when it does not name it (its
    cases are listed at collection time), so it skips, like every other one, when ../shared
    is absent."""
    for item in items:
        if item.get_closest_marker("shared") is not None and "shared" not in item.fixturenames:
            item.fixturenames.insert(0, "shared")
    # The longest modules start first: `--dist loadfile` hands modules out in this order, and
    # one of them starting last would keep the run going on one worker alone. (pytest-xdist
    # reorders modules by their number of tests unless told not to: `--no-loadscope-reorder`
    # in pyproject's addopts. Without it a walk of six tests over every view started last.)
    rank = {name: i for i, name in enumerate(LONGEST_FIRST)}
    items.sort(key=lambda item: rank.get(item.path.name, len(rank)))


#: Modules by the CPU they took on one worker in a per-test profile of the whole suite, most
#: first (re-rank when modules grow): one long app walk or Dask run cannot be shared out, and
#: pytest-xdist hands a worker its next module when two of its tests are left, so small
#: modules at the end let the three workers finish together. The
#: time-limit tests (test_loader_isolation: seconds of waiting on other processes) come
#: early, where the other workers' work fills their waits. The rest (under ~2.5 s each) keep
#: their order and fill in around them.
LONGEST_FIRST = (
    "test_rankwise.py",
    "test_every_view.py",
    "test_cache_damage.py",
    "test_screen_idle_steps.py",
    "test_screen_timelines_launch.py",
    "test_fuzz.py",
    "test_screen_kernels.py",
    "test_hta_parity.py",
    "test_screen_diff.py",
    "test_api.py",
    "test_report_every_key.py",
    "test_report.py",
    "test_many_ranks.py",
    "test_screen_timeline.py",
    "test_app_shell.py",
    "test_findings_shared.py",
    "test_view_first.py",
    "test_syncs.py",
    "test_hostile_input.py",
    "test_stream.py",
    "test_loader_isolation.py",
    "test_analysis_sequences.py",
    "test_screen_memory.py",
    "test_walk.py",
    "test_screen_distributed.py",
    "test_screen_operators.py",
    "test_critical_path.py",
    "test_timeline_links_tables.py",
    "test_hostile_names.py",
    "test_csv_formulas.py",
    "test_screen_syncs_modules.py",
    "test_load.py",
    "test_screen_findings.py",
    "test_parse.py",
    "test_special_files.py",
    "test_timeline_links.py",
    "test_app_snapshot.py",
    "test_textual_privates.py",
    "test_hta_deviations.py",
    "test_screen_gpu_metrics.py",
    "test_findings.py",
    "test_app_ui_behaviour.py",
    "test_one_key.py",
    "test_screen_critical_path.py",
    "test_plugin_definitions.py",
    "test_charts.py",
    "test_catalog_run.py",
    "test_no_verdict_before_data.py",
    "test_screen_kernel_view.py",
    "test_tb_kernels.py",
    "test_app_spans.py",
    "test_diff.py",
    "test_screen_step_time.py",
    "test_report_text.py",
    "test_timeline_lanes.py",
    "test_screen_graph_launches.py",
)


@pytest.fixture
def ui(tmp_path: Path) -> Any:
    """The Pilot helpers (tests/test_app_support.py `PilotHelpers`): `ui.wait_until`,
    `ui.settle`, `ui.open_view`, `ui.press_view`, `ui.app(root)`..."""
    from tests.test_app_support import PilotHelpers

    return PilotHelpers(tmp_path)


@pytest.fixture(autouse=True)
def _no_cache_notices_from_other_tests() -> Any:
    """Notices of damaged cache entries are process-wide (`trace.cache.take_notices`): one
    test's must not show up as a toast in another's app or snapshot. Taken after each test
    too: a module-scoped app walk is set up before this (function-scoped) fixture runs for
    the test that first asks for it, so only a test's own teardown keeps its notices out."""
    from hta_tui.trace.cache import take_notices

    take_notices()
    yield
    take_notices()


@pytest.fixture(autouse=True, scope="session")
def _no_overview_findings() -> Any:
    """The overview's findings run every rule's analyses (~0.6 s of CPU on the tests' tiny
    traces): only the app tests that look at them turn them on (`HtaApp(findings=True)`).
    For the whole session, so that the apps of module-scoped walks (set up before any
    function-scoped fixture) go without them too."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("HTA_TUI_FINDINGS", "0")
        yield


@pytest.fixture
def snap_svg(snapshot: Any, request: pytest.FixtureRequest) -> Any:
    """`snap_compare` for a screenshot already taken (`app_walk.screenshot`) in an app run that
    other tests share: the same snapshot file, comparison, `--snapshot-update` and report."""
    import inspect
    import pickle

    from pytest_textual_snapshot import (
        PseudoApp,
        PseudoConsole,
        SVGImageExtension,
        node_to_report_path,
    )
    from rich.console import Console

    snap = snapshot.use_extension(SVGImageExtension)

    def compare(svg: str) -> bool:
        result = snap == svg
        index = snap.num_executions - 1
        done = snap.executions.get(index)
        exists = bool(done and done.final_data is not None)
        console = Console(legacy_windows=False, force_terminal=True)
        node = request.node
        path, line, name = node.reportinfo()
        data = (
            result,
            str(snap),
            svg,
            PseudoApp(PseudoConsole(console.legacy_windows, console.size)),
            path,
            line,
            name,
            inspect.getdoc(node.function) or "",
            "",
            exists,
        )
        node_to_report_path(node).write_bytes(pickle.dumps(data))
        return result

    return compare
