"""The steps the TensorBoard plugin's views cover, for their screens' scope line: the plugin
keeps every ProfilerStep HTA keeps and the last one too (HTA leaves it out), and drops a step
for reasons of its own (no GPU work in it, ...), so the titles say which steps, and why some
are missing, instead of "the steps the plugin keeps"."""

from __future__ import annotations

from collections.abc import Mapping

import polars as pl

from hta_tui.analysis import registry
from hta_tui.analysis.scope import StepScope, describe_steps


def describe_plugin_steps(frames: Mapping[int, pl.DataFrame]) -> str:
    selection = registry.table(frames, "step_selection")
    if selection.is_empty():
        return "whole trace (no ProfilerStep)"
    used = tuple(selection.filter("used")["step"].unique().sort().to_list())
    text = describe_used(used)
    left = selection.filter(~pl.col("used") & ~pl.col("step").is_in(used))
    if left.is_empty():
        return text
    steps = ", ".join(map(str, left["step"].unique().sort().to_list()))
    return f"{text}  ·  {steps} left out: {left['reason'][0]}"


def describe_used(used: tuple[int, ...]) -> str:
    """The steps the plugin's views use (the overview reads them off its step table)."""
    if not used:
        return "no step kept by the plugin"
    if len(used) == 1:
        return f"step {used[0]}, as the TensorBoard plugin"
    return (
        f"{describe_steps(StepScope((), used, used), every_step=False)}, as the TensorBoard plugin"
    )
