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


#: What makes a spreadsheet read a cell as a formula (OWASP's CSV injection list).
FORMULA_START = r"^[=+\-@\t\r]"


def neutralise_formulas(df: pl.DataFrame) -> pl.DataFrame:
    """Text cells (and column names) that a spreadsheet would run as a formula get a leading
    `'`, which makes them text there: a kernel named `=HYPERLINK("http://x","click")` shows
    as written instead of becoming a link. Numbers are numbers: -5 stays -5; only text is
    touched, and only when it starts with =, +, -, @, tab or carriage return."""
    text = [n for n, t in df.schema.items() if t in (pl.String, pl.Categorical) or t == pl.Enum]
    exprs = []
    for name in text:
        col = pl.col(name).cast(pl.String)
        formula = col.str.contains(FORMULA_START)
        exprs.append(pl.when(formula).then(pl.lit("'") + col).otherwise(col).alias(name))
    out = df.with_columns(exprs) if exprs else df
    if any(_formula(n) for n in out.columns):
        out.columns = [f"'{n}" if _formula(n) else n for n in out.columns]
    return out


def _formula(text: str) -> bool:
    return text[:1] in ("=", "+", "-", "@", "\t", "\r")


def csv_for_people(df: pl.DataFrame) -> pl.DataFrame:
    """A table as a CSV meant to be opened in a spreadsheet: flat (`csv_ready`) and with
    formulas neutralised (`neutralise_formulas`). Programs want `csv_ready` alone."""
    return neutralise_formulas(csv_ready(df))
