"""Small helpers for handing analysis tables to people: CSV files, JSON."""

from __future__ import annotations

import polars as pl


def csv_ready(df: pl.DataFrame) -> pl.DataFrame:
    """CSV has no nested values: lists, arrays and structs become JSON-like text."""
    exprs = []
    for name, dtype in df.schema.items():
        if isinstance(dtype, pl.Struct):
            exprs.append(pl.col(name).struct.json_encode())
        elif isinstance(dtype, (pl.List, pl.Array)):
            items = pl.col(name).cast(pl.List(pl.String)).list.join(",")
            exprs.append(pl.format("[{}]", items).alias(name))
    return df.with_columns(exprs) if exprs else df
