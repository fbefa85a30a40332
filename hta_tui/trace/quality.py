"""What a file's events may not carry into the analyses: step numbers beyond any counter,
and ids shared where a trace has one per event.

A corrupted, merged or hand-made file can name a step `ProfilerStep#99999999999999999999999`
(no integer column holds it: every analysis that numbers steps would fail on it) or give
thousands of launches one correlation id (every join on it would grow as the square of
their number: 4,000 launches, kernels and operators sharing one id made 16 M rows per join).
Such a step event is dropped; such an id is kept on the first event that has it and cleared
on the others, whose events stay. Both are counted by reason, as a bad value is, so the
file's data quality line says what its numbers rest on.
"""

from __future__ import annotations

from collections import Counter

import polars as pl

from hta_tui.trace.schema import LAUNCH_KINDS

#: A step number must fit here (a rank must too, `parse._meta`): far beyond any run's.
MAX_STEP = 2**31
STEP_OUT_OF_RANGE = "ProfilerStep number out of range"
SHARED_CORRELATION = "correlation id of an earlier launch (id ignored)"
SHARED_EXTERNAL_ID = "External id of an earlier operator (id ignored)"

_STEP_DIGITS = r"^ProfilerStep\s*#\s*(\d+)"
#: The host events that own an External id (a launch and its kernels share their op's).
_OP_KINDS = ("cpu_op", "annotation")


def checked_events(
    events: pl.DataFrame, dropped: Counter[str], seen: dict[str, pl.Series] | None = None
) -> pl.DataFrame:
    """`events` without out-of-range steps and with shared ids cleared, counted in
    `dropped`. A clean file (every real trace) costs three cheap scans. `seen`: for a file
    read in pieces (`stream`), the ids its earlier pieces' owners hold, kept up to date."""
    if events.is_empty():
        return events
    events = _drop_huge_steps(events, dropped)
    launches, ops = pl.col("kind").is_in(LAUNCH_KINDS), pl.col("kind").is_in(_OP_KINDS)
    events = _unique_ids(events, "correlation", launches, SHARED_CORRELATION, dropped, seen)
    return _unique_ids(events, "external_id", ops, SHARED_EXTERNAL_ID, dropped, seen)


def _drop_huge_steps(events: pl.DataFrame, dropped: Counter[str]) -> pl.DataFrame:
    digits = pl.col("name").str.extract(_STEP_DIGITS, 1)
    number = digits.cast(pl.Int64, strict=False)
    bad = digits.is_not_null() & (number.is_null() | (number >= MAX_STEP))
    # the regex read only on the names it can match (steps are a few of a file's names)
    names = events.get_column("name")
    steps = names.filter(names.str.starts_with("ProfilerStep"))
    n = steps.to_frame().select(bad.sum()).item() if steps.len() else 0
    if not n:
        return events
    dropped[STEP_OUT_OF_RANGE] += n
    kept = events.filter(~bad.fill_null(False))
    return kept.with_columns(pl.int_range(kept.height, dtype=pl.UInt32).alias("idx"))


def _unique_ids(
    events: pl.DataFrame,
    column: str,
    owners: pl.Expr,
    reason: str,
    dropped: Counter[str],
    seen: dict[str, pl.Series] | None = None,
) -> pl.DataFrame:
    """`column` cleared on every `owners` row but the first (in file order) with its id,
    earlier pieces' rows (`seen`) included."""
    has = owners & pl.col(column).is_not_null()
    if seen is None:  # a clean file (as every real one) is told by a count, not a window
        ids = pl.col(column).filter(has)
        if events.select(ids.len() == ids.n_unique()).item():
            return events
    shared = has & ~pl.col(column).is_first_distinct().over(has)
    if seen is not None:
        earlier = seen.get(column)
        if earlier is not None:
            shared = shared | (has & pl.col(column).is_in(earlier.implode()))
        ids = events.filter(has).get_column(column).unique()
        seen[column] = ids if earlier is None else pl.concat([earlier, ids]).unique()
    n = events.select(shared.sum()).item()
    if not n:
        return events
    dropped[reason] += n
    return events.with_columns(pl.when(shared).then(None).otherwise(pl.col(column)).alias(column))
