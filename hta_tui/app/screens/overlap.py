"""Screen 5: how much of each rank's communication overlaps computation (HTA's
comm_comp_overlap), and the communication kernels behind it."""

from __future__ import annotations

from typing import Any

import polars as pl
from textual.app import ComposeResult
from textual.widgets import Static

from hta_tui.analysis import kernels, overlap
from hta_tui.app.screens.base import AnalysisScreen, Params
from hta_tui.app.widgets.frame_table import FrameTable


class OverlapScreen(AnalysisScreen):
    TITLE = "Comm/comp overlap"

    def compose_body(self) -> ComposeResult:
        yield Static("", id="overlap-summary", classes="summary")
        yield FrameTable(id="overlap-table", key_column="rank", export_name="overlap")
        yield Static("Communication kernels", classes="section-title")
        yield FrameTable(id="comm-kernels", key_column="name", export_name="comm_kernels")

    @staticmethod
    def compute(frames: dict[int, pl.DataFrame], params: Params) -> dict[str, Any]:
        per_rank = overlap.comm_comp_overlap(frames)
        stats = kernels.kernel_duration_stats(frames)
        comm = stats.filter(pl.col("name").str.contains(r"^nccl.*Kernel"))
        return {"overlap": per_rank, "comm": comm}

    def show(self, result: dict[str, Any]) -> None:
        per_rank: pl.DataFrame = result["overlap"]
        self.query_one("#overlap-table", FrameTable).show_frame(per_rank)
        self.query_one("#comm-kernels", FrameTable).show_frame(result["comm"])
        summary = self.query_one("#overlap-summary", Static)
        col = "comp_comm_overlap_pctg"
        known = per_rank.filter(pl.col(col).is_not_null()) if col in per_rank.columns else per_rank
        if known.is_empty():
            summary.update("No communication kernels in these ranks.")
        else:
            worst = known.sort(col).row(0, named=True)
            summary.update(
                f"Lowest overlap: rank {worst['rank']} with {worst[col]:.1f}% of its "
                "communication hidden behind computation."
            )
