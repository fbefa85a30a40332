"""pandas' `describe()`, which HTA's summary tables are: one definition for all of them."""

from __future__ import annotations

import polars as pl

#: The columns `describe` adds, as floats like pandas gives them.
DESCRIBE_COLUMNS: dict[str, pl.DataType] = {
    "count": pl.Float64(),
    "mean": pl.Float64(),
    "std": pl.Float64(),
    "min": pl.Float64(),
    "25%": pl.Float64(),
    "50%": pl.Float64(),
    "75%": pl.Float64(),
    "max": pl.Float64(),
}


def describe(value: pl.Expr) -> list[pl.Expr]:
    """Aggregations for a group_by: count of non-null values, mean, sample std (ddof 1),
    min, linear quartiles, max."""
    return [
        value.count().cast(pl.Float64).alias("count"),
        value.mean().alias("mean"),
        value.std().alias("std"),
        value.min().alias("min"),
        value.quantile(0.25, "linear").alias("25%"),
        value.quantile(0.5, "linear").alias("50%"),
        value.quantile(0.75, "linear").alias("75%"),
        value.max().alias("max"),
    ]
