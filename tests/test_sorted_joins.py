"""The numpy ways (sorted correlations, binary search) of the kernel launches' starts, the
plugin's runtime -> device links and the critical path's one-window clip give the tables the
polars queries give (group-bys and joins): ties, nulls, unmatched and unlinked rows."""

import polars as pl

from hta_tui.analysis import hta_view, tb_roles
from hta_tui.analysis.critical_path import graph
from hta_tui.trace.schema import KIND


def _events() -> pl.DataFrame:
    # kind, name, correlation, ts, dur, stream (idx in file order)
    rows = [
        ("runtime", "cudaLaunchKernel", 7, 100, 5, None),
        ("runtime", "cudaLaunchKernel", 3, 90, 4, None),
        ("runtime", "cudaLaunchKernel", 3, 90, 9, None),  # equal start: the first one wins
        ("driver", "cuLaunchKernel", 3, 95, 1, None),
        ("runtime", "cudaMemcpyAsync", 9, 120, 2, None),  # launched nothing on the GPU
        ("cpu_op", "aten::mm", 3, 80, 30, None),
        ("cpu_op", "Event Sync", 7, 101, 1, None),  # a device sync: no launch
        ("kernel", "k1", 3, 200, 10, 7),
        ("kernel", "k2", 3, 205, 10, 7),
        ("kernel", "k3", 7, 230, 5, 7),
        ("memcpy", "Memcpy HtoD", 11, 240, 3, 8),  # no runtime call
        ("kernel", "k4", None, 250, 2, 7),  # no correlation
        ("memset", "Memset", None, 260, 1, 8),
        ("kernel", "k5", 5, 270, 1, 7),
    ]
    kind, name, corr, ts, dur, stream = zip(*rows, strict=True)
    return pl.DataFrame(
        {
            "idx": pl.Series(range(len(rows)), dtype=pl.UInt32),
            "kind": pl.Series(kind, dtype=KIND),
            "name": list(name),
            "cat": ["cat"] * len(rows),
            "correlation": pl.Series(corr, dtype=pl.Int64),
            "ts": pl.Series(ts, dtype=pl.Int64),
            "dur": pl.Series(dur, dtype=pl.Int64),
            "stream": pl.Series(stream, dtype=pl.Int64),
        }
    )


def test_device_links_by_sorts_are_the_group_bys_rows() -> None:
    ev = _events()
    made = tb_roles._links_sorted(ev, tb_compat=False)
    keys = ["correlation"]
    lf = ev.lazy()
    runtimes = (
        lf.filter(tb_roles.runtime_rows(tb_compat=False) & pl.col("correlation").is_not_null())
        .group_by(keys)
        .agg(
            pl.col("ts").min().alias("rt_start"),
            (pl.col("ts") + pl.col("dur")).get(pl.col("ts").arg_min()).alias("rt_end"),
        )
    )
    device = (
        lf.filter(tb_roles.device_rows(tb_compat=False))
        .group_by(keys)
        .agg(
            pl.col("ts").min().alias("dev_start"),
            (pl.col("ts") + pl.col("dur")).max().alias("dev_end"),
            pl.len().alias("dev_ops"),
        )
    )
    want = device.join(runtimes, on=keys, how="left").select(made.columns).collect()
    assert made is not None and made.schema == want.schema
    by = pl.col("correlation")
    assert made.sort(by, nulls_last=True).equals(want.sort(by, nulls_last=True))
    assert made.filter(by == 3).row(0) == (3, 90, 94, 200, 215, 2)


def test_launch_starts_by_sorts_are_the_joins_rows() -> None:
    ev = _events()
    view = hta_view.build_rank_view(ev, set(), columns=())
    made = hta_view._launches_sorted(view)
    want = hta_view._with_launch_start(view.lazy().filter(pl.col("gpu")), view.lazy()).collect()
    assert made is not None and made.equals(want)
    # the last CPU row of the correlation in file order (aten::mm's), none without one
    assert dict(zip(made["name"], made["launch_start"], strict=True))["k1"] == 80
    assert made.filter(pl.col("correlation").is_null())["launch_start"].null_count() == 2
    # GPU rows alone (no CPU row launched anything): no start, as the join leaves them
    gpu_only = hta_view.build_rank_view(
        ev.filter(pl.col("stream").is_not_null()), set(), columns=()
    )
    alone = hta_view._launches_sorted(gpu_only)
    lone = hta_view._with_launch_start(gpu_only.lazy().filter(pl.col("gpu")), gpu_only.lazy())
    assert alone is not None and alone.equals(lone.collect())
    assert alone.height == 7 and alone["launch_start"].null_count() == 7


def test_one_window_clip_is_the_joins_rows() -> None:
    ev = (
        _events()
        .with_row_index("_pos")
        .with_columns(pl.lit(0, pl.Int64).alias("rank"), pl.col("ts").alias("start"))
    )
    narrow = ev.lazy().filter(pl.col("stream").is_null()).select("rank", "_pos", "start")
    wins = pl.DataFrame(
        {graph.G: [0], "rank": [0], "_w0": [90], "_w1": [100], "_extra": [False]},
        schema={
            graph.G: pl.Int64,
            "rank": pl.Int64,
            "_w0": pl.Int64,
            "_w1": pl.Int64,
            "_extra": pl.Boolean,
        },
    )
    want = (
        narrow.join(wins.lazy(), on="rank")
        .filter(pl.col("start").is_between(pl.col("_w0"), pl.col("_w1")))
        .drop("rank", "start")
        .collect()
    )
    got = graph._inside(narrow, wins)
    assert got.equals(want) and got["_pos"].to_list() == [0, 1, 2, 3]


def test_covered_per_step_of_a_merged_set_is_the_merged_again() -> None:
    """(the Distributed breakdown's sides are merged once, not again for each part)"""
    from hta_tui.analysis import comm_plugin, intervals

    steps = pl.DataFrame({"step": ["1", "2"], "start": [0, 40], "end": [40, 90]})
    for s, e in (([0, 5, 30, 50], [10, 7, 45, 60]), ([10, 10, 20], [5, 7, 30])):
        merged = intervals.merge_intervals(pl.DataFrame({"start": s, "end": e}))
        once = comm_plugin.covered_per_step(merged, steps, merged=True)
        assert once.equals(comm_plugin.covered_per_step(merged, steps))
