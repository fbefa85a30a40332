"""Exposed communication: the part of the NCCL time that no computation hides.

`comm_comp_overlap` gives the share of each rank's communication that overlaps computation;
what costs the job time is the rest. Per rank, `exposed_comm_per_rank` splits the union of the
COMMUNICATION kernels into the part that overlaps the union of COMPUTATION kernels and the
exposed part (same unions as `comm_comp_overlap`, so its `comp_comm_overlap_pctg` is exactly
`100 * overlapped / comm` rounded to 2 decimals). `comm_kernels_exposed` charges the exposed time
to the communication kernels themselves: per rank and kernel name, how long its kernels ran
and how much of that ran with no computation kernel on the GPU.
"""

from __future__ import annotations

from collections.abc import Mapping

import polars as pl

from hta_tui.analysis import intervals
from hta_tui.analysis.hta_view import us
from hta_tui.analysis.kernels import gpu_table
from hta_tui.analysis.temporal import gpu_unions

RANK_COLUMNS: dict[str, pl.DataType] = {
    "rank": pl.Int64(),
    "comm (us)": pl.Float64(),
    "overlapped (us)": pl.Float64(),
    "exposed (us)": pl.Float64(),
    "exposed_pctg": pl.Float64(),
}

KERNEL_COLUMNS: dict[str, pl.DataType] = {
    "rank": pl.Int64(),
    "name": pl.String(),
    "count": pl.Int64(),
    "time (us)": pl.Float64(),
    "exposed (us)": pl.Float64(),
    "exposed_pctg": pl.Float64(),
}


def exposed_comm_per_rank(
    ranks: Mapping[int, pl.DataFrame], *, hta_compat: bool = False
) -> pl.DataFrame:
    """Per rank: union of COMMUNICATION kernels (`comm (us)`), its part overlapping the union of
    COMPUTATION kernels, the exposed rest, and the exposed share of `comm` in percent (null
    without communication). One row per rank, like `comm_comp_overlap`; not rounded."""
    rows = []
    for rank, comm, comm_comp, comp in (
        gpu_unions(ranks, hta_compat=hta_compat)
        .select("rank", "comm", "comm_comp", "comp")
        .iter_rows()
    ):
        comm, comm_comp, comp = comm or 0, comm_comp or 0, comp or 0
        both = comm + comp - comm_comp  # |comm ∩ comp|
        exposed = comm - both
        pctg = 100 * exposed / comm if comm else None
        rows.append((rank, comm / 1000, both / 1000, exposed / 1000, pctg))
    return pl.DataFrame(rows, schema=RANK_COLUMNS, orient="row")


def _covered_before(points: pl.LazyFrame, comp: pl.LazyFrame, at: str, out: str) -> pl.LazyFrame:
    """Add `out`: length of the disjoint, sorted `comp` intervals (rank, start, end) that lies
    before the time in column `at`, per rank. One as-of join, no loop over events."""
    cum = comp.with_columns(
        (
            (pl.col("end") - pl.col("start")).cum_sum().over("rank")
            - (pl.col("end") - pl.col("start"))
        ).alias("__before")
    ).rename({"start": "__s", "end": "__e"})
    joined = points.sort(at).join_asof(
        cum.sort("__s"),
        left_on=at,
        right_on="__s",
        by="rank",
        strategy="backward",
        check_sortedness=False,  # sorted per rank by the sorts above
    )
    inside = pl.min_horizontal(pl.col(at), pl.col("__e")) - pl.col("__s")
    return joined.with_columns((pl.col("__before") + inside).fill_null(0).alias(out)).drop(
        "__s", "__e", "__before"
    )


#: for other analyses that measure how much of some intervals computation covers
covered_before = _covered_before


def comm_kernels_exposed(
    ranks: Mapping[int, pl.DataFrame], *, hta_compat: bool = False
) -> pl.DataFrame:
    """Per rank and COMMUNICATION kernel name: count, summed duration (`time (us)`), the part of
    those durations during which no COMPUTATION kernel ran on the rank (`exposed (us)`) and its
    share in percent. Sorted by exposed time (descending), then rank and name.

    Kernels of one rank that overlap each other (several NCCL streams) are each charged in
    full, so a rank's rows can add up to more than its `exposed_comm_per_rank` union.
    """
    gpu = gpu_table(ranks, hta_compat=hta_compat)
    comm = gpu.filter(pl.col("kernel_type") == "COMMUNICATION")
    if comm.is_empty():
        return pl.DataFrame(schema=KERNEL_COLUMNS)
    comp = intervals.merged(gpu.filter(pl.col("kernel_type") == "COMPUTATION"), by="rank")
    lf = comm.lazy().select("rank", "name", "start", "end")
    lf = _covered_before(lf, comp, "start", "__cs")
    lf = _covered_before(lf, comp, "end", "__ce")
    per_kernel = lf.with_columns(
        (pl.col("end") - pl.col("start")).alias("__dur"),
        (pl.col("__ce") - pl.col("__cs")).alias("__hidden"),
    )
    return (
        per_kernel.group_by("rank", "name")
        .agg(
            pl.len().alias("count"),
            us(pl.col("__dur").sum()).alias("time (us)"),
            us((pl.col("__dur") - pl.col("__hidden")).sum()).alias("exposed (us)"),
        )
        .with_columns(
            pl.when(pl.col("time (us)") > 0)
            .then(100 * pl.col("exposed (us)") / pl.col("time (us)"))
            .alias("exposed_pctg")
        )
        .collect()
        .cast(KERNEL_COLUMNS)
        .select(list(KERNEL_COLUMNS))
        .sort(["exposed (us)", "rank", "name"], descending=[True, False, False])
    )
