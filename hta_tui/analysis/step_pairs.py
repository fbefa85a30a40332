"""The diff's step time: the step-time view's steps, only those both runs have.

Each side's steps are the ones its step-time view shows (`step_breakdown.used_steps`, the
plugin's rules or this project's). Two runs rarely keep the same steps: the plugin's tail rule
drops a last step without GPU work on one side only, and a first step moved to its GPU work is
short on both. A median over each side's own steps then compares different steps (58.6 ms
against 135 us on trace_compare); so only the step numbers both sides show are compared, and
the headline says which, and which each side left out.
"""

from __future__ import annotations

from typing import Any

import polars as pl

from hta_tui.analysis import step_breakdown
from hta_tui.analysis.scope import _span


def _lengths(events: pl.DataFrame, *, tb_compat: bool) -> pl.DataFrame:
    """step, length (us) of the steps the step-time view shows on one side."""
    used = step_breakdown.used_steps({0: events}, tb_compat=tb_compat)
    return used.select("step", ((pl.col("end") - pl.col("start")) / 1000).alias("us"))


def paired_steps(
    control: pl.DataFrame, test: pl.DataFrame, *, tb_compat: bool = False
) -> dict[str, Any]:
    """Both sides' median step time (us) over the steps both show: `steps` (the common step
    numbers), `control` / `test` each {"median (us)", "steps", "only_here"} (the steps that
    side shows and the other does not). The medians are None without a common step."""
    return pair_lengths(_lengths(control, tb_compat=tb_compat), _lengths(test, tb_compat=tb_compat))


#: One side's step lengths (the registry's `diff_side_steps`).
step_lengths = _lengths


def pair_lengths(c: pl.DataFrame, t: pl.DataFrame) -> dict[str, Any]:
    """`paired_steps` from each side's `step_lengths`."""
    common = sorted(set(c["step"]) & set(t["step"]))
    out: dict[str, Any] = {"steps": common}
    for side, mine, other in (("control", c, t), ("test", t, c)):
        both = mine.filter(pl.col("step").is_in(common))
        out[side] = {
            "median (us)": float(both["us"].median()) if both.height else None,  # type: ignore[arg-type]
            "steps": both.height,
            "only_here": sorted(set(mine["step"]) - set(other["step"])),
        }
    return out


def steps_text(steps: list[int]) -> str:
    """`step 1009`, `steps 2-6` or `steps 2, 4, 7`."""
    if len(steps) == 1:
        return f"step {steps[0]}"
    return f"steps {_span(tuple(steps))}"
