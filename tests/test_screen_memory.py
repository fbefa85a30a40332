"""Screen m (Memory), driven with Pilot, and its snapshots.

The tables are compared with the analyses called directly on the same frames; the snapshots
use a small fixed trace written here (not `hta_tui.synth`, so tuning the demo data never moves
these pictures).
"""

from __future__ import annotations

import asyncio
import gzip
from pathlib import Path
from typing import Any

import orjson
import polars as pl
import pytest

from hta_tui.analysis.memory_view import FileMemory
from hta_tui.analysis.memory_window import memory_window, pan, zoom
from hta_tui.app.screens.memory import MemoryScreen
from hta_tui.app.widgets.frame_table import FrameTable
from hta_tui.synth import MemoryOptions, write_trace_dir
from hta_tui.trace.parse import parse_file
from tests.app_walk import Walk, snapshot_steps, walk_app
from tests.test_app_support import make_screen_app, screen_shows_current, settle, wait_until

SIZE = (80, 24)
MIB = 1024 * 1024
T0 = 1_000_000.0  # us


def _fixed_trace() -> dict[str, Any]:
    """Two steps on one thread; per step an addmm activation (4 MiB, freed at the step's
    end), a relu temporary (2 MiB), and one aten::empty under aten::zeros never freed."""
    events: list[dict[str, Any]] = []
    mem: list[tuple[float, int, int]] = []  # ts, bytes, addr
    op = {"ph": "X", "cat": "cpu_op", "pid": 1, "tid": 1}
    for s in range(2):
        base = T0 + s * 1000
        events.append({**op, "name": f"ProfilerStep#{s + 1}", "ts": base, "dur": 990})
        events.append({**op, "name": "aten::linear", "ts": base + 100, "dur": 200})
        events.append({**op, "name": "aten::addmm", "ts": base + 120, "dur": 160})
        events.append({**op, "name": "aten::relu", "ts": base + 400, "dur": 100})
        events.append({**op, "name": "aten::zeros", "ts": base + 590, "dur": 110})
        events.append({**op, "name": "aten::empty", "ts": base + 600, "dur": 50})
        mem += [
            (base + 150, 4 * MIB, 0x1000),
            (base + 420, 2 * MIB, 0x9000),
            (base + 450, -2 * MIB, 0x9000),
            (base + 610, MIB, 0x20000 + s * 0x1000),
            (base + 900, -4 * MIB, 0x1000),
        ]
    total = 0
    for ts, size, addr in mem:
        total += size
        args = {
            "Total Reserved": 20 * MIB,
            "Total Allocated": total,
            "Bytes": size,
            "Addr": addr,
            "Device Id": 0,
            "Device Type": 1,
        }
        events.append(
            {"ph": "i", "cat": "cpu_instant_event", "s": "t", "name": "[memory]", "pid": 1,
             "tid": 1, "ts": ts, "args": args}
        )  # fmt: skip
    return {"schemaVersion": 1, "traceEvents": events, "distributedInfo": {"rank": 0}}


def fixed_root(tmp_path: Path) -> Path:
    root = tmp_path / "traces"
    root.mkdir()
    (root / "rank-0.json.gz").write_bytes(gzip.compress(orjson.dumps(_fixed_trace()), mtime=0))
    return root


def synth_root(tmp_path: Path) -> Path:
    root = tmp_path / "traces"
    write_trace_dir(root, ranks=1, steps=3, seed=0, memory=MemoryOptions(leak_op="aten::add"))
    return root


async def open_memory(pilot: Any) -> MemoryScreen:
    await settle(pilot)
    await pilot.press("M")
    await wait_until(pilot, lambda: isinstance(pilot.app.screen, MemoryScreen), 10, "memory")
    await wait_shown(pilot)
    return pilot.app.screen


async def wait_shown(pilot: Any) -> None:
    await wait_until(
        pilot, lambda: screen_shows_current(pilot.app, pilot.app.screen), 30, "the memory view"
    )
    await pilot.pause()


def _file(root: Path) -> FileMemory:
    parsed = parse_file(next(root.iterdir()))
    return FileMemory(parsed.frames["events"], parsed.frames["memory"])


def test_zoom_and_pan_stay_inside() -> None:
    full = (0.0, 100.0)
    assert zoom(full, full, 0.5, 90.0) == (50.0, 100.0)
    assert zoom((50.0, 100.0), full, 2.0, 75.0) == full
    assert pan((0.0, 10.0), full, -0.5) == (0.0, 10.0)
    assert pan((0.0, 10.0), full, 0.5) == (5.0, 15.0)


def test_window_filters_by_time(tmp_path: Path) -> None:
    f = _file(fixed_root(tmp_path))
    whole = memory_window(f)
    assert whole.device == "GPU0"
    assert whole.events.height == 2 + 2 + 2  # 2 addmm, 2 relu pairs, 2 never-freed empties
    assert [s for s, _ in whole.steps] == [1, 2]
    assert whole.peak is not None and whole.peak["peak_allocated_mb"] == 7.0  # step 2's
    first = memory_window(f, view=(0.0, 1.0))  # ms: step 1 only
    assert first.events["allocation_ms"].max() <= 1.0
    assert first.peak is not None and first.peak["peak_allocated_mb"] == 6.0
    live = first.live.group_by("operator").agg(pl.col("live_mb").sum())
    assert dict(live.iter_rows()) == {"aten::addmm": 4.0, "aten::relu": 2.0}
    ops = first.stats.filter(pl.col("operator") == "aten::linear").row(0, named=True)
    assert ops["allocation_size_kb"] == 4 * 1024 and ops["self_allocation_size_kb"] == 0


async def _zoom(pilot: Any, seen: dict[str, Any]) -> None:
    """test_zoom_changes_the_tables' steps (first: it starts from the whole trace)."""
    screen = await open_memory(pilot)
    events = screen.query_one("#memory-events", FrameTable)
    seen["whole_height"] = events.frame.height
    seen["stats_before"] = screen.query_one("#memory-stats", FrameTable).frame
    await pilot.press("plus")
    await wait_shown(pilot)
    await pilot.press("plus")
    await wait_shown(pilot)
    seen["view"] = screen.params.get("view")
    # the headline stays one line at 80 columns (an id other views' styles once reached)
    seen["headline_height"] = screen.query_one("#memory-headline").region.height
    seen["zoomed"] = events.frame
    seen["stats_zoomed"] = screen.query_one("#memory-stats", FrameTable).frame
    await pilot.press("left_square_bracket")
    await wait_shown(pilot)
    seen["panned"] = screen.params.get("view")
    await pilot.press("z")
    await wait_shown(pilot)
    seen["all_height"] = events.frame.height
    seen["all_headline"] = str(screen.query_one("#memory-headline").render())


async def _filter_sort(pilot: Any, seen: dict[str, Any]) -> None:
    """test_filter_and_sort_the_events_table's steps (after the zoom's `z`: the whole trace)."""
    screen = await open_memory(pilot)
    if screen.params.get("view") is not None:  # the whole trace, whatever the zoom left
        screen.set_params(view=None)
        await wait_until(pilot, lambda: screen.params.get("view") is None, 10, "view all")
        await wait_shown(pilot)
    await pilot.press("v")
    table = screen.query_one("#memory-events", FrameTable)
    whole = memory_window(_file(pilot.app.trace_set.root)).events
    want = seen["want"] = whole.filter(pl.col("operator").str.to_lowercase().str.contains("addmm"))
    seen["whole_height"] = whole.height
    await pilot.press("slash", *"ADDMM", "enter")
    await wait_until(pilot, lambda: table.row_count == min(want.height, 400), 10, "rows")
    seen["filtered_height"] = table.view_frame.height
    table.sort_on("size_kb")
    seen["sorted_sizes"] = table.view_frame["size_kb"].to_list()
    seen["selected_size"] = table.selected_row()["size_kb"]


async def _synth_walk(root: Path, tmp_path: Path) -> Walk:
    app = make_screen_app(root, tmp_path, findings=False)
    return await walk_app(app, [("zoom", _zoom), ("filter", _filter_sort)], size=SIZE)


@pytest.fixture(scope="module")
def synth_walk(tmp_path_factory: pytest.TempPathFactory) -> tuple[Walk, Path]:
    """One app on the generated trace with memory events, for both tests on it."""
    tmp_path = tmp_path_factory.mktemp("memory-walk")
    root = synth_root(tmp_path)
    return asyncio.run(_synth_walk(root, tmp_path)), root


def test_zoom_changes_the_tables(synth_walk: tuple[Walk, Path]) -> None:
    walk, root = synth_walk
    seen = walk["zoom"]
    whole = memory_window(_file(root))
    assert seen["whole_height"] == whole.events.height
    lo, hi = seen["view"]
    assert hi - lo == pytest.approx((whole.full[1] - whole.full[0]) / 4)
    # the headline stays one line at 80 columns (an id other views' styles once reached)
    assert seen["headline_height"] == 1
    zoomed = seen["zoomed"]
    assert 0 < zoomed.height < whole.events.height
    times = pl.concat([zoomed["allocation_ms"], zoomed["release_ms"]]).drop_nulls()
    assert ((times >= lo - 1e-6) & (times <= hi + 1e-6)).all()
    assert not seen["stats_zoomed"].equals(seen["stats_before"])
    assert seen["panned"][0] < lo
    assert seen["all_height"] == whole.events.height
    assert "view all" in seen["all_headline"]


@pytest.mark.asyncio
async def test_no_memory_events_says_how_to_get_them(tmp_path: Path) -> None:
    root = tmp_path / "traces"
    write_trace_dir(root, ranks=1, steps=2, seed=0)
    app = make_screen_app(root, tmp_path)
    async with app.run_test(size=SIZE) as pilot:
        screen = await open_memory(pilot)
        assert "profile_memory=True" in str(screen.query_one("#memory-headline").render())


def _run_before(*keys: str):
    async def run_before(pilot: Any) -> None:
        await open_memory(pilot)
        for key in keys:
            await pilot.press(key)
            await wait_shown(pilot)

    return run_before


#: the view as it opens, then zoomed in once (`+`), in one app
SNAPSHOTS = {"keys0": (), "keys1": ("plus",)}


@pytest.fixture(scope="module")
def snapshots(tmp_path_factory: pytest.TempPathFactory) -> Walk:
    tmp_path = tmp_path_factory.mktemp("snapshots")
    app = make_screen_app(fixed_root(tmp_path), tmp_path)
    steps = snapshot_steps({name: _run_before(*keys) for name, keys in SNAPSHOTS.items()})
    return asyncio.run(walk_app(app, steps, size=SIZE, notifications=True))


@pytest.mark.parametrize("name", list(SNAPSHOTS))
def test_snapshot(snap_svg, snapshots: Walk, name: str) -> None:
    assert snap_svg(snapshots.check(name)["svg"])


def test_filter_and_sort_the_events_table(synth_walk: tuple[Walk, Path]) -> None:
    """The events table (names as categories) filters by any part of a name and sorts."""
    walk, _ = synth_walk
    seen = walk["filter"]
    want = seen["want"]
    assert 0 < want.height < seen["whole_height"]
    assert seen["filtered_height"] == want.height
    assert seen["sorted_sizes"] == sorted(want["size_kb"], reverse=True)
    assert seen["selected_size"] == want["size_kb"].max()
