"""The Python call stacks of one operator, for traces whose stacks are `python_function`
events (with_stack=True since PyTorch 2) instead of the old `Call stack` arg the TensorBoard
plugin reads: the plugin shows no stack for them, the Operators view still can.

A call's stack is the Python frames that enclose it on its thread (`host_context`), so the
cost is one nesting of the threads that run the operator, asked when an operator is chosen.
"""

from __future__ import annotations

from collections.abc import Mapping

import polars as pl

from hta_tui.analysis.host_context import context

STACK_COLUMNS: dict[str, pl.DataType] = {
    "call site": pl.String(),  # the innermost frame of the user's code
    "calls": pl.UInt32(),
    "host total (us)": pl.Float64(),
    "call stack": pl.String(),  # innermost source frames, outermost first, " > "
}


def has_python_frames(frames: Mapping[int, pl.DataFrame]) -> bool:
    """Whether any rank recorded Python frames (with_stack on PyTorch 2)."""
    return any(ev.select((pl.col("kind") == "python").any()).item() for ev in frames.values())


def python_stacks(frames: Mapping[int, pl.DataFrame], name: str) -> pl.DataFrame:
    """Per distinct Python stack of the calls of operator `name` over the ranks given: calls and
    host total time, largest first. Calls with no Python frame around them are left out."""
    parts = []
    for ev in frames.values():
        calls = ev.filter((pl.col("kind") == "cpu_op") & (pl.col("name") == name)).select(
            "idx", "pid", "tid", "ts", "dur"
        )
        if calls.is_empty():
            continue
        ctx = context(ev, calls).select("q", "python_stack", "call_site")
        parts.append(
            ctx.join(calls.select(pl.col("idx").alias("q"), "dur"), on="q", how="left").drop("q")
        )
    if not parts:
        return pl.DataFrame(schema=STACK_COLUMNS)
    return (
        pl.concat(parts)
        .filter(pl.col("python_stack").is_not_null())
        .group_by("python_stack", "call_site")
        .agg(pl.len().alias("calls"), (pl.col("dur").sum() / 1000).alias("host total (us)"))
        .rename({"python_stack": "call stack", "call_site": "call site"})
        .sort(["host total (us)", "call stack"], descending=[True, False])
        .cast(STACK_COLUMNS)
        .select(list(STACK_COLUMNS))
    )
