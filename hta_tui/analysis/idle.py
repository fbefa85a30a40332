"""Idle-time breakdown: why each GPU stream waits between kernels.

HTA's `get_idle_time_breakdown`: on each stream, the gap before a kernel (its start minus the
previous kernel's end) is
- host_wait when the kernel's launch (its correlated CPU runtime call) started after the
  previous kernel ended: the CPU was not enqueuing work fast enough;
- kernel_wait when it is not host_wait and the gap is under `consecutive_kernel_delay_us`:
  the usual back-to-back launch overhead;
- other otherwise, including the first kernel of a stream (no previous kernel, no gap).
Kernels of one stream can overlap (accelerators that run a stream's kernels concurrently;
HTA's rounding can also make neighbours touch). HTA then measures a negative gap and sums it,
which can make a whole category negative (`kernel_wait` -10,487 us on one accelerator trace).
DEVIATION (default mode): the gap before a kernel is measured from the latest end of the
stream's earlier kernels and is never negative; `hta_compat` keeps HTA's signed gaps.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping

import numpy as np
import polars as pl

from hta_tui.analysis.describe import DESCRIBE_COLUMNS, describe
from hta_tui.analysis.hta_view import HTA_KERNEL_CATS, gpu_launches, us
from hta_tui.trace.schema import GPU_WORK_KINDS

IDLE_CATEGORIES: tuple[str, ...] = ("host_wait", "kernel_wait", "other")
IDLE_CATEGORY = pl.Enum(IDLE_CATEGORIES)

BREAKDOWN_COLUMNS: dict[str, pl.DataType] = {
    "rank": pl.Int64(),
    "stream": pl.Int64(),
    "idle_category": pl.String(),
    "idle_time": pl.Float64(),
    "idle_time_ratio": pl.Float64(),
}

STATS_COLUMNS: dict[str, pl.DataType] = {
    "rank": pl.Int64(),
    "stream": pl.Int64(),
    "idle_category": pl.String(),
    **DESCRIBE_COLUMNS,
}


def _kernel_rows(*, hta_compat: bool) -> pl.Expr:
    """Rows HTA's idle breakdown looks at: GPU events of its kernel categories.

    HTA matches raw categories (so `cuda_sync` spans are out). DEVIATION (default mode only):
    any kernel/memcpy/memset kind counts too, whatever its dialect spells the category.
    """
    cats = pl.col("cat").is_in(HTA_KERNEL_CATS)
    if not hta_compat:
        cats = cats | pl.col("kind").is_in(GPU_WORK_KINDS)
    return pl.col("gpu") & cats


def classified_gaps(
    ranks: Mapping[int, pl.DataFrame],
    *,
    consecutive_kernel_delay_us: float = 30,
    hta_compat: bool = False,
) -> pl.DataFrame:
    """Every kernel with the gap before it on its stream and that gap's idle category.

    Columns: rank, stream, idx, name, start, end, launch_start (int ns), idle_interval (int
    ns, null for a stream's first kernel) and idle_category. The per-kernel detail behind
    `idle_time_breakdown`, kept public so a screen can list the longest gaps.
    """
    return _gaps(ranks, consecutive_kernel_delay_us, hta_compat).collect()


def _gaps(
    ranks: Mapping[int, pl.DataFrame], consecutive_kernel_delay_us: float, hta_compat: bool
) -> pl.LazyFrame:
    """`classified_gaps` as a lazy query."""
    schema: dict[str, pl.DataType] = {
        "rank": pl.Int64(),
        "stream": pl.Int64(),
        "idx": pl.UInt32(),
        "name": pl.String(),
        "start": pl.Int64(),
        "end": pl.Int64(),
        "launch_start": pl.Int64(),
    }
    gpu = gpu_launches(ranks, hta_compat=hta_compat)
    if gpu.is_empty():
        kernels = pl.LazyFrame(schema={**schema, "prev_end": pl.Int64()})
    else:
        rows = gpu.lazy().filter(_kernel_rows(hta_compat=hta_compat)).select(list(schema))
        rows = rows.cast(schema).collect()  # type: ignore[arg-type]
        # numpy's lexsort on (rank, stream, start, idx): 10x a polars sort on the 4 keys
        order = pl.Series(_stream_order(rows))
        ordered = rows.select(pl.col("rank", "stream", "end").gather(order))
        prev_end = _previous_end(ordered, running=not hta_compat)
        # lazy: a caller that drops `name` never gathers the strings
        kernels = rows.lazy().select(pl.all().gather(order), prev_end.alias("prev_end"))
    gap = pl.col("start") - pl.col("prev_end")
    if not hta_compat:  # no negative gap (module doc)
        gap = gap.clip(lower_bound=0)
    delay_ns = consecutive_kernel_delay_us * 1000
    host_wait = (pl.col("launch_start") > pl.col("prev_end")).fill_null(False)
    kernel_wait = ~host_wait & (pl.col("idle_interval") < delay_ns).fill_null(False)
    return (
        kernels.with_columns(gap.alias("idle_interval"))
        .with_columns(
            pl.when(host_wait)
            .then(pl.lit("host_wait"))
            .when(kernel_wait)
            .then(pl.lit("kernel_wait"))
            .otherwise(pl.lit("other"))
            .cast(IDLE_CATEGORY)
            .alias("idle_category")
        )
        .drop("prev_end")
    )


def _stream_order(rows: pl.DataFrame) -> np.ndarray:
    """Positions of `rows` sorted by rank, stream, start, idx. Rows come per rank in file
    order, so a stable sort by start keeps idx order among equal starts, and a radix sort by
    a 16-bit (rank, stream) code finishes it: 2x numpy's lexsort on the four keys."""
    idx, start, stream, rank = (rows[c].to_numpy() for c in ("idx", "start", "stream", "rank"))
    if rows.height:
        s0, r0 = stream.min(), rank.min()
        span = int(stream.max() - s0) + 1
        in_file_order = np.all((np.diff(idx.astype(np.int64)) > 0) | (np.diff(rank) != 0))
        if span * (int(rank.max() - r0) + 1) <= 2**16 and in_file_order:
            by_start = np.argsort(start, kind="stable")
            code = ((rank - r0) * span + (stream - s0)).astype(np.uint16)
            return by_start[np.argsort(code[by_start], kind="stable")]
    return np.lexsort((idx, start, stream, rank))


def _previous_end(rows: pl.DataFrame, *, running: bool) -> pl.Series:
    """`prev_end` of kernels sorted by rank, stream, start: the end of the stream's kernel
    before (HTA), or with `running` the latest end of its kernels so far (module doc); null
    for a stream's first kernel. A loop over streams, each a numpy pass."""
    rank, stream = rows["rank"].to_numpy(), rows["stream"].to_numpy()
    end = rows["end"].to_numpy()
    first = np.ones(end.size, dtype=bool)
    first[1:] = (rank[1:] != rank[:-1]) | (stream[1:] != stream[:-1])
    bounds = [*np.flatnonzero(first).tolist(), end.size]
    prev = np.zeros(end.size, dtype=np.int64)
    for a, b in itertools.pairwise(bounds):
        seg = np.maximum.accumulate(end[a:b]) if running else end[a:b]
        prev[a + 1 : b] = seg[:-1]
    return pl.Series("prev_end", prev).scatter(np.flatnonzero(first), None)


def idle_time_breakdown(
    ranks: Mapping[int, pl.DataFrame],
    *,
    consecutive_kernel_delay_us: float = 30,
    hta_compat: bool = False,
    show_idle_interval_stats: bool = False,
) -> tuple[pl.DataFrame, pl.DataFrame | None]:
    """HTA's idle-time breakdown per rank, stream and idle category (+ interval statistics).

    Returns (breakdown, stats): breakdown has HTA's columns rank, stream, idle_category,
    idle_time (us) and idle_time_ratio (share of the stream's idle time, null when the stream
    has none), rounded to 2 decimals like HTA; only categories that occur on a stream appear.
    stats (None unless `show_idle_interval_stats`) is HTA's `describe()` of the gaps: count,
    mean, std, min, 25%, 50%, 75%, max in us, rounded to 2 decimals, with idle_category as a
    column instead of HTA's index. Rows are sorted by rank, stream, category (HTA keeps the
    order streams first appear). A job without kernels gives empty tables where HTA raises.
    """
    keys = ["rank", "stream", "idle_category"]
    gaps = _gaps(ranks, consecutive_kernel_delay_us, hta_compat).select(*keys, "idle_interval")
    gaps = gaps.collect()
    interval = pl.col("idle_interval")
    total = pl.col("idle_time").sum().over(["rank", "stream"])
    breakdown = (
        gaps.group_by(keys)
        .agg(us(interval.sum()).alias("idle_time"))
        .sort(keys)
        .with_columns(
            pl.when(total != 0).then(pl.col("idle_time") / total).alias("idle_time_ratio")
        )
        .with_columns(pl.col("idle_time", "idle_time_ratio").round(2))
        .cast(BREAKDOWN_COLUMNS)
        .select(list(BREAKDOWN_COLUMNS))
    )
    if not show_idle_interval_stats:
        return breakdown, None
    v = us(interval)
    stats = (
        gaps.group_by(keys)
        .agg(describe(v))
        .sort(keys)
        .with_columns(pl.exclude(keys).round(2))
        .cast(STATS_COLUMNS)
        .select(list(STATS_COLUMNS))
    )
    return breakdown, stats
