"""Memory events: each allocation with the free that releases it, as the TensorBoard plugin's
memory-events table (`get_memory_events`).

Per address, in time order, a free releases the allocation just before it; an allocation
followed by another allocation of the same address is forgotten (the plugin overwrites it).
Rows: the pairs in the order of their free, then the allocations never freed, then the frees
of memory allocated before the trace (one per address: the last, placed where the first was,
as the plugin's dictionaries do). Size is the free's for a pair. Times are ms since the
plugin's profiler start. `status` marks the unmatched rows.

DEVIATION: the plugin matches by address alone, across devices; we match by device and
address (a CPU and a GPU allocation can share a numeric address).
"""

from __future__ import annotations

import polars as pl

from hta_tui.analysis.memory_records import display_op

KB = 1024.0

COLUMNS: dict[str, pl.DataType] = {
    "device": pl.String(),
    "operator": pl.String(),
    "size_kb": pl.Float64(),
    "allocation_ms": pl.Float64(),
    "release_ms": pl.Float64(),
    "duration_ms": pl.Float64(),
    "status": pl.String(),  # freed, never freed, allocated before the trace
    "addr": pl.Int64(),
    "alloc_ts": pl.Int64(),  # ns as in the file (null for a free without its allocation)
    "free_ts": pl.Int64(),
}

FREED, NOT_FREED, FREE_ONLY = "freed", "never freed", "allocated before"


def in_range(
    recs: pl.DataFrame, start_ns: int | None = None, end_ns: int | None = None
) -> pl.DataFrame:
    """The records with start <= ts <= end (the plugin's time filter, both ends included)."""
    if start_ns is not None:
        recs = recs.filter(pl.col("ts") >= start_ns)
    if end_ns is not None:
        recs = recs.filter(pl.col("ts") <= end_ns)
    return recs


def memory_events(
    recs: pl.DataFrame, origin_ns: int, start_ns: int | None = None, end_ns: int | None = None
) -> pl.DataFrame:
    """`recs` from `memory_records`; one row per allocation / free pair or unmatched event."""
    recs = in_range(recs, start_ns, end_ns).filter(pl.col("addr").is_not_null())
    if recs.is_empty():
        return pl.DataFrame(schema=COLUMNS)
    g = ["device", "addr"]
    alloc = pl.col("bytes") > 0
    pos = pl.col("pos")
    recs = recs.with_row_index("pos").with_columns(
        display_op().alias("operator"),
        alloc.alias("a"),
        alloc.shift(1).over(g).fill_null(False).alias("prev_a"),
        pos.max().over(g).alias("last"),
    )
    a, prev_a = pl.col("a"), pl.col("prev_a")
    ms = 1e6

    def t(col: str) -> pl.Expr:
        return (pl.col(col) - origin_ns) / ms

    prev = {c: pl.col(c).shift(1).over(g) for c in ("operator", "ts")}
    pairs = recs.with_columns(prev["operator"].alias("a_op"), prev["ts"].alias("a_ts")).filter(
        ~a & prev_a
    )
    pairs = pairs.select(
        "device",
        pl.col("a_op").alias("operator"),
        (-pl.col("bytes") / KB).alias("size_kb"),
        t("a_ts").alias("allocation_ms"),
        t("ts").alias("release_ms"),
        ((pl.col("ts") - pl.col("a_ts")) / ms).alias("duration_ms"),
        pl.lit(FREED).alias("status"),
        "addr",
        pl.col("a_ts").alias("alloc_ts"),
        pl.col("ts").alias("free_ts"),
        pos.alias("order"),
    )
    last_free = pl.when(~a).then(pos).max().over(g).fill_null(-1)
    run_start = pl.when(a & (pos > last_free)).then(pos).min().over(g)
    kept = recs.with_columns(run_start.alias("order")).filter(a & (pos == pl.col("last")))
    kept = kept.select(
        "device",
        "operator",
        (pl.col("bytes") / KB).alias("size_kb"),
        t("ts").alias("allocation_ms"),
        pl.lit(None, pl.Float64).alias("release_ms"),
        pl.lit(None, pl.Float64).alias("duration_ms"),
        pl.lit(NOT_FREED).alias("status"),
        "addr",
        pl.col("ts").alias("alloc_ts"),
        pl.lit(None, pl.Int64).alias("free_ts"),
        "order",
    )
    lone = recs.filter(~a & ~prev_a).with_columns(
        pos.min().over(g).alias("order"), pos.max().over(g).alias("lone_last")
    )
    lone = lone.filter(pos == pl.col("lone_last")).select(
        "device",
        "operator",
        (-pl.col("bytes") / KB).alias("size_kb"),
        pl.lit(None, pl.Float64).alias("allocation_ms"),
        t("ts").alias("release_ms"),
        pl.lit(None, pl.Float64).alias("duration_ms"),
        pl.lit(FREE_ONLY).alias("status"),
        "addr",
        pl.lit(None, pl.Int64).alias("alloc_ts"),
        pl.col("ts").alias("free_ts"),
        "order",
    )
    parts = [p.with_columns(pl.lit(i).alias("part")) for i, p in enumerate((pairs, kept, lone))]
    return (
        pl.concat(parts).sort(["device", "part", "order"]).select(list(COLUMNS)).cast(COLUMNS)  # type: ignore[arg-type]
    )
