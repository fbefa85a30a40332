"""Interval algebra on [start, end) integer columns, vectorised with the cum-max trick.

Every time-based analysis (temporal breakdown, overlap, idle gaps, kernel-type overlap) reduces
to unions of intervals. Sorting by start and comparing each start with the running maximum of
the previous ends finds where a new disjoint group begins, so a union is one sort, one cum-max
and one group-by: no Python loop over events.

Conventions (HTA's `merge_kernel_intervals`): intervals are half-open; touching intervals
([0, 5) and [5, 9)) merge into one, so a gap always has a positive length. Rows with a null
start or end are ignored. `by` names grouping columns (rank, stream, kernel type ...): each
group is merged on its own.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import polars as pl

Frame = pl.DataFrame | pl.LazyFrame


def _by(by: str | Sequence[str] | None) -> list[str]:
    if by is None:
        return []
    return [by] if isinstance(by, str) else list(by)


def merge_intervals(
    df: Frame, start: str = "start", end: str = "end", *, by: str | Sequence[str] | None = None
) -> pl.DataFrame:
    """Disjoint union of the intervals (per `by` group), sorted by start.

    Columns: the `by` columns, then `start` and `end` (named as in the input).
    Like HTA, a group's end is the max end of its members, so an interval with end < start
    (HTA's rounding can make those) survives as a group of negative length rather than
    vanishing: callers that reproduce HTA's numbers need that.
    """
    if _by(by):
        return merged(df, start, end, by=by).collect()
    # One group: a sort, then a running max and a reduceat in numpy (a fifth of the group-by's
    # time, and merges are in most analyses).
    rows = df.lazy().select(start, end).drop_nulls().sort(start).collect()
    if rows.is_empty():
        return rows
    s, e = rows[start].to_numpy(), rows[end].to_numpy()
    new_group = np.empty(len(s), dtype=bool)
    new_group[0] = True
    new_group[1:] = s[1:] > np.maximum.accumulate(e)[:-1]
    firsts = np.flatnonzero(new_group)
    return pl.DataFrame(
        [
            pl.Series(start, s[firsts], dtype=rows.schema[start]),
            pl.Series(end, np.maximum.reduceat(e, firsts), dtype=rows.schema[end]),
        ]
    )


def merged(
    df: Frame, start: str = "start", end: str = "end", *, by: str | Sequence[str] | None = None
) -> pl.LazyFrame:
    """`merge_intervals` as a lazy query, to combine with others in one `collect_all`."""
    keys = _by(by)
    lf = df.lazy().select(*keys, pl.col(start), pl.col(end))
    lf = lf.drop_nulls([start, end]).sort([*keys, start])
    prev_end = pl.col(end).cum_max().shift(1)
    if keys:
        prev_end = prev_end.over(keys)
    new_group = (pl.col(start) > prev_end).fill_null(True)
    grp = new_group.cum_sum().over(keys) if keys else new_group.cum_sum()
    return (
        lf.with_columns(grp.alias("__grp"))
        .group_by([*keys, "__grp"])
        .agg(pl.col(start).min(), pl.col(end).max())
        .sort([*keys, start])
        .drop("__grp")
    )


def covered_length(
    df: Frame, start: str = "start", end: str = "end", *, by: str | Sequence[str] | None = None
) -> pl.DataFrame:
    """Total length of the union, one row per `by` group (a single row without `by`).

    Column `covered`; 0 for an empty input without `by`.
    """
    keys = _by(by)
    merged = merge_intervals(df, start, end, by=keys)
    length = (pl.col(end) - pl.col(start)).sum().alias("covered")
    if keys:
        return merged.group_by(keys, maintain_order=True).agg(length)
    return merged.select(length)


def union_length(df: Frame, start: str = "start", end: str = "end") -> int:
    """Length of the union of all intervals in `df` (0 when empty)."""
    return int(covered_length(df, start, end).item())


def covered_within(
    merged: pl.DataFrame, lo: pl.Series, hi: pl.Series, start: str = "start", end: str = "end"
) -> pl.Series:
    """How much of each window [lo, hi) the merged intervals (`merge_intervals`, without `by`;
    disjoint, sorted) cover: prefix sums of their lengths and two binary searches per window,
    where clipping every interval to every window is a cross join."""
    if merged.is_empty() or lo.is_empty():
        return pl.Series("covered", np.zeros(len(lo), dtype=np.int64))
    s, e = merged[start].to_numpy(), merged[end].to_numpy()
    a, b = lo.to_numpy(), hi.to_numpy()
    prefix = np.concatenate(([0], np.cumsum(e - s)))
    first = np.searchsorted(e, a, side="right")  # the first interval ending after lo
    stop = np.searchsorted(s, b, side="left")  # past the last one starting before hi
    some = stop > first
    head = np.maximum(a - s[np.minimum(first, len(s) - 1)], 0)  # the first one's part before lo
    tail = np.maximum(e[np.maximum(stop - 1, 0)] - b, 0)  # the last one's part after hi
    # (A window ending before it starts covers nothing, even inside one interval.)
    covered = np.where(some, np.maximum(prefix[stop] - prefix[first] - head - tail, 0), 0)
    return pl.Series("covered", covered.astype(np.int64))


def span(df: Frame, start: str = "start", end: str = "end") -> tuple[int, int] | None:
    """(first start, end of the last merged interval) of the union; None when empty.

    HTA's "kernel time" is this span: `merged.iloc[-1].end - merged.iloc[0].ts`.
    """
    merged = merge_intervals(df, start, end)
    if merged.is_empty():
        return None
    return int(merged[start][0]), int(merged[end][-1])


def intersection_length(a: Frame, b: Frame, start: str = "start", end: str = "end") -> int:
    """Length of (union of a) ∩ (union of b).

    Inclusion-exclusion on unions: |A ∩ B| = |A| + |B| - |A ∪ B|, three vectorised unions and
    no sweep. Exact for non-negative intervals.
    """
    la = union_length(a, start, end)
    lb = union_length(b, start, end)
    both = pl.concat(
        [a.lazy().select(start, end), b.lazy().select(start, end)], how="vertical_relaxed"
    )
    return la + lb - union_length(both, start, end)


def gaps(
    df: Frame, start: str = "start", end: str = "end", *, by: str | Sequence[str] | None = None
) -> pl.DataFrame:
    """The holes between consecutive merged intervals (per `by` group), all of positive length.

    Columns: the `by` columns, `start` (end of the interval before), `end` (start of the one
    after) and `length`. Nothing before the first or after the last interval.
    """
    keys = _by(by)
    merged = merge_intervals(df, start, end, by=keys)
    nxt = pl.col(start).shift(-1)
    if keys:
        nxt = nxt.over(keys)
    return (
        merged.lazy()
        .select(*keys, pl.col(end).alias("__s"), nxt.alias("__e"))
        .drop_nulls("__e")
        .select(
            *keys,
            pl.col("__s").alias(start),
            pl.col("__e").alias(end),
            (pl.col("__e") - pl.col("__s")).alias("length"),
        )
        .filter(pl.col("length") > 0)
        .collect()
    )


def coverage_by_label(
    df: Frame,
    label: str,
    start: str = "start",
    end: str = "end",
    *,
    labels: Sequence[str] | None = None,
) -> pl.DataFrame:
    """How long each combination of labels is active at once (a sweep over merged unions).

    Each label's intervals are merged first, then every instant of the timeline is attributed
    to the exact set of labels running then. Returns `mask` (bit i = `labels[i]`), `labels`
    (the list of active labels, in `labels` order) and `length`; zero-length combinations
    are left out. This is HTA's "X overlapping Y" kernel-type breakdown, vectorised.
    """
    if labels is None:
        labels = (
            df.lazy()
            .select(pl.col(label).cast(pl.String).unique().sort())
            .collect()
            .to_series()
            .drop_nulls()
            .to_list()
        )
    labels = list(labels)
    if not labels:
        return pl.DataFrame(
            schema={"mask": pl.Int64, "labels": pl.List(pl.String), "length": pl.Int64}
        )
    sweep = label_sweep(df, label, labels, start, end).collect()
    bits = {name: 1 << i for i, name in enumerate(labels)}
    names = {m: [n for n in labels if m & bits[n]] for m in sweep["mask"].to_list()}
    return sweep.with_columns(
        pl.col("mask")
        .replace_strict(names, return_dtype=pl.List(pl.String), default=None)
        .alias("labels")
    ).select("mask", "labels", "length")


def label_sweep(
    df: Frame,
    label: str,
    labels: Sequence[str],
    start: str = "start",
    end: str = "end",
    *,
    zero_length: bool = False,
) -> pl.LazyFrame:
    """`coverage_by_label`'s mask and length columns as a lazy query (bit i = `labels[i]`).

    `zero_length` keeps combinations that last no time, as HTA's kernel-type sweep does: at
    an instant with several edges, the edges are taken in HTA's concatenation order (per
    label, starts then ends) and each state in between is a row of length 0 (HTA's rounding
    leaves zero-length memsets inside kernels: "COMPUTATION overlapping MEMORY", sum 0).
    """
    lf = df.lazy().select(pl.col(label).cast(pl.String).alias("__label"), start, end)
    # One merge per label: a sort on one integer column is far cheaper than on (label, start).
    edges = []
    for i, name in enumerate(labels):
        merged_label = merged(lf.filter(pl.col("__label") == name), start, end)
        edges.append(
            merged_label.select(pl.col(start).alias("t"), pl.lit(1 << i, pl.Int64).alias("delta"))
        )
        edges.append(
            merged_label.select(pl.col(end).alias("t"), pl.lit(-(1 << i), pl.Int64).alias("delta"))
        )
    # At an instant with several edges only the last one's state lasts (the others have length
    # 0 and are dropped), and it has every delta of that instant: ties need no grouping.
    lasting = (pl.col("length") >= 0) if zero_length else (pl.col("length") > 0)
    return (
        pl.concat(edges)
        .sort("t", maintain_order=zero_length)
        .with_columns(
            pl.col("delta").cum_sum().alias("mask"),
            (pl.col("t").shift(-1) - pl.col("t")).alias("length"),
        )
        .filter((pl.col("mask") > 0) & lasting)
        .group_by("mask")
        .agg(pl.col("length").sum())
        .sort("mask")
    )
