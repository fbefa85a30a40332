"""The single step "0" of a rank without ProfilerStep (`tb_steps.host_steps`): when no row
is a step row the span's step test is skipped; the span is the one the full rule
(`tb_roles.host_span_rows()`) gives, with an unnumbered `ProfilerStep#` annotation reaching
past every operator, a GPU annotation (a step row in the plugin's mode only), and none."""

from __future__ import annotations

import polars as pl
import pytest

from hta_tui.analysis import tb_roles, tb_steps

ROWS = [  # name, cat, ts, dur
    ("aten::mm", "cpu_op", 100, 50),
    ("forward", "python", 90, 80),
    ("aten::add", "Operator", 300, 10),
    ("cudaLaunchKernel", "cuda_runtime", 50, 500),
    ("gemm", "kernel", 40, 900),
    ("ProfilerStep#x", "user_annotation", 20, 700),  # a step row with no number
    ("ProfilerStep#y", "gpu_user_annotation", 10, 990),  # the plugin's mode only
]


def _span(events: pl.DataFrame) -> pl.DataFrame:
    """The span by the full rule (`host_span_rows()`: its categories and its step rows)."""
    return (
        events.filter(tb_roles.host_span_rows())
        .select(
            pl.lit(0, pl.Int64).alias("step"),
            pl.col("ts").min().alias("host_start"),
            (pl.col("ts") + pl.col("dur")).max().alias("host_end"),
        )
        .drop_nulls()
    )


@pytest.mark.parametrize("tb_compat", [False, True])
@pytest.mark.parametrize("kept", [7, 6, 5])
def test_span_without_steps(tb_compat: bool, kept: int) -> None:
    events = pl.DataFrame(
        ROWS[:kept],
        schema={"name": pl.String, "cat": pl.String, "ts": pl.Int64, "dur": pl.Int64},
        orient="row",
    )
    got = tb_steps.host_steps(events, tb_compat=tb_compat)
    assert got.equals(_span(events))
    # the unnumbered step annotation, where present, reaches before every operator
    assert got["host_start"].to_list() == [20 if kept >= 6 else 90]
