"""Screen 4: one kernel up close - how its duration spreads over ranks and over time, and which
operators launch it, with what delay, on which streams.

The kernel is `params.extra["name"]` (set by enter on the kernels screen through
`app.show_kernel`), else `app.selected_kernel`, else the kernel with the largest total time
(the screen says so). Charts are pre-aggregated in `compute` (30 histogram bins, at most 300
points over time) and live in tabs so each gets the room an 80x24 terminal has.
"""

from __future__ import annotations

import math
from dataclasses import replace
from functools import partial
from typing import Any, ClassVar

import polars as pl
from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.color import Color
from textual.widgets import Static, TabbedContent, TabPane
from textual_plotext import PlotextPlot

from hta_tui.analysis import registry
from hta_tui.analysis.names import fold_name
from hta_tui.app.access import hta_app
from hta_tui.app.moment import MomentColumns
from hta_tui.app.screens.base import TABLE_BINDING, AnalysisScreen, Params
from hta_tui.app.widgets.frame_table import FrameTable, RankSummary
from hta_tui.app.widgets.plot import SafePlot
from hta_tui.app.widgets.text_line import TextBlock
from hta_tui.app.widgets.ticks import label, linear_ticks
from hta_tui.printable import printable
from hta_tui.trace.model import TraceSet

TABS = ("tab-ranks", "tab-hist", "tab-time", "tab-runs", "tab-launch")

#: `t` on a run: that kernel instance (its correlation; `ts` is ns as written, not drawn).
RUN_MOMENT = MomentColumns("ts", unit="ns", base="abs", correlation="correlation")


#: One marker per rank in the time chart (with its colour), so ranks differ without colour.
RANK_MARKERS = ("•", "x", "+", "o", "*", "#", "@", "%")
RANK_MARKERS_ASCII = ("o", "x", "+", "*", "#", "@", "%", "&")
#: Ranks named in the time chart's legend (a legend of 64 ranks covers the chart).
LEGEND_RANKS = 8
#: The time chart's colours, a rank's by its place among the ranks (with its marker).
RANK_COLOURS = ("primary", "warning", "success", "error", "accent", "secondary")


def rank_series(occ: pl.DataFrame, styles: int) -> pl.DataFrame:
    """The time chart's series, in the order drawn: one per rank named in the legend (the
    first `LEGEND_RANKS`), then the other ranks together by the style each would have on its
    own (the `i`-th rank's is `i % styles`; `styles` a multiple of the markers' and colours'
    counts, so each keeps its marker and colour). One scatter and one filter per rank on the
    UI thread held the Kernel detail view's numbers 0.1 s at 1,000 ranks; now at most
    `LEGEND_RANKS + styles` series, the same points in the same styles. Columns: `named`
    (the rank, or null), `style`, and the points' `time (ms)` and `dur (us)` as lists."""
    ranks = occ["rank"].unique().sort()
    index = pl.DataFrame({"rank": ranks, "i": pl.int_range(ranks.len(), eager=True)})
    return (
        occ.join(index, on="rank", how="left")
        .with_columns(
            style=pl.col("i") % styles,
            named=pl.when(pl.col("i") < LEGEND_RANKS).then(pl.col("rank")),
        )
        .group_by("named", "style", maintain_order=True)
        .agg(pl.col("i").min().alias("first"), pl.col("time (ms)"), pl.col("dur (us)"))
        .sort("first")
        .select("named", "style", "time (ms)", "dur (us)")
    )


class KernelDetailScreen(AnalysisScreen):
    full_name = False  # `n`: the full name, wrapped, instead of the short one
    TITLE = "Kernel detail"
    ANALYSES = (
        "kernel_detail",
        "kernel_duration_summary",
        "kernel_duration_histogram",
        "kernel_occurrences",
        "kernel_launchers",
        "kernel_streams",
        "kernel_runs",
    )

    BINDINGS: ClassVar[list[BindingType]] = [
        TABLE_BINDING,
        Binding("escape", "back", "Back", show=True),
        Binding("n", "toggle_name", "Full name", tooltip="The kernel's full name or short one"),
    ]

    def default_params(self) -> dict[str, Any]:
        return {"name": None}

    def compose_body(self) -> ComposeResult:
        yield TextBlock("", id="detail-name")
        yield TextBlock("", id="detail-summary", classes="summary")
        with TabbedContent(id="detail-tabs", initial="tab-ranks"):
            with TabPane("Ranks", id="tab-ranks"):
                yield SafePlot(id="ranks-plot")
                yield FrameTable(
                    id="rank-table",
                    key_column="rank",
                    export_name="kernel_ranks",
                    ranks=RankSummary(worst="mean"),
                )
            with TabPane("Histogram", id="tab-hist"):
                yield SafePlot(id="hist-plot")
            with TabPane("Over time", id="tab-time"):
                yield SafePlot(id="time-plot")
            with TabPane("Longest runs", id="tab-runs"):
                yield FrameTable(id="runs-table", export_name="kernel_runs", moment=RUN_MOMENT)
            with TabPane("Launched by", id="tab-launch"):
                yield FrameTable(
                    id="launchers-table", key_column="operator", export_name="kernel_launchers"
                )
                yield Static(
                    "Delay: kernel start - launch end; op delay: launch start - op start (us)",
                    classes="detail-note",
                )
                yield FrameTable(id="streams-table", export_name="kernel_streams")

    def set_params(self, **changes: Any) -> None:
        if not self.is_mounted:
            # The first drill-down calls this before the screen is composed: keep the
            # parameters; mounting computes with them.
            rank = changes.pop("rank", self.params.rank)
            extra = {**self.params.extra, **changes}
            self.params = replace(self.params, rank=rank, extra=extra)
            return
        super().set_params(**changes)

    def on_screen_resume(self) -> None:
        chosen = hta_app(self).selected_kernel
        if chosen and chosen != self.params.get("name"):
            self.set_params(name=chosen)
        super().on_screen_resume()

    #: The tables of the tabs not shown first (who launched it, its longest runs) come after
    #: the numbers: they join every run to its launch on every rank, which cost more than
    #: the rest of the view together (issue 27: the numbers within 1 s of the key).
    LATER = True
    LATER_TABLES = ("kernel_launchers", "kernel_runs")

    def compute_on(self, ts: TraceSet, frames: dict[int, pl.DataFrame], params: Params) -> Any:
        """Run times count from the trace set's start, as the timeline's do."""
        return self.numbers(frames, params, ts.origin_ns)

    def compute_later(
        self, ts: TraceSet, frames: dict[int, pl.DataFrame], params: Params, result: Any
    ) -> dict[str, pl.DataFrame] | None:
        return self.later(frames, result, ts.origin_ns)

    def show_later(self, result: dict[str, Any], later: dict[str, pl.DataFrame] | None) -> None:
        if later is None:
            return
        self.result = {**result, **later}
        self.query_one("#launchers-table", FrameTable).show_frame(later["launchers"])
        self.query_one("#runs-table", FrameTable).show_frame(later["runs"])

    @staticmethod
    def compute(
        frames: dict[int, pl.DataFrame], params: Params, origin_ns: int | None = None
    ) -> dict[str, Any]:
        """The whole view: its numbers and the tables shown after them."""
        result = KernelDetailScreen.numbers(frames, params, origin_ns)
        return {**result, **(KernelDetailScreen.later(frames, result, origin_ns) or {})}

    @staticmethod
    def later(
        frames: dict[int, pl.DataFrame], result: dict[str, Any], origin_ns: int | None = None
    ) -> dict[str, pl.DataFrame] | None:
        """Who launched the kernel `result` shows, and its longest runs (None: no kernel)."""
        if result.get("name") is None:
            return None
        options = registry.Options(
            kernel_name=result["name"], origin_ns=-1 if origin_ns is None else origin_ns
        )
        got = registry.tables(frames, KernelDetailScreen.LATER_TABLES, options)
        return {"launchers": got["kernel_launchers"], "runs": got["kernel_runs"]}

    @staticmethod
    def numbers(
        frames: dict[int, pl.DataFrame], params: Params, origin_ns: int | None = None
    ) -> dict[str, Any]:
        """The kernel's numbers: its ranks, histogram, runs over time and streams (the
        first tab and the summary line); its launchers and longest runs empty (`later`)."""
        options = registry.Options(
            kernel_name=params.get("name") or "",
            origin_ns=-1 if origin_ns is None else origin_ns,
        )
        first = [a for a in KernelDetailScreen.ANALYSES if a not in KernelDetailScreen.LATER_TABLES]
        got = registry.tables(frames, first, options)
        chosen = got["kernel_detail"]
        name = chosen["name"][0] if not chosen.is_empty() else None
        auto = not params.get("name")
        if name is None:
            return {"name": None, "auto": True}
        summary, hist = got["kernel_duration_summary"], got["kernel_duration_histogram"]
        bins = (
            hist.group_by("bin")
            .agg(pl.col("bin_start").first(), pl.col("bin_end").first(), pl.col("count").sum())
            .sort("bin")
        )
        return {
            "name": name,
            "auto": auto,
            "summary": summary,
            "bins": bins,
            "occurrences": got["kernel_occurrences"],
            "launchers": pl.DataFrame(),
            "streams": got["kernel_streams"],
            "runs": pl.DataFrame(),
            "ranks": sorted(frames),
        }

    # -- showing -----------------------------------------------------------------------------
    def _show_name(self, name: str) -> None:
        """The short name on one line (template arguments folded), or with `n` the full
        name on as many lines as it takes."""
        title = self.query_one("#detail-name", Static)
        short = fold_name(name)
        full = self.full_name or short == name
        title.styles.max_height = None if full else 1
        if full:
            title.update(Text(printable(name), style="bold"))
            return
        text = Text(no_wrap=True, overflow="ellipsis")
        text.append(printable(short), style="bold")
        text.append("  (n: full name)", style="dim")
        title.update(text)

    def action_toggle_name(self) -> None:
        self.full_name = not self.full_name
        if isinstance(self.result, dict) and self.result.get("name"):
            self._show_name(self.result["name"])

    def _colour(self, var: str) -> tuple[int, int, int]:
        value = self.app.theme_variables.get(var) or self.app.theme_variables["foreground"]
        return Color.parse(value).rgb

    def show(self, result: dict[str, Any]) -> None:
        name = result["name"]
        title = self.query_one("#detail-name", Static)
        summary_line = self.query_one("#detail-summary", Static)
        tabs = self.query_one(TabbedContent)
        if name is None:
            title.update("No kernel to show")
            summary_line.update("No GPU kernels in these ranks (a CPU-only trace?).")
            tabs.display = False
            return
        self._show_name(name)
        summary: pl.DataFrame = result["summary"]
        if summary.is_empty():
            where = "these ranks" if self.params.rank is None else f"rank {self.params.rank}"
            summary_line.update(f"This kernel did not run on {where} (r: pick another rank).")
            tabs.display = False
            return
        tabs.display = True
        streams: pl.DataFrame = result["streams"]
        count = int(summary["count"].sum())
        total = float(streams["sum us"].sum())
        stream_ids = ", ".join(str(s) for s in streams["stream"].unique().sort().to_list())
        plural = "s" if streams["stream"].n_unique() != 1 else ""
        line = (
            f"{count:,} runs on {summary.height} rank{'s' if summary.height != 1 else ''}, "
            f"{total:,.1f} us in all, mean {total / count:,.2f} us; stream{plural} {stream_ids}"
        )
        if result["auto"]:
            line += "  (no kernel picked: the one with the largest total time; K: pick one)"
        summary_line.update(line)
        self.query_one("#rank-table", FrameTable).show_frame(summary)
        self.query_one("#launchers-table", FrameTable).show_frame(result["launchers"])
        self.query_one("#streams-table", FrameTable).show_frame(streams)
        runs = self.query_one("#runs-table", FrameTable)
        runs.hidden_columns = frozenset({"ts"})
        runs.show_frame(result["runs"])
        self.draw_later(partial(self._draw_ranks, summary), order=1)
        self.draw_later(partial(self._draw_hist, result["bins"]), order=2)
        self.draw_later(partial(self._draw_time, result["occurrences"]), order=3)

    def _plot(self, widget_id: str):
        plot = self.query_one(widget_id, PlotextPlot)
        plt = plot.plt
        plt.clear_figure()
        plt.clear_data()
        return plot, plt

    @property
    def _ascii(self) -> bool:
        return hta_app(self).ascii

    def _draw_ranks(self, summary: pl.DataFrame) -> None:
        plot, plt = self._plot("#ranks-plot")
        ranks = summary["rank"].to_list()
        x = list(range(len(ranks)))
        bar, up, down = ("#", "^", "v") if self._ascii else ("sd", "▲", "▼")
        plt.bar(x, summary["mean"].to_list(), width=0.3, marker=bar, color=self._colour("primary"))
        plt.scatter(x, summary["max"].to_list(), marker=up, color=self._colour("error"))
        plt.scatter(x, summary["min"].to_list(), marker=down, color=self._colour("success"))
        labels = [f"r{r}" for r in ranks]
        step = max(1, len(x) // 16)
        plt.xticks(x[::step], labels[::step])
        plt.xlim(-0.6, len(x) - 0.4)
        plt.ylim(0, (float(summary["max"].max()) or 1.0) * 1.08)  # type: ignore[arg-type]
        plt.title(f"us per rank: bar mean, {up} max, {down} min")
        if self._ascii:
            plt.frame(False)
        plot.refresh()

    def _draw_hist(self, bins: pl.DataFrame) -> None:
        plot, plt = self._plot("#hist-plot")
        x = bins["bin"].to_list()
        plt.bar(
            x,
            bins["count"].to_list(),
            marker="#" if self._ascii else "sd",
            color=self._colour("primary"),
            width=0.8,
        )
        starts = bins["bin_start"].to_list()
        if len(starts) > 1:  # round durations at their place on the bin axis
            width = starts[1] - starts[0]
            values = linear_ticks(starts[0], starts[-1] + width)
            plt.xticks([(v - starts[0]) / width - 0.5 for v in values], [label(v) for v in values])
        else:
            plt.xticks(x, [label(v) for v in starts])
        plt.xlim(-0.6, len(x) - 0.4)
        plt.title(f"runs per duration (us) bin: {len(x)} bins, shown ranks together")
        if self._ascii:
            plt.frame(False)
        plot.refresh()

    def _draw_time(self, occ: pl.DataFrame) -> None:
        plot, plt = self._plot("#time-plot")
        # a colour and a marker per rank, named in the legend: NO_COLOR keeps them apart
        markers = RANK_MARKERS_ASCII if self._ascii else RANK_MARKERS
        palette = RANK_COLOURS
        n_ranks = occ["rank"].n_unique()
        styles = math.lcm(len(markers), len(palette))
        for named, style, xs, ys in rank_series(occ, styles).iter_rows():
            plt.scatter(
                xs,
                ys,
                marker=markers[style % len(markers)],
                color=self._colour(palette[style % len(palette)]),
                label=None if named is None else f"r{named}",
            )
        if occ.height:
            for axis, column in ((plt.xticks, "time (ms)"), (plt.yticks, "dur (us)")):
                values = linear_ticks(float(occ[column].min()), float(occ[column].max()))  # type: ignore[arg-type]
                axis(values, [label(v) for v in values])
        bucketed = bool(occ.height) and int(occ["n"].max()) > 1  # type: ignore[arg-type]
        what = "longest run per time bucket" if bucketed else "every run"
        more = f" (legend: first {LEGEND_RANKS} ranks)" if n_ranks > LEGEND_RANKS else ""
        plt.title(f"duration (us) over time (ms from trace start): {what}{more}")
        if self._ascii:
            plt.frame(False)
        plot.refresh()

    # -- tabs ------------------------------------------------------------------------------
    def _switch(self, delta: int) -> None:
        tabs = self.query_one(TabbedContent)
        current = tabs.active if tabs.active in TABS else TABS[0]
        tabs.active = TABS[(TABS.index(current) + delta) % len(TABS)]

    def action_next_table(self) -> None:
        self._switch(1)
