"""The headless session, without Pilot or parsing: stale scans, a crashing loader, rechecks of
incomplete files, two sides, and one wake-up per batch. A fake loader answers each file at
once, and a hand-run executor decides when work runs, so every test takes milliseconds."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable, Iterator
from concurrent.futures import Executor, Future
from pathlib import Path
from typing import Any

import pytest

from hta_tui.session import MAIN, TEST, Change, InlineExecutor, LiveSession
from hta_tui.session import live as live_module
from hta_tui.trace.cache import Cache
from hta_tui.trace.discover import TraceFile
from hta_tui.trace.load import LoadResult
from hta_tui.trace.watch import Change as FileChange


class Later(Executor):
    """Keeps every task until `run()`: the test decides when the session's work happens."""

    def __init__(self) -> None:
        self.tasks: list[tuple[Callable[..., Any], tuple[Any, ...], dict[str, Any]]] = []

    def submit(self, fn: Callable[..., Any], /, *args: Any, **kw: Any) -> Future[Any]:
        self.tasks.append((fn, args, kw))
        return Future()

    def run(self) -> None:
        while self.tasks:
            fn, args, kw = self.tasks.pop(0)
            fn(*args, **kw)


def files(folder: Path, n: int, start: int = 0) -> list[Path]:
    folder.mkdir(parents=True, exist_ok=True)
    out = []
    for rank in range(start, start + n):
        path = folder / f"rank-{rank}.json"
        path.write_bytes(b"{}")
        out.append(path)
    return out


class FakeLoader:
    """`load_files` answering each file with `status[path name]` (default "error"), counting
    the files it was asked for."""

    def __init__(self, status: dict[str, str] | None = None) -> None:
        self.status = status or {}
        self.asked: list[str] = []

    def __call__(self, tfs: list[TraceFile], cache: Cache, **kw: Any) -> Iterator[LoadResult]:
        for tf in tfs:
            self.asked.append(tf.path.name)
            status = self.status.get(tf.path.name, "error")
            yield LoadResult(tf, status, error=None if status == "loaded" else status)


@pytest.fixture
def loader(monkeypatch: pytest.MonkeyPatch) -> FakeLoader:
    fake = FakeLoader()
    monkeypatch.setattr(live_module, "load_files", fake)
    return fake


def session(tmp_path: Path, executor: Executor, **kw: Any) -> tuple[LiveSession, list[Change]]:
    wakes: list[int] = []
    s = LiveSession(
        tmp_path / "a",
        cache=Cache(tmp_path / "cache"),
        executor=executor,
        wake=lambda: wakes.append(1),
        **kw,
    )
    heard: list[Change] = []
    s.subscribe(heard.append)
    s.wakes = wakes  # type: ignore[attr-defined]
    return s, heard


def test_two_sides_load_and_each_change_is_announced_once(tmp_path: Path, loader) -> None:
    files(tmp_path / "a", 3)
    files(tmp_path / "b", 2, start=10)
    loader.status = {"rank-0.json": "incomplete"}
    s, heard = session(tmp_path, InlineExecutor(), compare=tmp_path / "b")
    s.scan()
    assert s.trace_set.entries == {}  # nothing changes before the owner applies
    changes = s.apply_pending()
    assert heard == changes
    assert sorted(c.side for c in changes) == [MAIN, TEST]
    by_side = {c.side: c for c in changes}
    for side, n in ((MAIN, 3), (TEST, 2)):
        ts = s.sides[side].trace_set
        assert by_side[side].generation == ts.generation
        assert by_side[side].paths == frozenset(ts.entries)
        assert len(ts.entries) == n
        assert not by_side[side].scanning
    assert s.trace_set.entries[tmp_path / "a" / "rank-0.json"].status == "incomplete"
    assert s.compare_set is not None
    assert {e.status for e in s.compare_set.entries.values()} == {"error"}
    # the test side's broken files are told (the overview lists the main side's only)
    assert sorted(n.text for n in by_side[TEST].notices) == [
        "test side: rank-10.json: error",
        "test side: rank-11.json: error",
    ]
    assert by_side[MAIN].notices == ()
    assert s.idle and s.apply_pending() == []


def test_a_batch_of_files_is_one_wake_and_one_generation_per_step(tmp_path: Path, loader) -> None:
    """100 files found and loaded in one run: the owner is woken once, and the set's
    generation moves twice (listed, loaded), not once or twice per file."""
    files(tmp_path / "a", 100)
    s, _ = session(tmp_path, Later())
    s.scan()
    s._executor.run()  # type: ignore[attr-defined]
    assert len(s.wakes) == 1  # type: ignore[attr-defined]
    (change,) = s.apply_pending()
    assert len(change.paths) == 100
    assert change.generation <= 2


def test_a_long_listing_reaches_the_owner_in_turns(
    tmp_path: Path, loader, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A scan's listing comes in parts of FOUND_PART files, one part per limited
    `apply_pending` (10,000 files listed at once held the UI thread 0.06-0.11 s); the side
    scans until the last part, which still drops the files no longer in the folder."""
    monkeypatch.setattr(live_module, "FOUND_PART", 4)
    gone = files(tmp_path / "a", 10)[-1]
    later = Later()
    s, _ = session(tmp_path, later)

    def turns() -> list[tuple[int, bool]]:
        later.run()
        seen = []
        while s.pending():
            s.apply_pending(limit=100)
            seen.append((len(s.trace_set.entries), s.sides[MAIN].scanning))
        return seen

    s.scan()
    # three parts (4, 4, 2 files: a turn each; the loaded files come with the last)
    assert turns() == [(4, True), (8, True), (10, False)]
    gone.unlink()
    s.scan()
    assert turns() == [(10, True), (10, True), (9, False)]  # the gone file: with the last
    assert gone not in s.trace_set.entries


def test_an_older_scan_is_dropped(tmp_path: Path, loader) -> None:
    (first,) = files(tmp_path / "a", 1)
    later = Later()
    s, _ = session(tmp_path, later)
    s.scan()  # scan 1
    first.unlink()
    files(tmp_path / "a", 1, start=5)
    s.scan()  # scan 2, before scan 1 ran: scan 1's work is stale when it lands
    later.run()
    s.apply_pending()
    assert [p.name for p in s.trace_set.entries] == ["rank-5.json"]
    assert s.sides[MAIN].scan == 2 and not s.sides[MAIN].scanning


def test_a_result_for_an_older_version_of_a_file_is_dropped(tmp_path: Path, loader) -> None:
    (path,) = files(tmp_path / "a", 1)
    later = Later()
    s, _ = session(tmp_path, later)
    s.scan()
    later.run()
    s.apply_pending()
    entry = s.trace_set.entries[path]
    generation = s.trace_set.generation
    # a load of a version the set no longer has (the file changed since it started)
    old = TraceFile(path, entry.file.size, entry.file.mtime_ns - 1, 0, "")
    s._push(s.sides[MAIN], s.sides[MAIN].scan, "loaded", LoadResult(old, "loaded"))
    assert s.apply_pending()[0].paths == frozenset()
    assert s.trace_set.generation == generation
    assert s.trace_set.entries[path].status == "error"


def test_a_crashing_loader_fails_its_files_not_the_session(tmp_path: Path, monkeypatch) -> None:
    files(tmp_path / "a", 2)

    def broken(tfs, cache, **kw):
        raise RuntimeError("pool exploded")
        yield  # pragma: no cover

    monkeypatch.setattr(live_module, "load_files", broken)
    s, _ = session(tmp_path, InlineExecutor())
    s.scan()
    (change,) = s.apply_pending()
    entries = s.trace_set.entries.values()
    assert [e.status for e in entries] == ["error", "error"]
    assert all("pool exploded" in (e.error or "") for e in entries)
    assert [(n.severity, "pool exploded" in n.text) for n in change.notices] == [("error", True)]
    assert not change.scanning and s.idle


def test_recheck_reloads_only_incomplete_files_that_changed(tmp_path: Path, loader) -> None:
    slow, done = files(tmp_path / "a", 2)
    loader.status = {slow.name: "incomplete", done.name: "loaded"}
    s, _ = session(tmp_path, InlineExecutor())
    s.scan()
    s.apply_pending()
    assert s.sides[MAIN].incomplete.keys() == {slow}
    loader.asked.clear()
    s.recheck()  # nothing changed on disk: nothing loads
    assert s.apply_pending() == [] and loader.asked == []
    slow.write_bytes(b'{"traceEvents": []}')  # the writer finished (a missed event)
    loader.status[slow.name] = "loaded"
    s.recheck()
    (change,) = s.apply_pending()
    assert loader.asked == [slow.name]
    assert change.paths == {slow}
    assert s.trace_set.entries[slow].status == "loaded"
    assert s.sides[MAIN].incomplete == {}


def test_watcher_changes_reload_and_remove(tmp_path: Path, loader) -> None:
    a, b = files(tmp_path / "a", 2)
    s, _ = session(tmp_path, InlineExecutor())
    s.scan()
    s.apply_pending()
    (c,) = files(tmp_path / "a", 1, start=7)
    b.unlink()
    s._changed(
        s.sides[MAIN], [FileChange("added", c), FileChange("deleted", b)]
    )  # as the watcher thread reports them
    (change,) = s.apply_pending()
    assert set(s.trace_set.entries) == {a, c}
    assert change.paths == {b, c}


def test_a_failing_watcher_says_why(tmp_path: Path, loader, monkeypatch) -> None:
    async def no_watch(root, **kw):
        raise OSError("OS file watch limit reached")
        yield  # pragma: no cover

    monkeypatch.setattr(live_module.watch_module, "watch", no_watch)
    files(tmp_path / "a", 1)
    s, _ = session(tmp_path, InlineExecutor())
    s._watch_thread(s.sides[MAIN])  # the watcher's thread body, run here
    changes = s.apply_pending()
    assert changes[-1].watch == "off"
    (notice,) = [n for c in changes for n in c.notices]
    assert "watch limit" in notice.text and "--poll" in notice.text


def test_select_span_is_announced(tmp_path: Path, loader) -> None:
    files(tmp_path / "a", 1)
    s, heard = session(tmp_path, InlineExecutor())
    s.scan()
    s.apply_pending()
    before = s.trace_set.generation
    heard.clear()
    s.select_span(0, tmp_path / "a" / "rank-0.json")
    assert [(c.side, c.generation) for c in heard] == [(MAIN, s.trace_set.generation)]
    assert s.trace_set.generation > before


def test_the_session_imports_no_ui() -> None:
    code = (
        "import sys, hta_tui.session;"
        "bad = sorted(m for m in sys.modules if m.split('.')[0] in ('textual', 'rich') "
        "or m.startswith('hta_tui.app'));"
        "print(','.join(bad))"
    )
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1])}
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, env=env
    )
    assert out.stdout.strip() == ""


def test_report_and_api_open_their_files_through_the_session(tmp_path: Path, monkeypatch) -> None:
    """What the session's loader says of a file is what the report and the API say of it:
    the three front ends go through the same door."""
    import io

    import orjson

    from hta_tui.api import TraceAnalysis
    from hta_tui.report import run_report

    paths = files(tmp_path / "a", 2)
    real = live_module.load_files

    def vetoing(tfs, cache, **kw):
        for result in real(tfs, cache, **kw):
            if result.file.path == paths[1]:
                result = LoadResult(result.file, "error", error="vetoed by the session")
            yield result

    monkeypatch.setattr(live_module, "load_files", vetoing)
    out = io.StringIO()
    run_report(tmp_path / "a", as_json=True, out=out, cache=Cache(tmp_path / "cache"), only=[])
    errors = {Path(f["path"]).name: f["error"] for f in orjson.loads(out.getvalue())["files"]}
    assert errors["rank-1.json"] == "vetoed by the session"
    ta = TraceAnalysis(tmp_path / "a", cache=Cache(tmp_path / "cache"))
    assert ta.session.trace_set is ta.trace_set
    api_errors = dict(zip(ta.files()["path"], ta.files()["error"], strict=True))
    assert api_errors["rank-1.json"] == "vetoed by the session"


def test_the_overview_uses_what_the_loader_computed_without_reading_it_back(
    tmp_path: Path, monkeypatch
) -> None:
    """A file parsed now hands its overview numbers and step breakdown to the session with
    its result: building the overview's tables reads no derived table back from the cache."""
    from hta_tui.analysis import overview, step_overview
    from hta_tui.session import open_session
    from hta_tui.trace import model
    from tests.test_app_support import write_ranks

    write_ranks(tmp_path / "a", 2)
    s = open_session(
        tmp_path / "a", Cache(tmp_path / "cache"), after_parse=step_overview.precompute
    )
    ts = s.trace_set
    assert [e.status for e in ts.entries.values()] == ["loaded", "loaded"]

    def no_read_back(path: Path) -> Any:
        raise AssertionError(f"read back {path.name}")

    monkeypatch.setattr(model, "read_checked", no_read_back)
    files_table = overview.file_table(ts)
    # rank_trace: per step a GEMM of 400 - 60 * rank us, the all-reduce (200) and the copy
    # (40) after it, no overlap; three steps
    assert files_table.sort("rank")["gpu_busy_us"].to_list() == [3 * 640.0, 3 * 580.0]
    steps = step_overview.step_table(ts)
    assert sorted(steps["rank"].unique().to_list()) == [0, 1]


def test_the_report_says_when_the_session_failed_to_list_the_folder(
    tmp_path: Path, monkeypatch, capsys
) -> None:
    """A scan that fails is a one-line note on stderr and a failing exit code, not a report
    of an empty folder that says nothing."""
    import io

    from hta_tui.report import run_report

    def unreadable(root: Path) -> list[TraceFile]:
        raise PermissionError(13, "Permission denied", str(root))

    monkeypatch.setattr(live_module, "discover", unreadable)
    code = run_report(tmp_path / "a", out=io.StringIO(), cache=Cache(tmp_path / "cache"), only=[])
    err = capsys.readouterr().err
    assert code == 1
    assert "hta-tui: note: loading failed: PermissionError" in err


def test_the_overview_makes_rows_again_only_for_changed_files(tmp_path: Path, monkeypatch) -> None:
    """A file landing among others makes one new row of the file table; the table is the one
    `overview.file_table` makes from scratch."""
    from polars.testing import assert_frame_equal

    from hta_tui.analysis import overview, overview_rows
    from hta_tui.session import open_session
    from tests.test_app_support import write_rank, write_ranks

    root = tmp_path / "a"
    write_ranks(root, 3)
    s = open_session(root, Cache(tmp_path / "cache"))
    table, kept = overview_rows.update_file_table(s.trace_set, None)
    assert_frame_equal(table, overview.file_table(s.trace_set))
    made: list[str] = []
    real = overview.file_row

    def counted(ts: Any, entry: Any) -> dict[str, object]:
        made.append(entry.path.name)
        return real(ts, entry)

    monkeypatch.setattr(overview, "file_row", counted)
    new = write_rank(root, 3, world=3)
    s.reload([new])
    s.wait()
    table, kept = overview_rows.update_file_table(s.trace_set, kept)
    assert made == [new.name]
    monkeypatch.setattr(overview, "file_row", real)
    assert_frame_equal(table, overview.file_table(s.trace_set))
    assert table["path"].to_list()[-1] == new.name


def test_a_limited_apply_leaves_the_rest_queued_in_order(tmp_path: Path, loader) -> None:
    """An owner on a UI thread applied 10,000 landed files in one turn (0.15 s of CPU): with
    a limit it applies that many loaded files per call, the rest stay queued in order."""
    files(tmp_path / "a", 25)
    s, heard = session(tmp_path, InlineExecutor())
    s.scan()
    ts = s.trace_set
    s.apply_pending(limit=10)  # the listing, then 10 files
    assert len(ts.entries) == 25 and s.pending()
    assert ts.counts()["error"] == 10 and ts.counts()["pending"] == 15
    first = ts.generation
    s.apply_pending(limit=10)
    assert ts.counts()["error"] == 20 and s.pending() and ts.generation > first
    s.apply_pending(limit=10)
    assert ts.counts()["error"] == 25 and not s.pending() and s.idle
    assert len(heard) == 3
