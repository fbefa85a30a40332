"""Screen w (distributed), driven with Pilot: it names the rank the others wait for, its tables
equal the analyses on the same data, the tabs cycle, and snapshots at 8 and 64 ranks."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import polars as pl
import pytest
from polars.testing import assert_frame_equal
from textual.widgets import Static, TabbedContent

from hta_tui.analysis import comm_overview, comm_stats
from hta_tui.app.screens.distributed import (
    INSTANCE_HEADERS,
    MANY_BARS,
    STRAGGLER_HEADERS,
    TABS,
    CommBars,
    DistributedScreen,
)
from hta_tui.app.widgets.frame_table import FrameTable
from hta_tui.synth.nccl_job import write_nccl_job
from tests.app_walk import Walk, screenshot, walk_app
from tests.test_app_support import make_screen_app as make_app
from tests.test_app_support import screen_shows_current, settle, wait_until

SIZE = (80, 24)


def job(tmp_path: Path, ranks: int, late_rank: int) -> Path:
    root = tmp_path / f"job{ranks}"
    write_nccl_job(root, ranks=ranks, steps=3, late_rank=late_rank, late_us=500)
    return root


async def open_distributed(pilot: Any) -> DistributedScreen:
    app = pilot.app
    await settle(pilot, 120)  # 64 ranks on a loaded machine (a guard, not a deadline)
    await pilot.press("W")
    ready = lambda: (  # noqa: E731
        isinstance(app.screen_stack[0], DistributedScreen)
        and screen_shows_current(app, app.screen_stack[0])
    )
    # 64 ranks on a loaded machine: the app opens every rank first (a guard, not a deadline)
    await wait_until(pilot, ready, 60, what="distributed screen")
    await pilot.pause()
    return app.screen_stack[0]


async def _names_the_late_rank(pilot: Any, seen: dict[str, Any]) -> None:
    app = pilot.app
    screen = await open_distributed(pilot)
    frames = app.trace_set.frames()
    summary = str(screen.query_one("#dist-summary", Static).render())
    assert "Everyone waits most for rank 5" in summary
    assert "10.5 ms" in summary  # 3 all_reduces x 7 ranks x 500 us
    stragglers = comm_stats.collective_stragglers(frames)
    shown = screen.query_one("#dist-stragglers", FrameTable).frame
    want = stragglers.select(list(STRAGGLER_HEADERS)).rename(STRAGGLER_HEADERS)
    assert_frame_equal(shown, want)
    instances = screen.query_one("#dist-collectives", FrameTable).frame
    instances = instances.select(list(INSTANCE_HEADERS.values()))  # not the hidden moment
    want = comm_stats.collective_instances(frames).rename(INSTANCE_HEADERS)
    assert_frame_equal(instances, want.select(list(INSTANCE_HEADERS.values())))
    # the wait/transfer table: the analysis's times, with their unit in the header
    wait = screen.query_one("#dist-wait", FrameTable).frame
    want_wait = comm_overview.wait_transfer_per_step(frames)
    assert wait["transfer (us)"].to_list() == want_wait["transfer"].to_list()
    assert wait["synchronizing (us)"].to_list() == want_wait["synchronizing"].to_list()
    bars = screen.query_one("#dist-bars", CommBars).rows
    means = comm_overview.comm_comp_per_rank(frames).filter(pl.col("step") == "all")
    assert [b.label for b in bars] == [f"r{r}" for r in range(8)]
    late = means.filter(pl.col("rank") == 5).row(0, named=True)
    assert bars[5].values == (
        late["computation"],
        late["overlapping"],
        late["communication"],
        late["other"],
    )

    tabs = screen.query_one("#dist-tabs", TabbedContent)
    cycled = [tabs.active]
    for _ in TABS:
        await pilot.press("v")
        await pilot.pause()
        cycled.append(tabs.active)
    assert cycled == [*TABS, TABS[0]]


async def _most_communication_first(pilot: Any, seen: dict[str, Any]) -> None:
    screen = await open_distributed(pilot)
    bars = screen.query_one("#dist-bars", CommBars).rows
    assert len(bars) == 64 > MANY_BARS
    comm = [b.values[2] for b in bars]
    assert comm == sorted(comm, reverse=True)
    assert bars[-1].label == "r61"  # arrives last: never waits, least communication
    summary = str(screen.query_one("#dist-summary", Static).render())
    assert "rank 61" in summary


async def _snapshot(pilot: Any, seen: dict[str, Any]) -> None:
    await open_distributed(pilot)
    seen["svg"] = await screenshot(pilot)


#: Each job's late rank: the one every other rank waits for.
LATE = {8: 5, 64: 61}
SCENARIOS = {8: {"names": _names_the_late_rank}, 64: {"order": _most_communication_first}}


async def _walk(root: Path, tmp_path: Path, ranks: int) -> Walk:
    app = make_app(root, tmp_path, ascii=False)
    # the snapshot first, as a new app shows the view; the tests' keys after it
    steps = {"snapshot": _snapshot, **SCENARIOS[ranks]}
    return await walk_app(app, steps, size=SIZE, notifications=True)


def _job_walk(factory: pytest.TempPathFactory, ranks: int) -> Walk:
    tmp_path = factory.mktemp(f"dist{ranks}")
    root = job(tmp_path, ranks, late_rank=LATE[ranks])
    return asyncio.run(_walk(root, tmp_path, ranks))


@pytest.fixture(scope="module")
def walk8(tmp_path_factory: pytest.TempPathFactory) -> Walk:
    """One app on the 8-rank job for its snapshot and its test."""
    return _job_walk(tmp_path_factory, 8)


@pytest.fixture(scope="module")
def walk64(tmp_path_factory: pytest.TempPathFactory) -> Walk:
    """One app on the 64-rank job for its snapshot and its test."""
    return _job_walk(tmp_path_factory, 64)


def test_names_the_late_rank_and_shows_the_analyses(walk8: Walk) -> None:
    walk8.check("names")


def test_64_ranks_most_communication_first(walk64: Walk) -> None:
    walk64.check("order")


def test_no_collectives_says_so(tmp_path: Path) -> None:
    result = {
        "stragglers": pl.DataFrame(),
        "instances": pl.DataFrame(),
    }
    assert "No collectives" in DistributedScreen._summary(result)


@pytest.mark.parametrize("ranks", [8, 64])
def test_snapshot(snap_svg, request: pytest.FixtureRequest, ranks: int) -> None:
    walk = request.getfixturevalue(f"walk{ranks}")
    assert snap_svg(walk.check("snapshot")["svg"])
