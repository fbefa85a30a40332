"""The longest idle gaps on the GPU streams, with the kernels on either side.

`idle.classified_gaps` gives every kernel with the gap before it on its stream; this keeps the
longest gaps and names the kernel that ended before each one, so a screen can say "rank 3,
stream 7: 4.2 ms of host_wait between ncclKernel_AllReduce and sgemm".
"""

from __future__ import annotations

from collections.abc import Mapping

import polars as pl

from hta_tui.analysis import idle
from hta_tui.analysis.hta_view import us
from hta_tui.analysis.kernel_detail import START, trace_origin

COLUMNS: dict[str, pl.DataType] = {
    "rank": pl.Int64(),
    "stream": pl.Int64(),
    "idle_category": pl.String(),
    "gap (us)": pl.Float64(),
    START: pl.Float64(),
    "before": pl.String(),
    "after": pl.String(),
}


def longest_gaps(
    ranks: Mapping[int, pl.DataFrame],
    *,
    consecutive_kernel_delay_us: float = 30,
    n: int = 200,
    hta_compat: bool = False,
    origin_ns: int | None = None,
) -> pl.DataFrame:
    """The `n` longest gaps between consecutive kernels of a stream, longest first.

    Columns: rank, stream, idle_category (as `idle.classified_gaps` classifies the gap with the
    same threshold), `gap (us)`, `START` (where the gap starts: the latest end of the
    stream's earlier kernels, or with `hta_compat` HTA's previous kernel's end, in us from
    `origin_ns`, default `trace_origin`: the timeline's origin), `before` (that kernel's
    name) and `after` (the kernel the gap delays). A stream's first kernel has no gap and is
    left out. Ties are broken by rank, stream and time, so the order is deterministic.
    """
    gaps = idle.classified_gaps(
        ranks, consecutive_kernel_delay_us=consecutive_kernel_delay_us, hta_compat=hta_compat
    )
    if gaps.is_empty():
        return pl.DataFrame(schema=COLUMNS)
    stream = ["rank", "stream"]
    if hta_compat:  # HTA's gap: from the end of the kernel that started before
        ended, last = pl.col("end"), pl.col("name")
    else:  # the gap idle.py measures: from the latest end so far (kernels may overlap)
        ended = pl.col("end").cum_max().over(stream)
        last = pl.when(pl.col("end") == ended).then(pl.col("name")).forward_fill().over(stream)
    origin = trace_origin(ranks) if origin_ns is None else origin_ns
    return (
        gaps.with_columns(
            last.shift(1).over(stream).alias("before"),
            (ended.shift(1).over(stream) - (origin or 0)).alias("__at"),
        )
        .filter(pl.col("idle_interval").is_not_null())
        .sort(
            ["idle_interval", "rank", "stream", "start"],
            descending=[True, False, False, False],
        )
        .head(n)
        .select(
            "rank",
            "stream",
            pl.col("idle_category").cast(pl.String),
            us(pl.col("idle_interval")).alias("gap (us)"),
            us(pl.col("__at")).alias(START),
            "before",
            pl.col("name").alias("after"),
        )
        .cast(COLUMNS)
    )
