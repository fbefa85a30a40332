"""Screen Z: the findings, worst first by the time at stake per step, each with its advice
and the evidence rows it rests on.

`enter` on a finding opens the view and row of its first evidence (on an evidence row, of
that one); `t` opens the timeline at the moment of the finding's first timed evidence (of the
evidence row under the cursor). Every rank loaded, whatever rank `r` chose elsewhere: a
finding says which ranks it is about.
"""

from __future__ import annotations

from typing import Any

import polars as pl
from textual import on
from textual.app import ComposeResult
from textual.widgets import Static

from hta_tui.app.access import hta_app
from hta_tui.app.evidence import open_evidence
from hta_tui.app.findings_data import (
    MOMENT_COLUMNS,
    SEVERITY_LABEL,
    Findings,
    compute_findings,
    stake_text,
    with_moments,
)
from hta_tui.app.moment import MomentColumns
from hta_tui.app.screens.base import AnalysisScreen, Params
from hta_tui.app.widgets.frame_table import FrameTable
from hta_tui.app.widgets.text_line import TextBlock
from hta_tui.trace.model import TraceSet

#: A finding's first evidence with a moment (its time, else its step), kept beside its row
#: (not drawn) for `t`; an evidence row's own.
FIRST = ("ev_rank", "m_t", "m_dur", "m_name")
FINDING_MOMENT = MomentColumns(
    "m_t", unit="us", base="job", rank="ev_rank", dur="m_dur", name="m_name"
)
EVIDENCE_MOMENT = MomentColumns(
    "m_t", unit="us", base="job", rank="rank", dur="m_dur", name="m_name"
)


def finding_rows(result: Findings) -> pl.DataFrame:
    """The findings table as shown: severity, time at stake, rule, title, value against
    threshold, ranks; the first timed evidence of each kept for `t`."""
    timed = (
        with_moments(result.evidence)
        .filter(pl.col("m_t").is_not_null())
        .sort("id", "n")
        .group_by("id", maintain_order=True)
        .first()
        .select("id", pl.col("rank").alias("ev_rank"), *MOMENT_COLUMNS)
    )
    f = result.findings.with_row_index("order")
    stakes = [stake_text(row) for row in f.iter_rows(named=True)]  # one per rule (a dozen)
    shown = f.select(
        "order",
        pl.col("severity").replace_strict(SEVERITY_LABEL, default=pl.col("severity")).alias("sev"),
        pl.Series("at stake", stakes, dtype=pl.String),
        "id",
        "title",
        pl.col("value").round(2),
        pl.col("threshold").round(2),
        "ranks",
    )
    return shown.join(timed, on="id", how="left").sort("order").drop("order")


def evidence_rows(evidence: pl.DataFrame, rule: str | None) -> pl.DataFrame:
    """A finding's evidence rows as shown (every finding's when `rule` is None)."""
    rows = evidence if rule is None else evidence.filter(pl.col("id") == rule)
    return with_moments(rows.sort("id", "n")).select(
        "label",
        "view",
        "rank",
        "step",
        pl.col("start_us").round(1).alias("start (us)"),
        (pl.col("end_us") - pl.col("start_us")).round(1).alias("dur (us)"),
        "event",
        "start_us",
        "end_us",
        "table",
        "id",
        *MOMENT_COLUMNS,
    )


class FindingsScreen(AnalysisScreen):
    TITLE = "Findings"
    ANALYSES = ("findings", "finding_evidence")
    STEPS = "each rule's steps, time at stake per step"
    FOLLOWS_RANK = False

    def compose_body(self) -> ComposeResult:
        yield FrameTable(id="findings-table", export_name="findings", moment=FINDING_MOMENT)
        yield TextBlock("", id="finding-advice", classes="summary")
        yield Static(
            "Evidence · enter: its view and row · t: the timeline at its moment",
            classes="section-title",
        )
        yield FrameTable(
            id="finding-evidence", export_name="finding_evidence", moment=EVIDENCE_MOMENT
        )

    def compute_on(self, ts: TraceSet, frames: dict[int, pl.DataFrame], params: Params) -> Any:
        return compute_findings(ts, hta_app(self).kept_answers)

    def show(self, result: Findings) -> None:
        table = self.query_one("#findings-table", FrameTable)
        table.hidden_columns = frozenset(FIRST)
        table.show_frame(finding_rows(result))
        self._show_finding()
        if self.focused is None:
            self.call_after_refresh(table.focus)

    def _current_rule(self) -> dict[str, Any] | None:
        return self.query_one("#findings-table", FrameTable).selected_row()

    def _show_finding(self) -> None:
        """The advice (or why it abstained) and the evidence of the finding under the cursor."""
        result: Findings | None = self.result
        if result is None:
            return
        row = self._current_rule()
        rule = row["id"] if row else None
        advice = ""
        if rule is not None:
            full = result.findings.filter(pl.col("id") == rule).row(0, named=True)
            advice = full["advice"] or (f"abstained: {full['reason']}" if full["reason"] else "")
        self.query_one("#finding-advice", TextBlock).update(advice)
        evidence = self.query_one("#finding-evidence", FrameTable)
        evidence.hidden_columns = frozenset({"id", "table", "start_us", "end_us", *MOMENT_COLUMNS})
        evidence.show_frame(evidence_rows(result.evidence, rule))

    @on(FrameTable.RowHighlighted, "#findings-table")
    def _highlighted(self, _event: FrameTable.RowHighlighted) -> None:
        self._show_finding()

    @on(FrameTable.RowSelected, "#findings-table")
    def _open_first(self, _event: FrameTable.RowSelected) -> None:
        """Enter on a finding: the view and row of its first evidence."""
        row = self._current_rule()
        result: Findings | None = self.result
        if row is None or result is None:
            return
        ev = result.evidence.filter(pl.col("id") == row["id"]).sort("n")
        if ev.is_empty():
            self.app.notify(f"{row['id']}: no evidence row to open", timeout=4)
            return
        open_evidence(self, ev.row(0, named=True))

    @on(FrameTable.RowSelected, "#finding-evidence")
    def _open_one(self, _event: FrameTable.RowSelected) -> None:
        row = self.query_one("#finding-evidence", FrameTable).selected_row()
        if row is not None and row.get("view"):
            open_evidence(self, row)
