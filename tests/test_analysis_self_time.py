"""Self time (issue 17, point 5: the diff counted nested ops inclusively side by side): an
event's duration minus its direct children's, so a thread's self times add up to its busy
time once."""

from __future__ import annotations

import polars as pl
import pytest

from hta_tui.analysis.diff import compare_traces, side_view
from hta_tui.analysis.self_time import with_self_dur
from hta_tui.synth import write_trace_dir
from hta_tui.trace.cache import Cache
from hta_tui.trace.model import open_set


def _events(rows: list[tuple[int, int, int, int, bool]]) -> pl.DataFrame:
    """(tid, start, end) rows; `gpu` rows sit on a stream."""
    return pl.DataFrame(
        {
            "idx": list(range(len(rows))),
            "pid": [r[0] for r in rows],
            "tid": [r[1] for r in rows],
            "start": [r[2] for r in rows],
            "end": [r[3] for r in rows],
            "gpu": [r[4] for r in rows],
        }
    ).with_columns((pl.col("end") - pl.col("start")).alias("dur"))


def test_self_time_of_nested_events() -> None:
    view = _events(
        [
            (1, 1, 0, 100, False),  # step: children A (50) and D (20) -> 30
            (1, 1, 10, 60, False),  # A: children B (20) and C (10) -> 20
            (1, 1, 20, 40, False),  # B
            (1, 1, 45, 55, False),  # C
            (1, 1, 70, 90, False),  # D
            (1, 2, 10, 30, False),  # another thread: not a child of the step
            (0, 7, 5, 95, True),  # a kernel: its duration
            (1, 1, 60, 60, False),  # an instant right at A's end: a child of the step
        ]
    )
    got = with_self_dur(view, ~pl.col("gpu"))["self_dur"].to_list()
    assert got == [30, 20, 20, 10, 20, 20, 90, 0]


@pytest.fixture(scope="module")
def rank(tmp_path_factory: pytest.TempPathFactory) -> pl.DataFrame:
    d = tmp_path_factory.mktemp("self") / "t"
    write_trace_dir(d, ranks=1, steps=3, seed=2)
    return next(iter(open_set(d, Cache(d.parent / "c")).frames().values()))


def _busy(df: pl.DataFrame) -> int:
    """Union length of [start, end) intervals, the plain way (a small frame)."""
    total, reach = 0, None
    for start, end in df.sort("start").select("start", "end").iter_rows():
        if reach is None or start >= reach:
            total += end - start
            reach = end
        elif end > reach:
            total += end - reach
            reach = end
    return total


def test_a_threads_self_times_add_up_to_its_busy_time(rank: pl.DataFrame) -> None:
    view = side_view(rank)
    cpu = pl.col("stream").is_null()
    got = with_self_dur(view, cpu).filter(cpu)
    for (pid, tid), part in got.group_by(["pid", "tid"]):
        assert part["self_dur"].sum() == _busy(part), (pid, tid)


def test_compare_traces_with_self_time(rank: pl.DataFrame) -> None:
    incl = compare_traces(rank, rank, device_type="CPU")
    own = compare_traces(rank, rank, device_type="CPU", self_time=True)
    step = pl.col("name").str.starts_with("ProfilerStep")
    assert (
        own.filter(step)["Control_total_duration"][0]
        < incl.filter(step)["Control_total_duration"][0]
    )
    assert (
        own["Control_total_duration"] <= incl.sort("name")["Control_total_duration"].max()
    ).all()
    assert own["Control_counts"].sum() == incl["Control_counts"].sum()
