"""Several ranks' frames as one table with a rank column, and back: what an analysis made
over every rank at once starts from and ends with (below every analysis module, so the
shared per-rank views can use it too)."""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np
import polars as pl


def tagged(frames: list[tuple[int, pl.DataFrame]], column: str = "rank") -> pl.DataFrame:
    """Each rank's frame one after another with a leading rank `column` (Int64): the input
    of an analysis that makes every rank's table at once, with the rank in its keys. The
    column is inserted, not selected (no query per rank); a frame with no column is left
    out. `untagged` splits such a table back."""
    kept = [(rank, f) for rank, f in frames if f.width]
    if not kept:
        return pl.DataFrame()
    body = stacked(kept, column)
    return _tagged_apart(kept, column) if body is None else body


#: `stacked`: frames of fewer rows than this on average make one chunk (a query's cost on a
#: table of many tiny chunks is mostly theirs: ~10% of a batch of tiny ranks).
SMALL_FRAME_ROWS = 4096


def stacked(frames: list[tuple[int, pl.DataFrame]], column: str = "rank") -> pl.DataFrame | None:
    """`tagged` of frames of one schema (a batch's, mostly) with the rank column made once
    for them all (a column made per frame cost ~20 us: a batch's many tables are tagged ~40
    times a rank); None when their columns or types differ. Small frames (a batch's tiny
    ranks) as one chunk; others stacked as they are, chunk for chunk, the rank column cut
    in their chunks (a query on misaligned chunks rechunks the whole table)."""
    try:
        body = pl.concat([f for _, f in frames], how="vertical").clone()
    except pl.exceptions.PolarsError:  # (a SchemaError)
        return None
    heights = [f.height for _, f in frames]
    ranks = pl.Series(column, np.repeat([rank for rank, _ in frames], heights).astype(np.int64))
    if len(frames) == 1:
        body.insert_column(0, ranks)
        return body
    if body.height < SMALL_FRAME_ROWS * len(frames):
        body.insert_column(0, ranks)
        return body.rechunk()
    starts = np.cumsum([0, *heights[:-1]]).tolist()
    cut = [ranks.slice(start, height) for start, height in zip(starts, heights, strict=True)]
    body.insert_column(0, pl.concat(cut, rechunk=False))
    return body


def _tagged_apart(frames: list[tuple[int, pl.DataFrame]], column: str) -> pl.DataFrame:
    """`tagged` of frames of differing columns or types: each frame's rank column inserted
    before the relaxed concatenation casts them."""
    out = []
    for rank, f in frames:
        f = f.clone()  # a shallow copy: the caller's frame keeps its columns
        f.insert_column(0, pl.Series(column, np.full(f.height, rank, dtype=np.int64)))
        out.append(f)
    return pl.concat(out, how="diagonal_relaxed")


def ranked(rank: int, table: pl.DataFrame) -> pl.DataFrame:
    """`table` with a leading `rank` (Int64), inserted: the table `select(lit(rank), all())`
    makes, chunk for chunk, without its query (a query a rank and table, ~0.1 ms: much of a
    tiny rank's). Flagged sorted, as a literal's column is: the ranks' tables concatenated
    keep the flag, and a group-by on `rank` then takes the sorted path, whose float
    aggregations (a std, a sum) differ in the last bit from the hashed one's."""
    column = pl.Series("rank", np.full(table.height, rank, dtype=np.int64)).set_sorted()
    out = table.clone()  # (a shallow copy: the caller's frame, maybe a kept one, keeps its columns)
    out.insert_column(0, column)
    return out


def untagged(
    table: pl.DataFrame, ranks: Iterable[int], column: str = "rank"
) -> dict[int, pl.DataFrame]:
    """Each of `ranks`' rows of a table made over every rank at once, without its rank
    `column`, in the table's order; a rank with no row gets the table's columns empty."""
    mine = parts(table, column)
    empty = table.clear().drop(column)
    return {rank: mine.get((rank,), empty) for rank in ranks}


def parts(
    table: pl.DataFrame, column: str = "rank", *, keep: bool = False
) -> dict[tuple[object, ...], pl.DataFrame]:
    """`partition_by(column, as_dict=True, include_key=keep, maintain_order=True)`: when each
    key's rows come one after another (a table made over a batch's ranks, in rank order),
    its runs cut out as slices made one chunk, as `partition_by` makes its parts, with no
    query (its own is ~one a part); else `partition_by` itself."""
    found = runs(table, column)
    if found is None:
        return table.partition_by(column, as_dict=True, include_key=keep, maintain_order=True)
    if keep:
        return {(k,): part for k, part in found.items()}
    out = {}
    for k, part in found.items():
        part.drop_in_place(column)  # (a slice of its own: the table keeps its column)
        out[(k,)] = part
    return out


def runs(table: pl.DataFrame, column: str = "rank") -> dict[object, pl.DataFrame] | None:
    """key -> its rows, when each key's rows are one run: slices, each made one chunk, no
    query. None when a key's rows are apart, a key is null or there is no row."""
    keys = table[column]
    if not table.height or keys.null_count() or not keys.dtype.is_integer():
        return None
    values = keys.to_numpy()
    starts = np.flatnonzero(np.r_[True, values[1:] != values[:-1]])
    found = values[starts].tolist()
    if len(set(found)) != len(found):
        return None
    ends = [*starts[1:].tolist(), table.height]
    return {
        key: table.slice(start, end - start).rechunk()
        for key, start, end in zip(found, starts.tolist(), ends, strict=True)
    }
