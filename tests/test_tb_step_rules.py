"""The plugin's step rules on a hand-made rank whose numbers the test chose: steps moved to
the GPU work they launched, and the tail rule (a last step launching < 80 % of the GPU ops of
the one before is not used)."""

from __future__ import annotations

import polars as pl

from hta_tui.analysis.step_breakdown import rank_breakdown
from hta_tui.analysis.tb_steps import profiler_steps
from hta_tui.trace.schema import KIND

US = 1000  # ns


def rank(kernels_per_step: list[int]) -> pl.DataFrame:
    """Steps of 100 us; step i launches its kernels (10 us each, back to back) from a runtime
    call each; the GPU runs step i's kernels from 50 us into the step."""
    rows = []
    corr = 0
    for i, n in enumerate(kernels_per_step):
        start = i * 100 * US
        rows.append(
            (f"ProfilerStep#{i + 1}", "user_annotation", "annotation", start, 100 * US, None)
        )
        for k in range(n):
            corr += 1
            rows.append(
                ("cudaLaunchKernel", "cuda_runtime", "runtime", start + (k + 1) * US, US // 2, corr)
            )
            rows.append(("gemm", "kernel", "kernel", start + 50 * US + k * 10 * US, 10 * US, corr))
    return pl.DataFrame(
        rows,
        schema={
            "name": pl.String,
            "cat": pl.String,
            "kind": KIND,
            "ts": pl.Int64,
            "dur": pl.Int64,
            "correlation": pl.Int64,
        },
        orient="row",
    ).with_columns(pl.lit(None, pl.Int64).alias("external_id"), pl.lit(1, pl.Int64).alias("tid"))


def test_steps_move_to_their_gpu_work_and_short_tail_is_dropped() -> None:
    steps = profiler_steps(rank([5, 10, 7]))
    assert steps["gpu_ops"].to_list() == [5, 10, 7]
    # step 1's kernels end at 100 us: in the step; step 2's run to 150+ us past its end (200)
    assert steps["end"].to_list()[:2] == [100 * US, 250 * US]
    assert steps["start"].to_list()[1] == 100 * US
    assert steps["start"].to_list()[2] == 250 * US  # after the step before ends on the GPU
    assert steps["used"].to_list() == [True, True, False]  # 7 < 0.8 * 10
    assert "80%" in steps["reason"][2]


def test_breakdown_parts_of_a_moved_step() -> None:
    table = rank_breakdown(rank([5, 10, 8]))  # 8 >= 0.8 * 10: all used
    assert table["step"].to_list() == [1, 2, 3]
    second = table.row(1, named=True)
    assert second["step_time (us)"] == 150.0
    assert second["Kernel (us)"] == 100.0  # ten 10 us kernels
    assert second["Runtime (us)"] == 5.0  # ten 0.5 us launches, none under a kernel
    assert second["Other (us)"] == 45.0


def test_the_plugin_views_scope_names_the_steps_kept_and_why_one_is_not() -> None:
    """The step-time and GPU-metrics titles: the steps the plugin keeps, and the one its tail
    rule drops, with the rule's reason (the numbers chosen above: 7 < 0.8 * 10)."""
    from hta_tui.app.screens.plugin_steps import describe_plugin_steps

    text = describe_plugin_steps({0: rank([5, 10, 7]), 1: rank([5, 10, 7])})
    head, _, left = text.partition("  ·  ")
    assert head == "steps 1-2, as the TensorBoard plugin"
    assert left.startswith("3 left out: ") and "80%" in left
    assert describe_plugin_steps({0: rank([5, 10, 8])}) == "steps 1-3, as the TensorBoard plugin"
    assert describe_plugin_steps({0: rank([5])}) == "step 1, as the TensorBoard plugin"
