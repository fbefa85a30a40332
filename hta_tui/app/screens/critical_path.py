"""Screen X: the critical path of each step (HTA 0.6's critical path analysis): what the
step actually waited for.

The verdict lines first (the path across ranks per step: which rank held everyone up, and
by what); then one bar per rank and step splitting its path by what bounds it; the table of
those paths; enter on a row lists that path's edges below, in path order, and `t` on an
edge opens the trace timeline there with every event of the path marked.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, ClassVar

import polars as pl
from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import VerticalScroll
from textual.widgets import Static

from hta_tui.analysis import registry
from hta_tui.analysis.critical_path import export
from hta_tui.analysis.kernel_detail import START, trace_origin
from hta_tui.app.access import hta_app
from hta_tui.app.moment import MomentColumns
from hta_tui.app.screens.base import AnalysisScreen, Params
from hta_tui.app.widgets.bars import BarRow, StackedBars
from hta_tui.app.widgets.frame_table import FrameTable, RankSummary
from hta_tui.app.widgets.text_line import TextBlock
from hta_tui.printable import printable
from hta_tui.trace.model import TraceSet

#: (bound type, legend label, Unicode glyph, ASCII glyph), in the analysis' order.
BOUND_CATEGORIES: tuple[tuple[str, str, str, str], ...] = (
    ("cpu_bound", "CPU", "█", "#"),
    ("gpu_compute_bound", "GPU compute", "▓", "="),
    ("gpu_communication_bound", "comm", "▒", "~"),
    ("gpu_kernel_launch_overhead", "launch", "░", "."),
    ("gpu_kernel_kernel_overhead", "kernel gaps", "─", "-"),
    ("data_loading", "data", "▚", "%"),
)
#: Summary columns shown, numbers first (the verdict is long).
PATH_HEADERS: dict[str, str] = {
    "rank": "rank",
    "step": "step",
    "path_length_us": "path (us)",
    "verdict": "bound by",
    "ranks_on_path": "ranks crossed",
    "negative_edges": "neg. edges",
    "error": "why no path",
}
EDGE_HEADERS: dict[str, str] = {
    "duration": "dur (us)",
    "bound_by": "bound by",
    "type": "edge",
    "s_name": "event",
    "rank": "rank",
    START: START,
    "stream": "stream",
}
#: `t` on an edge: its start on the timeline (us from the trace's start, the timeline's own
#: origin: one number for a moment on every screen), the event by name.
EDGE_MOMENT = MomentColumns(START, base="job", dur="dur (us)", name="event")
MIN_BLOCK = 5


def _step(row: dict[str, Any]) -> object:
    """A path's step as every other view names it: N of ProfilerStep#N (HTA's instance
    index only for an unnumbered annotation)."""
    return row["step"] if row.get("step") is not None else row["instance_id"]


class BoundBars(StackedBars):
    """Per rank and step: the path split by what bounds it."""

    COMPONENT_CLASSES: ClassVar[set[str]] = StackedBars.COMPONENT_CLASSES | {
        f"stacked-bars--{c[0]}" for c in BOUND_CATEGORIES
    }


class CriticalPathScreen(AnalysisScreen):
    TITLE = "Critical path"
    ANALYSES = ("critical_path", "critical_path_edges", "critical_path_what_if")
    #: Each rank's path objects, kept for the overlay export (the registry's result).
    PATHS = "critical_path_paths"
    #: Every ProfilerStep's path, not HTA's first only (`critical_path_steps`).
    OPTIONS = registry.Options(critical_path_steps="all")
    STEPS = "every ProfilerStep"  # the distributed view's words for the same steps
    NO_STEPS = "no ProfilerStep: no step to follow"

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("o", "overlay", "Overlay", tooltip="Write the trace with this path, for Perfetto"),
    ]

    def __init__(self, **kw: Any) -> None:
        super().__init__(**kw)
        self.picked: tuple[int, int] | None = None
        self.last_export: Path | None = None

    def compose_body(self) -> ComposeResult:
        yield TextBlock("", id="cp-verdict", classes="summary")
        with VerticalScroll(id="cp-bars-box", can_focus=False):
            yield BoundBars(BOUND_CATEGORIES, ascii=hta_app(self).ascii, id="cp-bars")
        # past a screenful of ranks: the longest paths first, then their spread (issue 30)
        yield FrameTable(
            id="cp-paths", export_name="critical_path", ranks=RankSummary(worst="path (us)")
        )
        yield TextBlock(
            "Path edges (enter on a path above)", id="cp-what-if", classes="section-title"
        )
        yield FrameTable(id="cp-edges", export_name="critical_path_edges", moment=EDGE_MOMENT)

    def compute_on(self, ts: TraceSet, frames: dict[int, pl.DataFrame], params: Params) -> Any:
        """Edge starts count from the trace set's start, as the timeline's do."""
        return self.compute(frames, params, ts.origin_ns)

    @staticmethod
    def compute(
        frames: dict[int, pl.DataFrame], params: Params, origin_ns: int | None = None
    ) -> dict[str, Any]:
        got = registry.tables(
            frames,
            [*CriticalPathScreen.ANALYSES, CriticalPathScreen.PATHS],
            CriticalPathScreen.OPTIONS,
        )
        paths = got.pop(CriticalPathScreen.PATHS)
        origin = origin_ns if origin_ns is not None else trace_origin(frames)
        return {**got, "paths": paths, "origin_ns": origin or 0}

    def show(self, result: dict[str, Any]) -> None:
        summary: pl.DataFrame = result["critical_path"]
        per_rank = summary.filter(pl.col("rank").is_not_null())
        job = summary.filter(pl.col("rank").is_null())
        self.query_one("#cp-verdict", Static).update(self._verdict(per_rank, job))
        ok = per_rank.filter(pl.col("error").is_null() & (pl.col("path_length_us") > 0))
        self.query_one("#cp-bars-box").display = not ok.is_empty()
        self.query_one("#cp-bars", BoundBars).set_rows(
            [
                BarRow(
                    f"r{r['rank']} s{_step(r)}",
                    tuple(r[f"{c[0]}_us"] for c in BOUND_CATEGORIES),
                )
                for r in ok.iter_rows(named=True)
            ]
        )
        table = pl.concat([job, per_rank], how="vertical_relaxed").select(list(PATH_HEADERS))
        self.query_one("#cp-paths", FrameTable).show_frame(
            table.with_columns(pl.col("path_length_us").round(1)).rename(PATH_HEADERS)
        )
        self._show_edges(None)
        self._fit_heights()
        if self.focused is None:
            self.call_after_refresh(self.query_one("#cp-paths", FrameTable).focus)

    def _show_edges(self, pick: tuple[int, int] | None) -> None:
        edges: pl.DataFrame = self.result["critical_path_edges"] if self.result else pl.DataFrame()
        if edges.is_empty():
            self.query_one("#cp-edges", FrameTable).show_frame(pl.DataFrame())
            self._mark(edges)
            return
        if pick is None:
            first = edges.select("rank", "instance_id").row(0)
            pick = (int(first[0]), int(first[1]))
        self.picked = pick
        mine = edges.filter((pl.col("rank") == pick[0]) & (pl.col("instance_id") == pick[1]))
        self._mark(mine)
        self.query_one("#cp-what-if", Static).update(self._what_if(pick))
        shown = (
            mine.with_columns(
                ((pl.col("start_ns") - self.result.get("origin_ns", 0)) / 1000).alias(START),
                pl.col("type").str.replace("critical_path_", ""),
            )
            .select(list(EDGE_HEADERS))
            .rename(EDGE_HEADERS)
        )
        self.query_one("#cp-edges", FrameTable).show_frame(shown)

    def _summary_rows(self) -> pl.DataFrame:
        table = (self.result or {}).get("critical_path")
        return table if isinstance(table, pl.DataFrame) else pl.DataFrame()

    def _step_of(self, pick: tuple[int, int]) -> object:
        """The step number of (rank, instance), as the table shows it."""
        rows = self._summary_rows()
        if "step" in rows.columns:
            mine = rows.filter((pl.col("rank") == pick[0]) & (pl.col("instance_id") == pick[1]))
            if mine.height:
                return _step(mine.row(0, named=True))
        return pick[1]

    def _instance_of(self, rank: int, step: object) -> tuple[int, int] | None:
        """(rank, instance) of the table row showing `step` for `rank`."""
        rows = self._summary_rows().filter(pl.col("rank") == rank)
        for row in rows.iter_rows(named=True):
            if _step(row) == step and row["error"] is None:
                return rank, int(row["instance_id"])
        return None

    def _what_if(self, pick: tuple[int, int]) -> str:
        """The path's edges under the best what-if: how much faster the step could be."""
        table: pl.DataFrame = self.result.get("critical_path_what_if", pl.DataFrame())
        head = f"Rank {pick[0]} step {self._step_of(pick)}"
        if table.is_empty():
            return f"{head}: edges in path order"
        mine = table.filter((pl.col("rank") == pick[0]) & (pl.col("instance_id") == pick[1]))
        if mine.is_empty():
            return f"{head}: edges in path order"
        best = mine.sort("estimate_us").row(0, named=True)
        return (
            f"{head}: {best['step_us'] / 1000:.3f} -> est. {best['estimate_us'] / 1000:.3f} ms"
            f" if {best['scenario']}"
        )

    def _mark(self, edges: pl.DataFrame) -> None:
        """The timeline marks the events of the path shown below (`t` lands on them): those
        its edges join, as HTA's overlay marks them."""
        marks: dict[int, list[int]] = {}
        if not edges.is_empty():
            ends = pl.concat(
                [edges.select("rank", pl.col(c).alias("idx")) for c in ("from_idx", "to_idx")]
            ).unique()
            for rank, idx in ends.group_by("rank").agg("idx").iter_rows():
                marks[int(rank)] = sorted(idx)
        hta_app(self).critical_path_marks = marks

    @on(FrameTable.RowSelected, "#cp-paths")
    def _drill_down(self, event: FrameTable.RowSelected) -> None:
        """Enter on a rank's path: its edges."""
        row = self.query_one("#cp-paths", FrameTable).selected_row()
        if row is None or row.get("rank") is None or self.result is None:
            return
        pick = self._instance_of(int(row["rank"]), row.get("step"))
        if pick is None:
            return
        self._show_edges(pick)
        self.query_one("#cp-edges", FrameTable).focus()

    def action_overlay(self) -> None:
        """The trace of the path shown below, with the path overlaid, into the export folder
        (HTA's overlaid_critical_path_<name>; never inside the trace folder)."""
        entry = self.trace_set.selected(self.picked[0]) if self.picked else None
        rp = (self.result or {}).get("paths", {}).get(self.picked)
        if self.picked is None or entry is None or rp is None:
            self.notify("No path to export.", severity="warning")
            return
        export_dir = hta_app(self).export_dir
        target = export_dir / f"overlaid_critical_path_{entry.path.name}"
        n = 1
        while target.exists():
            n += 1
            target = export_dir / f"overlaid_critical_path-{n}_{entry.path.name}"
        self.notify(f"Writing rank {self.picked[0]} with its critical path…", title="Export")
        self._overlay(entry.path, rp, self.picked, target)

    @work(thread=True, group="export", exit_on_error=False)
    def _overlay(self, src: Path, rp: Any, pick: tuple[int, int], target: Path) -> None:
        try:
            written = export.overlay(src, rp, target)
        except Exception as exc:
            self.app.call_from_thread(
                self.notify, f"{type(exc).__name__}: {exc}", title="Export failed", severity="error"
            )
            return

        def done() -> None:
            self.last_export = written
            self.notify(f"rank {pick[0]} step {self._step_of(pick)}: {written}", title="Exported")

        self.app.call_from_thread(done)

    def on_resize(self) -> None:
        self._fit_heights()

    def _fit_heights(self) -> None:
        room = max(MIN_BLOCK, self.size.height // 5)
        for widget in self.query("#cp-bars-box, #cp-paths"):
            widget.styles.max_height = room

    @staticmethod
    def _verdict(per_rank: pl.DataFrame, job: pl.DataFrame) -> str:
        if per_rank.is_empty():
            return "No trace loaded yet."
        lines = [
            f"step {_step(r)}: {r['path_length_us'] / 1000:.3f} ms, "
            f"{printable(r['verdict'] or '')} (ranks {r['ranks_on_path']})"
            for r in job.iter_rows(named=True)
            if r["error"] is None
        ]
        if not lines:
            ok = per_rank.filter(pl.col("error").is_null())
            if ok.is_empty():
                return printable(per_rank["error"].drop_nulls().first() or "no path")
            worst = ok.sort("path_length_us", descending=True).row(0, named=True)
            lines = [
                f"longest: rank {worst['rank']} step {_step(worst)}, "
                f"{worst['path_length_us'] / 1000:.3f} ms, {worst['verdict']}"
            ]
        return "\n".join(lines[:2])
