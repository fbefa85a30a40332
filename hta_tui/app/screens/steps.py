"""Screen 9: profiler steps side by side across ranks, straggler candidates, and where the time
of a step goes by user annotation.

The per-step table (one row per ProfilerStep: fastest, median and slowest rank) drives the
chart above it: the durations of the step under the cursor, one bar per rank, the slowest rank
and the straggler candidates marked. The other tables are HTA's iterations
(`steps.iterations`), the straggler candidates with their robust z-scores and reasons
(`steps.straggler_candidates`), and the user annotation breakdown, CPU or GPU (`g`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

import polars as pl
from rich.text import Text
from textual import on
from textual.actions import SkipAction
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import VerticalScroll
from textual.widgets import Input, Static, TabbedContent, TabPane

from hta_tui.analysis import registry, step_compare
from hta_tui.app.access import hta_app
from hta_tui.app.format import fmt_us
from hta_tui.app.moment import MomentColumns
from hta_tui.app.screens.base import TABLE_BINDING, AnalysisScreen, Params
from hta_tui.app.widgets.bars import LinesOnScreen
from hta_tui.app.widgets.frame_table import FrameTable, RankSummary
from hta_tui.app.widgets.text_line import TextBlock

#: Tabs of the tables, in the order `v` cycles them.
TABS: tuple[str, ...] = (
    "steps-tab-per-step",
    "steps-tab-iterations",
    "steps-tab-stragglers",
    "steps-tab-annotations",
)

#: The straggler table's columns as shown: the verdict first, the measurements after.
STRAGGLER_ORDER: tuple[str, ...] = (
    "rank",
    "straggler",
    "reason",
    "step_time_z",
    "comm_time_z",
    "compute_time_z",
    "steps",
    "step_time (us)",
    "comm_time (us)",
    "compute_time (us)",
)

#: With more ranks than this (the chart box shows about 6), the slowest come first.
MANY_BARS = 6

#: `t` on an iteration: its ProfilerStep on the timeline (times are us from the job's start).
STEP_MOMENT = MomentColumns("ts", dur="dur", name="iter", name_format="ProfilerStep#{}")


@dataclass(frozen=True)
class RankBar:
    rank: int
    dur: float  # us
    slowest: bool
    flagged: bool  # a straggler candidate


class StepBars(LinesOnScreen):
    """One step's duration per rank: bars as long as the duration over the step's slowest
    duration, the slowest rank and the straggler candidates marked (`!`)."""

    COMPONENT_CLASSES: ClassVar[set[str]] = {
        "step-bars--title",
        "step-bars--label",
        "step-bars--bar",
        "step-bars--slowest",
        "step-bars--flagged",
    }

    DEFAULT_CSS = """
    StepBars { height: auto; }
    """

    def __init__(self, *, ascii: bool = False, id: str | None = None) -> None:
        super().__init__(id=id)
        self.ascii = ascii
        self.title = ""
        self.bars: list[RankBar] = []
        self.layouts: dict[int, tuple[int, int, int, float]] = {}  # `_layout` by width

    def set_bars(self, title: str, bars: list[RankBar]) -> None:
        if (title, bars) != (self.title, self.bars):
            self.title = title
            self.bars = list(bars)
            self.layouts.clear()
            self.forget_lines()

    def line_count(self) -> int:
        return 1 + len(self.bars)

    def line_text(self, y: int, width: int) -> Text:
        layout = self.layouts.get(width)
        if layout is None:
            self.layouts[width] = layout = self._layout(width)
        return self._line(y, width, layout)

    def _style(self, name: str):
        return self.get_component_rich_style(f"step-bars--{name}", partial=True)

    def _layout(self, width: int) -> tuple[int, int, int, float]:
        """(label, value, bar) widths and the longest duration: every line's, from all bars."""
        label_w = max((len(str(b.rank)) + 2 for b in self.bars), default=0)
        value_w = max((len(fmt_us(b.dur)) for b in self.bars), default=0)
        longest = max((b.dur for b in self.bars), default=0.0)
        return label_w, value_w, max(width - label_w - value_w - 12, 0), longest

    def _line(self, y: int, width: int, layout: tuple[int, int, int, float]) -> Text:
        """Line `y`: the title, then one bar per rank."""
        if y == 0:
            return Text(self.title, style=self._style("title"), no_wrap=True, overflow="ellipsis")
        label_w, value_w, bar_w, longest = layout
        bar = self.bars[y - 1]
        full, part = ("#", "#") if self.ascii else ("█", "▌")
        line = Text(no_wrap=True, overflow="crop")
        style = self._style("flagged") if bar.flagged else self._style("label")
        label = f"{'!' if bar.flagged else ' '}r{bar.rank}"
        line.append(label.rjust(label_w) + " ", style=style)
        cells = bar_w * bar.dur / longest if longest > 0 else 0
        whole = int(cells)
        glyphs = full * whole + (part if cells - whole >= 0.5 else "")
        bar_style = self._style("slowest") if bar.slowest else self._style("bar")
        line.append(glyphs.ljust(bar_w), style=bar_style)
        line.append(" " + fmt_us(bar.dur).rjust(value_w))
        if bar.slowest:
            line.append(" < slowest" if self.ascii else " ◀ slowest", style=bar_style)
        return line


def step_bars(
    iters: pl.DataFrame, spread: pl.DataFrame, stragglers: pl.DataFrame
) -> dict[int, pl.DataFrame]:
    """Worker thread: step -> its bars (rank, dur, slowest, flagged), in the order the chart
    shows them: by rank, or with more ranks than the box shows (`MANY_BARS`) the slowest
    first. Every step at once, with the numbers: made on the UI thread at each cursor move
    (a filter of every rank's steps, then 1,000 bars sorted), it held `P` up at 1,000 ranks."""
    flagged = stragglers.filter(pl.col("straggler"))["rank"]
    df = (
        iters.filter(pl.col("iter") >= 0)
        .join(spread.select("iter", "slowest_rank"), on="iter", how="left")
        .select(
            "iter",
            pl.col("rank").cast(pl.Int64),
            pl.col("dur").cast(pl.Float64),
            (pl.col("rank") == pl.col("slowest_rank")).fill_null(False).alias("slowest"),
            pl.col("rank").is_in(flagged.implode()).alias("flagged"),
        )
    )
    many = pl.len().over("iter") > MANY_BARS
    df = df.sort(
        "iter", pl.when(many).then(-pl.col("dur")).otherwise(0.0), "rank", maintain_order=True
    )
    parts = df.partition_by("iter", as_dict=True, include_key=False, maintain_order=True)
    return {int(key[0]): part for key, part in parts.items()}  # type: ignore[arg-type]


#: Which steps these are: HTA's, not the step-time view's (moved to their GPU work).
HOST_STEPS = "host ProfilerStep ranges, as HTA; B moves them to their GPU work"


class StepsScreen(AnalysisScreen):
    TITLE = "Steps & stragglers"
    ANALYSES = (
        "iterations",
        "straggler_scores",
        "user_annotation_breakdown",
        "gpu_user_annotation_breakdown",
    )

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding(
            "g",
            "toggle_gpu",
            "CPU/GPU",
            priority=True,  # over the tables' `g` (top): the screen's toggle wins
            tooltip="Annotations on the CPU or on the GPU",
        ),
        TABLE_BINDING,
    ]

    def default_params(self) -> dict[str, Any]:
        return {"gpu": False}

    @property
    def gpu(self) -> bool:
        return bool(self.params.get("gpu", False))

    def compose_body(self) -> ComposeResult:
        yield TextBlock("", id="steps-summary", classes="summary")
        with VerticalScroll(id="steps-bars-box", can_focus=False):
            yield StepBars(ascii=hta_app(self).ascii, id="steps-bars")
        with TabbedContent(id="steps-tabs"):
            with TabPane("Per step", id=TABS[0]):
                yield FrameTable(id="steps-per-step", key_column="iter", export_name="step_spread")
            with TabPane("Iterations", id=TABS[1]):
                yield FrameTable(
                    id="steps-iterations", export_name="iterations", moment=STEP_MOMENT
                )
            with TabPane("Stragglers", id=TABS[2]):
                yield FrameTable(
                    id="steps-stragglers",
                    key_column="rank",
                    export_name="stragglers",
                    ranks=RankSummary(worst="step_time_z"),
                )
            with TabPane("Annotations (CPU)", id=TABS[3]):
                yield FrameTable(id="steps-annotations", export_name="user_annotations")

    @staticmethod
    def compute(frames: dict[int, pl.DataFrame], params: Params) -> dict[str, Any]:
        gpu = bool(params.get("gpu", False))
        notes = "gpu_user_annotation_breakdown" if gpu else "user_annotation_breakdown"
        got = registry.tables(frames, ["iterations", "straggler_scores", notes])
        iters, stragglers = got["iterations"], got["straggler_scores"]
        spread = step_compare.step_spread(iters)
        # flagged ranks first (light reshaping; the rows are the analysis's)
        stragglers = stragglers.sort(["straggler", "rank"], descending=[True, False])
        result = {
            "iterations": iters,
            "spread": spread,
            "stragglers": stragglers.select(STRAGGLER_ORDER),
            "annotations": got[notes],
            "gpu": gpu,
            "bars": step_bars(iters, spread, stragglers),
        }
        result["summary"] = StepsScreen._summary(result)
        return result

    def show(self, result: dict[str, Any]) -> None:
        iters: pl.DataFrame = result["iterations"]
        self.query_one("#steps-per-step", FrameTable).show_frame(result["spread"])
        self.query_one("#steps-iterations", FrameTable).show_frame(iters)
        self.query_one("#steps-stragglers", FrameTable).show_frame(result["stragglers"])
        self.query_one("#steps-annotations", FrameTable).show_frame(result["annotations"])
        where = "GPU" if result["gpu"] else "CPU"
        tabs = self.query_one("#steps-tabs", TabbedContent)
        tabs.get_tab(TABS[3]).label = f"Annotations ({where})"
        self.query_one("#steps-summary", Static).update(result["summary"])
        self._show_step()
        if not isinstance(self.focused, FrameTable):
            self.call_after_refresh(self._focus_table)

    def _show_step(self) -> None:
        """The chart: the step under the per-step table's cursor, one bar per rank (made in
        the worker with the numbers, `step_bars`: here only looked up)."""
        box = self.query_one("#steps-bars-box")
        if not isinstance(self.result, dict) or self.result["spread"].is_empty():
            box.display = False
            return
        row = self.query_one("#steps-per-step", FrameTable).selected_row()
        spread: pl.DataFrame = self.result["spread"]
        if row is None:
            row = spread.row(0, named=True)
        step = int(row["iter"])
        shown: pl.DataFrame | None = self.result["bars"].get(step)
        bars = [] if shown is None else [RankBar(*r) for r in shown.iter_rows()]
        order = "slowest first" if len(bars) > MANY_BARS else "by rank"
        slowest = row["slowest_rank"]
        spread_txt = "" if row["spread_pctg"] is None else f", spread {row['spread_pctg']:.1f}%"
        title = f"Step {step} {order} (slowest rank {slowest}{spread_txt})"
        box.display = True
        self.query_one("#steps-bars", StepBars).set_bars(title, bars)

    @staticmethod
    def _summary(result: dict[str, Any]) -> str:
        spread: pl.DataFrame = result["spread"]
        if spread.is_empty():
            return (
                "No ProfilerStep events in these traces: no steps to compare. "
                "(Annotations below, if any.)"
            )
        s: pl.DataFrame = result["stragglers"]
        flagged = s.filter(pl.col("straggler"))
        n_ranks = result["iterations"]["rank"].n_unique()
        head = (
            f"{spread.height} step{'s' if spread.height != 1 else ''} on {n_ranks} "
            f"rank{'s' if n_ranks != 1 else ''} ({HOST_STEPS}). "
        )
        head += StepsScreen._collectives(s)
        if flagged.is_empty():
            if s.height < 3:
                return head + "Straggler detection needs at least 3 ranks with steps."
            noise = s.filter(pl.col("reason") != "")
            why = "; ".join(f"rank {r['rank']} {r['reason']}" for r in noise.iter_rows(named=True))
            return head + "No straggler: no rank stands out" + (f" ({why})." if why else ".")
        names = "; ".join(
            f"rank {r['rank']} ({r['reason']})" for r in flagged.iter_rows(named=True)
        )
        return head + f"Straggler candidate{'s' if flagged.height > 1 else ''}: {names}."

    @staticmethod
    def _collectives(s: pl.DataFrame) -> str:
        """The spread of time in collectives per step across ranks: in synchronous training
        the rank that waits least is the one the others wait for."""
        comm = s.filter(pl.col("comm_time (us)") > 0)
        if comm.height < 2:
            return ""
        low = comm.row(int(comm["comm_time (us)"].arg_min() or 0), named=True)
        lo, hi = comm["comm_time (us)"].min(), comm["comm_time (us)"].max()
        return (
            f"Collectives per step: {fmt_us(lo)} to {fmt_us(hi)} across ranks "
            f"(least: rank {low['rank']}). "
        )

    def _focus_table(self) -> None:
        tabs = self.query_one("#steps-tabs", TabbedContent)
        pane = tabs.active or TABS[0]
        tables = list(self.query_one(f"#{pane}", TabPane).query(FrameTable))
        if tables:
            tables[0].focus()

    @on(FrameTable.RowHighlighted, "#steps-per-step")
    def _step_highlighted(self, event: FrameTable.RowHighlighted) -> None:
        self._show_step()

    # -- actions -------------------------------------------------------------------------------
    def action_toggle_gpu(self) -> None:
        if isinstance(self.focused, Input):
            raise SkipAction()  # typing a `g` in the filter box
        self.set_params(gpu=not self.gpu)

    def action_next_table(self) -> None:
        tabs = self.query_one("#steps-tabs", TabbedContent)
        current = tabs.active if tabs.active in TABS else TABS[0]
        tabs.active = TABS[(TABS.index(current) + 1) % len(TABS)]
        self.call_after_refresh(self._focus_table)
