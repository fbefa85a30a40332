"""`trace.series.column`: the parser's columns, made without polars' Python-side dispatch,
are the columns pl.Series makes from the same values, odd values included."""

from __future__ import annotations

import polars as pl
import pytest

from hta_tui.trace import series as series_mod
from hta_tui.trace.series import FAST_DTYPES, column, maker

#: What the parser's lists can hold (msgspec's types for a field declared loosely, and what a
#: bad trace puts there): every kind of value each dtype's constructor may meet or refuse.
VALUES = [
    [1, 2, None, 3],
    [None, None],
    [],
    [1.5, -0.0, None, float("nan"), float("inf")],
    [1, 2.5, None],
    ["7", "0x1", "stream 7", "", None],
    ["aten::add", None, "\x00\x1b[31m"],
    [2**63, 1],  # beyond an int64
    [-(2**64), None],
    [True, False, None],
    [1, "2", 3.0, None],
    [[1, 2], None],
    [{"a": 1}, 2],
]


@pytest.mark.parametrize("dtype", FAST_DTYPES, ids=str)
@pytest.mark.parametrize("strict", [False, True])
def test_column_is_what_pl_series_makes(dtype: pl.DataType, strict: bool) -> None:
    for values in VALUES:
        try:
            want = pl.Series("c", values, dtype=dtype, strict=strict)
        except Exception as exc:  # the same refusal, whatever it is
            with pytest.raises(type(exc)):
                column("c", values, dtype, strict=strict)
            continue
        got = column("c", values, dtype, strict=strict)
        assert got.dtype == want.dtype, values
        assert got.name == "c"
        assert got.equals(want, check_names=True), (values, got.to_list(), want.to_list())


def test_the_fast_way_is_taken_on_this_polars() -> None:
    """On a polars without the constructor `column` still works (the public way), but the
    parser loses its speed: this says so when polars changes."""
    if series_mod.polars_type_to_constructor is None:
        pytest.skip(f"polars {pl.__version__} has no polars_type_to_constructor: the public way")
    for dtype in FAST_DTYPES:
        assert maker(dtype) is not None, dtype
    assert maker(pl.Datetime("us")) is None  # not a dtype the fast way is for
