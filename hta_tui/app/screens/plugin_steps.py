"""The steps the TensorBoard plugin's views cover, for their screens' scope line: the plugin
keeps every ProfilerStep HTA keeps and the last one too (HTA leaves it out), and drops a step
for reasons of its own (no GPU work in it, ...), so the titles say which steps, and why some
are missing, instead of "the steps the plugin keeps"."""

from __future__ import annotations

from collections.abc import Mapping

import polars as pl

from hta_tui.analysis import registry
from hta_tui.analysis.scope import StepScope, describe_steps

#: The plugin's step of a trace without ProfilerStep.
WHOLE_TRACE_STEP = "whole trace as step 0 (no ProfilerStep)"


def describe_plugin_steps(frames: Mapping[int, pl.DataFrame]) -> str:
    selection = registry.table(frames, "step_selection")
    if selection.is_empty():
        return "whole trace (no ProfilerStep)"
    used = tuple(selection.filter("used")["step"].unique().sort().to_list())
    # no ProfilerStep on any rank: the plugin's one step, 0, is the whole trace
    marked = any(f["name"].str.starts_with("ProfilerStep").any() for f in frames.values())
    text = describe_used(used, whole_trace=not marked)
    left = selection.filter(~pl.col("used") & ~pl.col("step").is_in(used))
    if left.is_empty():
        return text
    steps = ", ".join(map(str, left["step"].unique().sort().to_list()))
    return f"{text}  ·  {steps} left out: {left['reason'][0]}"


def describe_used(used: tuple[int, ...], *, whole_trace: bool = False) -> str:
    """The steps the plugin's views use (the overview reads them off its step table);
    `whole_trace`: the ranks have no ProfilerStep, so the plugin's one step "0" is the whole
    trace (other views say `whole trace (no ProfilerStep)`, not a step)."""
    if whole_trace and used == (0,):
        return WHOLE_TRACE_STEP  # HTA's views cover the same (and it fits the overview's box)
    if not used:
        return "no step kept by the plugin"
    if len(used) == 1:
        return f"step {used[0]}, as the TensorBoard plugin"
    return (
        f"{describe_steps(StepScope((), used, used), every_step=False)}, as the TensorBoard plugin"
    )
