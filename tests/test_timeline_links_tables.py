"""`t` from the tables added to the timeline's links (issue 15): memory events, collectives,
a rank's wait/transfer per step, the step-time table and a kernel's longest runs. Each
expectation is read off the raw events (or memory) frame, or the generator's own arguments,
never the timeline's output."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import polars as pl
import pytest
from textual.widgets import TabbedContent

from hta_tui.app.widgets.frame_table import FrameTable
from hta_tui.synth import MemoryOptions, write_trace_dir
from hta_tui.synth.nccl_job import write_nccl_job
from tests.app_walk import Walk, walk_app
from tests.test_app_support import make_screen_app, wait_until
from tests.test_timeline_links import on_screen, open_screen, press_t_on, selected_event

SIZE = (80, 24)
LATE_RANK = 2


@pytest.fixture(scope="module")
def nccl_job(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("nccl") / "job"
    write_nccl_job(root, ranks=4, steps=3, late_rank=LATE_RANK, late_us=500)
    return root


@pytest.fixture(scope="module")
def memory_trace(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("mem") / "t"
    write_trace_dir(root, ranks=1, steps=2, seed=0, memory=MemoryOptions())
    return root


async def _collective(pilot: Any, seen: dict) -> None:
    from hta_tui.app.screens.distributed import DistributedScreen

    app = pilot.app
    screen = await open_screen(pilot, "W", DistributedScreen)
    values = await press_t_on(pilot, screen, "tab-collectives", "dist-collectives", 1)
    rank, ev = selected_event(app)
    # the generator delays rank LATE_RANK: it arrives last, everyone waits for its call
    assert values["last"] == LATE_RANK == rank
    assert ev["coll_name"] is not None and ev["kind"] == "kernel"
    assert (ev["comm_seq"], ev["pg_name"]) == (values["seq"], values["group"])
    # of that collective's kernels on every rank (raw events), the one starting last
    starts = [
        f.filter(
            (pl.col("kind") == "kernel")
            & (pl.col("comm_seq") == values["seq"])
            & (pl.col("pg_name") == values["group"])
        )["ts"].max()
        for f in app.trace_set.frames().values()
    ]
    assert ev["ts"] == max(v for v in starts if v is not None)
    assert on_screen(app, ev["ts"])


async def _wait_transfer(pilot: Any, seen: dict) -> None:
    from hta_tui.app.screens.distributed import DistributedScreen

    app = pilot.app
    screen = await open_screen(pilot, "W", DistributedScreen)
    values = await press_t_on(pilot, screen, "tab-wait", "dist-wait", 1)
    rank, ev = selected_event(app)
    assert rank == values["rank"]
    assert ev["name"] == f"ProfilerStep#{values['step']}"


async def _mean_row(pilot: Any, seen: dict) -> None:
    from hta_tui.app.screens.distributed import DistributedScreen

    app = pilot.app
    screen = await open_screen(pilot, "W", DistributedScreen)
    screen.query_one(TabbedContent).active = "tab-wait"
    table = screen.query_one("#dist-wait", FrameTable)
    await wait_until(pilot, lambda: table.row_count > 0, 20)
    table.focus()
    means = table.view_frame["step"].to_list().index("all")
    table.move_cursor(row=means)
    await pilot.pause()
    await pilot.press("t")
    await pilot.pause()
    assert app.screen is screen


async def _step_time(pilot: Any, seen: dict) -> None:
    from hta_tui.app.screens.step_time import StepTimeScreen

    app = pilot.app
    screen = await open_screen(pilot, "B", StepTimeScreen)
    values = await press_t_on(pilot, screen, None, "step-time-table", 3)
    rank, ev = selected_event(app)
    assert rank == values["rank"]
    assert ev["name"] == f"ProfilerStep#{values['step']}"
    assert ev["kind"] != "gpu_annotation"
    assert on_screen(app, ev["ts"])


async def _kernel_run(pilot: Any, seen: dict) -> None:
    from hta_tui.app.screens.detail import KernelDetailScreen

    app = pilot.app
    screen = await open_screen(pilot, "E", KernelDetailScreen)
    values = await press_t_on(pilot, screen, "tab-runs", "runs-table", 2)
    rank, ev = selected_event(app)
    assert rank == values["rank"]
    assert ev["name"] == screen.result["name"]
    assert ev["correlation"] == values["correlation"]
    assert ev["dur"] / 1e3 == pytest.approx(values["dur (us)"], abs=1e-3)
    # the runs are the longest: none of that kernel on these ranks is longer than the first
    frames = app.trace_set.frames()
    longest = max(
        int(f.filter(pl.col("name") == ev["name"])["dur"].max() or 0) for f in frames.values()
    )
    assert screen.query_one("#runs-table", FrameTable).frame["dur (us)"][0] * 1e3 == longest
    assert on_screen(app, ev["ts"])


async def _walk(root: Path, tmp_path: Path, scenarios: dict) -> Walk:
    app = make_screen_app(root, tmp_path)
    return await walk_app(app, scenarios, size=SIZE)


@pytest.fixture(scope="module")
def nccl_links(nccl_job: Path, tmp_path_factory: pytest.TempPathFactory) -> Walk:
    """One app on the NCCL job through the distributed view's links, in turn."""
    scenarios = {"collective": _collective, "wait": _wait_transfer, "mean": _mean_row}
    return asyncio.run(_walk(nccl_job, tmp_path_factory.mktemp("nccl-app"), scenarios))


@pytest.fixture(scope="module")
def synth_links(tmp_path_factory: pytest.TempPathFactory) -> Walk:
    """One app on a generated 2-rank job through the step-time and kernel-run links."""
    root = tmp_path_factory.mktemp("synth") / "t"
    write_trace_dir(root, ranks=2, steps=3, seed=0)
    scenarios = {"step time": _step_time, "kernel run": _kernel_run}
    return asyncio.run(_walk(root, tmp_path_factory.mktemp("synth-app"), scenarios))


def test_t_from_a_collective_selects_the_last_ranks_call(nccl_links: Walk) -> None:
    nccl_links.check("collective")


def test_t_from_wait_transfer_selects_the_ranks_step(nccl_links: Walk) -> None:
    nccl_links.check("wait")


def test_t_on_the_mean_row_stays(nccl_links: Walk) -> None:
    nccl_links.check("mean")


def test_t_from_step_time_selects_the_profiler_step(synth_links: Walk) -> None:
    synth_links.check("step time")


def test_t_from_a_kernel_run_selects_that_instance(synth_links: Walk) -> None:
    synth_links.check("kernel run")


async def test_t_from_a_memory_event_selects_its_operator(
    memory_trace: Path, tmp_path: Path
) -> None:
    from hta_tui.app.screens.memory import MemoryScreen

    app = make_screen_app(memory_trace, tmp_path)
    async with app.run_test(size=SIZE) as pilot:
        screen = await open_screen(pilot, "M", MemoryScreen)
        await wait_until(pilot, lambda: screen.result and "window" in screen.result, 30)
        values = await press_t_on(pilot, screen, "memory-events-pane", "memory-events", 3)
        rank, ev = selected_event(app)
        assert rank == 0
        # the allocation, in ns as written: the plugin's origin is the file's first event,
        # memory events included
        events, memory = app.trace_set.frames()[0], app.trace_set.frames("memory")[0]
        origin = min(int(events["ts"].min()), int(memory["ts"].min()))
        at = origin + values["allocation_ms"] * 1e6
        assert ev["ts"] <= at + 1 and at - 1 <= ev["ts"] + ev["dur"]  # around the allocation
        cpu = events.filter(
            pl.col("stream").is_null()
            & ~pl.col("kind").is_in(["trace_span", "gpu_annotation", "kernel", "memcpy"])
            & (pl.col("ts") <= at + 1)
            & (pl.col("ts") + pl.col("dur") >= at - 1)
        )
        assert ev["dur"] == cpu["dur"].min()  # the innermost CPU event around it
        if "(" not in values["operator"] and values["operator"] != "<unknown>":
            assert ev["name"] == values["operator"]
        assert on_screen(app, ev["ts"])
