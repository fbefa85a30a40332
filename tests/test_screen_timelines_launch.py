"""Screens 6 (Timelines) and 7 (Kernel launches), driven with Pilot, plus their snapshots.

The numbers on screen are compared with the analysis functions called directly on the same
frames; the snapshots use a small fixed trace made here (not `hta_tui.synth`, so tuning the
demo data never moves these pictures).
"""

from __future__ import annotations

import asyncio
import csv
import gzip
from pathlib import Path
from typing import Any

import orjson
import polars as pl
import pytest
from textual.widgets import SelectionList, Static, TabbedContent

from hta_tui.analysis import launch, memory, queue
from hta_tui.analysis.downsample import step_bucket_max
from hta_tui.analysis.tables import csv_ready
from hta_tui.app.app import HtaApp
from hta_tui.app.screens.base import Params, RankPicker
from hta_tui.app.screens.launch import CutoffsScreen, LaunchScreen
from hta_tui.app.screens.timelines import BUCKETS, StreamPicker, TimelinesScreen
from hta_tui.app.widgets.frame_table import FrameTable
from hta_tui.app.widgets.plot import SafePlot
from hta_tui.synth import write_trace_dir
from hta_tui.trace.parse import parse_file, read_bytes
from tests.app_walk import Walk, run_scenarios, snapshot_steps, walk_app
from tests.shared_sets import trace_set
from tests.test_app_support import T0, listing, screen_shows_current, settle, wait_until
from tests.test_app_support import make_screen_app as make_app

SIZE = (80, 24)
HTA = ["correlation", "cpu_duration", "gpu_duration", "launch_delay"]


# -- helpers -----------------------------------------------------------------------------------


def synth(tmp_path: Path) -> Path:
    root = tmp_path / "traces"
    write_trace_dir(root, ranks=2, steps=3, seed=0, slow_rank=1)
    return root


def up_to_date(app: HtaApp) -> bool:
    return hasattr(app.screen, "params") and screen_shows_current(app, app.screen)


async def wait_screen(pilot: Any, what: str = "the screen's computation") -> None:
    await wait_until(pilot, lambda: up_to_date(pilot.app), 30, what)
    await pilot.pause()


async def open_screen(pilot: Any, key: str, cls: type) -> Any:
    await settle(pilot)
    await pilot.press(key)
    await wait_until(pilot, lambda: isinstance(pilot.app.screen, cls), 10, cls.__name__)
    await wait_screen(pilot)
    return pilot.app.screen


async def sort_by(pilot: Any, table: FrameTable, column: str) -> None:
    """`s` on the table, then pick `column` in the list of its columns."""
    app = pilot.app
    screen = app.screen
    await pilot.press("s")
    await wait_until(pilot, lambda: app.screen is not screen, 5, "the column list")
    await pilot.press("home", *["down"] * table.frame.columns.index(column), "enter")
    await wait_until(pilot, lambda: app.screen is screen, 5, "the column list to close")


async def sort_and_export(pilot: Any, table: FrameTable, column: str, csv: str) -> None:
    """Sort `table` by `column` (`s`: descending) and export it (`e`): its rows in that
    order, then the file `csv` in the export folder."""
    view = table.view_frame
    await sort_by(pilot, table, column)
    assert table.sort_by == (column, True)
    assert table.view_frame[column].to_list() == sorted(view[column], reverse=True)
    await pilot.press("e")
    out = pilot.app.export_dir / csv
    await wait_until(pilot, out.exists, 10, "the csv")
    await pilot.pause()


def frame(screen: Any, table_id: str) -> pl.DataFrame:
    return screen.query_one(f"#{table_id}", FrameTable).frame


# -- one app on the generated job for the four tests below ----------------------------------
# Each test's steps are a scenario of one app run (tests/app_walk.py), in this order: the export
# (rank 0, fresh), the timelines' tables, streams and rank switch (ends on rank 1), the
# launches' rank switch, all ranks again, the launches' cutoffs, filter, sort and export.


async def pick_all_ranks(pilot: Any) -> None:
    """`r`, then "all ranks" (the list's first entry), from whichever rank is picked."""
    app = pilot.app
    screen = app.screen
    await pilot.press("r")
    await wait_until(pilot, lambda: isinstance(app.screen, RankPicker), 5, "rank picker")
    await pilot.press("pageup", "enter")
    await wait_until(pilot, lambda: screen.params.rank is None, 5, "all ranks")
    await wait_screen(pilot)


async def _timelines_export(pilot: Any, seen: dict[str, Any]) -> None:
    """test_timelines_export_counters_and_csv's steps."""
    app = pilot.app
    screen = await open_screen(pilot, "N", TimelinesScreen)
    await pilot.press("x")
    await wait_until(pilot, lambda: screen.last_export is not None, 30, "the export")
    seen["path"] = screen.last_export
    seen["src"] = app.trace_set.selected(0).path
    seen["events"] = app.trace_set.frames()[0]

    # filter, sort and export the memory table
    await pilot.press("v")
    table = screen.query_one("#memory-summary", FrameTable)
    await pilot.press("slash", *"memcpy", "enter")
    view = seen["view"] = table.view_frame
    assert 0 < view.height < table.frame.height
    assert view["name"].str.starts_with("Memcpy").all()
    assert app.focused is not None
    table.focus()
    await sort_and_export(pilot, table, "mean", "hta-tui-memory_bw_summary.csv")
    seen["table_view"] = table.view_frame
    # back to a known state: the filter cleared, the queue pane shown
    await pilot.press("escape")
    await wait_until(pilot, lambda: table.view_frame.height == table.frame.height, 5, "cleared")
    await pilot.pause()
    if screen.query_one(TabbedContent).active != "queue-pane":  # escape's focus may move it
        screen.action_next_view()
    await wait_until(
        pilot, lambda: screen.query_one(TabbedContent).active == "queue-pane", 5, "the queue"
    )
    await pilot.pause()


async def _timelines_tables(pilot: Any, seen: dict[str, Any]) -> None:
    """test_timelines_tables_streams_and_rank_switch's steps and checks."""
    app = pilot.app
    screen = await open_screen(pilot, "N", TimelinesScreen)
    frames = app.trace_set.frames()
    assert sorted(frames) == [0, 1]
    one = {0: frames[0]}  # default: the first rank, said in the title
    title = str(screen.query_one("#screen-title", Static).render())
    assert "rank 0" in title and "first of 2" in title
    assert frame(screen, "queue-summary").equals(queue.queue_length_summary(one))
    assert frame(screen, "memory-summary").equals(memory.memory_bw_summary(one))
    assert frame(screen, "queue-blocked").equals(queue.time_blocked_on_full_queue(one))
    # the chart is the bucket maximum of the analysis' series
    series = queue.queue_length_series(one)
    result = screen.result
    want = step_bucket_max(
        series,
        value="queue_length",
        by=["stream"],
        t0=result["t0"],
        t1=result["t1"],
        buckets=BUCKETS,
    )
    assert result["queue_plot"].equals(want)
    assert result["queue_plot"]["queue_length"].max() == series["queue_length"].max()
    # default streams: the busiest three, by launches
    counts = queue.queue_length_summary(one).sort("count", descending=True)
    before = screen.picked_streams()
    assert before == counts["stream"].head(3).to_list()

    # p: pick streams (space toggles, enter applies)
    await pilot.press("p")
    await wait_until(pilot, lambda: isinstance(app.screen, StreamPicker), 5, "picker")
    assert list(app.screen.query_one(SelectionList).selected) == before
    await pilot.press("space", "enter")  # untick the busiest
    await wait_until(pilot, lambda: app.screen is screen, 5, "picker closed")
    assert screen.streams == before[1:]
    assert screen.picked_streams() == before[1:]
    note = str(screen.query_one("#queue-note", Static).render())
    assert f"streams {before[1]}, {before[2]}" in note and "picked" in note
    # escape cancels: nothing changes
    await pilot.press("p")
    await wait_until(pilot, lambda: isinstance(app.screen, StreamPicker), 5, "picker")
    await pilot.press("space", "escape")
    await wait_until(pilot, lambda: app.screen is screen, 5, "picker closed")
    assert screen.picked_streams() == before[1:]

    # r: rank 1; the tables follow
    await pilot.press("r")
    await wait_until(pilot, lambda: isinstance(app.screen, RankPicker), 5, "rank picker")
    await pilot.press("down", "down", "enter")  # all ranks, rank 0, rank 1
    await wait_until(pilot, lambda: screen.params.rank == 1, 5, "rank 1")
    await wait_screen(pilot)
    one = {1: frames[1]}
    title = str(screen.query_one("#screen-title", Static).render())
    assert "rank 1" in title and "first" not in title
    assert screen.result["rank"] == 1
    assert frame(screen, "queue-summary").equals(queue.queue_length_summary(one))
    assert frame(screen, "memory-summary").equals(memory.memory_bw_summary(one))
    # v: the memory view, its table focused
    await pilot.press("v")
    assert screen.query_one(TabbedContent).active == "memory-pane"
    assert app.focused is screen.query_one("#memory-summary", FrameTable)
    await pilot.press("v")
    assert screen.query_one(TabbedContent).active == "queue-pane"
    seen["done"] = True


async def _launch_rank_switch(pilot: Any, seen: dict[str, Any]) -> None:
    """test_launch_rank_switch_and_drill_down's steps and checks (from all ranks)."""
    app = pilot.app
    shown: list[str] = app.shown_kernels
    screen = await open_screen(pilot, "L", LaunchScreen)
    if screen.params.rank is not None:  # the timelines' pick holds here: all ranks first
        await pick_all_ranks(pilot)
    shown.clear()
    await pilot.press("r")
    await wait_until(pilot, lambda: isinstance(app.screen, RankPicker), 5, "rank picker")
    await pilot.press("down", "down", "enter")
    await wait_until(pilot, lambda: screen.params.rank == 1, 5, "rank 1")
    await wait_screen(pilot)
    assert "rank 1" in str(screen.query_one("#screen-title", Static).render())
    frames = app.trace_set.frames()
    assert_launch_tables(screen, {1: frames[1]}, 50, 100)
    assert set(frame(screen, "short-table")["rank"]) == {1}
    # v: next table; enter opens the kernel the launch enqueued
    await pilot.press("v")
    assert screen.query_one(TabbedContent).active == "runtime"
    table = screen.query_one("#runtime-table", FrameTable)
    assert app.focused is table and table.frame.height > 0
    await pilot.press("j", "enter")
    row = table.selected_row()
    assert table.cursor_row == 1 and shown == [row["kernel"]]
    ops = frames[1].filter(
        (pl.col("correlation") == row["correlation"]) & pl.col("stream").is_not_null()
    )
    assert row["kernel"] == ops.sort("ts")["name"][0]
    await pilot.press("p")  # the other chart
    assert screen.plot_kind == "delay"
    # back to a known state: all ranks, the first table, the first chart
    await pick_all_ranks(pilot)
    await pilot.press("p")
    await wait_until(pilot, lambda: screen.plot_kind != "delay", 5, "the first chart")
    while screen.query_one(TabbedContent).active != "short":
        await pilot.press("v")
    seen["done"] = True


async def _launch_cutoffs(pilot: Any, seen: dict[str, Any]) -> None:
    """test_launch_tables_cutoffs_filter_sort_export's steps and checks."""
    app = pilot.app
    screen = await open_screen(pilot, "L", LaunchScreen)
    assert "all 2 ranks" in str(screen.query_one("#screen-title", Static).render())
    frames = app.trace_set.frames()
    want = assert_launch_tables(screen, frames, 50, 100)
    assert all(w.height for w in want.values())
    tabs = screen.query_one(TabbedContent)
    assert f"({want['delay-table'].height})" in str(tabs.get_tab("delay").label)

    # c: edit both cutoffs with the keyboard
    await pilot.press("c")
    await wait_until(pilot, lambda: isinstance(app.screen, CutoffsScreen), 5, "cutoffs")
    await pilot.press("end", *["backspace"] * 4, *"5", "tab")
    await pilot.press("end", *["backspace"] * 4, *"20", "enter")
    await wait_until(pilot, lambda: app.screen is screen, 5, "cutoffs closed")
    assert screen.params.get("runtime_cutoff") == 5.0
    assert screen.params.get("launch_delay_cutoff") == 20.0
    await wait_screen(pilot)
    new = assert_launch_tables(screen, frames, 5, 20)
    assert new["runtime-table"].height > want["runtime-table"].height
    assert new["delay-table"].height >= want["delay-table"].height
    assert "Call > 5 us" in str(tabs.get_tab("runtime").label)
    # a bad value is refused in the dialog; the cutoffs stay
    await pilot.press("c")
    await wait_until(pilot, lambda: isinstance(app.screen, CutoffsScreen), 5, "cutoffs")
    await pilot.press("end", *["backspace"] * 4, "minus", "1", "enter")
    assert isinstance(app.screen, CutoffsScreen)
    assert ">= 0" in str(app.screen.query_one("#cutoffs-note", Static).render())
    await pilot.press("escape")
    await wait_until(pilot, lambda: app.screen is screen, 5, "cutoffs closed")
    assert screen.params.get("runtime_cutoff") == 5.0

    # filter, sort, export the short-kernels table
    table = screen.query_one("#short-table", FrameTable)
    await pilot.press("slash", *"memcpy", "enter")
    view = seen["view"] = table.view_frame
    assert 0 < view.height < table.frame.height
    assert view["kernel"].str.to_lowercase().str.contains("memcpy").all()
    assert app.focused is table
    await sort_and_export(pilot, table, "cpu_duration", "hta-tui-short_gpu_kernels.csv")
    seen["table_view"] = table.view_frame


async def _synth_walk(root: Path, tmp_path: Path) -> Walk:
    walk = Walk()
    app = make_app(root, tmp_path, findings=False)
    app.shown_kernels = []  # type: ignore[attr-defined]
    app.show_kernel = app.shown_kernels.append  # type: ignore[method-assign]
    async with app.run_test(size=SIZE) as pilot:
        await run_scenarios(
            pilot,
            walk,
            [
                ("timelines export", _timelines_export),
                ("timelines tables", _timelines_tables),
                ("launch rank switch", _launch_rank_switch),
                ("launch cutoffs", _launch_cutoffs),
            ],
        )
    return walk


@pytest.fixture(scope="module")
def synth_walk(tmp_path_factory: pytest.TempPathFactory) -> tuple[Walk, Path, Path]:
    """One app on the generated job for the four tests on it; the walk, the trace folder
    (as it was before the app ran: `listing`) and the exports folder."""
    tmp_path = tmp_path_factory.mktemp("synth-walk")
    root = synth(tmp_path)
    before = listing(root)
    walk = asyncio.run(_synth_walk(root, tmp_path))
    walk.seen.setdefault("listing", {})["before"] = before
    walk.seen["listing"]["after"] = listing(root)
    return walk, root, tmp_path / "exports"


# -- screen 6: timelines -----------------------------------------------------------------------
def test_timelines_tables_streams_and_rank_switch(synth_walk) -> None:
    walk, _, _ = synth_walk
    assert walk["timelines tables"]["done"]


def test_timelines_export_counters_and_csv(synth_walk) -> None:
    walk, _, exports = synth_walk
    seen = walk["timelines export"]
    path, src, events = seen["path"], seen["src"], seen["events"]
    assert path.parent == exports and path.name.endswith("_with_counters.json.gz")
    # nothing written into the trace folder
    assert walk["listing"]["after"] == walk["listing"]["before"]
    parsed = parse_file(path)  # a valid trace with the same events
    assert parsed.frames["events"].height == parse_file(src).frames["events"].height
    doc = orjson.loads(read_bytes(path))
    counters = [e for e in doc["traceEvents"] if e.get("ph") == "C"]
    queue_events = [c for c in counters if c["name"] == "Queue Length"]
    memory_events = [c for c in counters if c["name"] != "Queue Length"]
    one = {0: events}
    assert len(queue_events) == queue.queue_length_series(one).height > 0
    assert len(memory_events) == memory.memory_bw_series(one).height > 0
    assert {c["id"] for c in queue_events} == set(queue.queue_length_series(one)["stream"])

    out = exports / "hta-tui-memory_bw_summary.csv"
    with out.open() as f:
        rows = list(csv.reader(f))
    want = csv_ready(seen["table_view"])
    assert rows[0] == want.columns
    assert len(rows) - 1 == want.height == seen["view"].height
    assert [r[1] for r in rows[1:]] == want["name"].to_list()


# -- screen 7: launches ------------------------------------------------------------------------
def launch_subsets(frames: dict[int, pl.DataFrame], rc: float, dc: float) -> dict[str, Any]:
    stats = launch.cuda_kernel_launch_stats(frames, runtime_cutoff=rc, launch_delay_cutoff=dc)

    def each(fn: Any, cutoff: float) -> pl.DataFrame:
        parts = [
            fn(rows, cutoff).select(pl.lit(r, pl.Int64).alias("rank"), *HTA)
            for r, rows in stats.items()
        ]
        return pl.concat(parts) if parts else pl.DataFrame()

    return {
        "short-table": each(launch.short_gpu_kernels, rc),
        "runtime-table": each(launch.runtime_outliers, rc),
        "delay-table": each(launch.launch_delay_outliers, dc),
    }


def assert_launch_tables(screen: Any, frames: dict[int, pl.DataFrame], rc: float, dc: float):
    want = launch_subsets(frames, rc, dc)
    for table_id, expected in want.items():
        got = frame(screen, table_id)
        if expected.is_empty():
            assert got.is_empty(), table_id
            continue
        assert got.select("rank", *HTA).equals(expected), table_id
    return want


def test_launch_tables_cutoffs_filter_sort_export(synth_walk) -> None:
    walk, _, exports = synth_walk
    seen = walk["launch cutoffs"]
    out = exports / "hta-tui-short_gpu_kernels.csv"
    got = pl.read_csv(out)
    expected = csv_ready(seen["table_view"])
    assert got.columns == expected.columns and got.height == expected.height == seen["view"].height
    assert got["correlation"].to_list() == expected["correlation"].to_list()
    assert got["cpu_duration"].to_list() == expected["cpu_duration"].to_list()
    assert got["cpu_duration"].to_list() == sorted(got["cpu_duration"], reverse=True)


def test_launch_rank_switch_and_drill_down(synth_walk) -> None:
    walk, _, _ = synth_walk
    assert walk["launch rank switch"]["done"]


# -- every shared case -------------------------------------------------------------------------
def shared_cases(shared: Path) -> list[Path]:
    root = shared / "traces"
    return sorted(
        p for p in root.rglob("*") if p.is_dir() and any(f.is_file() for f in p.iterdir())
    )


async def _cpu_only(pilot: Any, seen: dict[str, Any]) -> None:
    """test_cpu_only_case_in_the_app's steps and checks."""
    screen = await open_screen(pilot, "N", TimelinesScreen)
    assert "rank 34" in str(screen.query_one("#screen-title", Static).render())
    note = str(screen.query_one("#queue-note", Static).render())
    assert "Rank 34 launched no GPU work" in note
    assert not screen.query_one("#queue-plot").display
    assert "no memcpy or memset" in str(screen.query_one("#memory-note", Static).render())
    screen = await open_screen(pilot, "L", LaunchScreen)
    summary = str(screen.query_one("#launch-summary", Static).render())
    assert summary == "No kernel launches in rank 34 (no GPU work launched from the CPU)."
    assert not screen.query_one("#launch-plot").display
    seen["done"] = True


def _every_case(cases: list[Path]) -> Any:
    async def scenario(pilot: Any, seen: dict[str, Any]) -> None:
        """test_shared_cases_show's steps and checks."""
        timelines = await open_screen(pilot, "N", TimelinesScreen)
        launches = await open_screen(pilot, "L", LaunchScreen)
        seen["cases"] = []
        for case in cases:
            frames = trace_set(case).frames()  # parsed once a process
            result = TimelinesScreen.compute(frames, Params())
            timelines.result = result
            timelines.show(result)
            await wait_until(pilot, lambda: timelines.charts_pending == 0, 10, "the charts")
            note = str(timelines.query_one("#queue-note", Static).render())
            if not frames:
                assert "No trace loaded" in note, case
            elif result["streams"]:
                one = {result["rank"]: frames[result["rank"]]}
                got = frame(timelines, "queue-summary")
                assert got.equals(queue.queue_length_summary(one)), case
                assert "streams" in note, case
            else:
                assert "launched no GPU work" in note, case
            params = Params(extra=launches.default_params())
            result = LaunchScreen.compute(frames, params)
            launches.result = result
            launches.show(result)
            summary = str(launches.query_one("#launch-summary", Static).render())
            if result["launches"]:
                assert "launches" in summary, case
                assert_launch_tables(launches, frames, 50, 100)
            else:
                assert summary.startswith("No "), case
            await pilot.pause()
            seen["cases"].append(case)

    return scenario


async def _shared_walk(shared: Path, tmp_path: Path) -> Walk:
    walk = Walk()
    cases = shared_cases(shared)
    walk.seen["listed"] = {"cases": cases}
    app = make_app(shared / "traces" / "cpu_only", tmp_path, findings=False)
    async with app.run_test(size=SIZE) as pilot:
        await run_scenarios(
            pilot,
            walk,
            [
                ("cpu only", _cpu_only),  # first: the app's own case, through the app
                ("every case", _every_case(cases)),
            ],
        )
    return walk


@pytest.fixture(scope="module")
def shared_walk(shared: Path, tmp_path_factory: pytest.TempPathFactory) -> Walk:
    """One app on the CPU-only case for both tests on the shared cases."""
    return asyncio.run(_shared_walk(shared, tmp_path_factory.mktemp("shared-walk")))


def test_shared_cases_show(shared_walk: Walk) -> None:
    """Every case's results through both screens' compute and show (one app for all, fast),
    each number against the analyses; the CPU-only case through the whole app (below)."""
    cases = shared_walk["listed"]["cases"]
    assert len(cases) >= 10
    assert shared_walk["every case"]["cases"] == cases


def test_cpu_only_case_in_the_app(shared_walk: Walk) -> None:
    """The empty states through the whole app: a CPU-only rank (34) has no queue, no copies
    and no launches; each screen says so in a sentence."""
    assert shared_walk["cpu only"]["done"]


# -- snapshots ---------------------------------------------------------------------------------
def snapshot_trace(rank: int) -> dict[str, Any]:
    """Three steps: bursts of launches on stream 7 that queue up behind long kernels, a copy
    on stream 20 and a memset, with one slow launch call and delays that grow with the rank."""
    cpu = {"pid": 100, "tid": 100}
    ev: list[dict[str, Any]] = []
    corr = 1
    for s in range(3):
        t = T0 + s * 2000
        ev.append(
            {
                "ph": "X",
                "cat": "user_annotation",
                "name": f"ProfilerStep#{s + 1}",
                **cpu,
                "ts": t,
                "dur": 1990,
            }
        )
        gpu_t = t + 40
        for i in range(12):
            call = t + 5 + i * 12
            dur = 90 if (s, i) == (1, 3) else 4 + (i * 7) % 9
            name = ("ampere_sgemm_128x64_tn", "vectorized_elementwise_kernel")[i % 2]
            ker = 80 + 30 * (i % 3) if i % 2 == 0 else 3
            gpu_t = max(gpu_t, call + dur + 2 + 10 * rank)
            ev.append(
                {
                    "ph": "X",
                    "cat": "cuda_runtime",
                    "name": "cudaLaunchKernel",
                    **cpu,
                    "ts": call,
                    "dur": dur,
                    "args": {"correlation": corr},
                }
            )
            ev.append(
                {
                    "ph": "X",
                    "cat": "kernel",
                    "name": name,
                    "pid": 0,
                    "tid": 7,
                    "ts": gpu_t,
                    "dur": ker,
                    "args": {"device": 0, "stream": 7, "correlation": corr},
                }
            )
            gpu_t += ker + 2
            corr += 1
        for j, (name, cat, stream, nbytes, dur) in enumerate(
            [
                ("Memcpy HtoD (Pageable -> Device)", "gpu_memcpy", 20, 4_000_000, 200),
                ("Memset (Device)", "gpu_memset", 7, 1_000_000, 20),
            ]
        ):
            call = t + 200 + 300 * j
            ev.append(
                {
                    "ph": "X",
                    "cat": "cuda_runtime",
                    "name": "cudaMemcpyAsync",
                    **cpu,
                    "ts": call,
                    "dur": 6,
                    "args": {"correlation": corr},
                }
            )
            ev.append(
                {
                    "ph": "X",
                    "cat": cat,
                    "name": name,
                    "pid": 0,
                    "tid": stream,
                    "ts": call + 30 + 50 * s,
                    "dur": dur,
                    "args": {
                        "device": 0,
                        "stream": stream,
                        "correlation": corr,
                        "bytes": nbytes,
                        "memory bandwidth (GB/s)": nbytes / (dur * 1000),
                    },
                }
            )
            corr += 1
    return {
        "schemaVersion": 1,
        "deviceProperties": [{"id": 0, "name": "NVIDIA A100-SXM4-80GB"}],
        "distributedInfo": {"backend": "nccl", "rank": rank, "world_size": 2},
        "traceEvents": ev,
    }


def snapshot_app(tmp_path: Path, theme: str) -> HtaApp:
    root = tmp_path / "traces"
    root.mkdir()
    for rank in range(2):
        data = orjson.dumps(snapshot_trace(rank))
        (root / f"rank-{rank}.trace.json.gz").write_bytes(gzip.compress(data, mtime=0))
    return make_app(root, tmp_path, timings=False, theme=theme)


def run_to(key: str, cls: type):
    async def run_before(pilot: Any) -> None:
        await open_screen(pilot, key, cls)
        await pilot.pause()

    return run_before


@pytest.fixture(scope="module")
def dark_snapshots(tmp_path_factory: pytest.TempPathFactory) -> Walk:
    """One app in the dark theme for the timelines' and the launches' snapshots, in turn."""
    app = snapshot_app(tmp_path_factory.mktemp("snapshots"), "hta-dark")
    steps = {
        "N": run_to("N", TimelinesScreen),
        "L": run_to("L", LaunchScreen),
        "N light": light(run_to("N", TimelinesScreen)),  # as an app started in it shows it
    }
    scenarios = {**snapshot_steps(steps), "L grown": _launch_chart_grown}  # after the pictures
    return asyncio.run(walk_app(app, scenarios, size=SIZE, notifications=True))


NARROW = 25


async def _launch_chart_grown(pilot: Any, seen: dict[str, Any]) -> None:
    """The launches' chart drawn at 25 columns (room for two ticks), then the terminal
    widened: it shows what a chart drawn at the new width shows (it kept the narrow chart's
    ticks: the launch snapshot's flake, a first draw before the chart was laid out)."""
    screen = await open_screen(pilot, "L", LaunchScreen)
    plot = screen.query_one("#launch-plot", SafePlot)

    async def drawn() -> str:
        await pilot.pause()
        await wait_until(pilot, lambda: screen.charts_pending == 0, 10, "the chart")
        return plot.picture.plain

    await pilot.resize_terminal(NARROW, SIZE[1])
    await pilot.press("p", "p")  # the chart drawn again, narrow
    seen["narrow"] = await drawn()
    await pilot.resize_terminal(*SIZE)
    await wait_until(pilot, lambda: plot.size.width > NARROW, 10, "the wider chart")
    seen["grown"] = await drawn()
    await pilot.press("p", "p")
    seen["drawn wide"] = await drawn()


def test_a_launch_chart_drawn_narrow_then_widened_is_drawn_for_its_width(
    dark_snapshots: Walk,
) -> None:
    seen = dark_snapshots["L grown"]
    assert seen["grown"] == seen["drawn wide"]
    # (the narrow chart has fewer ticks: otherwise this would not tell)
    assert len(x_labels(seen["narrow"])) < len(x_labels(seen["drawn wide"]))


def x_labels(picture: str) -> list[str]:
    """The labels under a chart's x axis (the line below its bottom border)."""
    lines = picture.splitlines()
    below = next(i for i, line in enumerate(lines) if "└" in line) + 1
    return lines[below].split()


def light(run_before: Any) -> Any:
    async def then_light(pilot: Any) -> None:
        await run_before(pilot)
        pilot.app.theme = "hta-light"
        await wait_screen(pilot)

    return then_light


@pytest.mark.parametrize("theme", ["hta-dark", "hta-light"])
def test_snapshot_timelines(snap_svg, dark_snapshots: Walk, theme: str) -> None:
    assert snap_svg(dark_snapshots.check("N" if theme == "hta-dark" else "N light")["svg"])


# the dark theme only: the light one restyles the same layout, and the timelines' light
# snapshot above keeps it covered in this module (as the operators' snapshots do)
@pytest.mark.parametrize("theme", ["hta-dark"])
def test_snapshot_launch(snap_svg, dark_snapshots: Walk, theme: str) -> None:
    assert snap_svg(dark_snapshots.check("L")["svg"])
