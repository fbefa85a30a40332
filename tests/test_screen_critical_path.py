"""The Critical path view (key `J`): what it shows equals the analysis on the same data,
enter drills into a path's edges, `t` on an edge opens the timeline with the path marked;
its snapshot at 80x24."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import numpy as np
import orjson
import polars as pl
import pytest
from textual.widgets import Static

from hta_tui.analysis.critical_path.tables import critical_path_tables
from hta_tui.app.screens.critical_path import BoundBars, CriticalPathScreen
from hta_tui.app.screens.timeline import TimelineScreen
from hta_tui.app.widgets.frame_table import FrameTable
from hta_tui.synth import write_trace_dir
from hta_tui.synth.constants import _FIRST_STEP
from hta_tui.trace.parse import parse_file, read_bytes
from tests.app_walk import Walk, snapshot_steps, walk_app
from tests.test_app_snapshot import demo_app
from tests.test_app_support import make_screen_app, screen_shows_current, settle, wait_until

SIZE = (80, 24)


async def open_critical_path(pilot: Any) -> CriticalPathScreen:
    app = pilot.app
    await settle(pilot)
    await pilot.press("J")

    def ready() -> bool:
        s = app.screen_stack[0]
        return isinstance(s, CriticalPathScreen) and screen_shows_current(app, s)

    await wait_until(pilot, ready, 60.0, "the critical path screen")
    await pilot.pause()
    return app.screen_stack[0]


async def test_paths_edges_and_timeline_marks(tmp_path: Path) -> None:
    root = tmp_path / "traces"
    files = write_trace_dir(root, ranks=2, steps=2, seed=0, kernels_per_step=12)
    frames = {r: parse_file(f).frames["events"] for r, f in enumerate(sorted(files))}
    want = critical_path_tables(frames)
    app = make_screen_app(root, tmp_path)
    async with app.run_test(size=SIZE) as pilot:
        screen = await open_critical_path(pilot)
        paths = screen.query_one("#cp-paths", FrameTable)
        assert paths.row_count == want["critical_path"].height > 0
        got = screen.result["critical_path"].sort("rank", "instance_id", nulls_last=True)
        expected = want["critical_path"].sort("rank", "instance_id", nulls_last=True)
        assert got["path_length_us"].to_list() == expected["path_length_us"].to_list()
        bars = screen.query_one("#cp-bars", BoundBars)
        per_rank = expected.filter(pl.col("rank").is_not_null() & pl.col("error").is_null())
        assert len(bars.rows) == per_rank.height
        verdict = str(screen.query_one("#cp-verdict", Static).render())
        assert verdict.startswith("step ") and "bound by rank" in verdict
        # enter on rank 1's first step (named as every view names it, ProfilerStep#2): its
        # edges below, in path order
        paths.focus()
        for _ in range(paths.row_count):
            row = paths.selected_row()
            if row is not None and row["rank"] == 1 and row["step"] == _FIRST_STEP:
                break
            await pilot.press("down")
        await pilot.press("enter")
        await pilot.pause()
        edges = screen.query_one("#cp-edges", FrameTable)
        mine = want["critical_path_edges"].filter(
            (pl.col("rank") == 1) & (pl.col("instance_id") == 0)
        )
        assert edges.row_count == mine.height > 0
        title = str(screen.query_one("#cp-what-if", Static).render())
        assert title.startswith(f"Rank 1 step {_FIRST_STEP}: ") and " -> est. " in title
        marks = app.critical_path_marks
        assert set(marks) == {1}
        assert set(marks[1]) == set(mine["from_idx"]) | set(mine["to_idx"])
        # `o`: the trace with this path overlaid, into the export folder
        app.export_dir = tmp_path / "exports"
        await pilot.press("o")
        await wait_until(pilot, lambda: screen.last_export is not None, 60.0, "the export")
        written = orjson.loads(read_bytes(screen.last_export))["traceEvents"]
        assert screen.last_export.parent == tmp_path / "exports"
        complete = [e for e in written if e.get("ph") == "X"]  # an event's idx is its rank here
        critical = [i for i, e in enumerate(complete) if e.get("args", {}).get("critical") == 1]
        assert critical == sorted(marks[1])
        # `t` on an edge: the timeline, with the path's events highlighted
        await pilot.press("t")
        await wait_until(pilot, lambda: isinstance(app.screen, TimelineScreen), 60.0, "timeline")
        await wait_until(pilot, lambda: screen_shows_current(app, app.screen), 60.0, "rows")
        await pilot.pause()
        matches = app.screen.view.matches
        assert matches, "no event of the path highlighted"
        tl = app.screen.view.timeline
        hit_idx = set()
        for i, mask in matches.items():
            row = tl.rows[i]
            pos = row.idx[mask].astype(np.int64)
            hit_idx |= set(tl.frames[row.rank]["idx"].gather(pos).to_list())
            assert row.rank == 1
        assert hit_idx == set(marks[1])


async def _on_critical_path(pilot: Any) -> None:
    await open_critical_path(pilot)


@pytest.fixture(scope="module")
def snapshots(tmp_path_factory: pytest.TempPathFactory) -> Walk:
    """One app on the demo for both snapshots: the view, then the timeline from a path."""
    app = demo_app(tmp_path_factory.mktemp("snapshots"))
    steps = snapshot_steps({"view": _on_critical_path, "timeline": _timeline_with_path})
    return asyncio.run(walk_app(app, steps, size=SIZE, notifications=True))


def test_snapshot(snap_svg, snapshots: Walk) -> None:
    assert snap_svg(snapshots.check("view")["svg"])


async def _timeline_with_path(pilot: Any) -> None:
    """Enter on rank 0's first step, then `t` on its first edge."""
    screen = await open_critical_path(pilot)
    paths = screen.query_one("#cp-paths", FrameTable)
    first = screen.result["critical_path"].filter(pl.col("rank") == 0)["step"].min()
    paths.focus()
    for _ in range(paths.row_count):
        row = paths.selected_row()
        if row is not None and row["rank"] == 0 and row["step"] == first:
            break
        await pilot.press("down")
    await pilot.press("enter")
    await pilot.pause()
    await pilot.press("t")
    app = pilot.app
    await wait_until(pilot, lambda: isinstance(app.screen, TimelineScreen), 60.0, "timeline")
    await wait_until(pilot, lambda: screen_shows_current(app, app.screen), 60.0, "rows")
    await pilot.pause()


def test_snapshot_timeline_marks(snap_svg, snapshots: Walk) -> None:
    """The timeline from a path's edge: the path's events highlighted."""
    assert snap_svg(snapshots.check("timeline")["svg"])
