"""Issue 24, point 15: times say their origin, and it is one origin. A kernel run, a sync, a
memory event and the time axes of the memory curve, the GPU metrics and the Timelines charts
count from the trace's start (the earliest event of every rank: `TraceSet.origin_ns`, the
trace timeline's origin), as kernel detail and idle gaps do, also for a rank that started
later. The syncs table gave the file's clock, the others the rank's own first event.
"""

from __future__ import annotations

import polars as pl
import pytest

from hta_tui.analysis import gpu_metrics
from hta_tui.analysis.kernel_detail import START
from hta_tui.app.screens.base import Params
from hta_tui.app.screens.detail import KernelDetailScreen
from hta_tui.app.screens.gpu_metrics import GpuMetricsScreen
from hta_tui.app.screens.memory import EVENT_MOMENT, MemoryScreen
from hta_tui.app.screens.syncs import SYNC_MOMENT, SyncsScreen
from hta_tui.app.screens.timelines import TimelinesScreen
from hta_tui.synth import write_trace_dir
from hta_tui.synth.files import write_trace
from hta_tui.synth.memory import MemoryOptions
from hta_tui.synth.sync_story import make_sync_story
from hta_tui.trace.cache import Cache
from hta_tui.trace.model import TraceSet, open_set


@pytest.fixture(scope="module")
def job(tmp_path_factory: pytest.TempPathFactory) -> TraceSet:
    """Two generated ranks (rank 0 starts after rank 1) with memory events, and a third
    whose host syncs (the sync story) on a clock of its own."""
    root = tmp_path_factory.mktemp("origin")
    write_trace_dir(
        root / "t", ranks=2, steps=3, seed=3, kernels_per_step=10, memory=MemoryOptions()
    )
    story = make_sync_story(steps=2)
    story["distributedInfo"]["rank"] = 2
    write_trace(story, root / "t" / "rank-2.json")
    return open_set(root / "t", Cache(root / "cache"))


def test_premise_rank_0_starts_after_the_trace(job: TraceSet) -> None:
    assert job.frames()[0]["ts"].min() > job.origin_ns  # type: ignore[operator]


def test_a_kernel_run_and_a_sync_count_from_the_trace_start(job: TraceSet) -> None:
    origin = job.origin_ns
    assert origin is not None
    frames = job.frames()
    kernel = (
        frames[0].filter(pl.col("kind") == "kernel").sort("dur", descending=True).row(0, named=True)
    )
    runs = KernelDetailScreen.compute({0: frames[0]}, Params(0, {"name": kernel["name"]}), origin)
    run = runs["runs"].filter(pl.col("ts") == kernel["ts"]).row(0, named=True)
    assert run[START] == pytest.approx((kernel["ts"] - origin) / 1000)
    # a sync: the same origin in its table, and `t` finds it there on the timeline
    syncs = SyncsScreen().compute_on(job, {2: frames[2]}, Params(2))["syncs"]
    assert not syncs.is_empty()
    row = syncs.row(0, named=True)
    raw = frames[2].filter(pl.col("name") == row["call"])["ts"].to_list()
    [at] = [t for t in raw if abs(t - row["start (us)"] * 1000) < 1]  # the call, in the file
    assert row[START] == pytest.approx((at - origin) / 1000)
    moment = SYNC_MOMENT.moment(row)
    assert moment is not None and moment.base == "job"
    assert origin + moment.t == pytest.approx(row["start (us)"] * 1000)


def test_memory_gpu_metrics_and_timelines_axes_count_from_the_trace_start(job: TraceSet) -> None:
    origin = job.origin_ns
    assert origin is not None
    events, memory = job.frames(), job.frames("memory")
    result = MemoryScreen.compute_memory(events, memory, Params(0), origin)
    window = result["window"]
    first = memory[0]["ts"].min()
    assert window.curve["time_ms"].min() == pytest.approx((first - origin) / 1e6)  # type: ignore[operator]
    alloc = memory[0].filter(pl.col("bytes") > 0)["ts"].min()
    assert window.events["allocation_ms"].min() == pytest.approx((alloc - origin) / 1e6)  # type: ignore[operator]
    assert EVENT_MOMENT.base == "job"
    # the GPU metrics' chart: the plugin's buckets of rank 0, placed from the trace's start
    shown = GpuMetricsScreen().compute_on(job, {0: events[0]}, Params(0))
    grid = gpu_metrics.trace_buckets(events[0])
    assert grid is not None
    assert shown["offsets"][0] == pytest.approx((grid[0] - origin) / 1000)
    # the Timelines charts: x = (ts - origin)
    lines = TimelinesScreen().compute_on(job, {0: events[0]}, Params(0))
    assert lines["origin"] == origin and lines["t0"] > origin
