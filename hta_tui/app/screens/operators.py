"""Operators (key `R`): the TensorBoard plugin's Operator view, summed over the ranks shown.

Per operator (or per operator + input shape, `v`): calls, device self/total (GPU work its own
runtime calls launched / its subtree launched), host self/total, tensor-core eligibility and
the tensor-core share of its device time (analysis/operators.py). A CPU-only trace keeps the
host columns and says why the device ones are gone. When the trace records call stacks
(`Call stack`, with_stack=True before PyTorch 2; Python frames since), the highlighted
operator's stacks are listed below: the Python frames' in a worker, when it is highlighted.
"""

from __future__ import annotations

from typing import Any, ClassVar

import polars as pl
from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.widgets import Static
from textual.worker import get_current_worker

from hta_tui.analysis import operator_stacks, registry
from hta_tui.app.foreground import Superseded
from hta_tui.app.safe_text import as_text
from hta_tui.app.screens.base import AnalysisScreen, Params, verdict_text
from hta_tui.app.widgets.frame_table import FrameTable
from hta_tui.app.widgets.text_line import TextBlock, TextLine
from hta_tui.trace.schema import GPU_WORK_KINDS

#: analysis column -> header short enough for 80 columns
HEADERS: dict[str, str] = {
    "name": "operator",
    "input_shape": "input shape",
    "call_stack": "call stack",
    "calls": "calls",
    "device_self_duration (us)": "dev self (us)",
    "device_total_duration (us)": "dev total",
    "host_self_duration (us)": "host self",
    "host_total_duration (us)": "host total",
    "tc_eligible": "tc eligible",
    "tc_self_ratio": "tc self %",
    "tc_total_ratio": "tc total %",
}
#: Columns that need GPU work: left out of a CPU-only trace's table.
DEVICE_COLUMNS = (
    "device_self_duration (us)",
    "device_total_duration (us)",
    "tc_eligible",
    "tc_self_ratio",
    "tc_total_ratio",
)


def display(table: pl.DataFrame, *, gpu: bool) -> pl.DataFrame:
    """An analysis table as the screen shows it: short headers, no device columns without
    GPU work, `has_call_stack` kept only as the stacks' cue (not drawn)."""
    if table.is_empty():
        return table
    keep = [c for c in HEADERS if c in table.columns and (gpu or c not in DEVICE_COLUMNS)]
    return table.select(*keep).rename({c: HEADERS[c] for c in keep})


class OperatorsScreen(AnalysisScreen):
    TITLE = "Operators"
    ANALYSES = (
        "job_operator_stats",
        "job_operator_stats_by_input_shape",
        "job_operator_call_stacks",
    )
    STEPS = "whole trace"
    PLUGIN_WHY = "device times through cuda_runtime launches"
    WORKER_GROUPS = ("screen", "operator-stacks")

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding(
            "v", "toggle_shapes", "Group", tooltip="Per operator, or per operator + input shape"
        ),
    ]

    def default_params(self) -> dict[str, Any]:
        return {"by_shape": False}

    def compose_body(self) -> ComposeResult:
        yield TextBlock("", id="operators-summary", classes="summary")
        yield FrameTable(id="operators-table", key_column="operator", export_name="operators")
        yield TextLine("", id="operator-shape")
        yield TextBlock("", id="operator-stacks-title", classes="section-title")
        yield FrameTable(
            id="operator-stacks", key_column="call stack", export_name="operator_call_stacks"
        )

    @staticmethod
    def compute(frames: dict[int, pl.DataFrame], params: Params) -> dict[str, Any]:
        options = registry.Options(tb_compat=bool(params.get("tb_compat", False)))
        by_shape = bool(params.get("by_shape", False))
        # the grouping shown only (`v` asks for the other): each is a third of the numbers
        grouping = OperatorsScreen.ANALYSES[1 if by_shape else 0]
        stacks_name = OperatorsScreen.ANALYSES[2]
        got = registry.tables(frames, (grouping, stacks_name), options)
        gpu = any(
            ev.select(pl.col("kind").is_in(GPU_WORK_KINDS).any()).item() for ev in frames.values()
        )
        table = got[grouping]
        return {
            "gpu": gpu,
            "tb_compat": bool(params.get("tb_compat", False)),
            "by_shape": by_shape,
            "table": display(table, gpu=gpu),
            "stacks": display(got[stacks_name], gpu=gpu),
            "python": operator_stacks.has_python_frames(frames),
            "ops": table["name"].n_unique() if not table.is_empty() else 0,
            "calls": int(table["calls"].sum()) if not table.is_empty() else 0,
            "attribution": None,
        }

    #: The verdict on GPU time with no operator comes after the numbers: it nests every
    #: launch of every rank in its host ranges (`kernel_owners`; shared with the Kernels
    #: view's), which cost about as much as the operator tables themselves.
    LATER = True

    @staticmethod
    def later(frames: dict[int, pl.DataFrame], result: dict[str, Any]) -> str | None:
        """The attribution verdict of a trace with GPU work (`result`: `compute`'s)."""
        if not result.get("gpu"):
            return None
        return verdict_text(registry.table(frames, "kernel_verdict"))

    def compute_later(
        self, ts: Any, frames: dict[int, pl.DataFrame], params: Params, result: Any
    ) -> str | None:
        return self.later(frames, result)

    def show_later(self, result: dict[str, Any], later: str | None) -> None:
        self.result = {**result, "attribution": later}
        self.query_one("#operators-summary", Static).update(summary(self.result))

    def _fit(self, table: FrameTable) -> bool:
        """Per input shape, the name and the shape share the name's room (half each), so the
        device columns stay on screen; the highlighted row's full shape is printed below.
        True when the caps changed."""
        room = self.text_room()  # calls and the self times in view
        caps: dict[str, int] = {}
        if isinstance(self.result, dict) and self.result.get("by_shape"):
            name = room // 2
            room, caps = name, {HEADERS["input_shape"]: room - 2 - name}
        changed = (table.max_text, table.column_max_text) != (room, caps)
        table.max_text, table.column_max_text = room, caps
        return changed

    def on_resize(self) -> None:
        table = self.query_one("#operators-table", FrameTable)
        if isinstance(self.result, dict) and self._fit(table):
            table.show_frame(self.result["table"])

    def show(self, result: dict[str, Any]) -> None:
        table = self.query_one("#operators-table", FrameTable)
        self._fit(table)
        table.show_frame(result["table"])
        self.query_one("#operators-summary", Static).update(summary(result))
        self._show_stacks()
        if self.focused is None:
            self.call_after_refresh(table.focus)

    def action_toggle_shapes(self) -> None:
        self.set_params(by_shape=not self.params.get("by_shape", False))

    @on(FrameTable.RowHighlighted, "#operators-table")
    def _highlighted(self, event: FrameTable.RowHighlighted) -> None:
        self._show_stacks()

    def _show_shape(self) -> None:
        """Per input shape: the highlighted row's whole shape (the table elides it)."""
        line = self.query_one("#operator-shape", TextLine)
        row = self.query_one("#operators-table", FrameTable).selected_row()
        shape = row.get(HEADERS["input_shape"]) if row is not None else None
        line.display = shape is not None
        line.update(f"{row['operator']} {shape}" if row is not None and shape is not None else "")

    def _show_stacks(self) -> None:
        """The call stacks of the highlighted operator; hidden when the trace has none."""
        self._show_shape()
        result = self.result or {}
        stacks: pl.DataFrame = result.get("stacks", pl.DataFrame())
        title = self.query_one("#operator-stacks-title", Static)
        box = self.query_one("#operator-stacks", FrameTable)
        row = self.query_one("#operators-table", FrameTable).selected_row()
        has = not stacks.is_empty()
        name = row["operator"] if row is not None else None
        if not has and result.get("python") and name is not None:
            title.update(as_text(f"Call stacks of {name}: looking them up in the Python frames…"))
            self._python_stacks(name, self.params)
            return
        box.display = has
        if not has:
            title.update(
                "No call stacks in this trace (record with with_stack=True)."
                if result.get("table") is not None and not result["table"].is_empty()
                else ""
            )
            return
        mine = stacks.filter(pl.col("operator") == name) if name is not None else stacks.clear()
        title.update(
            as_text(
                f"Call stacks of {name}: {mine.height}"
                if not mine.is_empty()
                else f"{name or 'This operator'}: no call stack recorded"
            )
        )
        box.show_frame(mine.drop("operator"))

    @work(thread=True, exclusive=True, group="operator-stacks", exit_on_error=False)
    def _python_stacks(self, name: str, params: Params) -> None:
        """Worker: the highlighted operator's Python stacks (a newer highlight cancels it)."""
        frames = self.frames_for(self.trace_set, params)
        try:
            with self.giving_way(get_current_worker()):  # a newer highlight: stops early
                table = registry.table(
                    frames, "operator_python_stacks", registry.Options(operator=name)
                )
        except Superseded:
            return
        self.app.call_from_thread(self._show_python_stacks, name, table)

    def _show_python_stacks(self, name: str, table: pl.DataFrame) -> None:
        row = self.query_one("#operators-table", FrameTable).selected_row()
        if row is None or row["operator"] != name:
            return  # the cursor moved on; its own lookup is under way
        title = self.query_one("#operator-stacks-title", Static)
        box = self.query_one("#operator-stacks", FrameTable)
        box.display = not table.is_empty()
        title.update(
            as_text(
                f"Python stacks of {name}: {table.height} (with_stack)"
                if not table.is_empty()
                else f"{name}: no Python frame around its calls"
            )
        )
        box.show_frame(table)


def summary(result: dict[str, Any]) -> str:
    """What the table holds and, on a CPU-only trace, why device columns are missing."""
    if result["table"].is_empty():
        return "No operators: no cpu_op events in these ranks."
    group = "operator + input shape" if result["by_shape"] else "operator"
    head = f"{result['ops']} operators, {result['calls']:,} calls, per {group} (v: "
    head += "per operator)" if result["by_shape"] else "per input shape)"
    if not result["gpu"]:
        return head + "\nCPU-only trace: no GPU work, so host times only (no device columns)."
    # the plugin's own rules (X) count tensor cores by its 2021 kernel list, as its columns do
    listed = "the plugin's 2021 kernel list" if result.get("tb_compat") else "modern kernel list"
    head += f"\nSorted by device self time; tensor cores: {listed}."
    if result.get("attribution"):  # kernel time no operator's device time counts, and why
        head += "\n" + result["attribution"]
    return head
