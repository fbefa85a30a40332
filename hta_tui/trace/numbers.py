"""Timestamps and durations: the JSON numbers of `ts` / `dur` (microseconds) -> integer ns.

Two ways, one answer. Most chunks are decoded with numbers as numbers (msgspec's float
parser is correctly rounded): below EXACT_FLOAT_US a float64 is within 0.49 ns of the
3-decimal number written, so its ns follow exactly from it, without a Python string per
value or a decimal cast (a tenth of the parse). A chunk with a fractional value beyond that
(epoch-microsecond traces written to the nanosecond, where a float64 resolves only 0.25 us)
raises InexactNumbers and is decoded again with every fractional number kept as its text,
which `exact_ns` reads digit by digit. So does a chunk with values that are not plain numbers
(text, NaN, objects, a missing ts), where `dropped_reasons` says what is wrong with each.
"""

from __future__ import annotations

from typing import Any

import polars as pl

from hta_tui.trace.series import column

#: Timestamps are kept below this many microseconds, so that ts + dur in ns fits an int64.
MAX_US = 2**62 // 1000
#: A longer duration is a broken value, not a profiled span (ns).
MAX_DUR_NS = 86_400 * 10**9
#: Below this many microseconds a float64's spacing is under 1 ns (2**-10 us at most): the
#: 3-decimal number nearest to it is the one written (within 0.49 ns, so rounding finds it).
EXACT_FLOAT_US = 2.0**43
_DECIMAL = pl.Decimal(19, 3)
_PLAIN = frozenset({int, float})
_PLAIN_OR_MISSING = frozenset({int, float, type(None)})


class InexactNumbers(Exception):
    """A chunk decoded with floats holds a fractional number a float64 cannot keep to the
    nanosecond: decode it again with fractional numbers as text."""


def plain_us(name: str, values: list[Any], *, optional: bool = False) -> pl.Series | None:
    """`values` (ints and floats of microseconds; None too when `optional`) as float64
    microseconds that `us_ns` turns into exact ns; None when some value is anything else
    (the caller reads them as text). Raises InexactNumbers for a float at or past
    EXACT_FLOAT_US. The ns are left to `us_ns` once per file: each polars call has a fixed
    cost, and made per chunk the conversion took a tenth of the parse."""
    types = set(map(type, values))
    if not types <= (_PLAIN_OR_MISSING if optional else _PLAIN):
        if float in types:  # decoded with floats: the odd values are read from their text
            raise InexactNumbers(name)
        return None
    if float not in types:
        ints = column(name, values, pl.Int64, strict=False)
        if ints.null_count() != values.count(None):
            return None  # beyond an int64: the text way says which
        if ints.null_count() != ints.len() and max(ints.max(), -ints.min()) >= MAX_US:  # type: ignore[operator]
            return None  # out of range
        return ints.cast(pl.Float64)  # exact: MAX_US is below 2^53
    us = column(name, values, pl.Float64)
    if max(us.max(), -us.min()) >= EXACT_FLOAT_US:  # type: ignore[operator]
        raise InexactNumbers(name)
    return us


def us_ns(us: pl.Expr) -> pl.Expr:
    """Integer ns of `plain_us` microseconds, exact (see EXACT_FLOAT_US)."""
    whole = us.floor()
    return whole.cast(pl.Int64) * 1000 + ((us - whole) * 1000).round().cast(pl.Int64)


def plain_ns(name: str, values: list[Any], *, optional: bool = False) -> pl.Series | None:
    """`plain_us` in integer ns."""
    us = plain_us(name, values, optional=optional)
    return None if us is None else us.to_frame().select(us_ns(pl.col(name))).to_series()


def ns_column(name: str, values: list[Any]) -> pl.Series:
    """Integer ns of `values`, the plain way or the text way (null where not a number)."""
    ns = plain_ns(name, values)
    return text_ns(name, values)[1] if ns is None else ns


def time_column(name: str, values: list[Any]) -> pl.Series:
    """`name` in ns read from the text, or `name`_us (`plain_us`); frames of chunks holding
    either are concatenated "diagonal" and made one ns column once per file (`resolve_ns`)."""
    us = plain_us(name, values)
    return text_ns(name, values)[1] if us is None else us.rename(f"{name}_us")


def resolve_ns(frame: pl.DataFrame, *names: str) -> pl.DataFrame:
    """Each of `names` in ns, from the `time_column`s (or `plain_us`) of the chunks."""
    pairs = [(n, pl.Int64) for n in names] + [(f"{n}_us", pl.Float64) for n in names]
    missing = [pl.lit(None, dtype).alias(c) for c, dtype in pairs if c not in frame.columns]
    resolved = [pl.coalesce(pl.col(n), us_ns(pl.col(f"{n}_us"))).alias(n) for n in names]
    lazy = frame.lazy().with_columns(missing).with_columns(resolved)
    return lazy.drop([f"{n}_us" for n in names]).collect()


def null_column(name: str, n: int, dtype: pl.DataType) -> pl.Series:
    """n nulls, without a Python list (polars scans a list of Nones for a first value): one
    null repeated in Rust. `extend_constant` costs ~150 us a call whatever n (a query plan),
    7x this; a small file's parse makes ~27 such columns."""
    return pl.Series(name, [None], dtype=dtype).new_from_index(0, n)


def number_texts(name: str, values: list[Any]) -> pl.Series:
    """Numbers (ints, or a float's JSON text: see `events.Event.ts`) as text for `exact_ns`.
    Anything else becomes text too and fails there, so it is counted, not raised."""
    try:
        return pl.Series(name, values, dtype=pl.String, strict=False)
    except Exception:  # an object polars cannot make text of
        texts = [v if isinstance(v, str) else str(v) if isinstance(v, int | float) else "?"
                 for v in values]  # fmt: skip
        return pl.Series(name, texts, dtype=pl.String)


def exact_ns(text: pl.Expr) -> pl.Expr:
    """Microseconds as the JSON number's text -> integer ns, exact to the digit.

    A decimal cast, not a float64: at epoch-microsecond scale (~1.7e15) a float64 keeps only
    quarter microseconds, so `ts` written to the nanosecond would snap to a 0.25 us grid.
    Null for anything that is not a number (strings, NaN, objects) or out of range.
    """
    dec = text.cast(_DECIMAL, strict=False)
    whole = dec.cast(pl.Int64, strict=False)
    frac = ((dec - whole.cast(_DECIMAL)) * 1000).cast(pl.Int64)
    return pl.when(whole.abs() < MAX_US).then(whole * 1000 + frac).alias(text.meta.output_name())


def text_ns(name: str, values: list[Any]) -> tuple[pl.Series, pl.Series]:
    """The values as text and their exact ns (null where not a usable number)."""
    texts = number_texts(name, values)
    return texts, texts.to_frame().select(exact_ns(pl.col(name))).to_series()


def dropped_reasons(texts: pl.DataFrame, times: pl.DataFrame) -> pl.Series | None:
    """Why each complete event cannot be used (null where it can): the field and what is
    wrong; None when every event can (the common case costs three counts and two bounds).
    `texts`: ts and dur as written, `times`: `exact_ns` of them. A missing dur is a
    zero-length event, as Kineto writes instants. HTA 0.5 fails on the whole trace instead
    (a deliberate difference, see README)."""
    ts, dur = times["ts"], times["dur"]
    if (
        ts.null_count() == 0
        and dur.null_count() == texts["dur"].null_count()
        and (dur.min() or 0) >= 0  # type: ignore[operator]
        and (dur.max() or 0) <= MAX_DUR_NS  # type: ignore[operator]
    ):
        return None
    ts_f, dur_f = (pl.col(c).cast(pl.Float64, strict=False) for c in ("ts", "dur"))
    ts, dur = pl.col("ts_ns"), pl.col("dur_ns")
    reason = (
        pl.when(pl.col("ts").is_null())
        .then(pl.lit("no ts"))
        .when(ts.is_null() & ts_f.is_finite())
        .then(pl.lit("ts out of range"))
        .when(ts.is_null())
        .then(pl.lit("ts is not a number"))
        .when(pl.col("dur").is_null())
        .then(None)
        .when((dur < 0) | (dur.is_null() & (dur_f < 0) & dur_f.is_finite()))
        .then(pl.lit("dur is negative"))
        .when((dur > MAX_DUR_NS) | (dur.is_null() & dur_f.is_finite()))
        .then(pl.lit("dur over a day"))
        .when(dur.is_null())
        .then(pl.lit("dur is not a number"))
    )
    both = texts.with_columns(times["ts"].alias("ts_ns"), times["dur"].alias("dur_ns"))
    return both.select(reason.alias("dropped")).to_series()


def range_reasons(dur: pl.Expr) -> pl.Expr:
    """`dropped_reasons` for events whose ts and dur are plain numbers (ns): only a
    duration can be out of bounds."""
    return (
        pl.when(dur < 0)
        .then(pl.lit("dur is negative"))
        .when(dur > MAX_DUR_NS)
        .then(pl.lit("dur over a day"))
    )
