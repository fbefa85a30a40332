"""Chart reductions (analysis.downsample) and launch rows with their kernel
(analysis.launch_kernels)."""

from __future__ import annotations

import random
from pathlib import Path

import polars as pl
import pytest

from hta_tui.analysis import launch
from hta_tui.analysis.downsample import step_bucket_max, thin_points
from hta_tui.analysis.launch_kernels import TABLE_COLUMNS, launch_table
from hta_tui.synth import write_trace_dir
from hta_tui.trace.parse import parse_file


def brute_bucket_max(
    rows: list[tuple[int, float]], t0: int, t1: int, buckets: int, before: float = 0.0
) -> list[float]:
    """Max of a step function per bucket, the slow obvious way."""
    rows = sorted(rows, key=lambda r: r[0])  # stable: equal times keep their order
    span = t1 - t0
    out = []
    for b in range(buckets):
        lo = t0 + b * span // buckets
        hi = t0 + (b + 1) * span // buckets
        at_lo = before
        for t, v in rows:
            if t <= lo:
                at_lo = v
        inside = [v for t, v in rows if lo <= t < hi]
        # a row exactly at lo is both the value at the start and inside: same value
        values = [at_lo] if not any(t == lo for t, _ in rows) else []
        out.append(max(values + inside))
    return out


@pytest.mark.parametrize("seed", range(6))
def test_step_bucket_max_keeps_every_buckets_maximum(seed: int) -> None:
    rng = random.Random(seed)
    t0, t1 = rng.randint(-50, 50), rng.randint(200, 5000)
    buckets = rng.choice([1, 3, 7, 64, 300])
    frames = []
    expected = {}
    for stream in (3, 7, 9):
        n = rng.randint(1, 200)
        rows = [(rng.randint(t0 - 20, t1 + 20), float(rng.randint(0, 50))) for _ in range(n)]
        rows.sort(key=lambda r: r[0])
        frames.append(
            pl.DataFrame(
                {"stream": [stream] * n, "ts": [t for t, _ in rows], "q": [v for _, v in rows]}
            )
        )
        kept = [(t, v) for t, v in rows if t < t1]
        expected[stream] = brute_bucket_max(kept, t0, t1, buckets)
    series = pl.concat(frames)
    got = step_bucket_max(series, value="q", by=["stream"], t0=t0, t1=t1, buckets=buckets)
    assert got.columns == ["stream", "bucket", "ts", "q"]
    for stream, want in expected.items():
        mine = got.filter(pl.col("stream") == stream)
        assert mine["bucket"].to_list() == list(range(buckets))
        assert mine["ts"].to_list() == [t0 + b * (t1 - t0) // buckets for b in range(buckets)]
        assert mine["q"].to_list() == want
    # the overall maximum inside the range survives
    inside = series.filter(pl.col("ts") < t1)
    assert got["q"].max() >= inside["q"].max()


def test_step_bucket_max_small_example_and_empty() -> None:
    s = pl.DataFrame({"ts": [0, 5, 12], "q": [1, 3, 0]})
    got = step_bucket_max(s, value="q", t0=0, t1=20, buckets=4)
    assert got.select("bucket", "ts", "q").rows() == [
        (0, 0, 1.0),
        (1, 5, 3.0),
        (2, 10, 3.0),  # 3 holds until 12: the bucket's maximum
        (3, 15, 0.0),
    ]
    # a one-ns spike inside a wide bucket is kept
    spike = pl.DataFrame({"ts": [0, 300, 301], "q": [0, 99, 0]})
    assert step_bucket_max(spike, value="q", t0=0, t1=1000, buckets=2)["q"].to_list() == [
        99.0,
        0.0,
    ]
    empty = step_bucket_max(s.clear(), value="q", t0=0, t1=20, buckets=4)
    assert empty.is_empty() and empty.columns == ["bucket", "ts", "q"]
    assert step_bucket_max(s, value="q", t0=5, t1=5, buckets=4).is_empty()


def test_step_bucket_max_is_fast_on_a_million_rows() -> None:
    n = 1_000_000
    i = pl.int_range(0, n, eager=True)
    series = pl.DataFrame({"stream": i % 4, "ts": i * 1000, "q": (i * 7919) % 101}).sort(
        "stream", "ts"
    )
    got = step_bucket_max(series, value="q", by=["stream"], t0=0, t1=n * 1000, buckets=240)
    assert got.height == 4 * 240
    assert got["q"].max() == 100.0


def test_thin_points_one_per_cell() -> None:
    rng = random.Random(1)
    n = 5_000
    df = pl.DataFrame(
        {
            "x": [rng.expovariate(0.1) for _ in range(n)],
            "y": [rng.expovariate(0.01) for _ in range(n)],
            "id": list(range(n)),
        }
    )
    thin = thin_points(df, "x", "y", nx=50, ny=20)
    assert 0 < thin.height <= 50 * 20
    assert thin.columns == ["x", "y", "id"]
    assert thin["id"].to_list() == sorted(thin["id"].to_list())  # frame order

    # every cell that has a point keeps one: the picture is the same
    x0, x1, y0, y1 = df["x"].min(), df["x"].max(), df["y"].min(), df["y"].max()

    def cells(frame: pl.DataFrame) -> set[tuple[int, int]]:
        out = set()
        for x, y in frame.select("x", "y").iter_rows():
            out.add(
                (min(int((x - x0) / (x1 - x0) * 50), 49), min(int((y - y0) / (y1 - y0) * 20), 19))
            )
        return out

    assert cells(thin) == cells(df) and len(cells(thin)) == thin.height
    # deterministic
    assert thin.equals(thin_points(df, "x", "y", nx=50, ny=20))
    logged = thin_points(
        df.vstack(pl.DataFrame({"x": [0.0], "y": [1.0], "id": [-1]})), "x", "y", log=True
    )
    assert (logged["x"] > 0).all()
    assert thin_points(df.clear(), "x", "y").is_empty()


@pytest.fixture(scope="module")
def synth_frames(tmp_path_factory: pytest.TempPathFactory) -> dict[int, pl.DataFrame]:
    root = tmp_path_factory.mktemp("synth")
    paths = write_trace_dir(root, ranks=2, steps=2, seed=0, slow_rank=1)
    return {rank: parse_file(p).frames["events"] for rank, p in enumerate(paths)}


def test_launch_table_is_launch_stats_plus_kernel(synth_frames: dict[int, pl.DataFrame]) -> None:
    table = launch_table(synth_frames, runtime_cutoff=20, launch_delay_cutoff=30)
    assert table.schema == pl.Schema(TABLE_COLUMNS)
    stats = launch.cuda_kernel_launch_stats(synth_frames, runtime_cutoff=20, launch_delay_cutoff=30)
    for rank, rows in stats.items():
        mine = table.filter(pl.col("rank") == rank)
        assert mine.select(list(rows.columns)).equals(rows)
        assert mine["kernel"].null_count() == 0
        # the kernel is the GPU op of the launch's correlation; ts the launch call's start
        ev = synth_frames[rank]
        gpu = ev.filter(
            pl.col("stream").is_not_null() & pl.col("kind").is_in(["kernel", "memcpy", "memset"])
        )
        cpu = ev.filter(pl.col("kind").is_in(["runtime", "driver"]))
        for row in mine.head(50).iter_rows(named=True):
            ops = gpu.filter(pl.col("correlation") == row["correlation"]).sort("ts", "idx")
            assert row["kernel"] == ops["name"][0]
            calls = cpu.filter(pl.col("correlation") == row["correlation"])
            assert row["ts"] == calls["ts"].min()
    assert launch_table({}).is_empty()


def test_launch_table_cpu_only(tmp_path: Path) -> None:
    from tests.test_app_support import write_rank

    path = write_rank(tmp_path, 0, gpu=False)
    frames = {0: parse_file(path).frames["events"]}
    table = launch_table(frames)
    assert table.is_empty() and table.schema == pl.Schema(TABLE_COLUMNS)
