"""Screen u: the TensorBoard plugin's module view, a tree table of nn.Modules and an icicle.

Each row is a module (indented by depth) with occurrences, operators, host and device time;
enter folds or unfolds a module's children. Above, an icicle chart of host time (device time
when the trace has GPU work launched by modules), three levels deep. One rank at a time (the
first loaded, or the one picked with `r`): module trees of different ranks do not add up.
"""

from __future__ import annotations

from typing import Any

import polars as pl
from textual import on
from textual.app import ComposeResult
from textual.widgets import Static

from hta_tui.analysis import kernel_owners, registry
from hta_tui.app.access import hta_app
from hta_tui.app.screens.base import AnalysisScreen, Params
from hta_tui.app.widgets.frame_table import FrameTable
from hta_tui.app.widgets.icicle import icicle_lines
from hta_tui.app.widgets.text_line import TextBlock

HEADERS: dict[str, str] = {
    "label": "module",
    "occurrences": "occ",
    "operators": "ops",
    "host total (us)": "host (us)",
    "host self (us)": "host self",
    "device total (us)": "device (us)",
    "device self (us)": "dev self",
}
ICICLE_DEPTH = 3


def visible_rows(table: pl.DataFrame, folded: set[str]) -> pl.DataFrame:
    """The tree's rows in path order, without the descendants of folded paths; `label` is the
    indented name with a fold marker (`+` folded, `-` open) on modules with children."""
    if table.is_empty():
        return table.with_columns(pl.lit("", pl.String).alias("label"))
    paths = table["path"]
    parents = set(paths.str.replace(r"/[^/]*$", "").filter(paths.str.contains("/")).to_list())
    hidden = pl.lit(False)
    for f in folded:
        hidden = hidden | pl.col("path").str.starts_with(f + "/")
    marker = (
        pl.when(pl.col("path").is_in(sorted(folded)))
        .then(pl.lit("+ "))
        .when(pl.col("path").is_in(sorted(parents)))
        .then(pl.lit("- "))
        .otherwise(pl.lit("  "))
    )
    indent = pl.lit("  ").repeat_by(pl.col("depth")).list.join("")
    return (
        table.sort("path")
        .filter(~hidden)
        .with_columns(pl.concat_str(indent, marker, pl.col("module")).alias("label"))
    )


def annotated_line(by_kernel: pl.DataFrame) -> str:
    """The modules graph kernels' CUDA-graph annotations name (`kernel_modules`), costliest
    first: the tree below has only the module around the graph's launch, which runs them all."""
    named = by_kernel.filter(pl.col("module_from") == kernel_owners.ANNOTATED)
    if named.is_empty():
        return ""
    kernels = named["kernels"].sum()
    each = ", ".join(f"{m} {t:,.0f} us" for m, t in named.select("module", "time (us)").rows())
    return f"{kernels:,} graph kernels by CUDA-graph annotation (not in the tree): {each}"


class ModulesScreen(AnalysisScreen):
    TITLE = "Modules"
    ANALYSES = ("module_stats", "kernel_modules")
    STEPS = "whole trace"

    def __init__(self, **kw: Any) -> None:
        super().__init__(**kw)
        self.folded: set[str] = set()

    def compose_body(self) -> ComposeResult:
        yield TextBlock("", id="module-summary", classes="summary")
        yield TextBlock("", id="module-icicle")
        yield FrameTable(id="module-tree", key_column="module", export_name="modules")

    @staticmethod
    def compute(frames: dict[int, pl.DataFrame], params: Params) -> dict[str, Any]:
        for rank in sorted(frames):
            table = registry.table({rank: frames[rank]}, "module_stats")
            if not table.is_empty():
                by_kernel = registry.table({rank: frames[rank]}, "kernel_modules")
                return {"rank": rank, "table": table, "annotated": annotated_line(by_kernel)}
        empty = registry.tables({}, ModulesScreen.ANALYSES)
        return {"rank": None, "table": empty["module_stats"], "annotated": ""}

    def show(self, result: dict[str, Any]) -> None:
        table: pl.DataFrame = result["table"]
        summary = self.query_one("#module-summary", Static)
        if table.is_empty():
            summary.update("No nn.Module frames: profile with with_modules=True (or with_stack).")
        else:
            tops = table.filter(pl.col("depth") == 0).height
            text = (
                f"rank {result['rank']}: {table['module'].n_unique()} modules, {tops} at the "
                "top; enter folds or unfolds a module"
            )
            if result.get("annotated"):
                text += "\n" + result["annotated"]
            summary.update(text)
        self._draw()
        if self.focused is None:
            self.call_after_refresh(self.query_one("#module-tree", FrameTable).focus)

    def _draw(self) -> None:
        if self.result is None:
            return
        table: pl.DataFrame = self.result["table"]
        value = "device total (us)" if table["device total (us)"].sum() > 0 else "host total (us)"
        width = max(10, self.size.width - 2)
        ascii_ = hta_app(self).ascii
        lines = icicle_lines(table, width, depth=ICICLE_DEPTH, value=value, ascii=ascii_)
        icicle = self.query_one("#module-icicle", Static)
        icicle.display = bool(lines)
        icicle.update("\n".join(lines))
        rows = visible_rows(table, self.folded)
        self.query_one("#module-tree", FrameTable).show_frame(
            rows.select(*HEADERS, "path").rename(HEADERS)
        )

    @on(FrameTable.RowSelected, "#module-tree")
    def _toggle(self, event: FrameTable.RowSelected) -> None:
        tree = self.query_one("#module-tree", FrameTable)
        row = tree.selected_row()
        if row is None:
            return
        path = row["path"]
        self.folded.symmetric_difference_update({path})
        cursor = tree.cursor_row
        self._draw()
        tree.move_cursor(row=cursor)
