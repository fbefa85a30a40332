"""Screen m: memory. One device of one rank: allocated and reserved memory over time (the
TensorBoard plugin's curve) with its peak marked and the profiler steps as vertical lines, and
below it what is alive at the peak, the memory events and the per-operator statistics.

`+` zooms in around the peak of the view, `-` out, `[` / `]` move the view, `z` shows it all:
the tables then cover the view only (events and statistics inside it, what is alive at its
peak). `d` cycles the devices, `r` the ranks (memory events are per file, so one rank at a time).
"""

from __future__ import annotations

import logging
from typing import Any, ClassVar

import polars as pl
from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.message import Message
from textual.widgets import Static, TabbedContent, TabPane
from textual.worker import get_current_worker

from hta_tui.analysis import registry
from hta_tui.analysis.checkpoint import checkpoint
from hta_tui.analysis.memory_window import MemoryWindow, from_tables, pan, zoom
from hta_tui.app.access import hta_app
from hta_tui.app.environment import one_line
from hta_tui.app.foreground import Superseded
from hta_tui.app.moment import MomentColumns
from hta_tui.app.screens.base import (
    TABLE_BINDING,
    AnalysisScreen,
    Computed,
    ComputeFailed,
    Params,
)
from hta_tui.app.screens.timelines import X_LABEL, line_colours
from hta_tui.app.widgets.frame_table import FrameTable
from hta_tui.app.widgets.plot import SafePlot
from hta_tui.app.widgets.text_line import TextBlock
from hta_tui.trace.model import TraceSet

ZOOM = 0.5


class CurveReady(Message):
    """The curve of the window, before its tables (see `MemoryScreen._compute`)."""

    def __init__(self, window: MemoryWindow, params: Params) -> None:
        super().__init__()
        self.window = window
        self.params = params


TABS = ("memory-peak-pane", "memory-events-pane", "memory-stats-pane")

LIVE_COLUMNS = ("operator", "module", "live_mb", "share_of_peak_pct", "allocations", "stack")
EVENT_COLUMNS = ("operator", "size_kb", "allocation_ms", "release_ms", "duration_ms", "status")
#: `t` on an event: its allocation (ms from the trace's start, the timeline's origin, as the
#: curve) inside its operator.
EVENT_MOMENT = MomentColumns("allocation_ms", unit="ms", base="job", dur="duration_ms", side="cpu")
STAT_COLUMNS = (
    "operator",
    "calls",
    "size_increase_kb",
    "self_size_increase_kb",
    "allocation_count",
    "allocation_size_kb",
)


class MemoryScreen(AnalysisScreen):
    TITLE = "Memory"
    STEPS = "whole trace"

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("plus,equals_sign", "zoom_in", "Zoom", key_display="+"),
        Binding("minus", "zoom_out", "Out", key_display="-"),
        Binding("left_square_bracket", "pan(-0.5)", "Earlier", key_display="["),
        Binding("right_square_bracket", "pan(0.5)", "Later", key_display="]"),
        Binding("z", "reset_zoom", "All"),
        Binding("d", "next_device", "Device"),
        TABLE_BINDING,
    ]

    def default_params(self) -> dict[str, Any]:
        return {"device": None, "view": None}

    def compose_body(self) -> ComposeResult:
        yield TextBlock("", id="memory-headline", classes="plot-note")
        yield SafePlot(id="memory-curve")
        with TabbedContent(id="memory-tabs", initial=TABS[0]):
            with TabPane("At the peak", id=TABS[0]):
                yield FrameTable(id="memory-live", key_column="operator", export_name="memory_peak")
            with TabPane("Events", id=TABS[1]):
                yield FrameTable(
                    id="memory-events", export_name="memory_events", moment=EVENT_MOMENT
                )
            with TabPane("Operators", id=TABS[2]):
                yield FrameTable(
                    id="memory-stats", key_column="operator", export_name="memory_stats"
                )

    def on_mount(self) -> None:
        super().on_mount()
        self.app.theme_changed_signal.subscribe(self, lambda _theme: self._draw())

    # -- computation (worker) ------------------------------------------------------------------
    #: The registry's memory window (analysis/registry.py): the view (device, time range)
    #: is the analysis's options and the rank the one frame given, so a zoom key asks the
    #: one door again.
    ANALYSES = (
        "memory_window",
        "memory_window_summary",
        "memory_window_steps",
        "memory_window_peak",
        "memory_window_events",
        "memory_window_stats",
    )
    #: The curve's tables: drawn first (they need no operator attribution).
    CURVE = ANALYSES[:3]

    @staticmethod
    def window_options(params: Params, origin_ns: int | None) -> registry.Options:
        """The view as the analysis's options: times from the trace's start (`origin_ns`,
        the timeline's origin)."""
        view = params.get("view")
        return registry.Options(
            window_device=params.get("device") or "",
            window_start_ms=view[0] if view else -1,
            window_end_ms=view[1] if view else -1,
            origin_ns=-1 if origin_ns is None else origin_ns,
        )

    @staticmethod
    def compute_memory(
        events: dict[int, pl.DataFrame],
        memory: dict[int, pl.DataFrame],
        params: Params,
        origin_ns: int | None = None,
        names: tuple[str, ...] = ANALYSES,
    ) -> dict[str, Any]:
        """The screen's result: the window's tables (`names`: the curve's only, first) from
        the registry, of the rank chosen (else the first with memory events): memory events
        are per file, and only the rank shown has its events attributed."""
        have = [r for r in sorted(memory) if r in events and not memory[r].is_empty()]
        rank = params.rank if params.rank in have else (have[0] if have else None)
        options = MemoryScreen.window_options(params, origin_ns)
        got = registry.tables(
            {rank: events[rank]} if rank is not None else {},
            names,
            options,
            frames=lambda f: {"memory": memory}.get(f, {}),
        )
        window = from_tables(got)
        if window is None or rank is None:
            return {"rank": None}
        if not window.events.is_empty():
            # a table of half a million allocations: names as categories, so `/` filters
            # them on the UI thread in milliseconds (FrameTable matches the few distinct names)
            cats = [c for c in ("operator", "status") if c in window.events.columns]
            window.events = window.events.with_columns(pl.col(cats).cast(pl.Categorical))
        return {"rank": rank, "window": window, "ranks": len(have)}

    def compute_on(self, ts: TraceSet, frames: dict[int, pl.DataFrame], params: Params) -> Any:
        return self.compute_memory(ts.frames(), ts.frames("memory"), params, ts.origin_ns)

    @work(thread=True, exclusive=True, group="screen", exit_on_error=False)
    def _compute(self, ts: TraceSet, params: Params) -> None:
        """As the base's, with the memory frames besides the events, and the curve posted
        first: it needs no operator attribution, the tables do."""
        worker = get_current_worker()
        try:
            with self.giving_way(worker):  # the view on screen first (app/foreground.py)
                events, memory = ts.frames(), ts.frames("memory")
                first = self.compute_memory(events, memory, params, ts.origin_ns, self.CURVE)
                if first.get("window") is not None:
                    checkpoint()
                    self.post_message(CurveReady(first["window"], params))
                result = self.compute_memory(events, memory, params, ts.origin_ns)
        except Superseded:
            return
        except Exception as exc:  # said on the screen, instead of loading forever
            logging.getLogger("hta_tui").exception("%s failed", self.TITLE)
            self.post_message(ComputeFailed(one_line(exc), ts.generation, params))
            return
        if not worker.is_cancelled:
            rank = result.get("rank")
            shown = {rank: events[rank]} if rank is not None else {}
            scope = self._scope(ts, shown, every=False)
            self.post_message(Computed(result, ts.generation, params, scope))

    @on(CurveReady)
    def _curve_ready(self, msg: CurveReady) -> None:
        msg.stop()
        if msg.params == self.params:
            self.query_one("#body").loading = False  # the tables fill in when they land
            self.query_one("#memory-headline", Static).update(_summary(msg.window))
            self._draw_window(msg.window)

    # -- display (main thread) -----------------------------------------------------------------
    def _title_text(self) -> str:
        result = self.result if isinstance(self.result, dict) else {}
        if self.result is not None and result.get("rank") is None:
            return f"{self.TITLE}  ·  no rank has memory events"
        rank = result.get("rank", self.params.rank)
        have = result.get("ranks")
        where = (
            f"{self.TITLE}  ·  first rank with memory events"
            if rank is None
            else self._where_one(rank, "first with memory events", of=have)
        )
        return self._with_scope(where)

    def show(self, result: dict[str, Any]) -> None:
        self.query_one("#screen-title", Static).update(self._title_text())
        window: MemoryWindow | None = result.get("window")
        summary = self.query_one("#memory-headline", Static)
        tables = {
            "#memory-live": ("live", LIVE_COLUMNS),
            "#memory-events": ("events", EVENT_COLUMNS),
            "#memory-stats": ("stats", STAT_COLUMNS),
        }
        if window is None:
            summary.update(
                "No memory events: record with torch.profiler.profile(profile_memory=True)."
            )
            for selector in tables:
                self.query_one(selector, FrameTable).show_frame(pl.DataFrame())
            self._draw()
            return
        rank = pl.lit(result["rank"]).alias("rank")  # not drawn: the rank, for `t`
        self.query_one("#memory-events", FrameTable).hidden_columns = frozenset({"rank"})
        for selector, (attr, columns) in tables.items():
            frame: pl.DataFrame = getattr(window, attr).select(columns)
            if selector == "#memory-events":
                frame = frame.with_columns(rank)
            table = self.query_one(selector, FrameTable)
            table.max_text = self.text_room(44)  # the sizes beside the operator at 80 columns
            table.show_frame(frame)
        summary.update(_summary(window))
        self.draw_later(self._draw)

    def _draw(self) -> None:
        if self.is_mounted:
            self._draw_window((self.result or {}).get("window"))

    def _draw_window(self, window: MemoryWindow | None) -> None:
        plot = self.query_one("#memory-curve", SafePlot)
        plt = plot.plt
        plt.clear_figure()
        plot.display = window is not None and not window.curve.is_empty()
        if window is None or window.curve.is_empty():
            return
        colours = line_colours(self.app)
        marker = "*" if hta_app(self).ascii else "braille"
        x = window.curve["time_ms"].to_list()
        plt.plot(
            x,
            window.curve["reserved_mb"].to_list(),
            label="reserved",
            color=colours[1 % len(colours)],
            marker=marker,
        )
        plt.plot(
            x,
            window.curve["allocated_mb"].to_list(),
            label="allocated",
            color=colours[0],
            marker=marker,
        )
        for _, start in window.steps:
            plt.vline(start, colours[2 % len(colours)])
        if window.peak is not None:
            plt.scatter(
                [window.peak["peak_time_ms"]],
                [window.peak["peak_allocated_mb"]],
                marker="x" if marker == "*" else "●",
                color=colours[3 % len(colours)],
            )
        plt.xlim(*window.view)
        plt.xlabel(X_LABEL)
        plot.refresh()

    # -- actions -------------------------------------------------------------------------------
    def _window(self) -> MemoryWindow | None:
        return (self.result or {}).get("window")

    def action_zoom_in(self) -> None:
        w = self._window()
        if w is not None:
            at = w.peak["peak_time_ms"] if w.peak else sum(w.view) / 2
            self.set_params(view=zoom(w.view, w.full, ZOOM, at))

    def action_zoom_out(self) -> None:
        w = self._window()
        if w is not None:
            view = zoom(w.view, w.full, 1 / ZOOM, sum(w.view) / 2)
            self.set_params(view=None if view == w.full else view)

    def action_pan(self, by: float) -> None:
        w = self._window()
        if w is not None and w.view != w.full:
            self.set_params(view=pan(w.view, w.full, by))

    def action_reset_zoom(self) -> None:
        self.set_params(view=None)

    def action_next_device(self) -> None:
        w = self._window()
        if w is None or len(w.devices) < 2:
            self.notify("Only one device has memory events here.")
            return
        nxt = w.devices[(w.devices.index(w.device) + 1) % len(w.devices)] if w.device else None
        self.set_params(device=nxt, view=None)

    def action_next_table(self) -> None:
        tabs = self.query_one(TabbedContent)
        tabs.active = (
            TABS[(TABS.index(tabs.active) + 1) % len(TABS)] if tabs.active in TABS else TABS[0]
        )

    @on(TabbedContent.TabActivated)
    def _tab_shown(self) -> None:
        pane = self.query_one(TabbedContent).active_pane
        if pane is not None:
            for table in pane.query(FrameTable):
                table.focus()


def _summary(w: MemoryWindow) -> str:
    """One line at 80 columns: device, the view's peak, the view."""
    view = "all" if w.view == w.full else f"{w.view[0]:.2f}-{w.view[1]:.2f}/{w.full[1]:.2f} ms"
    devices = f" (d: {len(w.devices)})" if len(w.devices) > 1 else ""
    if w.peak is None and w.no_curve is not None:
        return f"{w.device}{devices} · {w.no_curve}"
    if w.peak is None:
        return f"{w.device}{devices} · no memory event in view · view {view}"
    p = w.peak
    return (
        f"{w.device}{devices} · peak {p['peak_allocated_mb']:.1f} MB @ {p['peak_time_ms']:.2f} ms"
        f" · reserved {p['peak_reserved_mb']:.1f} MB · view {view}"
    )
