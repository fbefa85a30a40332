"""Screen 3: where GPU time goes - by kernel type (HTA's gpu_kernel_breakdown) and by kernel.

The type breakdown is a compact table with a bar of each type's share; the kernel table has
real statistics for every row (kernel_detail.kernel_table), HTA's top-k folding (`t` toggles
between "top kernels + others" and every kernel), and enter drills down to the kernel.
"""

from __future__ import annotations

from typing import Any, ClassVar

import polars as pl
from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.widget import Widget
from textual.widgets import Input, Static

from hta_tui.analysis import registry
from hta_tui.analysis.names import fold_names
from hta_tui.app.access import hta_app
from hta_tui.app.screens import kernel_columns
from hta_tui.app.screens.base import AnalysisScreen, Params, verdict_text
from hta_tui.app.widgets.frame_table import FrameTable
from hta_tui.app.widgets.text_line import TextBlock
from hta_tui.printable import printable

#: HTA's top-k folding (get_gpu_kernel_breakdown's defaults).
DURATION_RATIO = 0.8
NUM_KERNELS = 10

#: The short name with its first-level template arguments (shown when it fits).
WIDER = "kernel (wider)"
#: Columns kept in view beside a short kernel name: share %, sum, count, mean.
NUMBERS_WIDTH = 42

#: kernel type -> (style name, Unicode glyph, ASCII glyph); overlaps share one.
TYPE_STYLES: dict[str, tuple[str, str, str]] = {
    "COMPUTATION": ("computation", "█", "#"),
    "COMMUNICATION": ("communication", "▓", "="),
    "MEMORY": ("memory", "▒", "+"),
}
OVERLAP_STYLE = ("overlap", "░", ".")

SHORT = (("COMPUTATION", "COMP"), ("COMMUNICATION", "COMM"), ("MEMORY", "MEM"))


def short_label(label: str) -> str:
    """ "COMPUTATION overlapping COMMUNICATION" -> "COMP + COMM" (narrow terminals)."""
    for long, short in SHORT:
        label = label.replace(long, short)
    return label.replace(" overlapping ", " + ")


class TypeBreakdown(Widget):
    """One line per kernel type (or overlap of types): label, time (us), share, bar."""

    COMPONENT_CLASSES: ClassVar[set[str]] = {
        "type-breakdown--label",
        "type-breakdown--computation",
        "type-breakdown--communication",
        "type-breakdown--memory",
        "type-breakdown--overlap",
    }

    DEFAULT_CSS = """
    TypeBreakdown { height: auto; }
    """

    def __init__(self, *, ascii: bool = False, id: str | None = None) -> None:
        super().__init__(id=id)
        self.ascii = ascii
        self.rows: list[tuple[str, float, float]] = []

    def set_rows(self, rows: list[tuple[str, float, float]]) -> None:
        self.rows = list(rows)
        self.refresh(layout=True)

    def get_content_height(self, container, viewport, width: int) -> int:  # type: ignore[override]
        return max(len(self.rows), 1)

    def _style(self, name: str):
        return self.get_component_rich_style(f"type-breakdown--{name}", partial=True)

    def render(self) -> Text:
        if not self.rows:
            return Text("")
        width = self.content_size.width or self.size.width
        labels = [label for label, _, _ in self.rows]
        if max(map(len, labels)) + 30 > width:
            labels = [short_label(label) for label in labels]
        label_w = max(map(len, labels))
        whole = all(total == round(total) for _, total, _ in self.rows)
        nums = [f"{total:,.{0 if whole else 1}f}" for _, total, _ in self.rows]
        num_w = max(map(len, nums))
        bar_w = max(width - label_w - num_w - 9, 0)
        lines = []
        for label, num, (name, _, pct) in zip(labels, nums, self.rows, strict=True):
            style, glyph, ascii_glyph = TYPE_STYLES.get(name, OVERLAP_STYLE)
            line = Text(no_wrap=True, overflow="crop")
            line.append(label.ljust(label_w) + " ", style=self._style("label"))
            line.append(num.rjust(num_w) + " ")
            line.append(f"{pct or 0:5.1f}% ")
            cells = round((pct or 0) / 100 * bar_w)
            if pct and cells == 0 and bar_w:
                cells = 1
            line.append((ascii_glyph if self.ascii else glyph) * cells, style=self._style(style))
            lines.append(line)
        return Text("\n", no_wrap=True).join(lines)


class KernelsScreen(AnalysisScreen):
    TITLE = "Kernels"
    ANALYSES = (
        "gpu_kernel_type_breakdown",
        "kernel_table",
        "kernel_view_job",
        "kernel_backend_by_name",
        "kernel_verdict",
    )
    PLUGIN_WHY = "tensor cores by a modern list"  # its tc, blocks/SM, occupancy columns
    #: What its analyses read (every parameter's: by operator, the plugin's rules, ...):
    #: 23 of the events' 37 columns.
    EVENTS_COLUMNS = (
        *("idx", "ts", "dur", "name", "cat", "kind", "pid", "tid", "stream", "correlation"),
        *("external_id", "bytes", "bandwidth", "input_dims", "blocks_per_sm", "occupancy"),
        *("annotation", "python_module_id", "grid", "block", "registers", "shared_memory"),
        "call_stack",
    )
    #: A rank held whole is given whole, the same frame every view reads: HTA's views of
    #: it (`hta_view`, kept per frame) are built once for this view and the others, and
    #: kept across this view's own recomputations (`o`, `v`, `n`); a large rank gives only
    #: these columns (tests/test_stream.py checks them against the whole frame's numbers).
    EVENTS_COLUMNS_ALWAYS = False
    #: What they read of a large rank (`RankData.columns`): every row but the Python
    #: functions that are no module (a third of a real rank's events; `kernel_owners` reads
    #: only modules' among them).
    EVENTS_ROWS = (pl.col("kind") != "python") | pl.col("python_module_id").is_not_null()

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("o", "toggle_fold", "Top-k/all", tooltip="Fold the long tail into 'others'"),
        Binding(
            "n",
            "toggle_names",
            "Names",
            tooltip="Short kernel names (template arguments folded) or full ones",
        ),
        Binding(
            "v",
            "toggle_by_op",
            "Group",
            tooltip="Per kernel, or per kernel + launching op + grid, block, registers, shmem",
        ),
    ]

    def default_params(self) -> dict[str, Any]:
        return {"fold": True, "full_names": False, "by_op": False}

    def compose_body(self) -> ComposeResult:
        ascii = hta_app(self).ascii
        yield Static("GPU time by kernel type (us, all ranks summed)", classes="section-title")
        yield TypeBreakdown(ascii=ascii, id="kernel-types")
        yield TextBlock("", id="kernels-summary", classes="summary")
        yield FrameTable(id="kernel-table", key_column="name", export_name="kernels")
        yield TextBlock("", id="kernel-name")

    #: The backend column and the attribution verdict come after the numbers: they nest
    #: every launch in its host ranges on every rank (`kernel_owners`), which cost more than
    #: the rest of the view together (issue 27: the numbers within 1 s of the key).
    LATER = True

    @staticmethod
    def compute(frames: dict[int, pl.DataFrame], params: Params) -> dict[str, Any]:
        """The view's numbers: the type breakdown and the kernel table, its backend column
        empty until `later` fills it."""
        compat = bool(params.get("tb_compat", False))  # the plugin's columns by its rules (X)
        type_df = registry.table(
            frames,
            "gpu_kernel_type_breakdown",
            registry.Options(duration_ratio=DURATION_RATIO, num_kernels=NUM_KERNELS),
        )
        by_op = bool(params.get("by_op", False))
        options = registry.Options(
            duration_ratio=DURATION_RATIO,
            num_kernels=NUM_KERNELS,
            fold_kernels=bool(params.get("fold", True)),
            tb_compat=compat,
        )
        if by_op:
            table = kernel_columns.by_operator(
                registry.table(frames, "kernel_view_job_by_op", options)
            )
        else:
            got = registry.tables(frames, ["kernel_table", "kernel_view_job"], options)
            table = kernel_columns.with_kernel_view(
                got["kernel_table"], got["kernel_view_job"], kernel_columns.NO_BACKENDS
            )
        if not params.get("full_names", False):
            # the short name in the name's place; the full one stays for detail and export
            table = table.with_columns(
                fold_names(table["name"], keep=0).alias("kernel"),
                fold_names(table["name"], keep=1).alias(WIDER),
            )
            last = [c for c in ("type", "ranks", "name", WIDER) if c in table.columns]
            table = table.select("kernel", pl.exclude("kernel", *last), *last)
        return {
            "types": type_df,
            "kernels": table,
            "ranks": len(frames),
            "by_op": by_op,
            "attribution": None,
        }

    @staticmethod
    def later(frames: dict[int, pl.DataFrame], params: Params) -> dict[str, Any]:
        """What the view shows after its numbers: each kernel's backend (per kernel, not
        by operator) and the verdict on kernel time with no operator."""
        got = registry.tables(
            frames,
            ["kernel_verdict"] if params.get("by_op", False) else
            ["kernel_verdict", "kernel_backend_by_name"],
        )  # fmt: skip
        return {
            "backends": got.get("kernel_backend_by_name"),
            "attribution": verdict_text(got["kernel_verdict"]),
        }

    @staticmethod
    def with_later(result: dict[str, Any], later: dict[str, Any]) -> dict[str, Any]:
        """`compute`'s numbers with `later`'s parts in their places."""
        table = result["kernels"]
        backends = later.get("backends")
        if backends is not None and "backend" in table.columns:
            filled = table.drop("backend").join(
                backends, on="name", how="left", maintain_order="left"
            )
            table = filled.select(table.columns)
        return {**result, "kernels": table, "attribution": later.get("attribution")}

    def compute_later(
        self, ts: Any, frames: dict[int, pl.DataFrame], params: Params, result: Any
    ) -> dict[str, Any]:
        return self.later(frames, params)

    def show_later(self, result: dict[str, Any], later: dict[str, Any]) -> None:
        self.result = self.with_later(result, later)
        self.show(self.result)

    def show(self, result: dict[str, Any]) -> None:
        types: pl.DataFrame = result["types"]
        table: pl.DataFrame = result["kernels"]
        self.query_one(TypeBreakdown).set_rows(
            [(t, s, p) for t, s, p in types.select("kernel_type", "sum", "percentage").iter_rows()]
        )
        kernel_table = self.query_one("#kernel-table", FrameTable)
        kernel_table.hidden_columns = frozenset(
            {"name", WIDER} if "kernel" in table.columns else ()
        )
        kernel_table.max_text = self._name_room()
        kernel_table.show_frame(self._fitted(table))
        summary = self.query_one("#kernels-summary", Static)
        if table.is_empty():
            text = (
                "No GPU kernels in these ranks (a CPU-only trace, or no kernel in the "
                "profiled steps)."
            )
        elif result.get("by_op"):
            # the plugin's table counts every step (the title says so); the bars, HTA's
            text = "Per kernel + op + launch props, whole trace (bars: HTA's steps); v: per kernel"
        elif self.params.get("fold", True):
            text = (
                f"Top kernels/type (HTA: {DURATION_RATIO:.0%} of time, max {NUM_KERNELS}) "
                "+ others; o: all; v: by op"
            )
        else:
            text = f"Every kernel ({table.height}); o: top kernels + others; v: by op"
        if result.get("attribution") and not table.is_empty():
            # kernel time with no operator, and why: said, never left silent
            text += "\n" + result["attribution"]
        summary.update(text)
        self._show_name()

    def _name_room(self) -> int:
        """Short names first, elided to leave the share, sum, count and mean in view."""
        if self.params.get("full_names", False):
            return 400
        return max(24, min(100, self.size.width - NUMBERS_WIDTH))

    def _fitted(self, table: pl.DataFrame) -> pl.DataFrame:
        """Short names with their first template arguments where the room allows (a wide
        terminal tells `vectorized_elementwise_kernel<4, FillFunctor<…>>` apart)."""
        if WIDER not in table.columns:
            return table
        wider = pl.col(WIDER)
        fits = wider.str.len_chars() <= self._name_room()
        return table.with_columns(pl.when(fits).then(wider).otherwise("kernel").alias("kernel"))

    def on_resize(self) -> None:
        table = self.query_one("#kernel-table", FrameTable)
        if isinstance(self.result, dict) and table.max_text != self._name_room():
            table.max_text = self._name_room()
            table.show_frame(self._fitted(self.result["kernels"]))

    # -- interaction -----------------------------------------------------------------------
    def action_toggle_fold(self) -> None:
        self.set_params(fold=not self.params.get("fold", True))

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        """Top-k folding is HTA's, per kernel: greyed out while grouped by operator."""
        if action == "toggle_fold" and self.params.get("by_op", False):
            return None
        return True

    def action_toggle_by_op(self) -> None:
        self.set_params(by_op=not self.params.get("by_op", False))
        self.refresh_bindings()

    def steps_text(self, frames: dict[int, pl.DataFrame], every: bool) -> str:
        """The per-op grouping is the plugin's Kernel view: every kernel of the trace."""
        if self.params.get("by_op", False):
            return "whole trace (TensorBoard's kernel view)"
        return super().steps_text(frames, every)

    def action_toggle_names(self) -> None:
        self.set_params(full_names=not self.params.get("full_names", False))

    def _apply_filter(self) -> None:
        """A filter looks at every kernel, not only the top ones: the tail folded into
        "others" is listed while a filter is on."""
        text = self.query_one("#filter", Input).value.strip()
        if text and self.params.get("fold", True):
            self.set_params(fold=False)
            self.notify("every kernel listed while filtering (t folds them again)", timeout=4)
        super()._apply_filter()

    @on(FrameTable.RowHighlighted, "#kernel-table")
    def _highlighted(self, event: FrameTable.RowHighlighted) -> None:
        self._show_name()

    def _show_name(self) -> None:
        row = self.query_one("#kernel-table", FrameTable).selected_row()
        label = self.query_one("#kernel-name", Static)
        if row is None:
            label.update("")
            return
        text = Text(no_wrap=True, overflow="ellipsis")
        text.append(printable(row["name"]))
        kind = row.get("type") or row.get("operator")
        if row.get("backend"):
            kind = f"{kind}, {row['backend']}"
        text.append(f"  ({kind})", style="dim")
        label.update(text)

    @on(FrameTable.RowSelected, "#kernel-table")
    def _selected(self, event: FrameTable.RowSelected) -> None:
        event.stop()
        row = self.query_one("#kernel-table", FrameTable).selected_row()
        if row is None:
            return
        if row["name"] == "others":
            self.notify(
                f"'others' folds the tail of the {row['type']} kernels; press t to list "
                "every kernel.",
                timeout=5,
            )
            return
        hta_app(self).show_kernel(row["name"])
