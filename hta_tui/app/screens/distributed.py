"""Screen w: the distributed view. Is communication hiding behind compute, and who is
everyone waiting for?

The summary names the rank the others wait for at collectives (`comm_stats
.collective_stragglers`: the rank that arrived last, what it cost the others, its costliest
collective). Per rank a stacked bar splits the mean step into computation, overlapping,
communication and other (the TensorBoard plugin's definitions, every collective counted:
`comm_overview`); with
more ranks than the box shows, the ranks with the most communication come first. The tabs
hold the straggler ranking, every collective instance matched across ranks, the
communication op stats (bytes, wait, transfer, bandwidth) and transfer vs waiting time per
rank and step.
"""

from __future__ import annotations

from typing import Any, ClassVar

import polars as pl
from textual.app import ComposeResult
from textual.binding import BindingType
from textual.containers import VerticalScroll
from textual.widgets import Static, TabbedContent, TabPane

from hta_tui.analysis import registry
from hta_tui.app.access import hta_app
from hta_tui.app.format import fmt_us
from hta_tui.app.moment import MomentColumns
from hta_tui.app.screens.base import TABLE_BINDING, AnalysisScreen, Params
from hta_tui.app.widgets.bars import BarRow, StackedBars
from hta_tui.app.widgets.frame_table import FrameTable, RankSummary
from hta_tui.app.widgets.text_line import TextBlock
from hta_tui.printable import printable

#: (category, legend label, Unicode glyph, ASCII glyph)
CATEGORIES: tuple[tuple[str, str, str, str], ...] = (
    ("computation", "computation", "█", "#"),
    ("overlapping", "overlapping", "▓", "="),
    ("communication", "communication", "▒", "+"),
    ("other", "other", "░", "."),
)
#: Bars the box shows without scrolling (the legend takes one more line).
MANY_BARS = 8

TABS = ("tab-stragglers", "tab-collectives", "tab-ops", "tab-wait")

#: Column -> header, in the order shown; long text last so numbers stay on an 80-column screen.
STRAGGLER_HEADERS: dict[str, str] = {
    "rank": "rank",
    "times_last": "last at",
    "cost_us": "cost (us)",
    "share_pctg": "share %",
    "worst_kind": "worst",
    "worst_step": "step",
    "worst_cost_us": "worst (us)",
    "why": "why",
}
INSTANCE_HEADERS: dict[str, str] = {
    "pg": "group",
    "seq": "seq",
    "kind": "kind",
    "step": "step",
    "ranks": "ranks",
    "last_rank": "last",
    "cost_us": "cost (us)",
    "spread_us": "spread (us)",
    "transfer_us": "transfer (us)",
    "bytes": "bytes",
}
#: `t` on a collective: the call of the rank that arrived last (hidden columns, ns as written).
INSTANCE_MOMENT = MomentColumns(
    "last_ts", unit="ns", base="abs", rank="last", dur="last_dur", name="last_name"
)
#: `t` on a rank's step of the wait/transfer table: its ProfilerStep (none for the mean row).
WAIT_MOMENT = MomentColumns(None, name="step_name")
OPS_HEADERS: dict[str, str] = {
    "rank": "rank",
    "kind": "kind",
    "calls": "calls",
    "mean_bytes": "mean bytes",
    "wait_us": "wait (us)",
    "transfer_us": "transfer (us)",
    "algbw_GBps": "algbw GB/s",
    "busbw_GBps": "busbw GB/s",
    "total_latency_us": "latency (us)",
    "total_bytes": "bytes",
}
#: The wait/transfer table's times with their unit, as the other tables give it.
WAIT_HEADERS: dict[str, str] = {
    "rank": "rank",
    "step": "step",
    "transfer": "transfer (us)",
    "synchronizing": "synchronizing (us)",
    "step_name": "step_name",
}


class CommBars(StackedBars):
    """Per rank: computation / overlapping / communication / other of the mean step."""

    COMPONENT_CLASSES: ClassVar[set[str]] = StackedBars.COMPONENT_CLASSES | {
        f"stacked-bars--{c[0]}" for c in CATEGORIES
    }


class DistributedScreen(AnalysisScreen):
    TITLE = "Distributed"
    ANALYSES = (
        "comm_comp_per_rank",
        "collective_stragglers",
        "collective_instances",
        "comm_ops_stats",
        "comm_wait_transfer",
        "collective_last_calls",
    )
    STEPS = "every ProfilerStep"
    PLUGIN_WHY = "every collective counted, timed on the GPU"

    BINDINGS: ClassVar[list[BindingType]] = [
        TABLE_BINDING,
    ]

    def compose_body(self) -> ComposeResult:
        yield TextBlock("", id="dist-summary", classes="summary")
        with VerticalScroll(id="dist-bars-box", can_focus=False):
            yield CommBars(CATEGORIES, ascii=hta_app(self).ascii, id="dist-bars")
        with TabbedContent(id="dist-tabs"):
            with TabPane("Stragglers", id=TABS[0]):
                yield FrameTable(
                    id="dist-stragglers",
                    key_column="rank",
                    export_name="stragglers",
                    ranks=RankSummary(worst="cost (us)"),
                )
            with TabPane("Collectives", id=TABS[1]):
                yield FrameTable(
                    id="dist-collectives", export_name="collectives", moment=INSTANCE_MOMENT
                )
            with TabPane("Comm ops", id=TABS[2]):
                yield FrameTable(id="dist-ops", export_name="comm_ops")
            with TabPane("Wait/transfer", id=TABS[3]):
                yield FrameTable(id="dist-wait", export_name="wait_transfer", moment=WAIT_MOMENT)

    @staticmethod
    def compute(frames: dict[int, pl.DataFrame], params: Params) -> dict[str, Any]:
        compat = bool(params.get("tb_compat", False))  # the plugin's own formulas (X)
        got = registry.tables(
            frames, DistributedScreen.ANALYSES, registry.Options(tb_compat=compat)
        )
        return {
            "means": got["comm_comp_per_rank"].filter(pl.col("step") == "all"),
            "stragglers": got["collective_stragglers"],
            "instances": got["collective_instances"],
            "last_calls": got["collective_last_calls"],
            "ops": got["comm_ops_stats"],
            "wait": got["comm_wait_transfer"],
        }

    def show(self, result: dict[str, Any]) -> None:
        stragglers: pl.DataFrame = result["stragglers"]
        self.query_one("#dist-stragglers", FrameTable).show_frame(
            _headed(stragglers, STRAGGLER_HEADERS)
        )
        moments = ("last_ts", "last_dur", "last_name")
        instances = result["instances"].join(result["last_calls"], on=["pg", "seq"], how="left")
        table = self.query_one("#dist-collectives", FrameTable)
        table.hidden_columns = frozenset(moments)
        table.show_frame(_headed(instances, {**INSTANCE_HEADERS, **{m: m for m in moments}}))
        self.query_one("#dist-ops", FrameTable).show_frame(_headed(result["ops"], OPS_HEADERS))
        wait = self.query_one("#dist-wait", FrameTable)
        wait.hidden_columns = frozenset({"step_name"})
        step = pl.col("step")
        name = pl.when(step.str.contains(r"^\d+$")).then(pl.lit("ProfilerStep#") + step)
        wait.show_frame(_headed(result["wait"].with_columns(name.alias("step_name")), WAIT_HEADERS))
        self.query_one("#dist-summary", Static).update(self._summary(result))
        self._show_bars(result["means"])
        if not isinstance(self.focused, FrameTable):
            self.call_after_refresh(self._focus_table)

    def _show_bars(self, means: pl.DataFrame) -> None:
        box = self.query_one("#dist-bars-box")
        box.display = not means.is_empty()
        rows = means.sort("rank")
        if rows.height > MANY_BARS:  # the ranks whose steps are most communication first
            rows = rows.sort(["communication", "rank"], descending=[True, False])
        self.query_one("#dist-bars", CommBars).set_rows(
            [
                BarRow(f"r{r['rank']}", tuple(float(r[c[0]] or 0) for c in CATEGORIES))
                for r in rows.iter_rows(named=True)
            ]
        )

    @staticmethod
    def _summary(result: dict[str, Any]) -> str:
        stragglers: pl.DataFrame = result["stragglers"]
        instances: pl.DataFrame = result["instances"]
        if instances.is_empty():
            return "No collectives in these ranks (NCCL kernels, nccl:/gloo: ops)."
        if stragglers.is_empty():
            seen = (
                "1 collective, not seen on another rank"
                if instances.height == 1
                else f"{instances.height} collectives, none seen on two ranks"
            )
            return f"{seen}: load more ranks to see who waits for whom."
        t = stragglers.row(0, named=True)
        step = f" in step {t['worst_step']}" if t["worst_step"] is not None else ""
        return (
            f"Everyone waits most for rank {t['rank']}: last at {t['times_last']} of "
            f"{t['instances']} collectives, {fmt_us(t['cost_us'])} of waiting for the others; "
            f"worst {printable(t['worst_kind'])} #{t['worst_seq']} "
            f"(group {printable(t['worst_pg'])}){step}, {fmt_us(t['worst_cost_us'])}."
        )

    def _focus_table(self) -> None:
        tabs = self.query_one("#dist-tabs", TabbedContent)
        pane = tabs.active or TABS[0]
        tables = list(self.query_one(f"#{pane}", TabPane).query(FrameTable))
        if tables:
            tables[0].focus()

    def action_next_table(self) -> None:
        tabs = self.query_one("#dist-tabs", TabbedContent)
        current = tabs.active if tabs.active in TABS else TABS[0]
        tabs.active = TABS[(TABS.index(current) + 1) % len(TABS)]
        self.call_after_refresh(self._focus_table)


def _headed(df: pl.DataFrame, headers: dict[str, str]) -> pl.DataFrame:
    """The columns shown, renamed to short headers (light reshaping of the analysis's rows)."""
    return df.select([c for c in headers if c in df.columns]).rename(
        {k: v for k, v in headers.items() if k in df.columns}
    )
