"""Screen 7: CUDA kernel launches (HTA's get_cuda_kernel_launch_stats): how long each launch
call took on the CPU, how long its work ran on the GPU, and how long the work waited; the
short kernels, runtime outliers and launch-delay outliers as tables; enter on a row opens the
kernel it launched.

The cutoffs (`c`) recompute the tables exactly as `launch.short_gpu_kernels`,
`runtime_outliers` and `launch_delay_outliers` with those values. The chart shows either the
CPU call against the GPU work (log-log) or the launch delay over time (`p`), thinned to one
point per cell of the plot (`analysis.downsample.thin_points`).
"""

from __future__ import annotations

import math
from typing import Any, ClassVar

import polars as pl
from textual import on
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import Input, Label, Static, TabbedContent, TabPane
from textual_plotext import PlotextPlot

from hta_tui.analysis import registry
from hta_tui.analysis.downsample import thin_points
from hta_tui.analysis.names import fold_names
from hta_tui.app.access import hta_app
from hta_tui.app.moment import MomentColumns
from hta_tui.app.screens.base import TABLE_BINDING, AnalysisScreen, Params
from hta_tui.app.screens.timelines import line_colours
from hta_tui.app.widgets.frame_table import FrameTable
from hta_tui.app.widgets.plot import SafePlot
from hta_tui.app.widgets.text_line import TextBlock
from hta_tui.app.widgets.ticks import label, log_ticks

RUNTIME_CUTOFF = 50.0  # us, HTA's default
LAUNCH_DELAY_CUTOFF = 100.0  # us, HTA's default
#: Plot grid the scatter is thinned to: about one point per character cell of the chart
#: (plotext draws every point given, on the UI thread: 240 x 80 cost 80 ms a draw).
GRID = (120, 48)
#: Columns the tables show (the frames keep all of launch_table's).
SHOWN = (
    "rank",
    "cpu_duration",
    "gpu_duration",
    "launch_delay",
    "kernel",
    "launch",
    "gpu_ops",
    "correlation",
)
TABS = ("short", "runtime", "delay")
PLOTS = ("scatter", "delay")

#: `t` on a launch row: the kernel it launched (its correlation id; `ts` is ns as written).
LAUNCH_MOMENT = MomentColumns("ts", unit="ns", base="abs", name="kernel", correlation="correlation")


def parse_cutoff(text: str) -> float | None:
    """A cutoff in us: a finite number >= 0, else None."""
    try:
        value = float(text.strip())
    except ValueError:
        return None
    return value if math.isfinite(value) and value >= 0 else None


def fmt_us(value: float) -> str:
    return f"{value:g}"


class CutoffsScreen(ModalScreen[tuple[float, float] | None]):
    """Edit both cutoffs; enter applies, escape cancels."""

    BINDINGS: ClassVar[list[BindingType]] = [Binding("escape", "cancel", "Cancel")]

    def __init__(self, runtime_cutoff: float, launch_delay_cutoff: float) -> None:
        super().__init__()
        self.values = (runtime_cutoff, launch_delay_cutoff)

    def compose(self) -> ComposeResult:
        with Vertical(id="cutoffs-box"):
            yield Static("Cutoffs (us)", classes="picker-title")
            yield Label("runtime outlier: launch call longer than")
            yield Input(fmt_us(self.values[0]), id="runtime-cutoff", type="number")
            yield Label("launch-delay outlier: work waiting longer than")
            yield Input(fmt_us(self.values[1]), id="delay-cutoff", type="number")
            yield Static("enter: apply · tab: next field · escape: cancel", id="cutoffs-note")

    def on_mount(self) -> None:
        self.query_one("#runtime-cutoff", Input).focus()

    @on(Input.Submitted)
    def _submitted(self, event: Input.Submitted) -> None:
        event.stop()
        runtime = parse_cutoff(self.query_one("#runtime-cutoff", Input).value)
        delay = parse_cutoff(self.query_one("#delay-cutoff", Input).value)
        if runtime is None or delay is None:
            self.query_one("#cutoffs-note", Static).update(
                "Each cutoff must be a number of microseconds >= 0."
            )
            return
        self.dismiss((runtime, delay))

    def action_cancel(self) -> None:
        self.dismiss(None)


class LaunchPlot(SafePlot):
    """The launches' chart. Its tick labels are as many as its size has room for
    (`LaunchScreen._draw`), so a new size draws it again: the first draw can come before the
    chart is laid out (the body was loading, and the draw's timer beat the layout on a busy
    machine), which left two ticks on a full-width chart."""

    def on_resize(self) -> None:
        screen = self.screen
        if isinstance(screen, LaunchScreen):
            screen.plot_resized()


class LaunchScreen(AnalysisScreen):
    TITLE = "Kernel launches"
    ANALYSES = ("kernel_launches", "short_gpu_kernels", "runtime_outliers", "launch_delay_outliers")

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("c", "edit_cutoffs", "Cutoffs", tooltip="Edit the outlier cutoffs (us)"),
        TABLE_BINDING,
        Binding("p", "toggle_plot", "Plot", tooltip="CPU vs GPU time, or launch delay over time"),
        Binding("enter", "drill", "Kernel", tooltip="Open the kernel of the row", show=False),
    ]

    def __init__(self, **kw: Any) -> None:
        super().__init__(**kw)
        self.plot_kind = "scatter"
        #: the tick room the chart was last drawn for (`_tick_room`)
        self._drawn_room: tuple[int, int] | None = None

    def on_mount(self) -> None:
        super().on_mount()
        self.app.theme_changed_signal.subscribe(self, lambda _theme: self._draw())

    def default_params(self) -> dict[str, Any]:
        return {"runtime_cutoff": RUNTIME_CUTOFF, "launch_delay_cutoff": LAUNCH_DELAY_CUTOFF}

    def compose_body(self) -> ComposeResult:
        yield TextBlock("", id="launch-summary", classes="summary")
        yield LaunchPlot(id="launch-plot")
        with TabbedContent(id="launch-tabs", initial="short"):
            with TabPane("Short kernels", id="short"):
                yield FrameTable(
                    id="short-table",
                    export_name="short_gpu_kernels",
                    moment=LAUNCH_MOMENT,
                )
            with TabPane("Runtime outliers", id="runtime"):
                yield FrameTable(
                    id="runtime-table",
                    export_name="runtime_outliers",
                    moment=LAUNCH_MOMENT,
                )
            with TabPane("Delay outliers", id="delay"):
                yield FrameTable(
                    id="delay-table",
                    export_name="launch_delay_outliers",
                    moment=LAUNCH_MOMENT,
                )

    # -- computation (worker) ------------------------------------------------------------------
    @staticmethod
    def compute(frames: dict[int, pl.DataFrame], params: Params) -> dict[str, Any]:
        rc = float(params.get("runtime_cutoff", RUNTIME_CUTOFF))
        dc = float(params.get("launch_delay_cutoff", LAUNCH_DELAY_CUTOFF))
        options = registry.Options(runtime_cutoff_us=rc, launch_delay_cutoff_us=dc)
        got = registry.tables(frames, LaunchScreen.ANALYSES, options)
        table = got["kernel_launches"]
        nx, ny = GRID
        # each rank on its own clock: time since the rank's first launch
        timed = table.with_columns(
            ((pl.col("ts") - pl.col("ts").min().over("rank")) / 1e6).alias("time_ms")
        )
        return {
            "ranks": sorted(frames),
            "rc": rc,
            "dc": dc,
            "launches": table.height,
            "short": got["short_gpu_kernels"],
            "runtime": got["runtime_outliers"],
            "delay": got["launch_delay_outliers"],
            "scatter": thin_points(
                table, "cpu_duration", "gpu_duration", nx=nx, ny=ny, log=True
            ).select("cpu_duration", "gpu_duration"),
            "delay_points": thin_points(timed, "time_ms", "launch_delay", nx=nx, ny=ny).select(
                "time_ms", "launch_delay"
            ),
        }

    # -- display (main thread) -----------------------------------------------------------------
    def show(self, result: dict[str, Any]) -> None:
        rc, dc = result["rc"], result["dc"]
        counts = {k: result[k].height for k in TABS}
        for key in TABS:
            frame: pl.DataFrame = result[key]
            shown = frame.select([c for c in SHOWN if c in frame.columns])
            table = self.query_one(f"#{key}-table", FrameTable)
            if "kernel" in shown.columns:  # the short name drawn, the full one kept
                short = fold_names(shown["kernel"], keep=0).alias("name")
                at = shown.columns.index("kernel")
                shown = shown.insert_column(at, short)
                table.hidden_columns = frozenset({"kernel"})
            table.show_frame(shown)
        tabs = self.query_one(TabbedContent)
        tabs.get_tab("short").label = f"Short kernels ({counts['short']:,})"
        tabs.get_tab("runtime").label = f"Call > {fmt_us(rc)} us ({counts['runtime']:,})"
        tabs.get_tab("delay").label = f"Delay > {fmt_us(dc)} us ({counts['delay']:,})"
        summary = self.query_one("#launch-summary", Static)
        if not result["ranks"]:
            summary.update("No trace loaded yet.")
        elif result["launches"] == 0:
            summary.update(
                "No kernel launches in "
                + ("these ranks" if len(result["ranks"]) > 1 else f"rank {result['ranks'][0]}")
                + " (no GPU work launched from the CPU)."
            )
        else:
            summary.update(
                f"{result['launches']:,} launches (durations in us) · c: cutoffs · p: plot · "
                "enter: kernel"
            )
        self.draw_later(self._draw)
        if not isinstance(self.focused, FrameTable):
            self._focus_active_table()

    def _draw(self) -> None:
        result = self.result
        if result is None:
            return
        plot = self.query_one("#launch-plot", PlotextPlot)
        plt = plot.plt
        plt.clear_figure()
        plot.display = result["launches"] > 0
        colour = line_colours(self.app)[0]
        marker = "*" if hta_app(self).ascii else "braille"
        if self.plot_kind == "scatter":
            pts: pl.DataFrame = result["scatter"]
            if not pts.is_empty():
                # log10 taken here: plotext's own log scale re-applies the log to its stored
                # data on every redraw (a resize), which ends in a math domain error
                logs = pts.select(pl.all().cast(pl.Float64).log10())
                plt.scatter(
                    logs["cpu_duration"].to_list(),
                    logs["gpu_duration"].to_list(),
                    color=colour,
                    marker=marker,
                )
                # round values in us at their log10 positions, not the log10 numbers
                # as many as the chart has room for: plotext drops labels that collide, and
                # which ones it drops varies
                self._drawn_room = self._tick_room(plot)
                room = dict(zip(("cpu_duration", "gpu_duration"), self._drawn_room, strict=True))
                for axis, column in ((plt.xticks, "cpu_duration"), (plt.yticks, "gpu_duration")):
                    lo, hi = float(pts[column].min()), float(pts[column].max())
                    values = log_ticks(lo, hi, room[column])
                    axis([math.log10(v) for v in values], [label(v) for v in values])
            plt.xlabel("x: launch call on the CPU (us), y: its GPU work (us); log scales")
        else:
            pts = result["delay_points"]
            if not pts.is_empty():
                plt.scatter(
                    pts["time_ms"].to_list(),
                    pts["launch_delay"].to_list(),
                    color=colour,
                    marker=marker,
                )
            plt.xlabel("launch delay (us) over time (ms since the rank's first launch)")
        plot.refresh()

    @staticmethod
    def _tick_room(plot: SafePlot) -> tuple[int, int]:
        """How many tick labels each axis has room for, at the chart's size now."""
        width, height = plot.size
        return max(2, width // 10), max(2, height // 3)

    def plot_resized(self) -> None:
        """The chart has a new size: drawn again if its ticks were for another room."""
        plot = self.query_one("#launch-plot", SafePlot)
        room = self._tick_room(plot)
        if self.result is not None and self._drawn_room not in (None, room):
            self._draw()

    def _focus_active_table(self) -> None:
        pane = self.query_one(TabbedContent).active_pane
        if pane is not None:
            for table in pane.query(FrameTable):
                table.focus()
                return

    def active_table(self) -> FrameTable | None:
        pane = self.query_one(TabbedContent).active_pane
        return next(iter(pane.query(FrameTable)), None) if pane is not None else None

    # -- actions -------------------------------------------------------------------------------
    def action_next_table(self) -> None:
        tabs = self.query_one(TabbedContent)
        i = TABS.index(tabs.active) if tabs.active in TABS else -1
        tabs.active = TABS[(i + 1) % len(TABS)]
        self._focus_active_table()

    def action_toggle_plot(self) -> None:
        self.plot_kind = PLOTS[(PLOTS.index(self.plot_kind) + 1) % len(PLOTS)]
        self._draw()

    def action_edit_cutoffs(self) -> None:
        def chosen(value: tuple[float, float] | None) -> None:
            if value is not None:
                self.set_params(runtime_cutoff=value[0], launch_delay_cutoff=value[1])

        self.app.push_screen(
            CutoffsScreen(
                float(self.params.get("runtime_cutoff", RUNTIME_CUTOFF)),
                float(self.params.get("launch_delay_cutoff", LAUNCH_DELAY_CUTOFF)),
            ),
            chosen,
        )

    def action_drill(self) -> None:
        table = self.active_table()
        if table is not None:
            self._open_kernel(table)

    @on(FrameTable.RowSelected)
    def _row_selected(self, event: FrameTable.RowSelected) -> None:
        if isinstance(event.view, FrameTable):
            event.stop()
            self._open_kernel(event.view)

    def _open_kernel(self, table: FrameTable) -> None:
        row = table.selected_row()
        name = row.get("kernel") if row else None
        if not name:
            self.notify("No kernel on this row.", severity="warning")
            return
        hta_app(self).show_kernel(name)
