"""Temporal breakdown: how a rank's GPU time splits into idle, compute and non-compute.

HTA's `get_temporal_breakdown`: over a rank's GPU events (see `hta_view`), kernel time is the
span from the first start to the end of the last merged interval, idle time is that span
minus the union of all GPU events, compute time is the union of COMPUTATION events and
non-compute time is the rest.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping

import numpy as np
import polars as pl

from hta_tui.analysis import interval_arrays, intervals
from hta_tui.analysis.hta_view import KERNEL_TYPES, gpu_events, hta_view, job_cached, us
from hta_tui.analysis.per_rank import gpu_rows_at_once, gpu_rows_stacked

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


def gpu_unions(ranks: Mapping[int, pl.DataFrame], *, hta_compat: bool = False) -> pl.DataFrame:
    """Per rank of the job (ns): first GPU start, end of the last merged GPU interval, and the
    union lengths of all GPU events, COMPUTATION, COMMUNICATION and both of those.

    What the temporal breakdown and the comm/comp overlap need, merged once per job: all ranks
    go to polars as one batch of queries. `first` is null for a rank without GPU events.
    """
    return job_cached(ranks, "gpu_unions", lambda: _gpu_unions(ranks, hta_compat), hta_compat)


def _gpu_unions(ranks: Mapping[int, pl.DataFrame], hta_compat: bool) -> pl.DataFrame:
    # numpy: one stable sort of the nearly ordered starts, then each union is a linear pass
    comp, comm = KERNEL_TYPES.index("COMPUTATION"), KERNEL_TYPES.index("COMMUNICATION")
    rows = []
    views = hta_view(ranks, hta_compat=hta_compat, columns=())
    whole = _unions_at_once(views)
    if whole is not None:
        return whole
    made = gpu_rows_at_once(views)  # (a batch's: one query, not one a rank)
    for rank, view in views.items():
        gpu = made[rank] if rank in made else gpu_events(view)
        start = gpu["start"].to_numpy()
        order = np.argsort(start, kind="stable")
        start, end = start[order], gpu["end"].to_numpy()[order]
        kind = _codes(gpu["kernel_type"])[order]
        every = interval_arrays.union(start, end, ordered=True)
        length = functools.partial(_union_length, start, end)
        rows.append(
            {
                "rank": rank,
                "first": int(every[0][0]) if start.size else None,
                "last": int(every[1][-1]) if start.size else None,
                "all": interval_arrays.length(every),
                "comp": length(kind == comp),
                "comm": length(kind == comm),
                "comm_comp": length((kind == comp) | (kind == comm)),
            }
        )
    return pl.DataFrame(rows, schema=_UNIONS_SCHEMA)


_UNIONS_SCHEMA = {
    c: pl.Int64() for c in ("rank", "first", "last", "all", "comp", "comm", "comm_comp")
}


def _unions_at_once(views: Mapping[int, pl.DataFrame]) -> pl.DataFrame | None:
    """`_gpu_unions` of a batch's views of one schema in one query and a few numpy passes
    over every rank's GPU rows (`interval_arrays.unions_by`: rows by rank then start, as
    each rank's stable sort orders its own), not a query and a dozen passes a rank (~0.1 ms
    a tiny rank). None outside a batch, on views of several schemas or null times."""
    gpu = gpu_rows_stacked(views, "start", "end", "kernel_type")
    if gpu is None:
        return None
    if gpu["start"].null_count() or gpu["end"].null_count():
        return None
    rank, start, end = (gpu[c].to_numpy() for c in ("rank", "start", "end"))
    by_start = np.argsort(start, kind="stable")
    order = by_start[np.argsort(rank[by_start], kind="stable")]
    rank, start, end = rank[order], start[order], end[order]
    kind = _codes(gpu["kernel_type"])[order]
    comp, comm = KERNEL_TYPES.index("COMPUTATION"), KERNEL_TYPES.index("COMMUNICATION")
    every = sorted(views)
    out: dict[str, list[int | None]] = {"rank": every}
    for name, keep in (
        ("all", None),
        ("comp", kind == comp),
        ("comm", kind == comm),
        ("comm_comp", (kind == comp) | (kind == comm)),
    ):
        picked = (rank, start, end) if keep is None else (rank[keep], start[keep], end[keep])
        found = interval_arrays.unions_by(*picked)
        if found is None:
            return None
        of, lo, hi = found
        if not of.size:  # (no such row on any rank)
            out[name] = [0] * len(every)
            if keep is None:
                out["first"] = out["last"] = [None] * len(every)
            continue
        cuts = np.flatnonzero(np.r_[True, of[1:] != of[:-1]])  # each rank's first union
        owner = of[cuts].tolist()
        lengths = dict(zip(owner, np.add.reduceat(hi - lo, cuts).tolist(), strict=True))
        out[name] = [lengths.get(r, 0) for r in every]
        if keep is None:
            firsts = dict(zip(owner, lo[cuts].tolist(), strict=True))
            lasts = dict(zip(owner, hi[np.r_[cuts[1:], of.size] - 1].tolist(), strict=True))
            out["first"] = [firsts.get(r) for r in every]
            out["last"] = [lasts.get(r) for r in every]
    return pl.DataFrame(out, schema=_UNIONS_SCHEMA)


def _codes(kernel_type: pl.Series) -> np.ndarray:
    """The kernel types' codes, -1 for none, read without a query (`fill_null` is one: ~2 a
    tiny rank)."""
    codes = kernel_type.to_physical()
    if not codes.null_count():
        return codes.to_numpy()
    read = codes.to_numpy()  # (float, NaN where null)
    return np.where(np.isnan(read), -1, read).astype(np.int64)


def _union_length(start: np.ndarray, end: np.ndarray, keep: np.ndarray) -> int:
    return interval_arrays.length(interval_arrays.union(start[keep], end[keep], ordered=True))


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
    kernel = pl.col("last") - pl.col("first")
    idle = kernel - pl.col("all")
    df = (
        gpu_unions(ranks, hta_compat=hta_compat)
        .filter(pl.col("first").is_not_null())
        .select(
            "rank",
            idle.alias("idle"),
            pl.col("comp").alias("compute"),
            (kernel - pl.col("comp") - idle).alias("non_compute"),
            kernel.alias("kernel"),
        )
        .sort("rank")
    )
    # Rebuilt from its few rows like before: polars divides a one-chunk column and a
    # concatenation differently in the last bit, and the numbers should stay exactly the same.
    return temporal_from_ns(pl.DataFrame(df.rows(), schema=df.schema, orient="row"))


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
