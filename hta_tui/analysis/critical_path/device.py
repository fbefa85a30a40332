"""The device side of the critical-path graph: each GPU op's span, the launch delay when
its stream was empty, the gap from the previous op on its stream, Stream / Context Sync
dependencies to the waiting call, and the launch-queue lengths those rules read."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import polars as pl

from hta_tui.analysis.critical_path.rules import (
    GRAPH_LAUNCHES,
    HTA_LAUNCHES,
    KERNEL_GAP_LIMIT_NS,
    KK,
    LAUNCH,
    OP,
    SYNC,
    RowOf,
    nulls,
    part,
)
from hta_tui.analysis.rank_column import untagged


def kernel_table(
    gpu: pl.DataFrame, queue: pl.DataFrame, by: str
) -> tuple[pl.DataFrame, pl.DataFrame]:
    """Every `by` group's (one graph's) GPU ops with their launch and queue lengths, in
    (time, idx) order, each with the previous op on its stream (`prev_idx`, `prev_end`); and
    its Stream / Context Syncs (name, stream, end, the waiting call's idx)."""
    g = (
        gpu.join(queue, on=["rank", "idx"], how="left")
        .with_columns(
            pl.col("name").is_in(("Stream Sync", "Context Sync")).alias("_sync_ok"),
            pl.when(pl.col("kind") == "sync")
            .then(pl.col("end"))
            .otherwise(pl.col("start"))
            .alias("_sort"),
        )
        .filter((pl.col("kind") != "sync") | pl.col("_sync_ok"))
        .sort(by, "_sort", "idx")
    )
    kernels = g.filter(pl.col("kind") != "sync").select(
        by,
        "idx",
        "stream",
        "start",
        "launch_idx",
        "launch_name",
        "launch_start",
        "queue_runtime",
        "queue_kernel",
        pl.col("idx").shift(1).over(by, "stream").alias("prev_idx"),
        pl.col("end").shift(1).over(by, "stream").alias("prev_end"),
    )
    syncs = g.filter(pl.col("kind") == "sync").select(by, "name", "stream", "end", "launch_idx")
    return kernels, syncs


def kernel_edges(k: pl.DataFrame, ts: np.ndarray, row_of_idx: RowOf, by: str) -> list[dict]:
    """The kernel spans, launch delays, kernel gaps and graph launches of a batch's graphs,
    from `kernel_table`'s kernels (the graph's number in `by`; numpy, no query)."""
    if k.is_empty():
        return []
    out: list[dict] = []
    graph = k[by].to_numpy()
    krow = row_of_idx(k["idx"].to_numpy(), graph)
    out.append(part(2 * krow, 2 * krow + 1, OP, ts, krow))
    # previous kernel on the stream
    launch_row = row_of_idx(k["launch_idx"].to_numpy(), graph)
    # (null queue lengths as NaN: neither 1 nor 0, as -1 was)
    q_rt = k["queue_runtime"].to_numpy()
    q_k = k["queue_kernel"].to_numpy()
    none = nulls(k["prev_idx"])
    prev_row = np.where(none, -1, row_of_idx(np.where(none, -1, k["prev_idx"].to_numpy()), graph))
    prev_end = k["prev_end"].to_numpy()
    lstart = k["launch_start"].to_numpy()
    kstart = k["start"].to_numpy()
    has_prev = prev_row >= 0
    launch = (
        (q_rt == 1)
        & (q_k == 0)
        & (~has_prev | (np.nan_to_num(prev_end, nan=0) < lstart))
        & (launch_row >= 0)
    )
    kk = ~launch & has_prev & (kstart - np.nan_to_num(prev_end, nan=0) < KERNEL_GAP_LIMIT_NS)
    out.append(
        part(2 * launch_row[launch], 2 * krow[launch], LAUNCH, ts, np.full(launch.sum(), -1))
    )
    out.append(part(2 * prev_row[kk] + 1, 2 * krow[kk], KK, ts, prev_row[kk]))
    via = np.isin(k["launch_name"].to_numpy(), GRAPH_LAUNCHES) & (launch_row >= 0) & ~launch
    if via.any():  # (a graph launch's kernels)
        e = part(2 * launch_row[via], 2 * krow[via], LAUNCH, ts, np.full(via.sum(), -1))
        e["weight"] = np.zeros(via.sum(), dtype=np.int64)
        out.append(e)
    return out


def sync_edges(
    k: pl.DataFrame, s: pl.DataFrame, ts: np.ndarray, row_of_idx: Callable[[np.ndarray], np.ndarray]
) -> list[dict]:
    """One graph's Stream / Context Sync edges, from its rows of `kernel_table` (node rows
    as `row_of_idx` gives them; a query per sync: syncs are few): the last kernel (by start,
    before the sync ends) -> the waiting call's end."""
    out: list[dict] = []
    krow = row_of_idx(k["idx"].to_numpy())
    kt = pl.DataFrame([k["stream"], k["start"], pl.Series("row", krow)]).sort("stream", "start")
    waits = s.select("name", "stream", "end", "launch_idx")
    for name, stream, end, launch_idx in waits.iter_rows():
        dst_row = int(row_of_idx(np.array([launch_idx]))[0])
        if dst_row < 0:
            continue
        if name == "Stream Sync":
            cands = kt.filter((pl.col("stream") == stream) & (pl.col("start") <= end))
        else:
            cands = kt.filter(pl.col("start") <= end)
        last = cands.group_by("stream").agg(pl.col("row").last())["row"].to_numpy()
        if last.size:
            out.append(
                part(
                    2 * last + 1,
                    np.full(last.size, 2 * dst_row + 1),
                    SYNC,
                    ts,
                    np.full(last.size, -1),
                )
            )
    return out


def queue_at(events: pl.DataFrame, *, hta_launches: bool = True) -> pl.DataFrame:
    """Launch-queue length per stream after each launch's +1 (`queue_runtime`, on the GPU
    op's row) and after each GPU op's -1 (`queue_kernel`), over the whole rank (HTA's
    `_get_queue_length_time_series_for_rank`). A graph launch counts once per stream: its
    first op there (DEVIATION, see module)."""
    return _queues(events, [], hta_launches=hta_launches)


def ranks_queue_at(
    every: pl.DataFrame, ranks: list[int], *, hta_launches: bool = True
) -> dict[int, pl.DataFrame]:
    """`queue_at` of each of `ranks`, from their prepared events one after another with a
    leading `rank` (`per_rank.tagged`), made over them at once (one query set, the rank in
    every key: ~17 queries a rank alone)."""
    return untagged(ranks_queues(every, hta_launches=hta_launches), ranks)


def ranks_queues(every: pl.DataFrame, *, hta_launches: bool = True) -> pl.DataFrame:
    """`ranks_queue_at` as one table, `rank` leading (what `graph.build_many` reads)."""
    return _queues(every, ["rank"], hta_launches=hta_launches)


def _queues(events: pl.DataFrame, by: list[str], *, hta_launches: bool) -> pl.DataFrame:
    """`queue_at` per `by` group (none: one rank's events), `by` leading its columns."""
    names = HTA_LAUNCHES + (() if hta_launches else GRAPH_LAUNCHES)
    if events["stream"].null_count() == events.height:  # no GPU op: no queue, its columns
        events = events.clear()  # (from no rows: the launches' name test of every row ~2 ms)
    launches = events.filter(
        pl.col("stream").is_null()
        & pl.col("kind").is_in(("runtime", "driver"))
        & pl.col("name").is_in(names)
        & pl.col("correlation").is_not_null()
    ).select(*by, "correlation", pl.col("start").alias("launch_start"))
    launches = launches.unique([*by, "correlation"], keep="first")
    ops = events.filter(pl.col("stream").is_not_null() & pl.col("correlation").is_not_null()).join(
        launches, on=[*by, "correlation"], how="inner"
    )
    # one unit per launch and stream: its first op
    ops = ops.sort(*by, "start", "idx").with_columns(
        (pl.int_range(pl.len()).over(*by, "correlation", "stream") == 0).alias("_first")
    )
    unit = ops.filter("_first")
    rows = pl.concat(
        [
            unit.select(
                *by,
                "idx",
                "stream",
                pl.col("launch_start").alias("t"),
                pl.lit(1).alias("d"),
                pl.lit(1).alias("launch"),
            ),
            unit.select(
                *by,
                "idx",
                "stream",
                pl.col("start").alias("t"),
                pl.lit(-1).alias("d"),
                pl.lit(0).alias("launch"),
            ),
        ]
    ).sort(*by, "stream", "t", "launch", "idx")
    rows = rows.with_columns(pl.col("d").cum_sum().over(*by, "stream").alias("q"))
    rt = rows.filter(pl.col("launch") == 1).select(*by, "idx", pl.col("q").alias("queue_runtime"))
    kq = rows.filter(pl.col("launch") == 0).select(*by, "idx", pl.col("q").alias("queue_kernel"))
    return rt.join(kq, on=[*by, "idx"], how="full", coalesce=True)
