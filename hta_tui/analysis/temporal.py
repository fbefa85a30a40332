"""Temporal breakdown: how a rank's GPU time splits into idle, compute and non-compute.

HTA's `get_temporal_breakdown`: over a rank's GPU events (see `hta_view`), kernel time is the
span from the first start to the end of the last merged interval, idle time is that span
minus the union of all GPU events, compute time is the union of COMPUTATION events and
non-compute time is the rest.
"""

from __future__ import annotations

from collections.abc import Mapping

import polars as pl

from hta_tui.analysis import intervals
from hta_tui.analysis.hta_view import gpu_events, hta_view, us

COLUMNS: dict[str, pl.DataType] = {
    "rank": pl.Int64(),
    "idle_time(us)": pl.Float64(),
    "compute_time(us)": pl.Float64(),
    "non_compute_time(us)": pl.Float64(),
    "kernel_time(us)": pl.Float64(),
    "idle_time_pctg": pl.Float64(),
    "compute_time_pctg": pl.Float64(),
    "non_compute_time_pctg": pl.Float64(),
}


def rank_times(gpu: pl.DataFrame) -> tuple[int, int, int, int] | None:
    """(idle, compute, non_compute, kernel_time) in ns; None without GPU events."""
    first_last = intervals.span(gpu)
    if first_last is None:
        return None
    kernel_time = first_last[1] - first_last[0]
    idle = kernel_time - intervals.union_length(gpu)
    compute = intervals.union_length(gpu.filter(pl.col("kernel_type") == "COMPUTATION"))
    return idle, compute, kernel_time - compute - idle, kernel_time


def temporal_breakdown(
    ranks: Mapping[int, pl.DataFrame], *, hta_compat: bool = False
) -> pl.DataFrame:
    """HTA's temporal breakdown, one row per rank that has GPU events, sorted by rank.

    `ranks` maps rank -> that rank's `events` frame. Times are float microseconds; the
    percentages are rounded to 2 decimals like HTA's. A rank without GPU events gets NO row
    (HTA raises an IndexError for the whole job instead): an empty table, never an exception,
    so a CPU-only job yields a frame with the columns and zero rows. A percentage is null when
    the kernel time is 0 (a single zero-length event), where HTA would divide by zero.
    """
    rows = []
    for rank, view in hta_view(ranks, hta_compat=hta_compat, columns=()).items():
        times = rank_times(gpu_events(view))
        if times is not None:
            rows.append((rank, *times))
    df = pl.DataFrame(
        rows,
        schema={k: pl.Int64() for k in ("rank", "idle", "compute", "non_compute", "kernel")},
        orient="row",
    )
    return temporal_from_ns(df)


def temporal_from_ns(df: pl.DataFrame) -> pl.DataFrame:
    """HTA's columns from per-rank ns totals (rank, idle, compute, non_compute, kernel)."""
    kernel = pl.col("kernel")

    def pctg(col: str) -> pl.Expr:
        return (
            pl.when(kernel != 0)
            .then(100 * pl.col(col).cast(pl.Float64) / kernel)
            .otherwise(None)
            .round(2)
        )

    return df.select(
        "rank",
        us(pl.col("idle")).alias("idle_time(us)"),
        us(pl.col("compute")).alias("compute_time(us)"),
        us(pl.col("non_compute")).alias("non_compute_time(us)"),
        us(kernel).alias("kernel_time(us)"),
        pctg("idle").alias("idle_time_pctg"),
        pctg("compute").alias("compute_time_pctg"),
        pctg("non_compute").alias("non_compute_time_pctg"),
    ).cast(COLUMNS)
