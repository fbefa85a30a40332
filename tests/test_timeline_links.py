"""`t` on a table row that names a moment opens the timeline there, with its event selected:
from the idle gaps, the three launch tables and the iterations (five tables), on a generated
trace. Each expectation is checked against the raw events frame, not the timeline's output."""

from __future__ import annotations

import asyncio
import functools
from pathlib import Path
from typing import Any

import pytest
from textual.widgets import TabbedContent

from hta_tui.analysis.kernel_detail import START
from hta_tui.app.screens.idle import IdleScreen
from hta_tui.app.screens.launch import LaunchScreen
from hta_tui.app.screens.steps import StepsScreen
from hta_tui.app.screens.timeline import TimelineScreen
from hta_tui.app.widgets.frame_table import FrameTable
from hta_tui.synth import write_trace_dir
from tests.app_walk import Walk, walk_app
from tests.test_app_support import make_screen_app, screen_shows_current, settle, wait_until

SIZE = (80, 24)


@pytest.fixture(scope="module")
def traces(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("links") / "traces"
    write_trace_dir(root, ranks=2, steps=3, seed=0, slow_rank=1)
    return root


async def open_screen(pilot: Any, key: str, cls: type) -> Any:
    app = pilot.app
    await settle(pilot)
    await pilot.press(key)
    await wait_until(
        pilot, lambda: isinstance(app.screen, cls) and screen_shows_current(app, app.screen), 30
    )
    await pilot.pause()
    return app.screen


async def press_t_on(pilot: Any, screen: Any, tab: str | None, table_id: str, row: int) -> dict:
    """Show the tab (if any), put the cursor on `row` of the table, press t, wait for the
    timeline with an event selected; the row's values."""
    if tab is not None:
        screen.query_one(TabbedContent).active = tab
    table = screen.query_one(f"#{table_id}", FrameTable)
    await wait_until(pilot, lambda: table.row_count > row, 20, f"{table_id} rows")
    table.focus()
    table.move_cursor(row=row)
    await pilot.pause()
    values = table.selected_row()
    assert values is not None
    app = pilot.app
    forget_selection(app)
    await pilot.press("t")
    await wait_until(
        pilot,
        lambda: isinstance(app.screen, TimelineScreen) and app.screen.view.selected is not None,
        30,
        "the timeline with a selected event",
    )
    await pilot.pause()
    return values


def forget_selection(app: Any) -> None:
    """No event selected on a timeline an earlier link opened (one app runs several links):
    the wait for the timeline's selection then waits for this link's."""
    for stack in app._screen_stacks.values():
        for screen in stack:
            if isinstance(screen, TimelineScreen) and screen.view.timeline is not None:
                screen.view.selected = None


def selected_event(app: Any) -> tuple[int, dict]:
    """(rank, events-frame row) of the timeline's selected event."""
    view = app.screen.view
    row_i, pos = view.selected
    row = view.timeline.rows[row_i]
    return row.rank, app.trace_set.frames()[row.rank].row(int(row.idx[pos]), named=True)


def on_screen(app: Any, ts_ns: int) -> bool:
    view = app.screen.view
    t = ts_ns - view.timeline.origin_ns
    return view.t0 <= t <= view.t0 + view.span


LAUNCH_TABLES = [("short", "short-table"), ("runtime", "runtime-table"), ("delay", "delay-table")]


async def _launch_table(pilot: Any, seen: dict, tab: str, table_id: str) -> None:
    app = pilot.app
    screen = await open_screen(pilot, "L", LaunchScreen)
    table = screen.query_one(f"#{table_id}", FrameTable)
    if table.frame.is_empty():
        pytest.skip(f"no {tab} rows in this trace")
    values = await press_t_on(pilot, screen, tab, table_id, min(1, table.frame.height - 1))
    rank, ev = selected_event(app)
    assert rank == values["rank"]
    assert ev["correlation"] == values["correlation"]
    assert ev["kind"] in ("kernel", "memcpy", "memset")
    assert on_screen(app, ev["ts"])


async def _idle_gaps(pilot: Any, seen: dict) -> None:
    app = pilot.app
    screen = await open_screen(pilot, "I", IdleScreen)
    values = await press_t_on(pilot, screen, "idle-tab-gaps", "idle-gaps", 2)
    rank, ev = selected_event(app)
    assert rank == values["rank"]
    assert ev["name"] == values["after"]
    assert ev["stream"] == values["stream"]
    # the gap ends where that kernel starts (us from the trace's start, as the timeline)
    want = values["start (us from trace start)"] + values["gap (us)"]
    assert (ev["ts"] - app.trace_set.origin_ns) / 1e3 == pytest.approx(want, abs=1e-3)
    view = app.screen.view  # the whole gap is in view
    start = ev["ts"] - view.timeline.origin_ns
    assert view.t0 <= start - values["gap (us)"] * 1e3
    assert start <= view.t0 + view.span


async def _iterations(pilot: Any, seen: dict) -> None:
    app = pilot.app
    screen = await open_screen(pilot, "P", StepsScreen)
    values = await press_t_on(pilot, screen, "steps-tab-iterations", "steps-iterations", 3)
    rank, ev = selected_event(app)
    assert rank == values["rank"]
    assert ev["name"] == f"ProfilerStep#{values['iter']}"
    assert ev["dur"] / 1e3 == pytest.approx(values["dur"], abs=1e-3)


async def _no_moments(pilot: Any, seen: dict) -> None:
    from hta_tui.app.screens.kernels import KernelsScreen

    app = pilot.app
    screen = await open_screen(pilot, "K", KernelsScreen)
    screen.query_one("#kernel-table", FrameTable).focus()
    folded = screen.params.get("fold", True)
    await pilot.press("t")
    await pilot.pause()
    assert isinstance(app.screen, KernelsScreen)  # totals: no moment, no timeline
    assert screen.params.get("fold", True) is folded  # and not the old top-k toggle
    await pilot.press("o")  # which moved here
    await wait_until(pilot, lambda: screen.params.get("fold", True) is not folded, 10)


async def _walk_links(root: Path, tmp_path: Path) -> Walk:
    scenarios = {
        f"launch {tab}": functools.partial(_launch_table, tab=tab, table_id=table_id)
        for tab, table_id in LAUNCH_TABLES
    }
    scenarios |= {"idle gaps": _idle_gaps, "iterations": _iterations, "kernels": _no_moments}
    app = make_screen_app(root, tmp_path)
    return await walk_app(app, scenarios, size=SIZE)


@pytest.fixture(scope="module")
def links(traces: Path, tmp_path_factory: pytest.TempPathFactory) -> Walk:
    """One app on `traces` through the scenarios of the tests below, in turn."""
    return asyncio.run(_walk_links(traces, tmp_path_factory.mktemp("links-app")))


@pytest.mark.parametrize(("tab", "table_id"), LAUNCH_TABLES)
def test_t_from_launch_tables_selects_the_launched_kernel(
    links: Walk, tab: str, table_id: str
) -> None:
    links.check(f"launch {tab}")


def test_t_from_idle_gaps_selects_the_delayed_kernel(links: Walk) -> None:
    links.check("idle gaps")


def test_t_from_iterations_selects_the_profiler_step(links: Walk) -> None:
    links.check("iterations")


def test_t_on_a_table_without_moments_means_nothing_else(links: Walk) -> None:
    links.check("kernels")


async def test_t_from_a_sync_selects_the_sync_call(tmp_path: Path) -> None:
    from hta_tui.app.screens.syncs import SyncsScreen
    from hta_tui.synth import sync_story
    from hta_tui.synth.files import write_trace

    root = tmp_path / "syncs"
    root.mkdir()
    write_trace(sync_story.make_sync_story(steps=2), root / "rank-0.json")
    app = make_screen_app(root, tmp_path)
    async with app.run_test(size=SIZE) as pilot:
        screen = await open_screen(pilot, "y", SyncsScreen)
        table = screen.query_one("#sync-instances", FrameTable)
        await wait_until(pilot, lambda: table.row_count > 0, 10, "sync rows")
        table.focus()
        await pilot.pause()
        values = table.selected_row()
        assert values is not None
        await pilot.press("t")
        await wait_until(
            pilot,
            lambda: isinstance(app.screen, TimelineScreen) and app.screen.view.selected is not None,
            30,
        )
        rank, ev = selected_event(app)
        assert rank == values["rank"]
        assert ev["name"] == values["call"]
        # the table counts from the trace's start, as the timeline does
        origin = app.trace_set.origin_ns or 0
        assert (ev["ts"] - origin) / 1e3 == pytest.approx(values[START], abs=1e-3)
