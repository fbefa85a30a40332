"""Thousands of rank files (issue 26, "ranks"): the trace set answers from a rank index built
once per change, and the overview's file table is linear in the files.

The files here are made-up load results (no parsing): what is measured is the work the set
and the table do per file, counted, never timed.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import polars as pl
import pytest

from hta_tui.analysis import overview
from hta_tui.trace import model
from hta_tui.trace.discover import TraceFile
from hta_tui.trace.load import LoadResult
from hta_tui.trace.model import TraceSet
from hta_tui.trace.schema import FRAME_SCHEMAS


class CountingMeta(dict):
    """A file's metadata that counts how often each key is read."""

    reads: dict[str, int] = {}  # noqa: RUF012 (one counter for the test that reads it)

    def get(self, key: Any, default: Any = None) -> Any:
        CountingMeta.reads[key] = CountingMeta.reads.get(key, 0) + 1
        return super().get(key, default)


def trace_file(root: Path, i: int, *, worker: str | None = None) -> TraceFile:
    name = f"{worker}.{1_700_000_000_000 + i}.pt.trace.json" if worker else f"rank{i}.json"
    return TraceFile(
        path=root / name,
        size=100 + i,
        mtime_ns=1_000 + i,
        rank_hint=None if worker else i,
        span_hint=name,
        worker=worker,
        stamp=str(1_700_000_000_000 + i) if worker else None,
        stamp_ns=(1_700_000_000_000 + i) * 1000 if worker else None,
    )


def loaded(tmp_path: Path, tf: TraceFile, i: int, **meta: Any) -> LoadResult:
    """A loaded file whose frames are in memory (empty events): nothing is read or parsed."""
    base = {
        "n_events": 12,
        "n_kernels": 3,
        "min_ts": 5_000 + i,
        "max_end": 9_000 + i,
        "step_names": ["ProfilerStep#1", "ProfilerStep#2"],
        "process_pid": 1000 + i,
    }
    events = pl.DataFrame(schema=FRAME_SCHEMAS["events"])
    return LoadResult(
        tf,
        "loaded",
        meta=CountingMeta(base | meta),
        entry=tmp_path / "entry",  # one for all: its summary computed once, then read
        frames={"events": events},
    )


@pytest.fixture
def assignments(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """How many times the set assigns ranks to every file (one entry per call)."""
    calls: list[int] = []
    real = model.assign

    def counted(entries: Any, chosen: Any) -> Any:
        entries = list(entries)
        calls.append(len(entries))
        return real(entries, chosen)

    monkeypatch.setattr(model, "assign", counted)
    return calls


def test_loading_many_files_assigns_ranks_once_per_question(
    tmp_path: Path, assignments: list[int]
) -> None:
    """Each landed file used to re-sort and regroup every file of the set (1,000 files: 2,000
    assignments of up to 1,000 files); now a change only marks the index stale."""
    n = 300
    ts = TraceSet(tmp_path)
    files = [trace_file(tmp_path, i) for i in range(n)]
    ts.add_pending_many(files)
    for i, tf in enumerate(files):
        ts.apply(loaded(tmp_path, tf, i))
    assert len(assignments) == 0
    # every question about every rank, many times over: one assignment for all of them
    for _ in range(3):
        assert ts.ranks() == list(range(n))
        assert sorted(ts.loaded()) == list(range(n))
        assert ts.origin_ns == 5_000
        assert ts.counts()["loaded"] == n
        assert [ts.selected(r).path for r in range(n)] == [tf.path for tf in files]
    assert len(assignments) == 0  # every file states its rank: grouped file by file
    # a change is seen at the next question; every file states its rank, so only the
    # rank the file left is grouped again (no assignment of every file)
    ts.remove(files[0].path)
    assert ts.ranks() == list(range(1, n))
    assert ts.origin_ns == 5_001
    assert ts.counts()["loaded"] == n - 1
    assert len(assignments) == 0


def test_asking_after_every_file_assigns_no_file_twice(
    tmp_path: Path, assignments: list[int]
) -> None:
    """The app asks about the ranks after each file lands (titles, status bar): with files
    that state their rank, each landing regroups its own rank only (10,000 files asked every
    10 took 59 s of assignments)."""
    n = 300
    ts = TraceSet(tmp_path)
    files = [trace_file(tmp_path, i) for i in range(n)]
    ts.add_pending_many(files)
    assert ts.ranks() == list(range(n))  # each file grouped as it was listed
    for i, tf in enumerate(files):
        ts.apply(loaded(tmp_path, tf, i, rank_in_file=i))
        assert len(ts.loaded()) == i + 1
    assert assignments == []


def test_a_thousand_files_landing_at_once_regroup_only_their_ranks(
    tmp_path: Path, assignments: list[int], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The app applies what landed in turns of hundreds of files (listed, then loaded); more
    than 256 changed files at once assigned every file of the set again: at 10,000 files,
    0.16 s of the UI thread per turn. Now each turn groups the ranks of its own files, and
    the index is what assigning every file gives."""
    grouped: list[int] = []
    real = model.group_of

    def counted(members: Any, chosen: Any) -> Any:
        grouped.append(len(members))
        return real(members, chosen)

    monkeypatch.setattr(model, "group_of", counted)
    n, part = 900, 300  # more than the 256 changed files that made it assign every file
    ts = TraceSet(tmp_path)
    files = [trace_file(tmp_path, i) for i in range(n)]
    events = pl.DataFrame(schema=FRAME_SCHEMAS["events"])
    for start in range(0, n, part):  # listed in parts, the index asked after each
        ts.add_pending_many(files[start : start + part])
        assert len(ts.ranks()) == start + part
    assert assignments == [] and len(grouped) == n
    for start in range(0, n, part):  # then loaded in turns, asked after each
        ts.apply_many(
            [
                LoadResult(tf, "loaded", {"rank_in_file": i}, tmp_path, frames={"events": events})
                for i, tf in enumerate(files[start : start + part], start)
            ]
        )
        ts.update_ranks()  # the app's turn: this turn's files grouped now, not at next ask
        assert len(grouped) == n + start + part
        assert len(ts.loaded()) == start + part
    assert assignments == []
    assert len(grouped) == 2 * n and set(grouped) == {1}  # each rank once a change, alone
    fresh = ts.snapshot()
    fresh._changed()  # every file assigned again
    assert rank_state(fresh) == rank_state(ts)


def rank_state(ts: TraceSet) -> tuple[Any, ...]:
    files = ts.files()
    per_file = sorted((str(p), e.rank, e.rank_source, e.conflict) for p, e in files.items())
    per_rank = [
        (
            r,
            [e.path for e in ts.spans(r)],
            [e.path for e in ts.conflicts(r)],
            ts.selected(r).path if ts.selected(r) else None,
        )
        for r in ts.ranks()
    ]
    return per_file, per_rank


def test_file_by_file_updates_agree_with_a_full_assignment(
    tmp_path: Path, assignments: list[int]
) -> None:
    """Changing the index file by file gives what assigning every file gives: spans of one
    process, a conflicting process, a file that says another rank than its name, files that
    fail, leave, come back, and a user's pick."""
    import dataclasses
    import random

    rnd = random.Random(7)
    ts = TraceSet(tmp_path)
    files = [
        dataclasses.replace(trace_file(tmp_path, i), rank_hint=i % 5, stamp_ns=rnd.randrange(9))
        for i in range(40)
    ]
    ts.add_pending_many(files)
    ts.ranks()
    picks = 0
    for step in range(400):
        i = rnd.randrange(len(files))
        tf = files[i]
        action = rnd.random()
        if action < 0.6:  # loads, mostly as its name's rank, by one of two processes
            pid = 100 + rnd.randrange(2)
            rank = i % 5 if rnd.random() < 0.8 else rnd.randrange(7)
            ts.apply(loaded(tmp_path, tf, i, rank_in_file=rank, process_pid=pid))
        elif action < 0.75:
            ts.apply(LoadResult(tf, "error", error="bad"))
        elif action < 0.85:
            ts.remove(tf.path)
        elif action < 0.95:
            ts.add_pending_many([tf])
        else:
            ts.select_span(i % 5, tf.path)
            picks += 1
        incremental = rank_state(ts)
        fresh = ts.snapshot()
        fresh._changed()  # every file assigned again
        assert rank_state(fresh) == incremental, step
    # the set itself was assigned in full only after each pick: every other change was file
    # by file (one assignment a step is the fresh copy's)
    assert len(assignments) - 400 == picks


def test_answers_are_those_of_a_fresh_assignment(tmp_path: Path) -> None:
    """The index answers as assigning from scratch would: spans of a worker, the shown span,
    a user's pick, and files still loading."""
    ts = TraceSet(tmp_path)
    files = [trace_file(tmp_path, i, worker="trainer") for i in range(3)]
    files += [trace_file(tmp_path, i) for i in range(1, 4)]
    ts.add_pending_many(files)
    for i, tf in enumerate(files[:-1]):
        ts.apply(loaded(tmp_path, tf, i, process_pid=42 if tf.worker else 1000 + i))
    # the worker's three spans are one rank (the next free number, 0); ranks 1-3 by name
    assert ts.ranks() == [0, 1, 2, 3]
    assert [e.path for e in ts.spans(0)] == [f.path for f in reversed(files[:3])]
    assert ts.selected(0).path == files[2].path  # the newest span
    assert ts.files_of(0) == 3 and ts.files_of(1) == 1 and ts.files_of(9) == 0
    assert ts.selected(3) is None and sorted(ts.loaded()) == [0, 1, 2]  # still pending
    ts.select_span(0, files[0].path)
    assert ts.selected(0).path == files[0].path
    assert ts.loaded()[0] is ts.files()[files[0].path].data
    assert {e.path: e.rank for e in ts.files().values()} == {
        **{f.path: 0 for f in files[:3]},
        **{f.path: f.rank_hint for f in files[3:]},
    }


def test_a_snapshot_keeps_its_own_index(tmp_path: Path, assignments: list[int]) -> None:
    """A snapshot reuses a current index (no assignment on the owner's thread) and is not
    changed by what the owner does next; a stale one is assigned in the snapshot."""
    ts = TraceSet(tmp_path)
    files = [trace_file(tmp_path, i) for i in range(5)]
    ts.add_pending_many(files)
    for i, tf in enumerate(files):
        ts.apply(loaded(tmp_path, tf, i))
    assert ts.ranks() == [0, 1, 2, 3, 4]
    before = len(assignments)
    snap = ts.snapshot()
    assert len(assignments) == before
    assert snap.ranks() == [0, 1, 2, 3, 4] and snap.generation == ts.generation
    assert snap.selected(2) is snap.entries[files[2].path]  # the copy, not the owner's entry
    assert snap.selected(2) is not ts.selected(2)
    ts.remove(files[2].path)
    later = ts.snapshot()  # every file states its rank: the owner's index, file by file
    assert snap.ranks() == [0, 1, 2, 3, 4]  # the older snapshot is unchanged
    assert later.ranks() == [0, 1, 3, 4]
    # each file is copied once for every snapshot until it changes (10,000 files copied
    # per snapshot, one per overview and per view, held the owner's thread 10-80 ms)
    ts.apply(loaded(tmp_path, files[1], 1, rank_in_file=7))
    again = ts.snapshot()
    assert again.entries[files[0].path] is later.entries[files[0].path]
    assert again.entries[files[1].path] is not later.entries[files[1].path]
    assert later.entries[files[1].path].rank == 1 and again.entries[files[1].path].rank == 7
    assert later.ranks() == [0, 1, 3, 4] and again.ranks() == [0, 3, 4, 7]
    assert again.selected(7) is again.entries[files[1].path]
    assert len(assignments) == before  # no file assigned in full anywhere
    # a file that says no rank (its worker's, or the next free number): the index needs
    # every file, assigned in the snapshot (its worker), not on the owner's thread
    ts.add_pending_many([trace_file(tmp_path, 9, worker="trainer")])
    ts.update_ranks()  # not file by file: left for whoever asks
    stale = ts.snapshot()
    assert len(assignments) == before
    assert stale.ranks() == [0, 3, 4, 7]
    assert len(assignments) == before + 1  # the stale snapshot assigned, for itself
    stale._changed()  # a snapshot that changes makes its copies its own first
    assert stale.ranks() == [0, 3, 4, 7] and again.entries[files[1].path].owner is None


def test_an_entry_read_after_a_change_has_its_current_rank(tmp_path: Path) -> None:
    """`entries` held the ranks of before a change until something asked the index
    (`files()`): a caller reading `ts.entries` got a file's old rank and no conflict. Now an
    entry's rank, its source and its conflict bring the index up to date when read, in the
    set and in a snapshot taken while stale."""
    ts = TraceSet(tmp_path)
    files = [trace_file(tmp_path, i) for i in range(3)]
    ts.add_pending_many(files)
    for i, tf in enumerate(files):
        ts.apply(loaded(tmp_path, tf, i))
    assert ts.ranks() == [0, 1, 2]
    entries = ts.entries  # what a caller holds, never asking the index itself
    ts.apply(loaded(tmp_path, files[2], 2, rank_in_file=5))  # distributedInfo wins the name
    assert entries[files[2].path].rank == 5
    assert entries[files[2].path].rank_source == "distributedInfo"
    stray = TraceFile(
        path=tmp_path / "stray.json",
        size=1,
        mtime_ns=1,
        rank_hint=None,
        span_hint="stray.json",
        worker=None,
        stamp=None,
        stamp_ns=None,
    )
    ts.apply(loaded(tmp_path, stray, 9, rank_in_file=1))  # another process says rank 1
    snap = ts.snapshot()  # stale: its copies are assigned in the snapshot, when read
    for owner in (snap, ts):
        assert owner.entries[stray.path].rank == 1
        both = (owner.entries[files[1].path], owner.entries[stray.path])
        assert sum(e.conflict.startswith("conflict:") for e in both) == 1
    ts.remove(stray.path)
    assert not entries[files[1].path].conflict  # alone again


def test_file_table_reads_each_file_a_bounded_number_of_times(tmp_path: Path) -> None:
    """The file table asked every loaded rank for its step names once per row (quadratic:
    0.87 s at 250 files, 44.7 s at 1,000); now once per table."""
    n = 200
    ts = TraceSet(tmp_path)
    files = [trace_file(tmp_path, i) for i in range(n)]
    ts.add_pending_many(files)
    for i, tf in enumerate(files):
        ts.apply(loaded(tmp_path, tf, i))
    CountingMeta.reads = {}
    table = overview.file_table(ts)
    assert table.height == n
    assert table["rank"].to_list() == list(range(n))
    assert table["shown"].all() and (table["span"] == "").all()
    assert table["events"].to_list() == [12] * n
    assert CountingMeta.reads.get("step_names", 0) <= 2 * n


class CountingViews(dict):
    """hta_view's kept values, counting the keys anything walks through."""

    walked = 0

    def __iter__(self) -> Any:
        for key in super().__iter__():
            CountingViews.walked += 1
            yield key


def test_freeing_a_jobs_frames_does_not_walk_every_kept_value(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Each freed frame looked at every kept key, and at every frame of each job key: a report
    over 1,000 ranks spent 3.5 s freeing its frames. Now a frame knows its own keys."""
    import gc

    from hta_tui.analysis import hta_view

    monkeypatch.setattr(hta_view, "_views", CountingViews())
    n = 300
    frames = {r: pl.DataFrame({"ts": [r]}) for r in range(n)}
    for r, f in frames.items():
        hta_view._remember(f, (id(f), "view"), pl.DataFrame({"view": [r]}))
    hta_view.job_cached(frames, "test-job", lambda: pl.DataFrame({"n": [n]}))
    assert len(hta_view._views) == n + 1
    CountingViews.walked = 0
    frames.clear()
    del f
    gc.collect()
    assert len(hta_view._views) == 0  # every value went with its frames
    assert CountingViews.walked <= n


def many_ranks_temporal(n: int) -> pl.DataFrame:
    """HTA's temporal breakdown of `n` ranks that agree, but for rank 7 (mostly idle) and
    rank 23 (never idle)."""
    from hta_tui.analysis.temporal import temporal_from_ns

    rows = []
    for r in range(n):
        idle = {7: 800_000, 23: 0}.get(r, 100_000 + 1_000 * (r % 5))
        compute = 700_000 - idle // 2
        rows.append(
            {
                "rank": r,
                "gpu_busy": 0,
                "has_gpu": True,
                "idle": idle,
                "compute": compute,
                "non_compute": 1_000_000 - idle - compute,
                "kernel": 1_000_000,
            }
        )
    return temporal_from_ns(pl.DataFrame(rows))


def test_temporal_breakdown_of_many_ranks_is_a_spread_and_its_outliers() -> None:
    """Past a screenful of ranks, one row per rank no longer fits: the spread over every rank
    (each column's min, median, p90, max) and then the ranks farthest from the median idle."""
    from hta_tui.app.format import TEMPORAL_ROWS_MAX, temporal_note, temporal_rows

    df = many_ranks_temporal(40)
    rows = temporal_rows(df)
    assert len(rows) == TEMPORAL_ROWS_MAX
    labels = [label for label, _, _ in rows]
    assert labels[:4] == ["min", "median", "p90", "max"]
    assert labels[4:6] == [7, 23]  # the most idle and the never idle, farthest first
    idle = sorted(df["idle_time_pctg"].to_list())
    assert rows[0][1][3] == f"{idle[0]:.1f}%" and rows[3][1][3] == f"{idle[-1]:.1f}%"
    assert rows[1][1][3] == f"{idle[len(idle) // 2]:.1f}%"
    idle_us = sorted(df["idle_time(us)"].to_list())
    assert rows[3][2][2] == idle_us[-1]  # the bar of the max row is the largest idle time
    assert temporal_note(rows, 40) == "40 ranks: spread, then 8 outliers (idle)"
    # a screenful or fewer: every rank, in rank order, as before
    few = temporal_rows(many_ranks_temporal(TEMPORAL_ROWS_MAX))
    assert [label for label, _, _ in few] == list(range(TEMPORAL_ROWS_MAX))
    assert temporal_note(few, TEMPORAL_ROWS_MAX) == ""


async def test_overview_shows_the_spread_of_many_ranks(tmp_path: Path) -> None:
    """The overview's temporal table and bars hold the spread and the outliers, and say so."""
    from hta_tui.app.format import temporal_rows
    from hta_tui.app.screens.overview import OverviewData, OverviewScreen
    from hta_tui.app.widgets.bars import StackedBars
    from tests.test_app_support import make_screen_app, settle, wait_until

    (tmp_path / "traces").mkdir()
    app = make_screen_app(tmp_path / "traces", tmp_path)
    df = many_ranks_temporal(1000)
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(pilot)
        screen = app.screen
        assert isinstance(screen, OverviewScreen)
        screen.show_overview(OverviewData(temporal=temporal_rows(df), temporal_ranks=1000))
        await pilot.pause()
        bars = screen.query_one("#temporal-bars", StackedBars)
        assert [r.label for r in bars.rows][:6] == ["min", "median", "p90", "max", "r7", "r23"]
        assert len(bars.rows) == 12
        title = str(screen.query_one("#temporal-box").border_title)
        assert "1000 ranks: spread, then 8 outliers (idle)" in title
        # while files land, an overview is shown in parts, each drawn before the next (a
        # whole repaint held the UI thread 40-75 ms at 1,000 ranks): the files at once, the
        # temporal breakdown after them; the last overview (nothing loading) whole at once
        few = temporal_rows(many_ranks_temporal(5))
        screen.show_overview(OverviewData(temporal=few, temporal_ranks=5, loading=True))
        assert len(bars.rows) == 12  # not yet
        await wait_until(pilot, lambda: len(bars.rows) == 5, 10, "the temporal part")
        assert [r.label for r in bars.rows] == ["r0", "r1", "r2", "r3", "r4"]
        screen.show_overview(OverviewData(temporal=temporal_rows(df), temporal_ranks=1000))
        assert len(bars.rows) == 12  # at once


async def test_rank_picker_finds_one_of_ten_thousand_ranks_by_number(tmp_path: Path) -> None:
    """The rank picker lists a screenful of ranks (not 10,000 options) and finds any rank by
    its number as it is typed; arrows and enter work as before."""
    from textual.widgets import OptionList

    from hta_tui.app.screens.base import RankPicker
    from tests.test_app_support import make_screen_app, settle

    (tmp_path / "traces").mkdir()
    app = make_screen_app(tmp_path / "traces", tmp_path)
    ranks = list(range(10_000))
    picked: list[int | None] = []
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(pilot)
        app.push_screen(RankPicker(ranks, None), picked.append)
        await pilot.pause()
        # opaque: the view beneath is not drawn again, blended, as the picker opens
        assert app.screen.styles.background.a == 1
        options = app.screen.query_one(OptionList)
        assert options.option_count <= 201  # "all ranks" and the first 200
        await pilot.press("down", "down", "enter")  # all ranks, rank 0, rank 1
        await pilot.pause()
        assert picked == [1]
        app.push_screen(RankPicker(ranks, 9_000), picked.append)  # beyond the first 200
        await pilot.pause()
        options = app.screen.query_one(OptionList)
        assert options.get_option_at_index(options.highlighted).id == "9000"
        await pilot.press("4", "3", "2")
        await pilot.pause()
        shown = [options.get_option_at_index(i).id for i in range(options.option_count)]
        assert shown == ["432", *(str(r) for r in range(4320, 4330))]
        await pilot.press("1", "enter")
        await pilot.pause()
        assert picked == [1, 4321]


async def test_files_table_of_many_files_formats_only_the_rows_on_screen(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The files table was a DataTable: 10,000 files were added and measured cell by cell
    on the UI thread (2.1 s at most, keys 0.6 s while rows were added). It is a FrameView
    now: an overview of 10,000 files formats the rows on screen, a new one (files landing,
    rows reordered) keeps the cursor on its file, and a file with a problem takes two
    lines, its reason under its name."""
    from hta_tui.app.format import FileRow
    from hta_tui.app.screens.overview import FilesTable, OverviewData, OverviewScreen
    from hta_tui.app.widgets.frame_view import PAGE
    from tests.test_app_support import make_screen_app, settle

    def rows(n: int, status: str, reason: str = "") -> list[FileRow]:
        return [
            FileRow(
                key=f"rank{i}.json",
                values={"rank": str(i), "file": f"rank{i}.json", "status": status},
                status=status,
                rank=i,
                reason=reason if i % 1000 == 7 else "",
            )
            for i in range(n)
        ]

    formatted: list[str] = []
    cells = OverviewScreen._cells

    def counted(self: OverviewScreen, row: FileRow, *args: Any) -> Any:
        formatted.append(row.key)
        return cells(self, row, *args)

    monkeypatch.setattr(OverviewScreen, "_cells", counted)
    columns = [("rank", "rank"), ("file", "file"), ("status", "status")]
    (tmp_path / "traces").mkdir()
    app = make_screen_app(tmp_path / "traces", tmp_path)
    n = 10_000
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(pilot)
        screen = app.screen
        assert isinstance(screen, OverviewScreen)
        table = screen.query_one("#files", FilesTable)
        formatted.clear()
        screen.show_overview(OverviewData(columns=columns, rows=rows(n, "pending")))
        await pilot.pause()
        assert table.row_count == n and table.border_title == f"Files ({n})"
        assert 0 < len(formatted) <= PAGE  # the first page, not 10,000 rows
        table.focus()
        table.move_cursor(row=5_000)
        await pilot.pause()
        assert len(formatted) <= 3 * PAGE
        # the files landed, in the other order, some with a reason (two lines each)
        landed = rows(n, "loaded", reason="dropped 3 events")[::-1]
        screen.show_overview(OverviewData(columns=columns, rows=landed))
        await pilot.pause()
        assert table.row_keys[table.cursor_row] == "rank5000.json"  # the cursor kept its file
        status = [c.key for c in table.view_columns].index("status")
        assert table.get_row(f"rank{n - 1}.json")[status].plain == "loaded"
        assert table.line_count == n + n // 1000  # rank7, rank1007, ... take two lines
        drawn = "\n".join(table.render_line(y).text for y in range(table.size.height))
        assert "rank5000.json" in drawn and "loaded" in drawn
        table.move_cursor(row=table.row_keys.index("rank1007.json"))
        await pilot.pause()
        drawn = "\n".join(table.render_line(y).text for y in range(table.size.height))
        assert "↳ dropped 3 events" in drawn  # under its name
        assert len(formatted) <= 10 * PAGE  # a few pages around the cursor, not 2 x 10,000


async def test_a_per_rank_table_of_many_ranks_names_the_worst_then_the_spread(
    tmp_path: Path,
) -> None:
    """At 80x24 a table of one row per rank showed the first ranks in rank order, saying
    nothing of the others. Past a screenful of ranks it shows the worst ranks first (most
    exposed communication here), then each column's spread over the ranks (min, p50, p90,
    max); `a` shows every rank's row, and the summary again."""
    from hta_tui.analysis.rank_spread import label_column
    from hta_tui.app.screens.overlap import OverlapScreen
    from hta_tui.app.widgets.frame_table import RANKS_MAX, FrameTable
    from hta_tui.synth.small_job import Dialect, JobShape, write_job
    from tests.test_app_support import make_screen_app, press_view, wait_patiently

    n = 24  # tiny ranks, more than a screenful (each costs the views ~0.1 s of CPU)
    assert n > RANKS_MAX
    # 8 ops a step: one of them an all-reduce, more or less hidden on each rank
    write_job(tmp_path / "job", Dialect(), JobShape(ranks=n, steps=2, ops_per_step=8))
    app = make_screen_app(tmp_path / "job", tmp_path)
    async with app.run_test(size=(80, 24)) as pilot:
        await wait_patiently(pilot, lambda: app.settled, what=f"{n} files")
        screen = await press_view(pilot, "C", OverlapScreen, timeout=60)
        table = screen.query_one("#overlap-table", FrameTable)
        every = table.frame  # every rank's row, as the analysis gave it
        assert every.height == n and table.summarised
        assert every["exposed (us)"].n_unique() > n // 2  # ranks differ: a worst one to name
        shown = table.view_frame
        label = label_column(n)
        assert shown.columns[0] == label
        exposed = every.sort(["exposed (us)", "rank"], descending=[True, False], nulls_last=True)
        worst = shown.filter(pl.col(label).str.starts_with("worst"))
        assert worst["rank"].to_list() == exposed["rank"].head(worst.height).to_list()
        assert worst["exposed (us)"][0] == every["exposed (us)"].max()
        spread = dict(zip(shown[label], shown["exposed (us)"], strict=True))
        assert spread["min"] == every["exposed (us)"].min()
        assert spread["max"] == every["exposed (us)"].max()
        assert spread["min"] <= spread["p50"] <= spread["p90"] <= spread["max"]
        assert shown.height < table.size.height + 6  # a screenful, not one row per rank
        drawn = "\n".join(table.render_line(y).text for y in range(table.size.height))
        assert "worst 1" in drawn and label in drawn
        table.focus()
        await pilot.press("a")
        assert not table.summarised and table.view_frame.height == n
        assert table.view_frame.columns == every.columns
        await pilot.press("a")
        assert table.summarised and table.view_frame.columns[0] == label
        # the critical path's paths too: the longest first (the path across ranks, of no
        # rank, among them), then their spread; not a row per path
        from hta_tui.app.screens.critical_path import CriticalPathScreen

        cp = await press_view(pilot, "J", CriticalPathScreen, timeout=120)
        paths = cp.query_one("#cp-paths", FrameTable)
        assert paths.frame["rank"].drop_nulls().n_unique() == n and paths.summarised
        shown = paths.view_frame
        assert shown.columns[0] == label and shown.height < n  # of n ranks, not n + 1
        longest = paths.frame.sort("path (us)", descending=True, nulls_last=True)
        worst = shown.filter(pl.col(label).str.starts_with("worst"))
        assert worst["path (us)"].to_list() == longest["path (us)"].head(worst.height).to_list()


async def test_bars_of_many_ranks_draw_only_the_lines_on_screen() -> None:
    """The per-rank bars (overlap, distributed, idle, ...; the steps view's one bar per rank)
    were one Text of every rank, laid out on every change: 3 s of the UI thread at 10,000
    ranks, 0.2-0.3 s for the steps view's at 1,000. They are drawn a line at a time now, only
    the lines on screen, each as the whole Text would draw it."""
    from textual.app import App, ComposeResult
    from textual.containers import VerticalScroll
    from textual.visual import Visual

    from hta_tui.app.screens.steps import RankBar, StepBars
    from hta_tui.app.widgets.bars import BarRow, StackedBars

    made: list[int] = []
    made_steps: list[int] = []

    class Counted(StackedBars):
        def line_text(self, y: int, width: int) -> Any:
            made.append(y)
            return super().line_text(y, width)

    class CountedSteps(StepBars):
        def _line(self, y: int, width: int, layout: Any) -> Any:
            made_steps.append(y)
            return super()._line(y, width, layout)

    class Bars(App[None]):
        def compose(self) -> ComposeResult:
            with VerticalScroll(id="stacked"):
                yield Counted(id="bars")
            with VerticalScroll(id="steps"):
                yield CountedSteps(id="step-bars")

    rows = [BarRow(f"r{i}", (float(i % 7 + 1), 3.0, float(i % 3))) for i in range(10_000)]
    steps = [RankBar(i, float(i % 13 + 1) * 1e3, i == 5, i % 97 == 0) for i in range(10_000)]
    async with Bars().run_test(size=(60, 24)) as pilot:
        bars = pilot.app.query_one(Counted)
        bars.set_rows(rows)
        step_bars = pilot.app.query_one(CountedSteps)
        step_bars.set_bars("Step 1 slowest first", steps)
        await pilot.pause()
        assert bars.size.height == 10_001 and 0 < len(made) < 50
        assert step_bars.size.height == 10_001 and 0 < len(made_steps) < 50
        for widget in (bars, step_bars):
            width = widget.size.width
            whole = Visual.to_strips(widget, _visual(widget), width, 40, widget.visual_style)
            for y in range(40):
                assert widget.render_line(y).text == whole[y].text
                assert list(widget.render_line(y)) == list(whole[y])


def _visual(bars: Any) -> Any:
    from textual.visual import visualize

    return visualize(bars, bars.render())
