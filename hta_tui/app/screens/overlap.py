"""Screen 5: how much of each rank's communication overlaps computation (HTA's
comm_comp_overlap), how much stays exposed, and the communication kernels behind it.

Per rank a bar splits the NCCL time (union of COMMUNICATION kernels) into the part hidden
behind computation and the exposed part; the table gives the numbers, HTA's overlap percentage
first. Below, every communication kernel name per rank with its time and its exposed time (no
computation kernel running meanwhile), the most exposed first; enter opens a kernel's detail.
"""

from __future__ import annotations

from typing import Any, ClassVar

import polars as pl
from textual import on
from textual.app import ComposeResult
from textual.containers import VerticalScroll
from textual.widgets import Static

from hta_tui.analysis import exposed_comm, overlap
from hta_tui.app.format import fmt_us
from hta_tui.app.screens.base import AnalysisScreen, Params
from hta_tui.app.widgets.bars import BarRow, StackedBars
from hta_tui.app.widgets.frame_table import FrameTable
from hta_tui.app.widgets.text_line import TextBlock

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

    def compose_body(self) -> ComposeResult:
        yield TextBlock("", id="overlap-summary", classes="summary")
        with VerticalScroll(id="overlap-bars-box", can_focus=False):
            yield OverlapBars(
                OVERLAP_CATEGORIES, ascii=bool(getattr(self.app, "ascii", False)), id="overlap-bars"
            )
        yield FrameTable(id="overlap-table", key_column="rank", export_name="overlap")
        yield Static("Communication kernels, most exposed first", classes="section-title")
        yield FrameTable(id="comm-kernels", key_column="name", export_name="comm_kernels")

    @staticmethod
    def compute(frames: dict[int, pl.DataFrame], params: Params) -> dict[str, Any]:
        per_rank = (
            overlap.comm_comp_overlap(frames)
            .join(
                exposed_comm.exposed_comm_per_rank(frames),
                on="rank",
                how="left",
                maintain_order="left",
            )
            .rename(RANK_HEADERS)
            .select(list(RANK_HEADERS.values()))
        )
        comm = exposed_comm.comm_kernels_exposed(frames).rename(KERNEL_HEADERS)
        return {"overlap": per_rank, "comm": comm.select(list(KERNEL_HEADERS.values()))}

    def show(self, result: dict[str, Any]) -> None:
        per_rank: pl.DataFrame = result["overlap"]
        comm: pl.DataFrame = result["comm"]
        self.query_one("#overlap-table", FrameTable).show_frame(per_rank)
        self.query_one("#comm-kernels", FrameTable).show_frame(comm)
        known = per_rank.filter(pl.col("overlap %").is_not_null())
        self.query_one("#overlap-bars-box").display = not known.is_empty()
        self.query_one("#overlap-bars", OverlapBars).set_rows(
            [
                BarRow(f"r{r['rank']}", (r["overlapped (us)"], r["exposed (us)"]))
                for r in known.iter_rows(named=True)
            ]
        )
        self.query_one("#overlap-summary", Static).update(self._summary(per_rank, known))
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

    @on(FrameTable.RowSelected, "#comm-kernels")
    def _drill_down(self, event: FrameTable.RowSelected) -> None:
        """Enter on a communication kernel: its kernel detail screen."""
        row = self.query_one("#comm-kernels", FrameTable).selected_row()
        if row is not None:
            self.app.show_kernel(row["name"])  # type: ignore[attr-defined]

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
