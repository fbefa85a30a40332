"""The timeline screen (`T`), driven with Pilot: every key, and snapshots at three zoom levels
in both themes. The trace is tests/timeline_trace.py (2 ranks, hand-written events), so the
expected positions and names are read off its events."""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path
from typing import Any

import pytest
from textual.widgets import Static

from hta_tui.analysis import registry
from hta_tui.app.app import HtaApp
from hta_tui.app.screens.timeline import Moment, TimelineScreen
from hta_tui.synth import write_trace_dir
from tests.app_walk import Walk, snapshot_steps, walk_app
from tests.test_app_support import (
    base_screen,
    make_screen_app,
    screen_shows_current,
    settle,
    wait_patiently,
    wait_until,
    wait_view,
)
from tests.timeline_trace import GEMM, RELU, T0, write_timeline_traces

SIZE = (80, 24)
US = 1000


def make(tmp_path: Path, **kw: Any) -> HtaApp:
    return make_screen_app(write_timeline_traces(tmp_path / "traces"), tmp_path, **kw)


async def open_timeline(pilot: Any) -> TimelineScreen:
    await settle(pilot)
    await pilot.press("T")
    app = pilot.app
    await wait_until(
        pilot,
        lambda: isinstance(app.screen, TimelineScreen) and screen_shows_current(app, app.screen),
        20,
        "the timeline",
    )
    await pilot.pause()
    return app.screen


def details(screen: TimelineScreen) -> str:
    return str(screen.query_one("#timeline-details", Static).content)


def row_key(screen: TimelineScreen) -> tuple | None:
    return screen.view.current_row_key


async def to_row(pilot: Any, screen: TimelineScreen, key: tuple) -> None:
    """Move the cursor to the row `key` with the up and down keys."""
    while screen.view.cursor > 0:
        await pilot.press("up")
    for _ in range(len(screen.view.items)):
        if row_key(screen) == key:
            return
        await pilot.press("down")
    raise AssertionError(f"row {key} not reached")


async def _opens_with_every_row_and_the_whole_trace(pilot: Any, seen: dict) -> None:
    screen = await fresh_timeline(pilot)
    view = screen.view
    assert view.span == 1400 * US
    assert [it.row is None for it in view.items].count(True) == 4  # 2 ranks x CPU, GPU
    # per rank: 2 threads; stream 7's queue, GPU utilisation, streams 7 and 20
    assert len(view.items) == 16


async def _zoom_keys_keep_the_cursor_in_place(pilot: Any, seen: dict) -> None:
    screen = await fresh_timeline(pilot)
    view = screen.view
    view.cursor_t = 300 * US
    frac = (view.cursor_t - view.t0) / view.span
    for key, factor in (("w", 0.5), ("plus", 0.5), ("s", 2), ("minus", 2)):
        before = view.span
        await pilot.press(key)
        assert view.span == pytest.approx(before * factor)
        assert (view.cursor_t - view.t0) / view.span == pytest.approx(frac)
    assert view.span == pytest.approx(1400 * US)


async def _pan_and_page_keys(pilot: Any, seen: dict) -> None:
    screen = await fresh_timeline(pilot)
    view = screen.view
    await pilot.press("w", "w")
    span, t0 = view.span, view.t0
    await pilot.press("d")
    assert view.t0 == pytest.approx(t0 + span / 8)
    await pilot.press("a")
    assert view.t0 == pytest.approx(t0)
    await pilot.press("D")
    assert view.t0 == pytest.approx(t0 + span)
    await pilot.press("A")
    assert view.t0 == pytest.approx(t0)
    await pilot.press("z")
    assert (view.t0, view.span) == (0, 1400 * US)


async def _rows_up_down_and_fold_a_group(pilot: Any, seen: dict) -> None:
    screen = await fresh_timeline(pilot)
    view = screen.view
    assert view.current_item.row is None  # the first group header
    await pilot.press("down")
    assert row_key(screen) == (0, "cpu", 10, 1)
    await pilot.press("down", "down", "down")
    assert row_key(screen) == (0, "gpu", 0, -1007)  # stream 7's launch queue
    await pilot.press("down")
    assert row_key(screen) == (0, "gpu", 0, -1)
    await pilot.press("up", "up")
    assert view.current_item.row is None  # rank 0's GPU header
    n = len(view.items)
    await pilot.press("enter")  # on a header: fold it
    assert len(view.items) == n - 4
    await pilot.press("space")  # unfold
    assert len(view.items) == n


async def _down_moves_the_cursor_past_the_screen(pilot: Any, seen: dict) -> None:
    """More rows than fit: down moves the cursor (not the scroll view's scroll) to the last
    row, and the view scrolls to keep it in sight."""
    await pilot.resize_terminal(80, 12)  # more rows than fit
    screen = await fresh_timeline(pilot)
    await wait_until(pilot, lambda: screen.view.size.height < 12, 10, "80x12")
    view = screen.view
    assert len(view.items) > view.size.height
    for _ in range(len(view.items)):
        await pilot.press("down")
    assert row_key(screen) == (1, "gpu", 1, 20)  # the last row
    assert view.scroll_offset.y > 0
    await pilot.press("up")
    assert row_key(screen) == (1, "gpu", 1, 7)


async def _enter_on_the_queue_track_says_its_length(pilot: Any, seen: dict) -> None:
    screen = await fresh_timeline(pilot)
    await to_row(pilot, screen, (0, "gpu", 0, -1007))
    screen.view.show_range(100 * US, 200 * US)
    screen.view.cursor_t = 140 * US  # launched at 120, started at 150: one in the queue
    await pilot.press("enter")
    assert "queue length of stream 7" in details(screen)
    assert "1.0 on average" in details(screen) and "(max 1)" in details(screen)


async def _next_previous_event_and_enter_select(pilot: Any, seen: dict) -> None:
    screen = await fresh_timeline(pilot)
    view = screen.view
    await to_row(pilot, screen, (0, "gpu", 0, 7))
    view.cursor_t = 0
    await pilot.press("right_square_bracket")
    assert view.selected == (view.current_row, 0)
    assert GEMM in details(screen)
    assert "dur 200.000 us" in details(screen)
    await pilot.press("right_square_bracket")
    assert view.selected == (view.current_row, 1)
    assert RELU in details(screen)
    await pilot.press("left_square_bracket")
    assert view.selected == (view.current_row, 0)
    # enter: the innermost event under the cursor, with its stack
    await to_row(pilot, screen, (0, "cpu", 10, 1))
    view.cursor_t = 125 * US
    await pilot.press("enter")
    text = details(screen)
    assert text.startswith("cudaLaunchKernel")
    assert "stack: ProfilerStep#1 > aten::linear > aten::addmm" in text
    view.cursor_t = 1100 * US  # past the step: nothing there
    await pilot.press("enter")
    assert "no event under the cursor" in details(screen)


async def _follow_flow_from_kernel_to_launch_and_back(pilot: Any, seen: dict) -> None:
    screen = await fresh_timeline(pilot)
    view = screen.view
    await pilot.press("f")
    assert "select an event first" in details(screen)
    await to_row(pilot, screen, (0, "gpu", 0, 7))
    view.cursor_t = 530 * US
    await pilot.press("enter")
    assert RELU in details(screen)
    await pilot.press("f")
    assert row_key(screen) == (0, "cpu", 10, 1)
    row = view.timeline.rows[view.current_row]
    assert row.starts[view.selected[1]] == 510 * US  # the relu's cudaLaunchKernel
    await pilot.press("f")
    assert row_key(screen) == (0, "gpu", 0, 7)
    assert RELU in details(screen)


async def _mark_a_range(pilot: Any, seen: dict) -> None:
    screen = await fresh_timeline(pilot)
    view = screen.view
    await to_row(pilot, screen, (0, "gpu", 0, 7))
    view.show_range(0, 1000 * US)
    view.cursor_t = 200 * US
    await pilot.press("m")
    assert view.mark == (200 * US, None)
    view.cursor_t = 400 * US
    await pilot.press("m")
    assert view.mark == (200 * US, 400 * US)
    text = details(screen)
    assert text.startswith("marked 200us")
    # [200, 390) of rank 0 main thread, [210, 400) of rank 1 (100 us later)
    assert "aten::addmm  380.0 us  x2" in text
    await pilot.press("m")
    assert view.mark is None


async def _find_highlights_names(pilot: Any, seen: dict) -> None:
    screen = await fresh_timeline(pilot)
    view = screen.view
    await pilot.press("slash")
    await pilot.press(*"gemm", "enter")
    assert "2 events match 'gemm'" in details(screen)
    lit = {i for i, m in view.matches.items() if m.any()}
    assert {view.timeline.rows[i].key for i in lit} == {(0, "gpu", 0, 7), (1, "gpu", 1, 7)}
    assert view.has_focus


async def _show_moment_zooms_and_selects(pilot: Any, seen: dict) -> None:
    screen = await fresh_timeline(pilot)
    view = screen.view
    screen.show_moment(Moment(rank=1, t=(T0 + 100 + 520) * US, dur=40 * US, name=RELU))
    assert row_key(screen) == (1, "gpu", 1, 7)
    assert RELU in details(screen)
    assert view.t0 <= 620 * US < 660 * US <= view.t0 + view.span
    assert view.span < 1400 * US / 4


# -- one app for the tests above ------------------------------------------------------------------


async def fresh_timeline(pilot: Any) -> TimelineScreen:
    """The timeline as first opened, though an earlier scenario used it: the whole trace,
    nothing selected or marked, the cursor on the first row."""
    screen = await open_timeline(pilot)
    view = screen.view
    view.focus()
    await pilot.press("z")
    view.selected = None
    view.mark = None
    while view.cursor > 0:
        await pilot.press("up")
    await pilot.pause()
    return screen


async def _timeline_walk(tmp_path: Path) -> Walk:
    scenarios = {
        "opens": _opens_with_every_row_and_the_whole_trace,
        "rows": _rows_up_down_and_fold_a_group,
        "zoom": _zoom_keys_keep_the_cursor_in_place,
        "pan": _pan_and_page_keys,
        "queue": _enter_on_the_queue_track_says_its_length,
        "events": _next_previous_event_and_enter_select,
        "flow": _follow_flow_from_kernel_to_launch_and_back,
        "mark": _mark_a_range,
        "find": _find_highlights_names,
        "moment": _show_moment_zooms_and_selects,
        "small": _down_moves_the_cursor_past_the_screen,
    }
    return await walk_app(make(tmp_path), scenarios, size=SIZE)


@pytest.fixture(scope="module")
def timeline_walk(tmp_path_factory: pytest.TempPathFactory) -> Walk:
    """One app on tests/timeline_trace.py through the scenarios of the tests below, in turn
    (the last at 80x12)."""
    return asyncio.run(_timeline_walk(tmp_path_factory.mktemp("timeline-app")))


def test_opens_with_every_row_and_the_whole_trace(timeline_walk: Walk) -> None:
    timeline_walk.check("opens")


def test_zoom_keys_keep_the_cursor_in_place(timeline_walk: Walk) -> None:
    timeline_walk.check("zoom")


def test_pan_and_page_keys(timeline_walk: Walk) -> None:
    timeline_walk.check("pan")


def test_rows_up_down_and_fold_a_group(timeline_walk: Walk) -> None:
    timeline_walk.check("rows")


def test_down_moves_the_cursor_past_the_screen(timeline_walk: Walk) -> None:
    """More rows than fit: down moves the cursor (not the scroll view's scroll) to the last
    row, and the view scrolls to keep it in sight."""
    timeline_walk.check("small")


def test_enter_on_the_queue_track_says_its_length(timeline_walk: Walk) -> None:
    timeline_walk.check("queue")


def test_next_previous_event_and_enter_select(timeline_walk: Walk) -> None:
    timeline_walk.check("events")


def test_follow_flow_from_kernel_to_launch_and_back(timeline_walk: Walk) -> None:
    timeline_walk.check("flow")


def test_mark_a_range(timeline_walk: Walk) -> None:
    timeline_walk.check("mark")


def test_find_highlights_names(timeline_walk: Walk) -> None:
    timeline_walk.check("find")


def test_show_moment_zooms_and_selects(timeline_walk: Walk) -> None:
    timeline_walk.check("moment")


# -- snapshots -----------------------------------------------------------------------------------


def zoomed(keys: str):
    """The GPU row of rank 0's stream 7, the cursor at 250 us, then `keys` (the zoom keys
    pressed since the view opened: each snapshot presses the ones the one before did not)."""

    async def run_before(pilot: Any) -> None:
        screen = await open_timeline(pilot)
        await to_row(pilot, screen, (0, "gpu", 0, 7))
        screen.view.cursor_t = 250 * US
        if keys:
            await pilot.press(*keys.split())
        await pilot.pause()

    return run_before


#: each zoom in the dark theme, in one app, zooming in further at each (the light theme
#: restyles, it does not lay out: its snapshots elsewhere cover it)
ZOOMS = {"-hta-dark": "", "w w-hta-dark": "w w", "w w w w w-hta-dark": "w w w"}


@pytest.fixture(scope="module")
def snapshots(tmp_path_factory: pytest.TempPathFactory) -> Walk:
    tmp_path = tmp_path_factory.mktemp("snapshots")
    steps = snapshot_steps({name: zoomed(keys) for name, keys in ZOOMS.items()})
    app = make(tmp_path, theme="hta-dark")
    return asyncio.run(walk_app(app, steps, size=SIZE, notifications=True))


@pytest.mark.parametrize("name", list(ZOOMS))
def test_snapshot_timeline(snap_svg, snapshots: Walk, name: str) -> None:
    assert snap_svg(snapshots.check(name)["svg"])


async def test_a_kernel_too_long_for_its_bar_shows_its_short_name(tmp_path: Path) -> None:
    """Issue 17 on the timeline: a templated kernel's name cut to `void at::nati…` reads the
    same for every kernel; its short name (no return type, parameters or template
    arguments) fits instead, and enter shows the whole name."""
    import gzip

    import orjson

    from tests.timeline_trace import timeline_trace

    long = (
        "void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<float>, "
        "at::detail::Array<char*, 1> >(int, at::native::FillFunctor<float>, "
        "at::detail::Array<char*, 1>)"
    )
    short = "vectorized_elementwise_kernel<…>"
    root = tmp_path / "traces"
    root.mkdir()
    for r in range(2):
        trace = timeline_trace(r)
        for e in trace["traceEvents"]:
            if e.get("name") == GEMM:
                e["name"] = long
        (root / f"rank-{r}.trace.json.gz").write_bytes(gzip.compress(orjson.dumps(trace)))
    async with make_screen_app(root, tmp_path).run_test(size=SIZE) as pilot:
        screen = await open_timeline(pilot)
        view = screen.view
        await to_row(pilot, screen, (0, "gpu", 0, 7))
        view.show_range(100 * US, 400 * US)  # the kernel [150, 350): two thirds of the track
        await pilot.pause()
        bar = 200 * view.track_width // 300
        assert len(short) < bar < len(long)
        line = view.render_line(view.cursor + 1 - int(view.scroll_offset.y)).text
        assert short in line and "void at::" not in line
        view.cursor_t = 250 * US
        await pilot.press("enter")
        assert long in details(screen).replace("\n", "")


@pytest.mark.parametrize(
    ("ns", "text"),
    [
        (5 * 3600e9, "5h"),  # two spans profiled hours apart: it read 1.8e+04s
        (75 * 60e9, "1.25h"),
        (20 * 60e9, "20min"),
        (12.5e9, "12.5s"),
        (41.28e6, "41.28ms"),
        (750.0, "750ns"),
    ],
)
def test_ruler_times_read_in_their_unit(ns: float, text: str) -> None:
    from hta_tui.app.widgets.timeline_view import fmt_time

    assert fmt_time(ns) == text


async def test_the_timeline_draws_the_ranks_on_screen_before_making_the_others(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 27: the timeline's first visit made every rank's rows before drawing any (8
    real ranks of 100 MB: 1.4 s). The ranks whose rows fill the view are made and drawn
    first; the others come after (`LATER`), and only once those are on the screen (a later
    part started at once took the CPU from drawing them). They land below, the cursor and
    zoom where they were, and the whole is the timeline one call makes."""
    write_trace_dir(tmp_path / "t", ranks=4, steps=1, seed=3)
    go = threading.Event()
    drawn_first: list[bool] = []
    real = TimelineScreen.compute_later

    def later(self: Any, ts: Any, frames: Any, params: Any, result: Any) -> Any:
        drawn_first.append(self._shown_key is not None)
        go.wait(30)
        return real(self, ts, frames, params, result)

    monkeypatch.setattr(TimelineScreen, "compute_later", later)
    app = make_screen_app(tmp_path / "t", tmp_path)
    async with app.run_test(size=(80, 24)) as pilot:
        await wait_patiently(pilot, lambda: app.settled)
        await pilot.press("T")
        await wait_patiently(
            pilot, lambda: isinstance(s := base_screen(app), TimelineScreen) and s.shows_numbers
        )
        screen = base_screen(app)
        view = screen.view
        first = view.timeline
        assert first.pending and drawn_first == [True] and not screen.shows_current
        assert {r.rank for r in first.rows} == set(range(4)) - set(first.pending)
        lines = len(first.rows) + len(first.group_labels)
        assert lines >= view.size.height  # the view's lines filled
        said = str(screen.query_one("#timeline-details").content)
        assert "rows being made" in said
        await pilot.press("w", "down")  # zoom in, a row down: kept when the rest lands
        await pilot.pause()
        span, cursor = view.span, view.cursor
        go.set()
        await wait_view(pilot, TimelineScreen, timeout=60)
        whole = view.timeline
        assert whole.pending == () and (view.span, view.cursor) == (span, cursor)
        assert whole.rows[: len(first.rows)] == first.rows  # drawn ones kept, first
        assert "rows being made" not in str(screen.query_one("#timeline-details").content)
        ts = app.trace_set
        one = registry.tables(
            ts.frames(),
            ["timeline_model"],
            registry.Options(origin_ns=ts.origin_ns),
            frames=ts.frames,
        )["timeline_model"]
        assert [(r.key, r.starts.tolist(), r.lod.busy.tolist()) for r in whole.rows] == [
            (r.key, r.starts.tolist(), r.lod.busy.tolist()) for r in one.rows
        ]
