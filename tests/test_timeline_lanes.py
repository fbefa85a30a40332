"""Issue 31 point 3: kernels of one stream that overlap are never dropped or hidden: the
timeline packs them into lanes (no two events of a lane overlap), every kernel is in one
lane, and the lanes sit under their stream."""

from __future__ import annotations

import asyncio
import gzip
import json
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl
import pytest
from textual.widgets import Static

from hta_tui.analysis import kernel_owners as ko
from hta_tui.analysis import lanes
from hta_tui.analysis.timeline_rows import LANE_STRIDE, build_timeline, stream_of
from hta_tui.synth.constants import COMPUTE_STREAM
from hta_tui.synth.files import write_trace
from hta_tui.synth.graph_replay import make_graph_replay
from hta_tui.trace.parse import parse_bytes, read_bytes
from hta_tui.trace.schema import KINDS
from tests.app_walk import Walk, snapshot_steps, walk_app
from tests.test_app_support import make_screen_app, settle
from tests.test_overview import _overlapping
from tests.test_screen_timeline import open_timeline, to_row

SIZE = (80, 24)
SYNC = KINDS.index("sync")


@pytest.mark.parametrize(
    ("starts", "ends", "want"),
    [
        ([0, 9, 19, 29], [10, 20, 30, 40], [0, 1, 0, 1]),  # a chain: two lanes
        ([0, 1, 3, 5], [100, 2, 4, 6], [0, 1, 1, 1]),  # three inside a long one
        ([0, 10, 20], [10, 20, 30], [0, 0, 0]),  # back to back: one lane
        ([0, 0, 0], [5, 5, 5], [0, 1, 2]),  # three at once
    ],
)
def test_pack_gives_lanes_without_overlaps(starts: list, ends: list, want: list) -> None:
    s, e = np.array(starts), np.array(ends)
    got = lanes.pack(s, e)
    assert got.tolist() == want
    for k in set(want):
        mine = got == k
        assert lanes.overlapping(s[mine], e[mine]) == 0


async def test_overlapping_kernels_of_a_stream_each_show_in_a_lane(tmp_path: Path) -> None:
    root = tmp_path / "traces"
    root.mkdir()
    # 12 graph kernels a step, each starting before the one before it ends, 2 steps
    trace = make_graph_replay(steps=2, kernels=12, overlap=True)
    write_trace(trace, root / "rank-0.json")
    app = make_screen_app(root, tmp_path)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)  # the overview's data quality line counts them
        detail = str(app.screen.query_one("#file-detail", Static).render())
        assert f"{_overlapping(trace)} GPU ops overlap on their stream" in detail
        screen = await open_timeline(pilot)
        tl = screen.view.timeline
        assert tl is not None
        stream = [
            r
            for r in tl.rows
            if r.key[1] == "gpu" and r.key[3] >= 0 and stream_of(r.key) == COMPUTE_STREAM
        ]
        assert [r.label for r in stream] == [
            f"stream {COMPUTE_STREAM}",
            f"stream {COMPUTE_STREAM} (2)",
        ]
        for r in stream:  # no event of a lane hides part of another
            assert lanes.overlapping(r.starts, r.ends) == 0
        # every GPU op once: 24 graph kernels and 2 copies
        drawn = np.concatenate([r.idx for r in stream])
        assert len(drawn) == len(set(drawn.tolist())) == 26
        # ] walks each lane's kernels in turn, every one of them
        seen = 0
        for r in stream:
            await to_row(pilot, screen, r.key)
            screen.view.cursor_t = -1
            last = None
            for _ in range(40):
                await pilot.press("right_square_bracket")
                if screen.view.selected == last:
                    break
                last = screen.view.selected
                seen += 1
        assert seen == 26


@pytest.mark.shared
def test_b200_overlapping_kernels_are_counted_and_each_drawn_in_a_lane(shared: Path) -> None:
    """tracelens_b200_eager_nccl has GPU ops that start before the one before them on their
    stream ends (raw JSON, per stream): `kernel_attribution` counts them, and the timeline
    draws every GPU op of the trace in a lane where none overlaps another."""
    (path,) = (shared / "traces" / "tracelens_b200_eager_nccl").iterdir()
    with gzip.open(path) as f:
        raw = json.load(f)["traceEvents"]
    by_stream: dict[int, list[tuple[float, float]]] = {}
    for e in raw:
        if e.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset"):
            by_stream.setdefault(e["args"]["stream"], []).append((e["ts"], e["ts"] + e["dur"]))
    expected = 0
    for spans in by_stream.values():
        reach = None
        for start, end in sorted(spans, key=lambda se: (se[0], -se[1])):
            expected += reach is not None and start < reach
            reach = end if reach is None else max(reach, end)
    assert expected > 0
    events = parse_bytes(read_bytes(path)).frames["events"]
    row = ko.kernel_attribution({0: events}).row(0, named=True)
    assert row["overlapping_on_stream"] == expected
    assert f"{expected} GPU ops overlap an earlier one on their stream" in row["verdict"]
    tl = build_timeline({0: events})
    gpu = [r for r in tl.rows if r.key[1] == "gpu" and r.key[3] >= 0]
    assert any(r.key[3] >= LANE_STRIDE for r in gpu)  # some stream needed a second lane
    for r in gpu:
        assert lanes.overlapping(r.starts[r.kinds != SYNC], r.ends[r.kinds != SYNC]) == 0
    work = events.filter(pl.col("kind").is_in(["kernel", "memcpy", "memset"]))
    drawn = np.concatenate([r.idx for r in gpu])
    assert set(work["idx"].to_list()) <= set(drawn.tolist())


async def _overview(pilot: Any) -> None:
    await settle(pilot)


@pytest.fixture(scope="module")
def snapshots(tmp_path_factory: pytest.TempPathFactory) -> Walk:
    """One app on a graph replay whose GPU ops overlap on their stream: the overview, then the
    timeline, for their snapshots."""
    tmp_path = tmp_path_factory.mktemp("snapshots")
    root = tmp_path / "traces"
    root.mkdir()
    write_trace(make_graph_replay(steps=1, kernels=6, overlap=True), root / "rank-0.json")
    app = make_screen_app(root, tmp_path)
    steps = snapshot_steps({"overview": _overview, "timeline": open_timeline})
    return asyncio.run(walk_app(app, steps, size=SIZE, notifications=True))


def test_snapshot_overview_counts_the_overlapping_gpu_ops(snap_svg, snapshots: Walk) -> None:
    assert snap_svg(snapshots.check("overview")["svg"])


def test_snapshot_timeline_with_a_second_lane(snap_svg, snapshots: Walk) -> None:
    assert snap_svg(snapshots.check("timeline")["svg"])
