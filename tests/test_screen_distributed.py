"""Screen w (distributed), driven with Pilot: it names the rank the others wait for, its tables
equal the analyses on the same data, the tabs cycle, and snapshots at 8 and 64 ranks."""

from __future__ import annotations

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
from tests.test_app_support import make_screen_app as make_app
from tests.test_app_support import screen_shows_current, settle, wait_until

SIZE = (80, 24)


def job(tmp_path: Path, ranks: int, late_rank: int) -> Path:
    root = tmp_path / f"job{ranks}"
    write_nccl_job(root, ranks=ranks, steps=3, late_rank=late_rank, late_us=500)
    return root


async def open_distributed(pilot: Any) -> DistributedScreen:
    app = pilot.app
    await settle(pilot)
    await pilot.press("W")
    ready = lambda: (  # noqa: E731
        isinstance(app.screen_stack[0], DistributedScreen)
        and screen_shows_current(app, app.screen_stack[0])
    )
    # 64 ranks on a loaded machine: the app opens every rank first (a guard, not a deadline)
    await wait_until(pilot, ready, 60, what="distributed screen")
    await pilot.pause()
    return app.screen_stack[0]


async def test_names_the_late_rank_and_shows_the_analyses(tmp_path: Path) -> None:
    app = make_app(job(tmp_path, 8, late_rank=5), tmp_path)
    async with app.run_test(size=SIZE) as pilot:
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
        seen = [tabs.active]
        for _ in TABS:
            await pilot.press("v")
            await pilot.pause()
            seen.append(tabs.active)
        assert seen == [*TABS, TABS[0]]


async def test_64_ranks_most_communication_first(tmp_path: Path) -> None:
    app = make_app(job(tmp_path, 64, late_rank=37), tmp_path)
    async with app.run_test(size=SIZE) as pilot:
        screen = await open_distributed(pilot)
        bars = screen.query_one("#dist-bars", CommBars).rows
        assert len(bars) == 64 > MANY_BARS
        comm = [b.values[2] for b in bars]
        assert comm == sorted(comm, reverse=True)
        assert bars[-1].label == "r37"  # arrives last: never waits, least communication
        summary = str(screen.query_one("#dist-summary", Static).render())
        assert "rank 37" in summary


def test_no_collectives_says_so(tmp_path: Path) -> None:
    result = {
        "stragglers": pl.DataFrame(),
        "instances": pl.DataFrame(),
    }
    assert "No collectives" in DistributedScreen._summary(result)


def _run_before(pilot: Any) -> Any:
    return open_distributed(pilot)


@pytest.mark.parametrize("ranks", [8, 64])
def test_snapshot(snap_compare, tmp_path: Path, ranks: int) -> None:
    app = make_app(job(tmp_path, ranks, late_rank=ranks - 3), tmp_path, ascii=False)
    assert snap_compare(app, terminal_size=SIZE, run_before=_run_before)
