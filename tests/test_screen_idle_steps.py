"""Screens 2 (idle time), 5 (comm/comp overlap) and 9 (steps & stragglers), driven with Pilot:
the numbers they show equal the analyses called on the same data, the threshold edit, rank
switch, filter / sort / export, the straggler flag, every shared trace, and snapshots."""

from __future__ import annotations

import asyncio
import csv
import sys
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import polars as pl
import pytest
from polars.testing import assert_frame_equal
from textual.widgets import Input, Static

from hta_tui.analysis import annotations, exposed_comm, gaps, idle, overlap, step_compare, steps
from hta_tui.app.screens.idle import IdleScreen, ThresholdDialog
from hta_tui.app.screens.overlap import KERNEL_HEADERS, RANK_HEADERS, OverlapScreen
from hta_tui.app.screens.steps import StepBars, StepsScreen
from hta_tui.app.widgets.frame_table import FrameTable
from hta_tui.synth import write_trace_dir
from hta_tui.trace.discover import discover
from hta_tui.trace.parse import TraceFileError
from tests.app_walk import Walk, snapshot_steps, walk_app
from tests.shared_sets import parsed
from tests.test_app_support import (
    T0,
    press_view,
    rank_trace,
    settle,
    wait_until,
    wait_view,
)
from tests.test_app_support import make_screen_app as make_app

SIZE = (80, 24)
SCREEN_KEYS = {"I": IdleScreen, "C": OverlapScreen, "P": StepsScreen}
SUMMARIES = {"I": "#idle-summary", "C": "#overlap-summary", "P": "#steps-summary"}


@pytest.fixture(scope="module")
def synth_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """synth's 4 ranks, rank 1 slow (written once; each test has its own cache)."""
    root = tmp_path_factory.mktemp("synth") / "traces"
    write_trace_dir(root, ranks=4, steps=4, seed=0, slow_rank=1)
    return root


def table(screen: Any, id: str) -> FrameTable:
    return screen.query_one(f"#{id}", FrameTable)


# -- screen 2: idle time -------------------------------------------------------------------------


async def _idle_numbers_and_threshold(pilot: Any, seen: dict) -> None:
    app = pilot.app
    await settle(pilot)
    screen = await press_view(pilot, "I", SCREEN_KEYS["I"])
    frames = app.trace_set.frames()
    want, want_stats = idle.idle_time_breakdown(frames, show_idle_interval_stats=True)
    assert_frame_equal(table(screen, "idle-breakdown").frame, want)
    assert_frame_equal(table(screen, "idle-stats").frame, want_stats)
    assert_frame_equal(table(screen, "idle-gaps").frame, gaps.longest_gaps(frames))
    title = str(screen.query_one("#screen-title", Static).render())
    assert "threshold 30 us" in title
    bars = screen.query_one("#idle-bars").rows
    assert len(bars) == want.select("rank", "stream").unique().height

    # `c`: a new threshold (cutoff), the numbers follow exactly
    await pilot.press("c")
    await wait_until(pilot, lambda: isinstance(app.screen, ThresholdDialog))
    box = app.screen.query_one("#threshold-input", Input)
    assert box.value == "30"
    await pilot.press("end", *["backspace"] * 4, "2", ".", "5", "enter")
    await wait_view(pilot, IdleScreen)
    assert screen.params.get("threshold") == 2.5
    got = table(screen, "idle-breakdown").frame
    new, new_stats = idle.idle_time_breakdown(
        frames, consecutive_kernel_delay_us=2.5, show_idle_interval_stats=True
    )
    assert_frame_equal(got, new)
    assert_frame_equal(table(screen, "idle-stats").frame, new_stats)
    assert not got.equals(want)  # the threshold moved gaps between categories
    assert "threshold 2.5 us" in str(screen.query_one("#screen-title", Static).render())
    expect = gaps.longest_gaps(frames, consecutive_kernel_delay_us=2.5)
    assert_frame_equal(table(screen, "idle-gaps").frame, expect)

    # a bad value keeps the dialog open; escape leaves the threshold alone
    await pilot.press("c")
    await wait_until(pilot, lambda: isinstance(app.screen, ThresholdDialog))
    await pilot.press("end", *["backspace"] * 4, "-", "1", "enter")
    await pilot.pause()
    assert isinstance(app.screen, ThresholdDialog)
    assert "number" in str(app.screen.query_one("#threshold-error", Static).render())
    await pilot.press("escape")
    await pilot.pause()
    assert screen.params.get("threshold") == 2.5


async def _idle_rank_switch_filter_sort_export(pilot: Any, seen: dict) -> None:
    app = pilot.app
    await settle(pilot)
    screen = await press_view(pilot, "I", SCREEN_KEYS["I"])
    frames = app.trace_set.frames()
    # `r`: rank 2 only
    await pilot.press("r")
    await pilot.pause()
    await pilot.press("down", "down", "down", "enter")  # all, 0, 1, 2
    await wait_view(pilot, IdleScreen)
    assert screen.params.rank == 2
    want, _ = idle.idle_time_breakdown({2: frames[2]})
    assert_frame_equal(table(screen, "idle-breakdown").frame, want)
    assert "rank 2" in str(screen.query_one("#screen-title", Static).render())
    assert all(r.label.startswith("r2 ") for r in screen.query_one("#idle-bars").rows)

    # `/` filter, `s` sort, `e` export: the CSV is exactly the view
    await pilot.press("slash", *"kernel_wait", "enter")
    await pilot.pause()
    breakdown = table(screen, "idle-breakdown")
    assert breakdown.has_focus
    view = breakdown.view_frame
    assert view.height == want.filter(pl.col("idle_category") == "kernel_wait").height > 0
    # `s` lists the columns: pick idle_time (a number: largest first)
    await pilot.press("s")
    await pilot.pause()
    await pilot.press("home", *["down"] * breakdown.frame.columns.index("idle_time"), "enter")
    await pilot.pause()
    assert breakdown.sort_by == ("idle_time", True)
    await pilot.press("e")
    await pilot.pause()
    files = list((app.export_dir).glob("*.csv"))
    assert len(files) == 1
    with files[0].open() as f:
        rows = list(csv.DictReader(f))
    expect = want.filter(pl.col("idle_category") == "kernel_wait").sort(
        "idle_time", descending=True
    )
    assert [float(r["idle_time"]) for r in rows] == expect["idle_time"].to_list()
    assert {r["idle_category"] for r in rows} == {"kernel_wait"}
    assert not list(app.root.glob("*.csv"))

    # `v` cycles the tables
    await pilot.press("v")
    await pilot.pause()
    assert screen.query_one("#idle-tabs").active == "idle-tab-stats"
    assert table(screen, "idle-stats").has_focus


# -- screen 9: steps ---------------------------------------------------------------------------


def _on_ui_thread(calls: list[str]) -> Callable[[], None]:
    """`step_compare`'s functions note each call the steps view makes on the UI thread (at
    1,000 ranks the chart's per-step durations made there held `P` up); returns the undo."""
    real = {n: getattr(step_compare, n) for n in ("step_spread", "step_durations")}

    def noted(name: str, fn: Any) -> Any:
        def call(*args: Any, **kw: Any) -> Any:
            caller = sys._getframe(1).f_code.co_filename
            if (
                caller.endswith("steps.py")
                and threading.current_thread() is threading.main_thread()
            ):
                calls.append(name)
            return fn(*args, **kw)

        return call

    def undo() -> None:
        for name, fn in real.items():
            setattr(step_compare, name, fn)

    for name, fn in real.items():
        setattr(step_compare, name, noted(name, fn))
    return undo


async def _steps_flags_slow_rank(pilot: Any, seen: dict) -> None:
    app = pilot.app
    await settle(pilot)
    on_ui: list[str] = []
    undo = _on_ui_thread(on_ui)
    try:
        screen = await press_view(pilot, "P", SCREEN_KEYS["P"])
        await pilot.press("down")  # the chart follows the per-step table's cursor
        await pilot.pause()
        await pilot.press("up")
        await pilot.pause()
    finally:
        undo()
    assert not on_ui  # the steps' durations come with the numbers, made in the worker
    frames = app.trace_set.frames()
    iters = steps.iterations(frames)
    assert_frame_equal(table(screen, "steps-iterations").frame, iters)
    assert_frame_equal(table(screen, "steps-per-step").frame, step_compare.step_spread(iters))
    shown = table(screen, "steps-stragglers").frame
    want = steps.straggler_candidates(frames)
    assert_frame_equal(shown.sort("rank").select(want.columns), want)
    assert shown.filter(pl.col("straggler"))["rank"].to_list() == [1]
    assert shown.row(0, named=True)["rank"] == 1  # flagged first
    summary = str(screen.query_one("#steps-summary", Static).render())
    assert "rank 1" in summary and "slow steps" in summary
    bars = screen.query_one(StepBars).bars
    assert [b.rank for b in bars if b.flagged] == [1]
    assert [b.rank for b in bars if b.slowest] == [1]
    # the chart follows the per-step table's cursor
    first = screen.query_one(StepBars).title
    await pilot.press("down")
    await pilot.pause()
    second_step = table(screen, "steps-per-step").selected_row()["iter"]
    assert screen.query_one(StepBars).title != first
    assert f"Step {second_step} " in screen.query_one(StepBars).title
    shown = [(b.rank, b.dur) for b in screen.query_one(StepBars).bars]
    assert shown == step_compare.step_durations(iters, second_step).rows()

    assert_frame_equal(
        table(screen, "steps-annotations").frame,
        annotations.user_annotation_breakdown(frames),
    )
    await pilot.press("g")  # GPU annotations, even with a table focused
    await wait_view(pilot, StepsScreen)
    assert screen.params.get("gpu") is True
    assert_frame_equal(
        table(screen, "steps-annotations").frame,
        annotations.user_annotation_breakdown(frames, gpu=True),
    )
    tabs = screen.query_one("#steps-tabs")
    assert "GPU" in str(tabs.get_tab("steps-tab-annotations").label)
    # `g` typed into the filter box is text, not the toggle
    await pilot.press("slash", "g")
    await pilot.pause()
    assert screen.query_one("#filter", Input).value == "g"
    assert screen.params.get("gpu") is True


def no_steps_root(root: Path) -> Path:
    """One rank of the tests' generator without its ProfilerStep annotations."""
    root.mkdir(parents=True)
    trace = rank_trace(0)
    trace["traceEvents"] = [
        e for e in trace["traceEvents"] if not str(e.get("name", "")).startswith("ProfilerStep")
    ]
    import orjson

    (root / "rank-0.trace.json").write_bytes(orjson.dumps(trace))
    return root


async def _steps_empty_without_profiler_steps(pilot: Any, seen: dict) -> None:
    await settle(pilot)
    screen = await press_view(pilot, "P", SCREEN_KEYS["P"])
    assert "No ProfilerStep" in str(screen.query_one("#steps-summary", Static).render())
    assert not screen.query_one("#steps-bars-box").display
    assert table(screen, "steps-iterations").frame.is_empty()


# -- screen 5: overlap -------------------------------------------------------------------------


async def _overlap_numbers(pilot: Any, seen: dict) -> None:
    app = pilot.app
    await settle(pilot)
    screen = await press_view(pilot, "C", SCREEN_KEYS["C"])
    frames = app.trace_set.frames()
    shown = table(screen, "overlap-table").frame
    inv = {v: k for k, v in RANK_HEADERS.items()}
    want = overlap.comm_comp_overlap(frames)
    assert_frame_equal(shown.rename(inv).select(want.columns), want)
    exposed = exposed_comm.exposed_comm_per_rank(frames)
    assert_frame_equal(shown.rename(inv).select(exposed.columns), exposed)
    kernels = table(screen, "comm-kernels").frame
    want_k = exposed_comm.comm_kernels_exposed(frames)
    inv_k = {v: k for k, v in KERNEL_HEADERS.items()}
    assert_frame_equal(kernels.rename(inv_k).select(want_k.columns), want_k)
    assert kernels["exposed (us)"].is_sorted(descending=True)
    worst = exposed.sort("exposed (us)", descending=True)["rank"][0]
    assert f"rank {worst}" in str(screen.query_one("#overlap-summary", Static).render())
    assert len(screen.query_one("#overlap-bars").rows) == 4


# -- one app on the generated job for the tests above ---------------------------------------------


async def _threshold_back(pilot: Any, seen: dict) -> None:
    """The idle view's threshold back to its default (30 us), as a new app has it."""
    app = pilot.app
    screen = await press_view(pilot, "I", IdleScreen)
    await pilot.press("c")
    await wait_until(pilot, lambda: isinstance(app.screen, ThresholdDialog))
    await pilot.press("end", *["backspace"] * 4, "3", "0", "enter")
    await wait_view(pilot, IdleScreen)
    assert screen.params.get("threshold") == 30


async def _synth_walk(root: Path, tmp_path: Path) -> Walk:
    app = make_app(root, tmp_path)
    scenarios = {
        "overlap": _overlap_numbers,
        "idle threshold": _idle_numbers_and_threshold,
        "reset": _threshold_back,
        "steps": _steps_flags_slow_rank,
        "idle rank": _idle_rank_switch_filter_sort_export,  # last: rank 2 holds on every view
    }
    return await walk_app(app, scenarios, size=SIZE, first=settle)


@pytest.fixture(scope="module")
def synth_walk(synth_root: Path, tmp_path_factory: pytest.TempPathFactory) -> Walk:
    """One app on `synth_root` through the scenarios of the four tests below, in turn."""
    return asyncio.run(_synth_walk(synth_root, tmp_path_factory.mktemp("synth-app")))


def test_idle_numbers_and_threshold(synth_walk: Walk) -> None:
    synth_walk.check("idle threshold")


def test_idle_rank_switch_filter_sort_export(synth_walk: Walk) -> None:
    synth_walk.check("reset")
    synth_walk.check("idle rank")


def test_steps_flags_slow_rank(synth_walk: Walk) -> None:
    synth_walk.check("steps")


def test_overlap_numbers(synth_walk: Walk) -> None:
    synth_walk.check("overlap")


# -- every shared trace --------------------------------------------------------------------------

#: Opened in the full app (loading included); every case also goes through each screen's
#: compute and show below, in one app (an app per case and screen costs a minute).
FULL_APP_CASES = ("cpu_only", "trace_filter")


def case_frames(folder: Path) -> dict[int, pl.DataFrame]:
    """rank -> events of every file under `folder` that parses (numbered in file order)."""
    frames = {}
    for i, found in enumerate(discover(folder)):
        try:
            frames[i] = parsed(found.path).frames["events"]  # parsed once a process
        except TraceFileError:
            continue
    return frames


@pytest.mark.parametrize("case", FULL_APP_CASES)
async def test_shared_traces_in_app(shared: Path, case: str, tmp_path: Path, ui: Any) -> None:
    app = make_app(shared / "traces" / case, tmp_path)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot, timeout=60)
        for key, summary in SUMMARIES.items():
            screen = await ui.press_view(pilot, key, SCREEN_KEYS[key])
            text = str(screen.query_one(summary, Static).render())
            assert text.strip()
            assert not [w for w in app.workers if w.group == "screen" and w.error is not None]
            if case == "cpu_only":  # no GPU at all: each screen says so in a sentence
                want = {"I": "No GPU kernels", "C": "nothing to overlap", "P": "on 1 rank"}
                assert want[key] in text


async def _every_case(pilot: Any, seen: dict) -> None:
    """Each case's frames through each screen's compute and show: a sentence, no exception,
    ASCII-only charts when the app draws without Unicode."""
    from tests.conftest import SHARED

    if not (SHARED / "traces").is_dir():
        pytest.skip(f"shared traces not found at {SHARED}")
    shared = SHARED
    cases = {p.name: case_frames(p) for p in sorted((shared / "traces").iterdir()) if p.is_dir()}
    assert len(cases) >= 10
    await settle(pilot)
    for key, summary in SUMMARIES.items():
        screen = await press_view(pilot, key, SCREEN_KEYS[key])
        for case, frames in cases.items():  # no pause per case: show() is synchronous
            result = type(screen).compute(frames, screen.params)
            screen.result = result
            screen.show(result)
            charts = screen.query("StackedBars, StepBars")
            assert charts
            for chart in charts:
                # what a refresh would draw, without waiting for one
                assert chart.render().plain.isascii(), (case, key)
            text = str(screen.query_one(summary, Static).render()).strip()
            assert text, (case, key)
            if key == "I" and not frames:
                assert "No GPU kernels" in text
            if key == "P" and case == "cpu_only":
                assert table(screen, "steps-iterations").frame.height > 0
        await pilot.pause()


async def _one_rank_walk(tmp_path: Path) -> Walk:
    app = make_app(no_steps_root(tmp_path / "traces"), tmp_path, ascii=True)  # ASCII charts
    scenarios = {"no steps": _steps_empty_without_profiler_steps, "every case": _every_case}
    return await walk_app(app, scenarios, size=SIZE)


@pytest.fixture(scope="module")
def one_rank_walk(tmp_path_factory: pytest.TempPathFactory) -> Walk:
    """One app on a one-rank trace without ProfilerSteps, drawing without Unicode: its steps
    view, then every shared case's results shown on the three views."""
    return asyncio.run(_one_rank_walk(tmp_path_factory.mktemp("one-rank-app")))


def test_steps_empty_without_profiler_steps(one_rank_walk: Walk) -> None:
    one_rank_walk.check("no steps")


def test_shared_traces_every_case(shared: Path, one_rank_walk: Walk) -> None:
    """Each case's frames through each screen's compute and show: a sentence, no exception,
    ASCII-only charts when the app draws without Unicode."""
    one_rank_walk.check("every case")


# -- snapshots -----------------------------------------------------------------------------------


def snapshot_root(tmp_path: Path) -> Path:
    """Four ranks of the tests' fixed generator, the all-reduce moved to a stream of its own
    where it overlaps the GEMM more with every rank; rank 1 runs everything 30% slower (a
    straggler). Byte-identical run to run."""
    import gzip

    import orjson

    root = tmp_path / "traces"
    root.mkdir(parents=True)
    for rank in range(4):
        trace = rank_trace(rank, steps=4, world=4)
        for e in trace["traceEvents"]:
            if e.get("pid") == 0 and str(e.get("name")).startswith("nccl"):
                # on its own stream, overlapping the end of the GEMM: 20% to 80% overlap
                e["ts"] -= 10 + 40 * (rank + 1)
                e["tid"] = e["args"]["stream"] = 8
        if rank == 1:
            for e in trace["traceEvents"]:
                if e.get("ph") == "X":
                    e["ts"] = T0 + (e["ts"] - T0) * 13 // 10
                    e["dur"] = e["dur"] * 13 // 10
        data = gzip.compress(orjson.dumps(trace), mtime=0)
        (root / f"rank-{rank}.trace.json.gz").write_bytes(data)
    return root


def _run_before(key: str):
    async def run_before(pilot: Any) -> None:
        await settle(pilot)
        await press_view(pilot, key, SCREEN_KEYS[key])
        await pilot.pause()

    return run_before


@pytest.fixture(scope="module")
def snapshots(tmp_path_factory: pytest.TempPathFactory) -> Walk:
    """One app (dark theme) on `snapshot_root` showing each view in turn for its snapshot."""
    tmp_path = tmp_path_factory.mktemp("snapshots")
    app = make_app(snapshot_root(tmp_path), tmp_path, theme="hta-dark", ascii=False)
    steps = snapshot_steps({key: _run_before(key) for key in SCREEN_KEYS})
    return asyncio.run(walk_app(app, steps, size=SIZE, notifications=True))


# each view in the dark theme; the light theme restyles, it does not lay out
# (the light theme's snapshots elsewhere cover it: a light twin here would show the same layout)
@pytest.mark.parametrize("key", ["I", "C", "P"], ids=["2-hta-dark", "5-hta-dark", "9-hta-dark"])
def test_snapshot(snap_svg, snapshots: Walk, key: str) -> None:
    assert snap_svg(snapshots.check(key)["svg"])
