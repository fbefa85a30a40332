"""Memory bandwidth of memcpy / memset ops over time, per kind of copy.

HTA's `TraceCounters.get_memory_bw_time_series`: every MEMORY GPU event (name starting with
Memcpy, Memset or dma) adds its bandwidth to its kind's counter from its start to its end;
the counter is the sum over the ops of that kind running at once (GB/s). Kinds are HTA's
`get_memory_kernel_type`: "Memset", the first 11 characters of a memcpy name ("Memcpy DtoH",
"Memcpy HtoD", "Memcpy DtoD", "Memcpy PtoP", ...), "Memcpy Unknown" for the rest (dma ...).
A zero-length op lasts 1 us, as in HTA (its issue #20).

Bandwidth comes from the `memory bandwidth (GB/s)` arg. Where that arg is missing (ROCm
traces have none):
- hta_compat=True: 0, like HTA, so such ops add nothing;
- default: bytes / duration (bytes per ns = GB/s). DEVIATION, only for events without the arg.

Equal timestamps: HTA sorts the starts and ends with an unstable quicksort, so where one op
ends exactly when another of the same kind starts, its series may or may not show their sum
for an instant. We put ends before starts at the same time (the ops do not overlap), then
keep file order. Floating sums are accumulated in that order, so after overlapping ops a
counter back at zero can keep a rounding residue (~1e-14 GB/s) that the summary, which
skips zero points only, counts as a point. With hta_compat=True we keep those residues, as
HTA does; DEVIATION (default mode): the counter is exactly 0 whenever no op of its kind
runs. (No reference trace shows a difference from this alone.)
"""

from __future__ import annotations

from collections.abc import Mapping

import polars as pl

from hta_tui.analysis.describe import DESCRIBE_COLUMNS, describe
from hta_tui.analysis.hta_view import hta_view
from hta_tui.analysis.per_rank import views_at_once

SERIES_COLUMNS: dict[str, pl.DataType] = {
    "rank": pl.Int64(),
    "name": pl.String(),
    "ts": pl.Int64(),  # ns, as in the file (HTA: us since the job's first event)
    "pid": pl.Int64(),
    "tid": pl.Int64(),
    "memory_bw_gbps": pl.Float64(),
}

SUMMARY_COLUMNS: dict[str, pl.DataType] = {
    "rank": pl.Int64(),
    "name": pl.String(),
    **DESCRIBE_COLUMNS,
}

_COLUMNS = ("pid", "tid", "bytes", "bandwidth")
_MIN_DUR_NS = 1000  # HTA: a 0 us op lasts 1 us


def memory_kind(name: pl.Expr | None = None, kind: pl.Expr | None = None) -> pl.Expr:
    """HTA's `get_memory_kernel_type` as an expression over names.

    With `kind` (the schema's kind column), an event of kind memset whose name does not say
    so is a "Memset" too (vendor spellings); HTA looks at the name only.
    """
    n = pl.col("name") if name is None else name
    n = n.fill_null("")
    out = pl.when(n.str.starts_with("Memset")).then(pl.lit("Memset"))
    if kind is not None:
        out = out.when(kind == "memset").then(pl.lit("Memset"))
    return (
        out.when(~n.str.starts_with("Memcpy"))
        .then(pl.lit("Memcpy Unknown"))
        .otherwise(n.str.slice(0, 11))
    )


def memory_ops(view: pl.DataFrame, *, hta_compat: bool, keys: tuple[str, ...] = ()) -> pl.DataFrame:
    """A rank view's memory ops: idx, name (the memory kind), pid, tid, start, end (int ns;
    a zero-length op lasts 1 us, as in HTA) and memory_bw_gbps (after `keys`: a batch's
    `rank`)."""
    is_memory = pl.col("gpu") & (pl.col("kernel_type") == "MEMORY")
    if not hta_compat:
        is_memory = is_memory | (pl.col("gpu") & pl.col("kind").is_in(("memcpy", "memset")))
    dur = (
        pl.when(pl.col("end") == pl.col("start"))
        .then(_MIN_DUR_NS)
        .otherwise(pl.col("end") - pl.col("start"))
    )
    if hta_compat:
        bw = pl.col("bandwidth").fill_null(0.0)
    else:
        from_bytes = pl.col("bytes").cast(pl.Float64) / dur.cast(pl.Float64)
        bw = pl.coalesce(
            pl.col("bandwidth"),
            pl.when(pl.col("bytes") >= 0).then(from_bytes),
            pl.lit(0.0),
        )
    kind = None if hta_compat else pl.col("kind")
    return view.filter(is_memory).select(
        *keys,
        "idx",
        memory_kind(kind=kind).alias("name"),
        "pid",
        "tid",
        "start",
        (pl.col("start") + dur).alias("end"),
        bw.cast(pl.Float64).alias("memory_bw_gbps"),
    )


def _rank_series(rank: int, ops: pl.DataFrame, *, snap_idle: bool) -> pl.DataFrame:
    return _series(ops, pl.lit(rank, pl.Int64), snap_idle=snap_idle)


def _series(ops: pl.DataFrame, rank: pl.Expr, *, snap_idle: bool) -> pl.DataFrame:
    """The step function of `ops` (one rank's, `rank` a literal; or a batch's, `rank` its
    column: each rank's kinds summed apart, in the same order, so each rank's rows are its
    own to the bit)."""
    batch = "rank" in ops.columns
    over = ["rank", "name"] if batch else "name"
    keys = ["name", "pid", "tid"]
    # one lazy query (as eager steps: 6 a rank), the same steps on the same rows
    lf = ops.lazy()
    if batch:
        keys = ["rank", *keys]
    changes = pl.concat(
        [
            lf.select(
                *keys,
                pl.col("start").alias("ts"),
                pl.lit(1, pl.Int8).alias("order"),
                "idx",
                "memory_bw_gbps",
                pl.lit(1, pl.Int64).alias("active"),
            ),
            lf.select(
                *keys,
                pl.col("end").alias("ts"),
                pl.lit(0, pl.Int8).alias("order"),
                "idx",
                -pl.col("memory_bw_gbps"),
                pl.lit(-1, pl.Int64).alias("active"),
            ),
        ]
    )
    bw = pl.col("memory_bw_gbps").cum_sum().over(over)
    if snap_idle:  # no op of this kind running: exactly 0, not a rounding residue
        bw = pl.when(pl.col("active").cum_sum().over(over) == 0).then(0.0).otherwise(bw)
    bw = bw.alias("memory_bw_gbps")
    order = ["name", "ts", "order", "idx"]
    return (
        changes.sort(["rank", *order] if batch else order)
        .with_columns(rank.alias("rank"), bw)
        .select(list(SERIES_COLUMNS))
        .cast(SERIES_COLUMNS)
        .collect()
    )


def memory_bw_series(
    ranks: Mapping[int, pl.DataFrame], *, hta_compat: bool = False
) -> pl.DataFrame:
    """Bandwidth of each memory kind of each rank as a step function.

    Columns rank, name (memory kind), ts (int ns, as in the file), pid, tid (of the op that
    changed it) and memory_bw_gbps: the value from ts until the kind's next row. Sorted by
    rank, name, ts. Empty (with the columns) without memory ops.
    """
    views = hta_view(ranks, hta_compat=hta_compat, columns=_COLUMNS)
    # a batch's ranks made at once (one query a schema, not two a rank: ~1.4 ms of CPU a
    # tiny rank), each rank's rows its own
    made = views_at_once(
        views,
        _READ,
        lambda t: _series(
            memory_ops(t, hta_compat=hta_compat, keys=("rank",)),
            pl.col("rank"),
            snap_idle=not hta_compat,
        ),
        keep=True,
    )
    frames = [
        made[rank]
        if rank in made
        else _rank_series(rank, memory_ops(view, hta_compat=hta_compat), snap_idle=not hta_compat)
        for rank, view in views.items()
    ]
    if not frames:
        return pl.DataFrame(schema=SERIES_COLUMNS)
    return pl.concat(frames)


#: What the memory ops read of a view (`memory_ops`)
_READ = ("idx", "name", "kind", "gpu", "kernel_type", "pid", "tid", "start", "end", *_COLUMNS[2:])


def memory_bw_summary_from_series(series: pl.DataFrame) -> pl.DataFrame:
    """HTA's `describe()` of the positive points of the series, per rank and kind."""
    bw = pl.col("memory_bw_gbps")
    return (
        series.filter(bw > 0)
        .group_by(["rank", "name"])
        .agg(describe(bw))
        .sort(["rank", "name"])
        .cast(SUMMARY_COLUMNS)
        .select(list(SUMMARY_COLUMNS))
    )


def memory_bw_summary(
    ranks: Mapping[int, pl.DataFrame], *, hta_compat: bool = False
) -> pl.DataFrame:
    """HTA's `get_memory_bw_summary`: count, mean, std, min, quartiles, max (GB/s) of the
    bandwidth time series per rank and memory kind, zero points left out. Empty where HTA
    returns None."""
    return memory_bw_summary_from_series(memory_bw_series(ranks, hta_compat=hta_compat))
