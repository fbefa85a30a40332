"""Screen 5: how much of each rank's communication overlaps computation (HTA's
comm_comp_overlap), how much stays exposed, and the communication kernels behind it.

Per rank a bar splits the NCCL time (union of COMMUNICATION kernels) into the part hidden
behind computation and the exposed part; the table gives the numbers, HTA's overlap percentage
first. Below, every communication kernel name per rank with its time and its exposed time (no
computation kernel running meanwhile), the most exposed first; enter opens a kernel's detail.
`v` shows instead the collectives per process group, stream, step and layer (FSDP's
all-gathers and reduce-scatters, `collective_streams`); the summary flags a stream where
all-gathers and reduce-scatters serialise.
"""

from __future__ import annotations

from typing import Any, ClassVar

import polars as pl
from textual import on
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import VerticalScroll
from textual.widgets import Static

from hta_tui.analysis import registry
from hta_tui.app.access import hta_app
from hta_tui.app.format import fmt_us
from hta_tui.app.screens.base import AnalysisScreen, Params
from hta_tui.app.widgets.bars import BarRow, StackedBars
from hta_tui.app.widgets.frame_table import FrameTable, RankSummary
from hta_tui.app.widgets.text_line import TextBlock, TextLine

#: (category, legend label, Unicode glyph, ASCII glyph)
OVERLAP_CATEGORIES: tuple[tuple[str, str, str, str], ...] = (
    ("overlapped", "overlapped with compute", "█", "#"),
    ("exposed", "exposed communication", "░", "."),
)

#: Analysis column -> header shown (short enough for 80 columns), in the order shown.
RANK_HEADERS: dict[str, str] = {
    "rank": "rank",
    "comp_comm_overlap_pctg": "overlap %",
    "exposed_pctg": "exposed %",
    "exposed (us)": "exposed (us)",
    "overlapped (us)": "overlapped (us)",
    "comm (us)": "comm (us)",
}
#: The kernel name last: long C++ names would push the numbers off an 80-column screen.
KERNEL_HEADERS: dict[str, str] = {
    "rank": "rank",
    "exposed (us)": "exposed (us)",
    "exposed_pctg": "exposed %",
    "time (us)": "time (us)",
    "count": "count",
    "name": "name",
}
#: The collectives per stream and layer; the module (layer) last, it can be long.
LAYER_HEADERS: dict[str, str] = {
    "rank": "rank",
    "exposed (us)": "exposed (us)",
    "hidden_pct": "hidden %",
    "kind": "kind",
    "stream": "stream",
    "step": "step",
    "calls": "calls",
    "time (us)": "time (us)",
    "pg": "group",
    "module": "layer",
}
KERNELS_TITLE = "Communication kernels, most exposed first (v: per stream and layer)"
LAYERS_TITLE = "Collectives by stream, step, layer (whole trace), most exposed; v: kernels"


class OverlapBars(StackedBars):
    """Per rank: overlapped vs exposed communication time."""

    COMPONENT_CLASSES: ClassVar[set[str]] = StackedBars.COMPONENT_CLASSES | {
        "stacked-bars--overlapped",
        "stacked-bars--exposed",
    }


#: Lines the bars and the rank table get at least (the .tcss value, at 80x24).
MIN_BLOCK = 7


class OverlapScreen(AnalysisScreen):
    TITLE = "Comm/comp overlap"
    ANALYSES = (  # `v`: collectives_hidden in place of comm_kernels_exposed
        "comm_comp_overlap",
        "exposed_comm_per_rank",
        "comm_kernels_exposed",
        "collective_streams",
    )

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding(
            "v",
            "toggle_layers",
            "Table",
            tooltip="Communication kernels, or collectives per stream, step and layer",
        ),
    ]

    def default_params(self) -> dict[str, Any]:
        return {"layers": False}

    def compose_body(self) -> ComposeResult:
        yield TextBlock("", id="overlap-summary", classes="summary")
        with VerticalScroll(id="overlap-bars-box", can_focus=False):
            yield OverlapBars(OVERLAP_CATEGORIES, ascii=hta_app(self).ascii, id="overlap-bars")
        yield FrameTable(
            id="overlap-table",
            key_column="rank",
            export_name="overlap",
            ranks=RankSummary(worst="exposed (us)"),
        )
        yield TextLine(KERNELS_TITLE, id="comm-title", classes="section-title")
        yield FrameTable(id="comm-kernels", key_column="name", export_name="comm_kernels")

    @staticmethod
    def compute(frames: dict[int, pl.DataFrame], params: Params) -> dict[str, Any]:
        per_rank = (
            registry.table(frames, "comm_comp_overlap")
            .join(
                registry.table(frames, "exposed_comm_per_rank"),
                on="rank",
                how="left",
                maintain_order="left",
            )
            .rename(RANK_HEADERS)
            .select(list(RANK_HEADERS.values()))
        )
        layers = bool(params.get("layers", False))
        if layers:
            table = registry.table(frames, "collectives_hidden")
            comm = table.rename(LAYER_HEADERS).select(list(LAYER_HEADERS.values()))
        else:
            comm = registry.table(frames, "comm_kernels_exposed").rename(KERNEL_HEADERS)
            comm = comm.select(list(KERNEL_HEADERS.values()))
        return {"overlap": per_rank, "comm": comm, "layers": layers, "serialised": None}

    #: The flag on serialised collective streams comes after the numbers: it nests every
    #: launch of every rank in its host ranges (`collective_streams` -> `kernel_owners`,
    #: shared with the Kernels view's later parts), about as much as the rest of the view.
    LATER = True

    @staticmethod
    def later(frames: dict[int, pl.DataFrame]) -> pl.DataFrame:
        """The ranks whose all-gathers and reduce-scatters serialise, with the verdict."""
        streams = registry.table(frames, "collective_streams")
        return streams.filter("serialised").select("rank", "verdict")

    def compute_later(
        self, ts: Any, frames: dict[int, pl.DataFrame], params: Params, result: Any
    ) -> pl.DataFrame:
        return self.later(frames)

    def show_later(self, result: dict[str, Any], later: pl.DataFrame) -> None:
        self.result = {**result, "serialised": later}
        self.query_one("#overlap-summary", Static).update(self._summary_text(self.result))

    def show(self, result: dict[str, Any]) -> None:
        per_rank: pl.DataFrame = result["overlap"]
        comm: pl.DataFrame = result["comm"]
        self.query_one("#overlap-table", FrameTable).show_frame(per_rank)
        self.query_one("#comm-kernels", FrameTable).show_frame(comm)
        title = LAYERS_TITLE if result.get("layers") else KERNELS_TITLE
        self.query_one("#comm-title", Static).update(title)
        known = per_rank.filter(pl.col("overlap %").is_not_null())
        self.query_one("#overlap-bars-box").display = not known.is_empty()
        self.query_one("#overlap-bars", OverlapBars).set_rows(
            [
                BarRow(f"r{r['rank']}", (r["overlapped (us)"], r["exposed (us)"]))
                for r in known.iter_rows(named=True)
            ]
        )
        self.query_one("#overlap-summary", Static).update(self._summary_text(result))
        self._fit_heights()
        if self.focused is None:
            self.call_after_refresh(self.query_one("#overlap-table", FrameTable).focus)

    def on_resize(self) -> None:
        self._fit_heights()

    def _fit_heights(self) -> None:
        """The bars and the rank table take up to a quarter of the screen each (7 lines at
        least): a tall terminal shows every rank of an 8-rank job without scrolling."""
        room = max(MIN_BLOCK, self.size.height // 4)
        for widget in self.query("#overlap-bars-box, #overlap-table"):
            widget.styles.max_height = room

    def action_toggle_layers(self) -> None:
        self.set_params(layers=not self.params.get("layers", False))

    @on(FrameTable.RowSelected, "#comm-kernels")
    def _drill_down(self, event: FrameTable.RowSelected) -> None:
        """Enter on a communication kernel: its kernel detail screen."""
        row = self.query_one("#comm-kernels", FrameTable).selected_row()
        if row is not None and "name" in row:
            hta_app(self).show_kernel(row["name"])

    def _summary_text(self, result: dict[str, Any]) -> str:
        """The summary, with the serialised streams' flag once it is known (`LATER`)."""
        per_rank: pl.DataFrame = result["overlap"]
        summary = self._summary(per_rank, per_rank.filter(pl.col("overlap %").is_not_null()))
        serialised = result.get("serialised")
        if serialised is not None and not serialised.is_empty():
            rank, verdict = serialised.row(0)
            more = f" (and {serialised.height - 1} more)" if serialised.height > 1 else ""
            summary += f"\nRank {rank}: {verdict}{more}."
        return summary

    @staticmethod
    def _summary(per_rank: pl.DataFrame, known: pl.DataFrame) -> str:
        if per_rank.is_empty():
            return "No GPU kernels in these ranks: nothing to overlap."
        if known.is_empty():
            return "No communication kernels in these ranks: nothing to overlap."
        worst = known.sort(["exposed (us)", "rank"], descending=[True, False]).row(0, named=True)
        return (
            f"Most exposed: rank {worst['rank']}, {fmt_us(worst['exposed (us)'])} of "
            f"{fmt_us(worst['comm (us)'])} communication not hidden by compute "
            f"({worst['overlap %']:.1f}% overlapped)."
        )
