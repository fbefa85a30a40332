"""The Distributed view's CPU rows take a Python event only when its `cat` is "python" in
some case (the plugin lower-cases it): the case-blind match (`comm_plugin.is_python_cat`)
keeps exactly the rows that lower-casing each `cat` kept, on cats that nearly match."""

from __future__ import annotations

import polars as pl

from hta_tui.analysis import comm_overview, comm_plugin

CATS = [
    "python",
    "Python",
    "PYTHON",
    "pYtHoN",
    "python_function",
    "Python ",
    " python",
    "pythön",
    "ΡΥΤΗΟΝ",  # Greek capitals that look like it
    "ｐｙｔｈｏｎ",  # fullwidth
    "PYTHON\n",
    "python\npython",
    "",
    None,
]


def _events() -> pl.DataFrame:
    kinds = ["python", "cpu_op"]
    rows = [(k, c) for k in kinds for c in CATS]
    n = len(rows)
    return pl.DataFrame(
        {
            "idx": pl.Series(range(n), dtype=pl.UInt32),
            "ts": [1000 * i for i in range(n)],
            "dur": [500] * n,
            "name": [f"op{i}" for i in range(n)],
            "cat": [c for _, c in rows],
            "kind": pl.Series([k for k, _ in rows], dtype=pl.Categorical),
            "rank": [0] * n,
        }
    )


def test_python_cat_is_the_lowercased_rule() -> None:
    events = _events()
    lowered = (pl.col("kind") != "python") | (pl.col("cat").str.to_lowercase() == "python")
    expected = events.filter(pl.col("kind").is_in(["cpu_op", "python"]) & lowered)
    got = comm_plugin._rows(events, *comm_plugin._CPU)
    assert got.equals(expected)
    kept = got.filter(pl.col("kind") == "python")["cat"].to_list()
    assert kept == ["python", "Python", "PYTHON", "pYtHoN"]
    # the one step over the CPU rows of a rank without ProfilerStep: from the same rows
    steps = comm_plugin.steps_of(events)
    assert steps.row(0) == ("0", expected["ts"].min(), (expected["ts"] + expected["dur"]).max())
    every = comm_overview._ranks_steps(events)
    assert every.row(0) == (0, *steps.row(0))
