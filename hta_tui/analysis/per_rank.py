"""A one-rank table function over every rank: one frame with a leading `rank` column."""

from __future__ import annotations

from collections.abc import Callable, Mapping

import numpy as np
import polars as pl

from hta_tui.analysis.checkpoint import checkpoint


def each_rank(
    ranks: Mapping[int, pl.DataFrame],
    table: Callable[[pl.DataFrame], pl.DataFrame],
    schema: Mapping[str, pl.DataType] | None = None,
) -> pl.DataFrame:
    """`table(events)` of every rank, ranks in order; `schema` (with `rank`) when none has a
    table, so callers can select columns of an empty answer."""
    made = []
    for rank, events in sorted(ranks.items()):
        checkpoint()  # each rank is a piece a view left behind may stop after
        made.append((rank, table(events)))
    return tagged(made, schema)


def tagged(
    made: list[tuple[int, pl.DataFrame]], schema: Mapping[str, pl.DataType] | None = None
) -> pl.DataFrame:
    """Each rank's table one after another with a leading `rank` (Int64), made in one step
    over the concatenation, not a query per rank (a batch of 64 tiny ranks ran ~500 of
    those); a table with no column is left out, as one with no row would add none."""
    kept = [(rank, t) for rank, t in made if t.width]
    if not kept:
        return pl.DataFrame(schema=dict(schema) if schema else None)
    rows = np.repeat(
        np.array([rank for rank, _ in kept], dtype=np.int64), [t.height for _, t in kept]
    )
    every = pl.concat([t for _, t in kept], how="diagonal_relaxed")
    return every.select(pl.Series("rank", rows, dtype=pl.Int64), pl.all())
