"""A one-rank table function over every rank: one frame with a leading `rank` column."""

from __future__ import annotations

from collections.abc import Callable, Mapping

import polars as pl

from hta_tui.analysis.checkpoint import checkpoint


def each_rank(
    ranks: Mapping[int, pl.DataFrame],
    table: Callable[[pl.DataFrame], pl.DataFrame],
    schema: Mapping[str, pl.DataType] | None = None,
) -> pl.DataFrame:
    """`table(events)` of every rank, ranks in order; `schema` (with `rank`) when none has a
    table, so callers can select columns of an empty answer."""
    frames = [_ranked(rank, table, events) for rank, events in sorted(ranks.items())]
    frames = [f for f in frames if f.width > 1]
    if frames:
        return pl.concat(frames, how="diagonal_relaxed")
    return pl.DataFrame(schema=dict(schema) if schema else None)


def _ranked(
    rank: int, table: Callable[[pl.DataFrame], pl.DataFrame], events: pl.DataFrame
) -> pl.DataFrame:
    checkpoint()  # each rank is a piece a view left behind may stop after
    return table(events).select(pl.lit(rank, pl.Int64).alias("rank"), pl.all())
