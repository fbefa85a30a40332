"""Screen 6: launch-queue length per stream and memory bandwidth per copy kind over time, for
one rank (HTA's TraceCounters), with their summaries and the export of a trace with counters.

Charts show one rank at a time (every rank at once is unreadable): the picked rank, else the
first. The series are reduced to one maximum per bucket of time in the worker
(`analysis.downsample.step_bucket_max`), so drawing costs the same for any trace size.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any, ClassVar

import polars as pl
from textual import work
from textual.app import App, ComposeResult
from textual.binding import Binding, BindingType
from textual.color import Color
from textual.widgets import Static, TabbedContent, TabPane
from textual_plotext import PlotextPlot

from hta_tui.analysis import memory, queue, registry
from hta_tui.analysis.counters_export import write_counters_trace
from hta_tui.analysis.downsample import step_bucket_max
from hta_tui.app.access import hta_app
from hta_tui.app.screens.base import AnalysisScreen, Params
from hta_tui.app.widgets.frame_table import FrameTable
from hta_tui.app.widgets.picker import Choices, Picker
from hta_tui.app.widgets.plot import SafePlot
from hta_tui.app.widgets.text_line import TextBlock
from hta_tui.trace.model import TraceSet

#: Time buckets per chart: about one per braille pixel column of a wide terminal.
BUCKETS = 240
#: The charts' time axis: from the trace's start, the origin of the timeline, kernel detail,
#: idle gaps and syncs (one number per moment on every screen).
X_LABEL = "ms from the trace's start"
#: Streams drawn when the user has not picked any: the busiest (most launches).
DEFAULT_STREAMS = 3
#: Theme colours the chart lines take, in order.
LINE_COLOURS = ("primary", "warning", "success", "error", "secondary", "accent")


def line_colours(app: App[Any]) -> list[tuple[int, int, int]]:
    """RGB of the theme's accent colours, for chart lines (no raw colours)."""
    variables = app.theme_variables
    out = []
    for name in LINE_COLOURS:
        value = variables.get(name)
        if value:
            try:
                out.append(Color.parse(value).rgb)
            except Exception:
                continue
    return out or [(128, 128, 128)]


def counters_name(src: Path) -> str:
    """rank0.json.gz -> rank0_with_counters.json.gz (HTA's name), gzipped like the source."""
    name = src.name
    for ext in (".json.gz", ".json"):
        if name.endswith(ext):
            name = name[: -len(ext)]
            break
    gz = src.name.endswith(".gz")
    return f"{name}_with_counters.json{'.gz' if gz else ''}"


class StreamPicker(Picker):
    """Tick the streams to draw (space toggles, enter applies, escape cancels)."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("enter", "apply", "Apply", priority=True),
    ]

    def __init__(self, streams: list[tuple[int, int]], chosen: list[int]) -> None:
        options = [(f"stream {s}  ({n:,} launch{'' if n == 1 else 'es'})", s) for s, n in streams]
        super().__init__(
            "Streams to draw",
            [Choices(options, chosen, id="stream-options")],
            box_id="stream-picker",
            hint="space: toggle · enter: apply · escape: cancel",
            multiple=True,
        )
        self.streams = streams  # (stream, launches)


class TimelinesScreen(AnalysisScreen):
    TITLE = "Timelines"
    ANALYSES = ("queue_length_time_series", "memory_bw_time_series")

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("p", "pick_streams", "Streams", tooltip="Pick the streams to draw"),
        Binding("v", "next_view", "View", tooltip="Switch queue length / memory bandwidth"),
        Binding("x", "export_counters", "Counters", tooltip="Write the trace with counters"),
    ]

    def __init__(self, **kw: Any) -> None:
        super().__init__(**kw)
        #: streams the user picked (None: the busiest DEFAULT_STREAMS)
        self.streams: list[int] | None = None
        self.last_export: Path | None = None

    def compose_body(self) -> ComposeResult:
        with TabbedContent(id="timeline-tabs", initial="queue-pane"):
            with TabPane("Queue length", id="queue-pane"):
                yield SafePlot(id="queue-plot", classes="timeline-plot")
                yield TextBlock("", id="queue-note", classes="plot-note")
                yield FrameTable(
                    id="queue-summary", key_column="stream", export_name="queue_length_summary"
                )
                yield TextBlock("", id="blocked-note", classes="plot-note")
                yield FrameTable(
                    id="queue-blocked", key_column="stream", export_name="queue_full_time"
                )
            with TabPane("Memory bandwidth", id="memory-pane"):
                yield SafePlot(id="memory-plot", classes="timeline-plot")
                yield TextBlock("", id="memory-note", classes="plot-note")
                yield FrameTable(
                    id="memory-summary", key_column="name", export_name="memory_bw_summary"
                )

    def on_mount(self) -> None:
        super().on_mount()
        self.app.theme_changed_signal.subscribe(self, lambda _theme: self._draw())

    # -- rank ----------------------------------------------------------------------------------
    def shown_rank(self) -> int | None:
        """The rank the charts are for: the picked one, else the first loaded."""
        if self.params.rank is not None:
            return self.params.rank
        ranks = sorted(self.trace_set.loaded())
        return ranks[0] if ranks else None

    def _title_text(self) -> str:
        return self._with_scope(self._where_one(self.shown_rank()))

    # -- computation (worker) ------------------------------------------------------------------
    def compute_on(self, ts: TraceSet, frames: dict[int, pl.DataFrame], params: Params) -> Any:
        """Times from the trace set's start, as the timeline's and kernel detail's."""
        return self.compute(
            frames, replace(params, extra={**params.extra, "origin_ns": ts.origin_ns})
        )

    @staticmethod
    def compute(frames: dict[int, pl.DataFrame], params: Params) -> dict[str, Any]:
        if not frames:
            return {"rank": None}
        rank = params.rank if params.rank in frames else min(frames)
        events = frames[rank]
        one = {rank: events}
        series = registry.tables(one, ["queue_length_time_series", "memory_bw_time_series"])
        q_series, m_series = series["queue_length_time_series"], series["memory_bw_time_series"]
        out: dict[str, Any] = {
            "rank": rank,
            "queue_summary": queue.queue_length_summary_from_series(q_series),
            "blocked": queue.time_blocked_on_full_queue(one, series=q_series),
            "memory_summary": memory.memory_bw_summary_from_series(m_series),
        }
        timed = events.filter(pl.col("ts").is_not_null())
        t0 = timed["ts"].min() if not timed.is_empty() else None
        t1 = (
            timed.select((pl.col("ts") + pl.col("dur").fill_null(0)).max()).item()
            if t0 is not None
            else None
        )
        if t0 is None or t1 is None:
            t0, t1 = 0, 0
        t1 = max(int(t1), int(t0)) + 1
        out["t0"], out["t1"] = int(t0), t1
        # the x axis: from the trace's start (every rank's first event), the timeline's origin
        out["origin"] = int(params.get("origin_ns") or t0)
        out["queue_plot"] = step_bucket_max(
            q_series, value="queue_length", by=["stream"], t0=t0, t1=t1, buckets=BUCKETS
        )
        out["memory_plot"] = step_bucket_max(
            m_series, value="memory_bw_gbps", by=["name"], t0=t0, t1=t1, buckets=BUCKETS
        )
        # streams by number of launches (the series has a +1 and a -1 per launch)
        out["streams"] = [
            (int(s), int(c) // 2)
            for s, c in out["queue_summary"]
            .sort(["count", "stream"], descending=[True, False])
            .select("stream", "count")
            .iter_rows()
        ]
        return out

    # -- display (main thread) -----------------------------------------------------------------
    def show(self, result: dict[str, Any]) -> None:
        self.query_one("#screen-title", Static).update(self._title_text())
        if result.get("rank") is None:
            for table in self.query(FrameTable):
                table.show_frame(pl.DataFrame())
            self._draw()
            return
        self.query_one("#queue-summary", FrameTable).show_frame(result["queue_summary"])
        blocked: pl.DataFrame = result["blocked"]
        blocked_table = self.query_one("#queue-blocked", FrameTable)
        blocked_table.show_frame(blocked)
        blocked_table.display = not blocked.is_empty()
        note = (
            f"Time blocked on a full queue (>= {queue.CUDA_MAX_LAUNCH_QUEUE_PER_STREAM} launches):"
            if not blocked.is_empty()
            else f"No stream reached the full queue ({queue.CUDA_MAX_LAUNCH_QUEUE_PER_STREAM} "
            "launches): the CPU never waited on it."
        )
        self.query_one("#blocked-note", Static).update(note)
        self.query_one("#memory-summary", FrameTable).show_frame(result["memory_summary"])
        self.draw_later(self._draw)
        if self.focused is None or not isinstance(self.focused, FrameTable):
            self._focus_pane_table()

    def _focus_pane_table(self) -> None:
        pane = self.query_one(TabbedContent).active_pane
        if pane is not None:
            tables = [t for t in pane.query(FrameTable) if t.display]
            if tables:
                tables[0].focus()

    def picked_streams(self) -> list[int]:
        """The streams drawn: the user's (those this rank has), else the busiest three."""
        result = self.result or {}
        available = [s for s, _ in result.get("streams", [])]
        chosen = [s for s in (self.streams or []) if s in available]
        return chosen or available[:DEFAULT_STREAMS]

    def _draw(self) -> None:
        result = self.result
        if result is None or not self.is_mounted:
            return
        rank = result.get("rank")
        colours = line_colours(self.app)
        marker = "*" if hta_app(self).ascii else "braille"
        q_plot = self.query_one("#queue-plot", PlotextPlot)
        m_plot = self.query_one("#memory-plot", PlotextPlot)
        q_note = self.query_one("#queue-note", Static)
        m_note = self.query_one("#memory-note", Static)
        for plot in (q_plot, m_plot):
            plot.plt.clear_figure()
        if rank is None:
            q_plot.display = m_plot.display = False
            gone = self.params.rank
            text = (
                "No trace loaded yet."
                if gone is None
                else f"Rank {gone} is not loaded any more: r picks another."
            )
            q_note.update(text)
            m_note.update(text)
            return
        t0 = result.get("origin", result["t0"])
        streams = self.picked_streams()
        series: pl.DataFrame = result["queue_plot"]
        q_plot.display = bool(streams)
        if not streams:
            q_note.update(f"Rank {rank} launched no GPU work: there is no launch queue to show.")
        else:
            plt = q_plot.plt
            for i, stream in enumerate(streams):
                rows = series.filter(pl.col("stream") == stream)
                x = ((rows["ts"] - t0) / 1e6).to_list()
                plt.plot(
                    x,
                    rows["queue_length"].to_list(),
                    label=f"stream {stream}",
                    color=colours[i % len(colours)],
                    marker=marker,
                )
            plt.xlabel(X_LABEL)
            total = len(result["streams"])
            which = "picked" if self.streams else f"busiest {min(DEFAULT_STREAMS, total)}"
            q_note.update(
                f"Max queue length per time bucket · streams {', '.join(map(str, streams))} "
                f"({which} of {total}; p: pick)"
            )
        q_plot.refresh()
        mem: pl.DataFrame = result["memory_plot"]
        kinds = mem["name"].unique(maintain_order=True).to_list() if not mem.is_empty() else []
        m_plot.display = bool(kinds)
        if not kinds:
            m_note.update(f"Rank {rank} has no memcpy or memset: no memory bandwidth to show.")
        else:
            plt = m_plot.plt
            for i, kind in enumerate(kinds):
                rows = mem.filter(pl.col("name") == kind)
                plt.plot(
                    ((rows["ts"] - t0) / 1e6).to_list(),
                    rows["memory_bw_gbps"].to_list(),
                    label=kind,
                    color=colours[i % len(colours)],
                    marker=marker,
                )
            plt.xlabel(X_LABEL)
            m_note.update("Max memory bandwidth (GB/s) per time bucket, per kind of copy")
        m_plot.refresh()

    # -- actions -------------------------------------------------------------------------------
    def action_next_view(self) -> None:
        tabs = self.query_one(TabbedContent)
        tabs.active = "memory-pane" if tabs.active == "queue-pane" else "queue-pane"
        self._focus_pane_table()

    def action_pick_streams(self) -> None:
        result = self.result or {}
        streams = result.get("streams") or []
        if not streams:
            self.notify("This rank has no streams with launched work.", severity="warning")
            return

        def chosen(value: list[int] | None) -> None:
            if value is None:
                return
            self.streams = value or None
            self._draw()

        self.app.push_screen(StreamPicker(streams, self.picked_streams()), chosen)

    def action_export_counters(self) -> None:
        result = self.result or {}
        rank = result.get("rank")
        entry = self.trace_set.selected(rank) if rank is not None else None
        if entry is None or entry.data is None:
            self.notify("No loaded rank to export.", severity="warning")
            return
        export_dir = hta_app(self).export_dir
        target = export_dir / counters_name(entry.path)
        n = 1
        while target.exists():
            n += 1
            stem = counters_name(entry.path).replace("_with_counters", f"_with_counters-{n}")
            target = export_dir / stem
        self.notify(f"Writing rank {rank} with counters…", title="Export")
        self._export(entry.path, entry.data, target, rank)

    @work(thread=True, group="export", exit_on_error=False)
    def _export(self, src: Path, data: Any, target: Path, rank: int) -> None:
        try:
            written = write_counters_trace(src, data.events, target, rank=rank)
        except Exception as exc:
            self.app.call_from_thread(
                self.notify, f"{type(exc).__name__}: {exc}", title="Export failed", severity="error"
            )
            return

        def done() -> None:
            self.last_export = written.path
            self.notify(
                f"rank {rank}: {written.queue_length:,} queue and {written.memory_bw:,} "
                f"bandwidth counters written to {written.path}",
                title="Exported",
            )

        self.app.call_from_thread(done)
