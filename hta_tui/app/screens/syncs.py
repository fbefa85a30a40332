"""Screen y: where the host waits for the GPU, and which code made it wait.

The verdict line per rank first; then blocked time by phase, module, operator and call site
(backward syncs attributed to the forward op that created them), the costliest first; enter
on a row lists its syncs below (every one otherwise), with what each waited for.
"""

from __future__ import annotations

import polars as pl
from textual import on
from textual.app import ComposeResult
from textual.widgets import Static

from hta_tui.analysis import registry
from hta_tui.analysis.kernel_detail import START, trace_origin
from hta_tui.analysis.names import fold_names
from hta_tui.app.moment import MomentColumns
from hta_tui.app.screens.base import AnalysisScreen, Params
from hta_tui.app.widgets.frame_table import FrameTable
from hta_tui.app.widgets.text_line import TextBlock
from hta_tui.printable import printable
from hta_tui.trace.model import TraceSet

#: Summary column -> header (numbers first: long call sites would push them off 80 columns).
SUMMARY_HEADERS: dict[str, str] = {
    "blocked (us)": "blocked (us)",
    "step_pctg": "step %",
    "count": "count",
    "phase": "phase",
    "operator": "operator",
    "module": "module",
    # PyTorch writes a Python frame's line at the function's entry, not the line that called
    # the op: the column names the innermost user function and its first line, for what it is
    "call_site": "function (first line)",
    "rank": "rank",
}
INSTANCE_HEADERS: dict[str, str] = {
    "blocked (us)": "blocked (us)",
    "call": "call",
    "waited_for": "waited for",
    "op_stack": "operators",
    "forward_op": "forward op",
    "rank": "rank",
    START: START,
}
#: `t` on a sync: the call on the timeline (its start is in us from the trace's start, the
#: timeline's origin, as in kernel detail and idle time: one number per moment).
SYNC_MOMENT = MomentColumns(START, base="job", dur="blocked (us)", name="call")
#: The kernel waited for, by its full name: exported, not drawn.
FULL = "waited for (full name)"
#: Verdict lines shown above the tables, one row each (syncs.tcss; the whole text is in the
#: table below): one per rank, or the last says how many ranks are left out.
VERDICTS = 3
#: What a summary row is keyed by, to pick its instances.
_KEYS = ("rank", "phase", "module", "operator", "call_site")


class SyncsScreen(AnalysisScreen):
    TITLE = "Syncs"
    ANALYSES = ("syncs", "sync_summary", "sync_verdict")
    STEPS = "whole trace, % of B's steps"  # step time: the step-time view's steps
    PLUGIN_STEPS = True  # ... in the rules it shows them (X)

    def compose_body(self) -> ComposeResult:
        yield TextBlock("", id="sync-verdict", classes="summary")
        # No key column: every column of a row can be null (a sync outside any op or module).
        yield FrameTable(id="sync-summary", export_name="sync_summary")
        yield Static("Syncs (enter on a row above: only its own)", classes="section-title")
        yield FrameTable(id="sync-instances", export_name="syncs", moment=SYNC_MOMENT)

    @staticmethod
    def compute(frames: dict[int, pl.DataFrame], params: Params) -> dict[str, pl.DataFrame]:
        options = registry.Options(tb_compat=bool(params.get("tb_compat", False)))
        out = registry.tables(frames, SyncsScreen.ANALYSES, options)
        return out | {"syncs": from_trace_start(out["syncs"], trace_origin(frames))}

    def compute_on(
        self, ts: TraceSet, frames: dict[int, pl.DataFrame], params: Params
    ) -> dict[str, pl.DataFrame]:
        """The flows frames besides the events: a backward sync follows its fwdbwd flow to the
        forward op (the sequence number alone when a trace has none)."""

        def chosen(name: str) -> dict[int, pl.DataFrame]:
            return {r: f for r, f in ts.frames(name).items() if r in frames}

        options = registry.Options(tb_compat=bool(params.get("tb_compat", False)))
        out = registry.tables(frames, self.ANALYSES, options, frames=chosen)
        return out | {"syncs": from_trace_start(out["syncs"], ts.origin_ns)}

    def show(self, result: dict[str, pl.DataFrame]) -> None:
        verdict: pl.DataFrame = result["sync_verdict"]
        # ranks with the same verdict share a line ("ranks 0-3: the host never waited"); a
        # call site's or module's line break is shown as \n
        # the rank whose host waits most first
        same = (
            verdict.group_by("verdict", maintain_order=True)
            .agg(pl.col("rank").sort(), pl.col("blocked_pctg").max())
            .sort("blocked_pctg", descending=True, nulls_last=True, maintain_order=True)
        )
        groups = [(ranks, v) for v, ranks, _ in same.iter_rows()]
        lines = [f"{ranks_label(r)}: {printable(v)}" for r, v in groups]
        if len(groups) > VERDICTS:  # say the others exist, and how to see one
            left = sum(len(r) for r, _ in groups[VERDICTS - 1 :])
            lines = [*lines[: VERDICTS - 1], f"... {left} more ranks: r picks one"]
        box = self.query_one("#sync-verdict", Static)
        box.set_class(len(lines) > 1, "-ranks")
        box.update("\n".join(lines) or "No trace loaded yet.")
        summary: pl.DataFrame = result["sync_summary"]
        self.query_one("#sync-summary", FrameTable).show_frame(
            ranks_first(
                summary.with_columns(pl.col("step_pctg").round(2))
                .select(list(SUMMARY_HEADERS))
                .rename(SUMMARY_HEADERS)
            )
        )
        self._show_instances(result["syncs"])
        if self.focused is None:
            self.call_after_refresh(self.query_one("#sync-summary", FrameTable).focus)

    def _show_instances(self, table: pl.DataFrame) -> None:
        shown = table.sort("blocked (us)", descending=True, maintain_order=True)
        # the kernel waited for by its short name; the export keeps the full one
        box = self.query_one("#sync-instances", FrameTable)
        box.hidden_columns = frozenset({FULL})
        shown = shown.select(list(INSTANCE_HEADERS)).rename(INSTANCE_HEADERS)
        short = fold_names(shown["waited for"], keep=0)
        box.show_frame(ranks_first(shown.with_columns(pl.col("waited for").alias(FULL), short)))

    @on(FrameTable.RowSelected, "#sync-summary")
    def _drill_down(self, event: FrameTable.RowSelected) -> None:
        """Enter on a call site: its syncs only."""
        row = self.query_one("#sync-summary", FrameTable).selected_row()
        if row is None or self.result is None:
            return
        names = {v: k for k, v in SUMMARY_HEADERS.items()}
        picked = {names[k]: v for k, v in row.items() if names.get(k) in _KEYS}
        table: pl.DataFrame = self.result["syncs"]
        match = pl.all_horizontal(pl.col(k).eq_missing(v) for k, v in picked.items())
        self._show_instances(table.filter(match))
        self.query_one("#sync-instances", FrameTable).focus()


def from_trace_start(syncs: pl.DataFrame, origin_ns: int | None) -> pl.DataFrame:
    """The syncs with their start in us from the trace's start (`TraceSet.origin_ns`, the
    timeline's origin), as kernel detail and idle time give theirs, not as in the file."""
    return syncs.with_columns((pl.col("start (us)") - (origin_ns or 0) / 1000).alias(START))


def ranks_first(table: pl.DataFrame) -> pl.DataFrame:
    """With more than one rank in a table, the rank column first: at 80 columns the last
    ones are off screen, and rows of different ranks would read as one rank's."""
    if "rank" not in table.columns or table["rank"].n_unique() < 2:
        return table
    return table.select("rank", pl.exclude("rank"))


def ranks_label(ranks: list[int]) -> str:
    if len(ranks) == 1:
        return f"rank {ranks[0]}"
    if ranks == list(range(ranks[0], ranks[-1] + 1)):
        return f"ranks {ranks[0]}-{ranks[-1]}"
    return "ranks " + ", ".join(map(str, ranks))
