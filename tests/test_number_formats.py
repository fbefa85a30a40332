"""One number format per column kind (issue 17, point 6: `0.0887` beside `30.9`): every cell
of a column is drawn with the same number of decimals, chosen by what the column holds."""

from __future__ import annotations

import polars as pl
import pytest

from hta_tui.app.widgets.frame_table import float_style, format_value


@pytest.mark.parametrize(
    ("name", "values", "cells"),
    [
        ("mean us", [0.0887, 30.9, 1234.56], ["0.1", "30.9", "1,234.6"]),  # times: one decimal
        ("share %", [0.04, 55.55], ["0.0", "55.5"]),  # shares: one decimal
        ("idle_time_ratio", [0.99, 0.01], ["0.99", "0.01"]),  # ratios: two
        ("tc_self_ratio", [0.5, 0.25], ["0.50", "0.25"]),
        # a duration is a time, though "duration" holds "ratio" (it read 5.66 beside 930.3)
        ("cpu_duration", [5.66, 4.41], ["5.7", "4.4"]),
        ("GPU kernel duration (us)", [12.345, 0.5], ["12.3", "0.5"]),
        ("step_time_z", [3.8311, -0.5], ["3.83", "-0.50"]),  # z-scores: two
        ("count", [82.0, 3.0], ["82", "3"]),  # whole numbers: no decimals
        ("bandwidth", [0.0887, 0.5], ["0.089", "0.500"]),  # small quantities: 3 digits
        ("bandwidth", [0.0887, 30.9], ["0.1", "30.9"]),
    ],
)
def test_a_column_has_one_format(name: str, values: list[float], cells: list[str]) -> None:
    col = pl.Series(name, values, dtype=pl.Float64)
    style = float_style(col)
    got = [format_value(v, pl.Float64(), style) for v in values]
    assert got == cells
    decimals = {len(c.split(".")[1]) if "." in c else 0 for c in got}
    assert len(decimals) == 1


def test_step_and_id_columns_are_written_as_the_titles_write_them() -> None:
    """trace_compare's step 1009 was `1,009` in the step-time table beside `steps 1009-1010`
    in its title and `iter 1009` in the diff; a count keeps its separator."""
    from hta_tui.app.widgets.frame_table import column_bound, column_cells

    steps = pl.Series("step", [1009, 1010, None])
    assert column_cells(steps) == ["1009", "1010", "-"]
    assert column_bound(steps, "int", 40) == 4
    assert column_cells(pl.Series("correlation", [6939149])) == ["6939149"]
    assert column_cells(pl.Series("count", [1009])) == ["1,009"]
