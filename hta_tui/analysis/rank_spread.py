"""A per-rank table too long for a screen, summarised: its worst ranks by one column, named
first (worst first), then each number column's spread over the ranks (min, p50, p90, max).

At 1,000 ranks a table of one row per rank shows a screenful of ranks in rank order, which
says nothing about the other 990; the summary says where the job stands and which ranks to
look at. Pure polars (the app's tables show it; `FrameTable` keeps the full table a key away).
"""

from __future__ import annotations

import polars as pl

#: (label, quantile) of the spread rows; "nearest": each a value some rank has
SPREAD: tuple[tuple[str, float], ...] = (("min", 0.0), ("p50", 0.5), ("p90", 0.9), ("max", 1.0))
#: Worst ranks named before the spread.
OUTLIERS = 6


def label_column(ranks: int) -> str:
    """The summary's first column: what each row stands for, among how many ranks."""
    return f"of {ranks:,} ranks"


def summarise(
    df: pl.DataFrame,
    worst: str,
    *,
    descending: bool = True,
    rank: str = "rank",
    outliers: int = OUTLIERS,
) -> pl.DataFrame:
    """`df` (one row per rank, or per rank and device) as its `outliers` worst rows by
    `worst` (largest first when `descending`; ties by rank), labelled "worst 1"..., then
    the spread of every number column over the rows (the rank column left empty there).
    The columns are `df`'s, after a leading label column (`label_column`)."""
    ranks = df[rank].drop_nulls().n_unique() if rank in df.columns else df.height
    label = label_column(ranks)
    order = [c for c in (worst, rank) if c in df.columns]
    ordered = (
        df.sort(order, descending=[descending, False][: len(order)], nulls_last=True)
        if order
        else df
    )
    top = ordered.head(outliers)
    top = top.select(
        pl.format("worst {}", pl.int_range(1, top.height + 1)).alias(label), *df.columns
    )
    numbers = [
        c for c, t in df.schema.items() if c != rank and t.is_numeric() and c not in (label,)
    ]
    spread = pl.concat(
        [
            df.select(
                pl.lit(name).alias(label),
                *(pl.col(c).quantile(q, "nearest").cast(df.schema[c]) for c in numbers),
            )
            for name, q in SPREAD
        ]
    )
    return pl.concat([top, spread], how="diagonal")
