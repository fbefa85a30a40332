"""FrameTable's filter and sort on big frames: categorical columns filter by their distinct
names, a number column's first rows are picked without sorting every row, and both give the
rows a plain lower-case search and a full stable sort give."""

from __future__ import annotations

import numpy as np
import polars as pl
import pytest

from hta_tui.app.widgets.frame_table import sorted_head, text_match


def _frame(n: int = 5000) -> pl.DataFrame:
    rng = np.random.default_rng(7)
    names = np.array(["aten::mm", "ATEN::Add", "(allocated before the trace)", "relu"])
    return pl.DataFrame(
        {
            "operator": names[rng.integers(0, len(names), n)],
            "size_kb": rng.integers(0, 40, n).astype(float),  # many ties
            "row": np.arange(n),
        }
    ).with_columns(
        pl.when(pl.col("row") % 11 == 0).then(None).otherwise(pl.col("size_kb")).alias("size_kb"),
        pl.when(pl.col("row") % 13 == 0).then(None).otherwise(pl.col("operator")).alias("operator"),
    )


@pytest.mark.parametrize("dtype", [pl.String, pl.Categorical])
@pytest.mark.parametrize("needle", ["aten", "add", "(", "zzz"])
def test_filter_matches_any_case(dtype: pl.DataType, needle: str) -> None:
    df = _frame().with_columns(pl.col("operator").cast(dtype))
    got = df.filter(text_match(df, "operator", needle).fill_null(False))["row"].to_list()
    ops = df["operator"].cast(pl.String).to_list()
    want = [i for i, op in enumerate(ops) if op is not None and needle in op.lower()]
    assert got == want
    assert text_match(df, "size_kb", needle) is None  # numbers are not searched


@pytest.mark.parametrize("descending", [True, False])
@pytest.mark.parametrize("limit", [None, 1, 400, 10_000])
def test_sorted_head_is_the_stable_sort_head(descending: bool, limit: int | None) -> None:
    df = _frame()
    full = df.sort("size_kb", descending=descending, nulls_last=True, maintain_order=True)
    want = full if limit is None else full.head(limit)
    assert sorted_head(df, "size_kb", descending, limit).equals(want)
    text = sorted_head(df, "operator", descending, limit)  # text: a full sort
    assert text.equals(
        df.sort("operator", descending=descending, nulls_last=True, maintain_order=True).head(
            limit or df.height
        )
    )
