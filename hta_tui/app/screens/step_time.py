"""Step time (key `b`): where each step's wall time goes, the TensorBoard plugin's Overview.

The summary answers the question first (the average step and its largest parts, the slowest
step and what it spent more on); one stacked bar per rank splits its average step into Kernel,
Memcpy, Memset, Communication, Runtime, DataLoader, CPU Exec and Other (analysis/
step_breakdown.py: parts counted by priority, so they add up to the step). The table has every
used step as shares of its time; steps the breakdown leaves out are named with the reason.
Works for CPU-only traces (CPU Exec, DataLoader, Communication, Other).
"""

from __future__ import annotations

from typing import Any

import polars as pl
from textual.app import ComposeResult
from textual.containers import VerticalScroll
from textual.widgets import Static

from hta_tui.analysis import registry, scope, step_time_stats, tb_roles
from hta_tui.app.access import hta_app
from hta_tui.app.format import fmt_us
from hta_tui.app.moment import MomentColumns
from hta_tui.app.screens.base import AnalysisScreen, Params
from hta_tui.app.screens.plugin_steps import describe_plugin_steps
from hta_tui.app.widgets.bars import BarRow, StackedBars
from hta_tui.app.widgets.frame_table import FrameTable
from hta_tui.app.widgets.text_line import TextBlock

#: (category, legend label, Unicode glyph, ASCII glyph), in the breakdown's priority order.
CATEGORIES: tuple[tuple[str, str, str, str], ...] = (
    ("kernel", "kernel", "█", "#"),
    ("memcpy", "memcpy", "▓", "@"),
    ("memset", "memset", "▒", "%"),
    ("comm", "comm", "▚", "~"),
    ("runtime", "runtime", "▞", "+"),
    ("data", "data", "▄", "d"),
    ("cpu", "cpu", "▀", "="),
    ("other", "other", "░", "."),
)
assert len(CATEGORIES) == len(tb_roles.CATEGORIES)

#: The table's share columns, short enough for 80 columns.
_SHORT = ("kern%", "cpy%", "set%", "comm%", "rt%", "data%", "cpu%", "oth%")
SHORT: dict[str, str] = dict(zip(tb_roles.CATEGORIES, _SHORT, strict=True))


#: The table's columns saying how far a step's start and end were moved to the device.
MOVED_START, MOVED_END = "start+us", "end+us"

#: Why a step's bounds move (the plugin's rule, tb_steps.py), said once under the summary.
MOVED_WHY = "moved to their GPU work (plugin's rule)"

#: `t` on a rank's step: its ProfilerStep event.
STEP_MOMENT = MomentColumns(None, name="step", name_format="ProfilerStep#{}")


class StepTimeBars(StackedBars):
    """Per rank: the average step split by category."""

    COMPONENT_CLASSES = StackedBars.COMPONENT_CLASSES | {
        f"stacked-bars--{c[0]}" for c in CATEGORIES
    }


class StepTimeScreen(AnalysisScreen):
    TITLE = "Step time"
    ANALYSES = ("step_time_breakdown", "step_selection", "outlier_steps")
    STEPS = "as the TensorBoard plugin"  # which steps: steps_text
    PLUGIN_WHY = "cuda_runtime counts as Runtime, NCCL as Comm"

    def steps_text(self, frames: dict[int, pl.DataFrame], every: bool) -> str:
        return describe_plugin_steps(frames)

    def compose_body(self) -> ComposeResult:
        yield TextBlock("", id="step-time-summary", classes="summary")
        with VerticalScroll(id="step-time-bars-box", can_focus=False):
            yield StepTimeBars(CATEGORIES, ascii=hta_app(self).ascii, id="step-time-bars")
        yield FrameTable(
            id="step-time-table", key_column="step", export_name="step_time", moment=STEP_MOMENT
        )

    @staticmethod
    def compute(frames: dict[int, pl.DataFrame], params: Params) -> dict[str, Any]:
        tb_compat = bool(params.get("tb_compat", False))
        got = registry.tables(
            frames, StepTimeScreen.ANALYSES, registry.Options(tb_compat=tb_compat)
        )
        breakdown, selection = got["step_time_breakdown"], got["step_selection"]
        means = breakdown.group_by("rank").agg(pl.all().exclude("rank", "step").mean()).sort("rank")
        step = pl.col("step_time (us)")
        shares = [
            (100 * pl.col(f"{c} (us)") / step).fill_nan(0.0).round(1).alias(SHORT[c])
            for c in tb_roles.CATEGORIES
        ]
        table = breakdown.select("rank", "step", step.alias("step (us)"), *shares)
        moves = pl.col("start_moved (us)").abs() + pl.col("end_moved (us)").abs()
        if not selection.is_empty() and selection.select(moves.sum()).item() > 0:
            # how far each step's bounds were moved to the device (none moved: no columns)
            moved = selection.select(
                "rank",
                "step",
                pl.col("start_moved (us)").alias(MOVED_START),
                pl.col("end_moved (us)").alias(MOVED_END),
            ).unique(["rank", "step"], keep="first", maintain_order=True)
            table = table.join(moved, on=["rank", "step"], how="left", maintain_order="left")
        return {
            "selection": selection,
            "breakdown": breakdown,
            "means": means,
            "table": table,
            "dropped": selection.filter(~pl.col("used")) if not selection.is_empty() else selection,
            "outliers": got["outlier_steps"],
            "whole_trace": not scope.step_scope(frames).steps,
        }

    def show(self, result: dict[str, Any]) -> None:
        means: pl.DataFrame = result["means"]
        self.query_one("#step-time-table", FrameTable).show_frame(result["table"])
        self.query_one("#step-time-bars-box").display = not means.is_empty()
        self.query_one("#step-time-bars", StepTimeBars).set_rows(
            [
                BarRow(f"r{r['rank']}", tuple(r[f"{c} (us)"] for c in tb_roles.CATEGORIES))
                for r in means.iter_rows(named=True)
            ]
        )
        self.query_one("#step-time-summary", Static).update(summary(result))
        if self.focused is None:
            self.call_after_refresh(self.query_one("#step-time-table", FrameTable).focus)


#: The third summary line of a trace without ProfilerStep (fits 80 columns).
WHOLE_TRACE_LINE = "Step 0 is the whole trace: no ProfilerStep in these ranks (the plugin's rule)"


def summary(result: dict[str, Any]) -> str:
    """Two lines: the average step and its largest parts; the slowest step, or what was left
    out."""
    breakdown: pl.DataFrame = result["breakdown"]
    if breakdown.is_empty():
        return "No steps: no ProfilerStep and no host ops in these ranks."
    totals = breakdown.select(pl.col(f"{c} (us)").sum() for c in tb_roles.CATEGORIES).row(0)
    whole = sum(totals) or 1.0
    top = sorted(zip(tb_roles.CATEGORIES, totals, strict=True), key=lambda x: -x[1])[:3]
    parts = ", ".join(f"{name} {100 * value / whole:.0f}%" for name, value in top if value > 0)
    ranks = breakdown["rank"].n_unique()
    mean = breakdown["step_time (us)"].mean()
    first = (
        f"Average step {fmt_us(float(mean))} ({breakdown.height} step"  # type: ignore[arg-type]
        f"{'s' if breakdown.height > 1 else ''}, {ranks} "
        f"rank{'s' if ranks > 1 else ''}): {parts}"
    )
    outliers: pl.DataFrame = result["outliers"]
    dropped: pl.DataFrame = result["dropped"]
    if not outliers.is_empty():
        o = outliers.sort("excess (us)", descending=True).row(0, named=True)
        second = (
            f"Slow: rank {o['rank']} step {o['step']} (+{fmt_us(o['excess (us)'])}, "
            f"mostly {o['cause']})"
        )
    elif not dropped.is_empty():
        d = dropped.row(0, named=True)
        second = f"Left out: rank {d['rank']} step {d['step']}: {d['reason']}"
    else:
        second = "Steady: no step stands out."
    third = WHOLE_TRACE_LINE if result.get("whole_trace") else moved_line(result.get("selection"))
    return f"{first}\n{second}" + (f"\n{third}" if third else "")


def moved_line(selection: pl.DataFrame | None) -> str:
    """The step most moved to the device, and why steps move (`start+us`, `end+us` give
    every step's): a step here is the plugin's, not the host range HTA's views use."""
    if selection is None or selection.is_empty():
        return ""
    used = selection.filter("used")
    start, end = pl.col("start_moved (us)"), pl.col("end_moved (us)")
    most = used.with_columns(pl.max_horizontal(start.abs(), end.abs()).alias("_m")).sort(
        "_m", descending=True, maintain_order=True
    )
    if most.is_empty() or most["_m"][0] == 0:
        return "Steps: the ProfilerStep ranges as recorded (none moved to GPU work)"
    m = most.row(0, named=True)
    return (
        f"Steps {MOVED_WHY}, most r{m['rank']} step {m['step']}: start "
        f"+{fmt_us(m['start_moved (us)'])}, end +{fmt_us(m['end_moved (us)'])}"
    )


def overview_rows(breakdown: pl.DataFrame) -> tuple[str, tuple[float, ...] | None]:
    """The overview's step-time lines (this view's summary) and the job's average step per
    category (us), from `step_breakdown.step_time_breakdown`'s frame."""
    if breakdown.is_empty():
        return summary({"breakdown": breakdown}), None
    result = {
        "breakdown": breakdown,
        "outliers": step_time_stats.outlier_steps(breakdown),
        "dropped": pl.DataFrame(),
    }
    means = breakdown.select(pl.col(f"{c} (us)").mean() for c in tb_roles.CATEGORIES).row(0)
    return summary(result), tuple(float(v or 0.0) for v in means)
