"""A one-rank table function over every rank: one frame with a leading `rank` column."""

from __future__ import annotations

from collections.abc import Callable, Mapping

import polars as pl

from hta_tui.analysis.checkpoint import checkpoint
from hta_tui.analysis.hta_view import job_cached
from hta_tui.analysis.rank_column import parts, ranked, stacked, tagged, untagged


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


def in_rank_order(together: pl.DataFrame | None, alone: pl.DataFrame) -> pl.DataFrame:
    """A table made over some of a batch's ranks at once (`rank` first, flagged sorted) and
    `each_rank`'s table of the other ranks, as one: as `each_rank` of every rank gives it,
    each rank's rows in rank order."""
    if together is None:
        return alone
    if not alone.height:
        return together
    pieces = {**by_rank(together, keep=True), **by_rank(alone, keep=True)}
    return pl.concat([pieces[r] for r in sorted(pieces)], how="diagonal_relaxed")


def _ranked(
    rank: int, table: Callable[[pl.DataFrame], pl.DataFrame], events: pl.DataFrame
) -> pl.DataFrame:
    """`table(events)` with a leading `rank`, inserted (a query per rank and table cost
    ~0.1 ms: a tenth of a tiny rank's analyses)."""
    checkpoint()  # each rank is a piece a view left behind may stop after
    out = table(events)
    if not out.width:  # no table: one row of its rank alone, as a select makes it
        return pl.DataFrame({"rank": [rank]}, schema={"rank": pl.Int64})
    return ranked(rank, out)  # (a shallow copy: the table may be kept, a cached one)


def ranks_events(ranks: Mapping[int, pl.DataFrame]) -> pl.DataFrame:
    """Every rank's events one after another with a leading `rank` (`tagged`: no query per
    rank), once per job: what the analyses made over a batch at once start from."""
    whole = _stacked(ranks)  # (of one schema: kept once, also what tells it is one)
    if whole is not None:
        return whole
    return job_cached(ranks, "tagged_events", lambda: tagged(sorted(ranks.items())))


def ranks_with(ranks: Mapping[int, pl.DataFrame], rows: pl.Expr) -> set[int] | None:
    """Inside a batch (`batching`), the ranks with a row `rows` keeps, in one query over the
    batch's events (`ranks_events`): a table of nothing but such rows is empty on the others
    without a query a rank. None outside a batch, when the ranks' columns differ (a rank
    missing one fails alone, as it should) or the query fails."""
    if len(ranks) < 2 or not batching():
        return None
    events = ranks_events(ranks)
    if any(ev.columns != events.columns[1:] for ev in ranks.values()):
        return None
    try:
        found = events.lazy().filter(rows).select(pl.col("rank").unique()).collect()
    except pl.exceptions.PolarsError:
        return None
    return set(found["rank"].to_list())


def divided_as_alone(num: pl.Expr, by: pl.Expr | float, alone: pl.Expr) -> pl.Expr:
    """`num / by` to the bit as polars made it on each rank's table alone, for a table made
    over every rank at once: polars divides a one-row table exactly (a number by a number)
    but a longer column by a number as times its inverse (1214.5 / 1000 is 1.2145, 1214.5 x
    0.001 is 1.2145000000000001, and round(3) then tells them apart). `alone`: the row was
    its rank's only row; `by`: a number, or a column (a per-rank total) of numbers."""
    num = num.cast(pl.Float64)
    if isinstance(by, pl.Expr):
        by = by.cast(pl.Float64)
        exact = num / by  # a column by a column: exactly, row by row
    else:
        divisor = float(by)
        exact = num.map_batches(
            lambda s: pl.Series(s.name, s.to_numpy() / divisor, dtype=pl.Float64),
            return_dtype=pl.Float64,
        )
    inverse = num * (1.0 / by)
    return pl.when(num.is_null()).then(None).when(alone).then(exact).otherwise(inverse)


def batching() -> bool:
    """Is this thread making a batch of small ranks at once (`hta_view.views_at_once`, on
    inside a report's batch task only: the app builds rank by rank with checkpoints)?"""
    from hta_tui.analysis import hta_view

    return hta_view.at_once()


def made_at_once(
    ranks: Mapping[int, pl.DataFrame],
    name: str,
    columns: tuple[str, ...],
    build: Callable[[list[tuple[int, pl.DataFrame]]], Mapping[int, object]],
    *args: object,
) -> None:
    """Inside a batch (`batching`), a per-rank intermediate kept as `job_cached({0: events},
    name, ..., *args)` made for every rank at once and kept under each rank's key, so each
    rank's own call finds it (once per batch: the priming is itself kept). `build` gets the
    ranks' `columns` (ranks of one schema together: a concatenation would cast a column
    another rank holds in another type) and returns rank -> its table as its own build would
    make it. A rank alone in its schema, without the columns, or in a group whose build
    fails, makes its own when asked."""
    if len(ranks) < 2 or not batching():
        return

    def prime() -> pl.DataFrame:
        groups: dict[tuple[object, ...], list[tuple[int, pl.DataFrame, pl.DataFrame]]] = {}
        whole = _stacked(ranks)  # (of one schema: no check a rank)
        if whole is not None and not set(columns) <= set(whole.columns):
            return pl.DataFrame()  # (no rank has the columns)
        for rank, events in sorted(ranks.items()):
            if whole is None and not set(columns) <= set(events.columns):
                continue
            picked = events[list(columns)]  # (a pick: no query)
            key = () if whole is not None else tuple(picked.dtypes)
            groups.setdefault(key, []).append((rank, events, picked))
        for members in groups.values():
            if len(members) < 2:
                continue
            try:
                built = build([(rank, picked) for rank, _, picked in members])
            except Exception:  # (each rank makes its own, and says what is wrong with it)
                continue
            for rank, events, _ in members:
                job_cached({0: events}, name, lambda t=built[rank]: t, *args)
        return pl.DataFrame()

    job_cached(ranks, f"{name} at once", prime, *args)


def tagged_views(
    views: Mapping[int, pl.DataFrame], columns: tuple[str, ...]
) -> list[tuple[list[int], pl.DataFrame]]:
    """(ranks, their views' `columns` with a leading `rank`), the ranks of one schema in one
    table each (a concatenation would cast a column another rank holds in another type),
    ranks in order (a view without the columns left out: made alone); kept per batch (the
    views are kept, so their ids name them). What an analysis made over a batch's views at
    once starts from."""

    def build() -> list[tuple[list[int], pl.DataFrame]]:
        whole = _stacked(views)
        if whole is not None and set(columns) <= set(whole.columns):
            return [(sorted(views), whole[["rank", *columns]])]  # (a pick: no query)
        groups: dict[tuple[object, ...], list[tuple[int, pl.DataFrame]]] = {}
        for rank, view in sorted(views.items()):
            if not set(columns) <= set(view.columns):
                continue  # (made alone)
            picked = view[list(columns)]  # (a pick: no query)
            groups.setdefault(tuple(picked.dtypes), []).append((rank, picked))
        return [([rank for rank, _ in members], tagged(members)) for members in groups.values()]

    return job_cached(views, "tagged views", build, columns)  # type: ignore[return-value]


def _stacked(frames: Mapping[int, pl.DataFrame]) -> pl.DataFrame | None:
    """A batch's frames (events, views) of one schema (mostly: a batch's files are one
    profiler's) stacked whole with a leading `rank` (`tagged`'s table), once per batch: each
    analysis's columns are a pick of it, not a pick and a type check a frame (~15 us a
    frame and analysis); None when they differ."""

    def build() -> pl.DataFrame:
        one = frames and all(f.width for f in frames.values())
        whole = stacked(sorted(frames.items())) if one else None
        return pl.DataFrame() if whole is None else whole  # (kept: None is not)

    whole = job_cached(frames, "stacked", build)
    return whole if whole.width else None


def gpu_rows_at_once(views: Mapping[int, pl.DataFrame]) -> dict[int, pl.DataFrame]:
    """rank -> `hta_view.gpu_events(view)` (its rows, in order, one chunk) of a batch's
    views, one query a schema (a filter a rank alone), kept per batch; empty outside a
    batch, a view of another schema or whose query fails left out (filtered alone)."""
    if len(views) < 2 or not batching():
        return {}
    columns = tuple(next(iter(views.values())).columns)

    def build() -> dict[int, pl.DataFrame]:
        out: dict[int, pl.DataFrame] = {}
        for members, table in tagged_views(views, columns):
            try:
                out |= untagged(table.filter(pl.col("gpu")), members)
            except pl.exceptions.PolarsError:
                continue
        return out

    return job_cached(views, "gpu rows at once", build)  # type: ignore[arg-type, return-value]


def gpu_rows_stacked(
    views: Mapping[int, pl.DataFrame], *picked: str | pl.Expr
) -> pl.DataFrame | None:
    """A batch's views' GPU rows (`hta_view.gpu_events` of each), `picked` after a leading
    `rank`, in one query when the views are of one schema: a table made at once without a
    rank's rows split out. None outside a batch, on views of several schemas or when the
    query fails (made rank by rank)."""
    if len(views) < 2 or not batching():
        return None
    groups = tagged_views(views, tuple(next(iter(views.values())).columns))
    if len(groups) != 1 or len(groups[0][0]) != len(views):
        return None
    try:
        return groups[0][1].lazy().filter(pl.col("gpu")).select("rank", *picked).collect()
    except pl.exceptions.PolarsError:
        return None


def views_at_once(
    views: Mapping[int, pl.DataFrame],
    columns: tuple[str, ...],
    make: Callable[[pl.DataFrame], pl.DataFrame | None],
    *,
    keep: bool = False,
) -> dict[int, pl.DataFrame]:
    """rank -> its table, `make` run once per schema over a batch's views at once
    (`tagged_views`: `make` sees a leading `rank` column) and split back (`by_rank`, with
    `rank` when `keep`); a rank with no rows gets the table's empty frame, as alone. Empty
    outside a batch; a schema `make` refuses (None) or fails on leaves its ranks out, to be
    made alone (which says what is wrong)."""
    out: dict[int, pl.DataFrame] = {}
    if len(views) < 2 or not batching():
        return out
    for members, table in tagged_views(views, columns):
        try:
            made = make(table)
        except pl.exceptions.PolarsError:
            continue
        if made is None:
            continue
        out |= by_rank(made, keep=keep)
        empty = made.clear() if keep else made.clear().drop("rank")
        out |= {r: empty for r in members if r not in out}
    return out


def by_rank(table: pl.DataFrame, *, keep: bool = False) -> dict[int, pl.DataFrame]:
    """rank -> its rows of a table made over a batch at once (one chunk each, as its own
    query makes it), with its `rank` column when `keep`."""
    found = parts(table, "rank", keep=keep)  # (a batch's: its runs, no query)
    return {int(key[0]): part for key, part in found.items()}  # type: ignore[arg-type]
