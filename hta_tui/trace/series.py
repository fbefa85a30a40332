"""A column from a list of Python values: `pl.Series(name, values, dtype=dtype)` without
polars' Python-side dispatch, which looks at the values' first item for dataclasses, enums
and dates and costs about 5 us a call. The parser makes some 40 columns per chunk of 4k
events, and that dispatch came to 2.6% of a parse's instructions.

It ends in the constructor pl.Series itself ends in for a flat dtype, with the same fallback
when that constructor refuses a value, so the column is the same. That constructor is not
polars' public API: on a polars without it, or where it changed, every call takes the public
way (a test checks the fast way is there, and equal, on the polars installed).
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import polars as pl

try:
    from polars._utils.construction.series import polars_type_to_constructor
except ImportError:  # pragma: no cover - another polars: the public way
    polars_type_to_constructor = None

#: The dtypes made the fast way: those the parser builds from Python lists.
FAST_DTYPES = (pl.Int64, pl.UInt32, pl.Float64, pl.String)

_Maker = Callable[[str, list[Any], bool], Any]


def column(name: str, values: list[Any], dtype: Any, *, strict: bool = True) -> pl.Series:
    """`pl.Series(name, values, dtype=dtype, strict=strict)`, for FAST_DTYPES."""
    make = maker(dtype)
    if make is not None:
        try:
            return pl.Series._from_pyseries(make(name, values, strict))
        except Exception:  # as in pl.Series: a value the constructor refuses, the general way
            pass  # (any exception: a polars whose constructor changed must not fail a file)
    return pl.Series(name, values, dtype=dtype, strict=strict)


@functools.cache
def maker(dtype: Any) -> _Maker | None:
    """polars' constructor for `dtype`, or None (take the public way); looked up once per
    dtype."""
    if polars_type_to_constructor is None or dtype not in FAST_DTYPES:
        return None
    try:
        return polars_type_to_constructor(dtype)
    except Exception:  # a polars whose helper changed: the public way
        return None
