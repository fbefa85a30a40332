"""Series reduced to what a terminal chart can show: one value per column of pixels.

A queue-length or bandwidth series has a row per change (a million on a long trace); a chart is
a few hundred pixel columns wide. `step_bucket_max` cuts the time range into equal buckets and
keeps, per bucket, the highest value the step function takes inside it, so a one-microsecond
spike still shows. `thin_points` keeps one point per cell of a grid for scatter plots.
Pure polars; deterministic (same input, same output rows in the same order).
"""

from __future__ import annotations

from collections.abc import Sequence

import polars as pl


def step_bucket_max(
    series: pl.DataFrame,
    *,
    value: str,
    by: Sequence[str] = (),
    time: str = "ts",
    t0: int,
    t1: int,
    buckets: int,
    before: float = 0.0,
) -> pl.DataFrame:
    """The maximum of each step function over each of `buckets` equal slices of [t0, t1).

    `series` holds step functions (one per `by` group): each row's `value` holds from its
    `time` (integer) until the group's next row, and the last one until t1; before a group's
    first row the function is `before`. Bucket i covers [t0 + i*(t1-t0)/buckets,
    t0 + (i+1)*(t1-t0)/buckets) (integer arithmetic: a row at time t is in bucket
    (t - t0) * buckets // (t1 - t0)); its value is the largest of the value in effect at the
    bucket's start (unless a row replaces it at that very time) and every value set inside it.

    Columns: the `by` columns, bucket (0 .. buckets-1), `time` (the bucket's start) and `value`
    (Float64); every bucket of every group, sorted by group, bucket. Empty (with the columns)
    for an empty series or an empty range.
    """
    keys = list(by)
    schema = {
        **{k: series.schema[k] for k in keys},
        "bucket": pl.Int64(),
        time: pl.Int64(),
        value: pl.Float64(),
    }
    span = int(t1) - int(t0)
    if series.is_empty() or span <= 0 or buckets <= 0:
        return pl.DataFrame(schema=schema)
    rows = series.select(
        *keys,
        pl.col(time).cast(pl.Int64),
        pl.col(value).cast(pl.Float64),
        pl.int_range(pl.len()).alias("__order"),
    ).filter(pl.col(time) < t1)
    # rows before t0 fall in bucket -1: only their last value matters (carried into bucket 0)
    bucket = ((pl.col(time) - t0) * buckets // span).clip(lower_bound=-1).alias("bucket")
    per_bucket = (
        rows.with_columns(bucket)
        .sort([*keys, time, "__order"])
        .group_by([*keys, "bucket"], maintain_order=True)
        .agg(
            pl.col(value).max().alias("__max"),
            pl.col(value).last().alias("__last"),
            pl.col(time).min().alias("__first"),
        )
    )
    groups = (
        series.select(keys).unique(maintain_order=True) if keys else pl.DataFrame({"__one": [0]})
    )
    grid = groups.join(
        pl.DataFrame({"bucket": pl.int_range(-1, buckets, eager=True).cast(pl.Int64)}),
        how="cross",
    )
    if not keys:
        grid = grid.drop("__one")
    carried = pl.col("__last").forward_fill()
    if keys:
        carried = carried.over(keys)
    joined = grid.join(per_bucket, on=[*keys, "bucket"], how="left", maintain_order="left")
    return (
        joined.sort([*keys, "bucket"])
        .with_columns(carried.alias("__carry"))
        # the value at a bucket's start: the last value set in an earlier bucket
        .with_columns(
            (pl.col("__carry").shift(1).over(keys) if keys else pl.col("__carry").shift(1))
            .fill_null(before)
            .alias("__start")
        )
        .filter(pl.col("bucket") >= 0)
        .with_columns((t0 + pl.col("bucket") * span // buckets).alias("__t"))
        .select(
            *keys,
            "bucket",
            pl.col("__t").alias(time),
            # the carried value counts unless a row replaces it at the bucket's very start
            pl.max_horizontal(
                pl.when(pl.col("__first").is_null() | (pl.col("__first") > pl.col("__t"))).then(
                    pl.col("__start")
                ),
                "__max",
            ).alias(value),
        )
        .cast(schema)
    )


def thin_points(
    df: pl.DataFrame,
    x: str,
    y: str,
    *,
    nx: int = 200,
    ny: int = 100,
    log: bool = False,
) -> pl.DataFrame:
    """At most one row per cell of an nx x ny grid over the x/y range (the first row of each
    cell, in frame order): a scatter plot of a million points looks the same from a few
    thousand. With `log`, cells are equal in log10 (rows with a value <= 0 are dropped).
    Rows with a null x or y are dropped. Keeps every column; frame order."""
    xs, ys = pl.col(x).cast(pl.Float64), pl.col(y).cast(pl.Float64)
    pts = df.filter(xs.is_not_null() & ys.is_not_null() & xs.is_not_nan() & ys.is_not_nan())
    if log:
        pts = pts.filter((xs > 0) & (ys > 0))
        xs, ys = xs.log10(), ys.log10()
    if pts.is_empty():
        return pts

    def cell(e: pl.Expr, n: int) -> pl.Expr:
        lo, hi = e.min(), e.max()
        width = pl.when(hi > lo).then(hi - lo).otherwise(1.0)
        return ((e - lo) / width * n).floor().clip(0, n - 1).cast(pl.Int64)

    return (
        pts.with_columns(cell(xs, nx).alias("__cx"), cell(ys, ny).alias("__cy"))
        .filter(pl.struct("__cx", "__cy").is_first_distinct())
        .drop("__cx", "__cy")
    )
