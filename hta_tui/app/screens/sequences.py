"""Screen 8: the kernel sequences an operator launches (HTA's frequent_cuda_kernel_sequences).

Top: the operators that launch GPU work, by the GPU time launched from inside them
(kernel_detail.launching_operators). Enter on one computes its frequent kernel sequences on
one rank (HTA's analysis is per rank: the picked one, else the smallest) with HTA's
min_pattern_len 3 and top_k 5; the highlighted pattern's kernels are listed one per line.
"""

from __future__ import annotations

from typing import Any, ClassVar

import polars as pl
from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import VerticalScroll
from textual.widgets import Static

from hta_tui.analysis import registry, sequences
from hta_tui.app.screens.base import AnalysisScreen, Params
from hta_tui.app.widgets.frame_table import FrameTable
from hta_tui.app.widgets.text_line import TextBlock
from hta_tui.printable import printable

MIN_PATTERN_LEN = 3
TOP_K = 5


class SequencesScreen(AnalysisScreen):
    TITLE = "Kernel sequences"
    ANALYSES = ("launching_operators", "frequent_cuda_kernel_sequences")

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("o", "focus_operators", "Operators", tooltip="Back to the operator list"),
    ]

    def __init__(self, **kw: Any) -> None:
        super().__init__(**kw)
        self._focus_patterns = False  # move to the patterns once the picked ones arrive

    def default_params(self) -> dict[str, Any]:
        return {"operator": None}

    def compose_body(self) -> ComposeResult:
        yield TextBlock("", id="seq-summary", classes="summary")
        yield FrameTable(id="operators-table", key_column="operator", export_name="operators")
        yield TextBlock("", id="seq-title", classes="section-title")
        yield FrameTable(id="patterns-table", key_column="pattern", export_name="sequences")
        with VerticalScroll(id="pattern-box"):
            yield TextBlock("", id="pattern-kernels")

    def _where(self) -> str:
        """One rank's sequences: the picked one, else the smallest (`sequences.pick_rank`)."""
        rank = self.result.get("rank") if isinstance(self.result, dict) else None
        if rank is None:
            rank = self.params.rank
        if rank is None:
            rank = min(self.trace_set.loaded(), default=None)
        return self._where_one(rank, "smallest")

    @staticmethod
    def compute(frames: dict[int, pl.DataFrame], params: Params) -> dict[str, Any]:
        rank = sequences.pick_rank(frames, params.rank)
        if rank is None:
            return {"rank": None}
        one = {rank: frames[rank]}
        operators = registry.table(one, "launching_operators")
        operator = params.get("operator")
        patterns = None
        if operator:
            options = registry.Options(
                operator_name=operator, rank=rank, min_pattern_len=MIN_PATTERN_LEN, top_k=TOP_K
            )
            patterns = registry.table(frames, "frequent_cuda_kernel_sequences", options)
        return {"rank": rank, "operators": operators, "operator": operator, "patterns": patterns}

    @staticmethod
    def shown_patterns(patterns: pl.DataFrame) -> pl.DataFrame:
        """The top_k patterns as the table shows them: numbers first, then the pattern."""
        return patterns.head(TOP_K).select(
            "count",
            (pl.col("pattern").str.count_matches("|", literal=True))
            .cast(pl.Int64)
            .alias("kernels"),
            "GPU kernel duration (us)",
            "CPU op duration (us)",
            "pattern",
        )

    def show(self, result: dict[str, Any]) -> None:
        summary = self.query_one("#seq-summary", Static)
        ops_table = self.query_one("#operators-table", FrameTable)
        pat_table = self.query_one("#patterns-table", FrameTable)
        title = self.query_one("#seq-title", Static)
        rank = result["rank"]
        if rank is None:
            summary.update("No rank loaded.")
            ops_table.show_frame(pl.DataFrame())
            pat_table.show_frame(pl.DataFrame())
            title.update("")
            self._show_kernels()
            return
        operators: pl.DataFrame = result["operators"]
        ops_table.show_frame(operators)
        # the title says which rank, and why that one
        if operators.is_empty():
            summary.update(f"Rank {rank}: no operator launches GPU work (a CPU-only trace?).")
        else:
            summary.update(
                f"Rank {rank}'s operators by GPU time launched inside; enter: sequences."
            )
        operator = result["operator"]
        patterns: pl.DataFrame | None = result["patterns"]
        if not operator or patterns is None:
            title.update("Pick an operator (enter) to see the kernel sequences it launches.")
            pat_table.show_frame(pl.DataFrame())
        elif patterns.is_empty():
            title.update(
                f"No '{operator}' launches {MIN_PATTERN_LEN} or more kernels on rank {rank}."
            )
            pat_table.show_frame(pl.DataFrame())
        else:
            shown = min(TOP_K, patterns.height)
            title.update(
                f"'{operator}' on rank {rank}: top {shown} of {patterns.height} pattern"
                f"{'s' if patterns.height != 1 else ''} (>= {MIN_PATTERN_LEN} kernels)"
            )
            pat_table.show_frame(self.shown_patterns(patterns))
            if self._focus_patterns:
                pat_table.focus()
        self._focus_patterns = False
        self._show_kernels()

    # -- interaction -----------------------------------------------------------------------
    @on(FrameTable.RowSelected, "#operators-table")
    def _operator_chosen(self, event: FrameTable.RowSelected) -> None:
        event.stop()
        row = self.query_one("#operators-table", FrameTable).selected_row()
        if row is None:
            return
        self._focus_patterns = True
        self.set_params(operator=row["operator"])

    @on(FrameTable.RowHighlighted, "#patterns-table")
    def _pattern_highlighted(self, event: FrameTable.RowHighlighted) -> None:
        self._show_kernels()

    @on(FrameTable.RowSelected, "#patterns-table")
    def _pattern_selected(self, event: FrameTable.RowSelected) -> None:
        event.stop()
        self._show_kernels()

    def _show_kernels(self) -> None:
        box = self.query_one("#pattern-kernels", Static)
        row = self.query_one("#patterns-table", FrameTable).selected_row()
        if row is None:
            box.update("")
            return
        parts = printable(row["pattern"]).split("|")
        text = Text(no_wrap=True, overflow="ellipsis")
        text.append(parts[0], style="bold")
        for i, name in enumerate(parts[1:], 1):
            text.append(f"\n{i:>3}. {name}")
        box.update(text)

    def action_focus_operators(self) -> None:
        self.query_one("#operators-table", FrameTable).focus()
