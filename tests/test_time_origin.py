"""Times say their origin (issue 24, point 15): a kernel run's start is one number in kernel
detail, in the idle gaps and on the timeline: us from the trace's start (the timeline's
origin, the earliest event of every rank), and the columns say so."""

from __future__ import annotations

from pathlib import Path

import polars as pl
import pytest

from hta_tui.analysis import gaps, kernel_detail
from hta_tui.analysis import timeline_events as te
from hta_tui.analysis.timeline_rows import build_timeline
from hta_tui.app.screens.base import Params
from hta_tui.app.screens.detail import KernelDetailScreen
from hta_tui.app.screens.idle import IdleScreen
from hta_tui.synth import write_trace_dir
from hta_tui.trace.cache import Cache
from hta_tui.trace.model import open_set
from hta_tui.trace.parse import parse_file

MI300 = "tracelens_mi300_ddp_resnet18"
START = "start (us from trace start)"


def _timeline_start_us(frames: dict[int, pl.DataFrame], rank: int, ts: int) -> float:
    """The timeline's `start ... us` of the GPU event of `rank` that starts at `ts`."""
    tl = build_timeline(frames)
    for i, row in enumerate(tl.rows):
        if row.rank != rank or row.key[1] != "gpu":
            continue
        hits = [p for p, s in enumerate(row.starts) if int(s) + tl.origin_ns == ts]
        if hits:
            return float(te.details(tl, te.Ref(i, hits[0]))["start_us"])
    raise AssertionError(f"no GPU event at {ts} on rank {rank}")


@pytest.mark.shared
def test_a_kernel_run_starts_at_one_number_everywhere(shared: Path) -> None:
    (path,) = sorted((shared / "traces" / MI300).glob("*.json*"))
    frames = {0: parse_file(path).frames["events"]}
    longest = gaps.longest_gaps(frames, n=5)
    assert START in longest.columns
    gap = longest.row(0, named=True)
    runs = kernel_detail.kernel_runs(frames, gap["after"], top=100_000)
    assert START in runs.columns
    # the kernel the gap delays starts where the gap ends, in both tables and on the timeline
    end = gap[START] + gap["gap (us)"]
    run = runs.filter((pl.col(START) - end).abs() < 1e-3).row(0, named=True)
    assert run["stream"] == gap["stream"]
    assert _timeline_start_us(frames, 0, run["ts"]) == pytest.approx(run[START], abs=1e-3)
    # every run's start counts from the trace's first event, as the timeline's
    first = int(frames[0]["ts"].min())  # type: ignore[arg-type]
    assert (runs[START] - (runs["ts"] - first) / 1e3).abs().max() < 1e-6


def test_one_rank_shown_keeps_the_trace_start(tmp_path: Path) -> None:
    """With one rank picked (`r`), times still count from the job's start, as the timeline,
    which keeps ranks aligned, does."""
    root = tmp_path / "traces"
    write_trace_dir(root, ranks=2, steps=2, seed=3)
    ts = open_set(root, Cache(tmp_path / "cache"))
    frames = ts.frames()
    rank = max(frames, key=lambda r: int(frames[r]["ts"].min()))  # type: ignore[arg-type]
    assert int(frames[rank]["ts"].min()) > ts.origin_ns  # type: ignore[arg-type,operator]
    one = {rank: frames[rank]}
    params = Params(rank=rank)
    screen = KernelDetailScreen()
    detail = screen.compute_on(ts, one, params)  # the runs come after the numbers
    runs = screen.compute_later(ts, one, params, detail)["runs"]
    assert not runs.is_empty()
    assert (runs[START] - (runs["ts"] - ts.origin_ns) / 1e3).abs().max() < 1e-6
    idle = IdleScreen.compute_on(IdleScreen(), ts, one, params)["gaps"]
    gap = idle.row(0, named=True)
    tl_frames = dict(frames)
    after = frames[rank].filter(
        (pl.col("name") == gap["after"]) & (pl.col("stream") == gap["stream"])
    )
    starts = ((after["ts"] - ts.origin_ns) / 1e3).to_list()
    assert any(abs(s - (gap[START] + gap["gap (us)"])) < 1e-3 for s in starts)
    assert _timeline_start_us(tl_frames, rank, int(after["ts"][0])) == pytest.approx(
        (int(after["ts"][0]) - ts.origin_ns) / 1e3  # type: ignore[operator]
    )
