"""Screen 2: why the GPU streams wait (HTA's idle-time breakdown).

Per rank and stream, the idle time between kernels split into host_wait (the CPU launched the
next kernel late), kernel_wait (back-to-back launch overhead, gaps under the threshold) and
other, as stacked bars and as tables: the breakdown, the statistics of the idle intervals, and
the longest gaps with the kernels on either side (enter opens the delayed kernel's detail).
`t` edits the threshold between kernel_wait and other (HTA's consecutive_kernel_delay, 30 us by
default); the title line shows it.
"""

from __future__ import annotations

from typing import Any, ClassVar

import polars as pl
from textual import on
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Vertical, VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Input, Static, TabbedContent, TabPane

from hta_tui.analysis import gaps, idle, registry
from hta_tui.app.access import hta_app
from hta_tui.app.format import fmt_us
from hta_tui.app.moment import MomentColumns
from hta_tui.app.screens.base import TABLE_BINDING, AnalysisScreen, Params
from hta_tui.app.widgets.bars import BarRow, StackedBars
from hta_tui.app.widgets.frame_table import FrameTable
from hta_tui.app.widgets.text_line import TextBlock
from hta_tui.printable import printable
from hta_tui.trace.model import TraceSet

#: HTA's default consecutive_kernel_delay (us).
DEFAULT_THRESHOLD = 30.0
#: `t` on a gap: the timeline from the gap's start (us after the rank's first kernel) to the
#: kernel it delays.
GAP_MOMENT = MomentColumns(
    gaps.START, base="job", dur="gap (us)", name="after", stream="stream", name_at_end=True
)
#: How many of the longest gaps the gaps table lists.
TOP_GAPS = 200
#: With more bars than this (the box shows about 6), the most idle streams come first.
MANY_BARS = 6

#: (category, legend label, Unicode glyph, ASCII glyph), in `idle.IDLE_CATEGORIES` order
IDLE_BAR_CATEGORIES: tuple[tuple[str, str, str, str], ...] = (
    ("host-wait", "host wait", "█", "#"),
    ("kernel-wait", "kernel wait", "▒", "="),
    ("other", "other", "░", "."),
)

#: Tabs of the tables, in the order `v` cycles them.
TABS: tuple[str, ...] = ("idle-tab-breakdown", "idle-tab-stats", "idle-tab-gaps")


class IdleBars(StackedBars):
    """Per rank and stream: host wait, kernel wait and other idle time."""

    COMPONENT_CLASSES: ClassVar[set[str]] = StackedBars.COMPONENT_CLASSES | {
        "stacked-bars--host-wait",
        "stacked-bars--kernel-wait",
        "stacked-bars--other",
    }


def format_threshold(value: float) -> str:
    return f"{value:g} us"


class ThresholdDialog(ModalScreen[float | None]):
    """Ask for the consecutive-kernel delay (us): enter applies it, escape cancels."""

    BINDINGS: ClassVar[list[BindingType]] = [Binding("escape", "cancel", "Cancel")]

    def __init__(self, current: float) -> None:
        super().__init__()
        self.current = current

    def compose(self) -> ComposeResult:
        with Vertical(id="threshold-dialog"):
            yield Static("Kernel-wait threshold (us)", classes="picker-title")
            yield Static(
                "Gaps shorter than this between kernels are kernel_wait, longer ones other.",
                id="threshold-help",
            )
            yield Input(
                value=f"{self.current:g}", type="number", id="threshold-input", select_on_focus=True
            )
            yield TextBlock("", id="threshold-error")

    def on_mount(self) -> None:
        self.query_one("#threshold-input", Input).focus()

    @on(Input.Submitted, "#threshold-input")
    def _submitted(self, event: Input.Submitted) -> None:
        event.stop()
        try:
            value = float(event.value)
        except ValueError:
            value = -1.0
        if not value >= 0 or value == float("inf"):
            error = self.query_one("#threshold-error", Static)
            error.update("Enter a number of microseconds >= 0.")
            return
        self.dismiss(value)

    def action_cancel(self) -> None:
        self.dismiss(None)


class IdleScreen(AnalysisScreen):
    TITLE = "Idle time"
    ANALYSES = ("idle_time_breakdown", "idle_interval_stats", "longest_gaps")

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("c", "threshold", "Cutoff", tooltip="Edit the kernel-wait threshold (us)"),
        TABLE_BINDING,
    ]

    def default_params(self) -> dict[str, Any]:
        return {"threshold": DEFAULT_THRESHOLD}

    @property
    def threshold(self) -> float:
        return float(self.params.get("threshold", DEFAULT_THRESHOLD))

    def _title_text(self) -> str:
        return self._with_scope(f"{self._where()}  ·  threshold {format_threshold(self.threshold)}")

    def compose_body(self) -> ComposeResult:
        yield TextBlock("", id="idle-summary", classes="summary")
        with VerticalScroll(id="idle-bars-box", can_focus=False):
            yield IdleBars(IDLE_BAR_CATEGORIES, ascii=hta_app(self).ascii, id="idle-bars")
        with TabbedContent(id="idle-tabs"):
            with TabPane("Breakdown", id=TABS[0]):
                yield FrameTable(id="idle-breakdown", export_name="idle_breakdown")
            with TabPane("Interval stats", id=TABS[1]):
                yield FrameTable(id="idle-stats", export_name="idle_interval_stats")
            with TabPane("Longest gaps", id=TABS[2]):
                yield FrameTable(id="idle-gaps", export_name="idle_gaps", moment=GAP_MOMENT)
                yield TextBlock("", id="idle-gap-detail")

    def compute_on(self, ts: TraceSet, frames: dict[int, pl.DataFrame], params: Params) -> Any:
        """Gap times count from the trace set's start, as the timeline's do."""
        return self.compute(frames, params, ts.origin_ns)

    @staticmethod
    def compute(
        frames: dict[int, pl.DataFrame], params: Params, origin_ns: int | None = None
    ) -> dict[str, Any]:
        threshold = float(params.get("threshold", DEFAULT_THRESHOLD))
        options = registry.Options(
            consecutive_kernel_delay_us=threshold,
            top_gaps=TOP_GAPS,
            origin_ns=-1 if origin_ns is None else origin_ns,
        )
        got = registry.tables(frames, IdleScreen.ANALYSES, options)
        breakdown, stats = got["idle_time_breakdown"], got["idle_interval_stats"]
        longest = got["longest_gaps"]
        # One bar per rank and stream: its idle time per category (light reshaping).
        per_stream = (
            breakdown.pivot(on="idle_category", index=["rank", "stream"], values="idle_time")
            if not breakdown.is_empty()
            else pl.DataFrame()
        )
        return {
            "breakdown": breakdown,
            "stats": stats,
            "gaps": longest,
            "per_stream": per_stream,
            "threshold": threshold,
        }

    def show(self, result: dict[str, Any]) -> None:
        self.query_one("#idle-breakdown", FrameTable).show_frame(result["breakdown"])
        self.query_one("#idle-stats", FrameTable).show_frame(result["stats"])
        self.query_one("#idle-gaps", FrameTable).show_frame(result["gaps"])
        per_stream: pl.DataFrame = result["per_stream"]
        has = not per_stream.is_empty()
        self.query_one("#idle-bars-box").display = has
        self.query_one("#idle-tabs").display = has
        rows = []
        for r in per_stream.iter_rows(named=True):
            values = tuple(float(r.get(c) or 0.0) for c in idle.IDLE_CATEGORIES)
            rows.append(BarRow(f"r{r['rank']} s{r['stream']}", values))
        if len(rows) > MANY_BARS:  # the most idle streams first: the box shows a few
            rows.sort(key=lambda b: -sum(v for v in b.values if v > 0))
        self.query_one("#idle-bars", IdleBars).set_rows(rows)
        self._show_gap()
        self.query_one("#idle-summary", Static).update(self._summary(per_stream))
        if has and not isinstance(self.focused, FrameTable):
            self.call_after_refresh(self._focus_table)

    @staticmethod
    def _summary(per_stream: pl.DataFrame) -> str:
        if per_stream.is_empty():
            return "No GPU kernels in these ranks: no idle time to break down."
        cats = [c for c in idle.IDLE_CATEGORIES if c in per_stream.columns]
        totals = per_stream.with_columns(
            pl.sum_horizontal(pl.col(c).clip(lower_bound=0) for c in cats).alias("__t")
        ).sort(["__t", "rank", "stream"], descending=[True, False, False])
        top = totals.row(0, named=True)
        if not top["__t"]:
            return "The GPU streams never wait between kernels."
        main = max(cats, key=lambda c: top[c] or 0)
        share = 100 * (top[main] or 0) / top["__t"]
        return (
            f"Most idle: rank {top['rank']} stream {top['stream']}, {fmt_us(top['__t'])} "
            f"between kernels, {share:.0f}% {main}."
        )

    @on(FrameTable.RowHighlighted, "#idle-gaps")
    def _gap_highlighted(self, event: FrameTable.RowHighlighted) -> None:
        self._show_gap()

    def _show_gap(self) -> None:
        """The whole story of the gap under the cursor (the table elides kernel names)."""
        row = self.query_one("#idle-gaps", FrameTable).selected_row()
        detail = self.query_one("#idle-gap-detail", Static)
        if row is None:
            detail.update("")
            return
        detail.update(
            printable(
                f"rank {row['rank']} stream {row['stream']}: {fmt_us(row['gap (us)'])} "
                f"{row['idle_category']} at {fmt_us(row[gaps.START])} from trace start, "
                f"after {row['before']} "
                f"and before {row['after']}"
            )
        )

    @on(FrameTable.RowSelected, "#idle-gaps")
    def _drill_down(self, event: FrameTable.RowSelected) -> None:
        """Enter on a gap: the detail of the kernel it delays."""
        row = self.query_one("#idle-gaps", FrameTable).selected_row()
        if row is not None:
            hta_app(self).show_kernel(row["after"])

    def _focus_table(self) -> None:
        tabs = self.query_one("#idle-tabs", TabbedContent)
        pane = tabs.active or TABS[0]
        tables = list(self.query_one(f"#{pane}", TabPane).query(FrameTable))
        if tables:
            tables[0].focus()

    # -- actions -------------------------------------------------------------------------------
    def action_threshold(self) -> None:
        def chosen(value: float | None) -> None:
            if value is not None and value != self.threshold:
                self.set_params(threshold=value)

        self.app.push_screen(ThresholdDialog(self.threshold), chosen)

    def action_next_table(self) -> None:
        tabs = self.query_one("#idle-tabs", TabbedContent)
        current = tabs.active if tabs.active in TABS else TABS[0]
        tabs.active = TABS[(TABS.index(current) + 1) % len(TABS)]
        self.call_after_refresh(self._focus_table)
