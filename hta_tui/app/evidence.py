"""Opening a finding's evidence: its view (the row's `view`, an app mode) with the cursor on
the row of its rank, step and event, or the timeline at its moment.

The row is looked for in the view's tables once they show the current numbers (at once if
they already do): the first table with a row whose rank (where it has a rank column) and step
(where it has a step column) match and one of whose text cells is the event; a table in a
tab that is not shown gets its tab shown. No such row: the view opens all the same, and a
notice says what was looked for.
"""

from __future__ import annotations

import contextlib
from collections.abc import Mapping
from typing import Any

import polars as pl
from textual.css.query import NoMatches
from textual.screen import Screen
from textual.widgets import TabbedContent, TabPane

from hta_tui.app.access import hta_app
from hta_tui.app.findings_data import with_moments
from hta_tui.app.moment import Moment, MomentColumns
from hta_tui.app.screens.registry import BY_MODE, DIFF
from hta_tui.app.widgets.frame_table import FrameTable

#: An evidence row's moment (its columns from `with_moments`).
EVIDENCE_MOMENT = MomentColumns(
    "m_t", unit="us", base="job", rank="rank", dur="m_dur", name="m_name"
)


def evidence_moment(row: Mapping[str, Any]) -> Moment | None:
    """The timeline moment of an evidence row (`findings_data.with_moments`: its time
    window, else its step), None when it names neither."""
    if row.get("rank") is None:
        return None
    moment = EVIDENCE_MOMENT.moment(dict(with_moments(pl.DataFrame([row])).row(0, named=True)))
    return moment


def row_index(
    df: pl.DataFrame, rank: int | None, step: int | None, event: str | None
) -> tuple[int, int]:
    """(the first row of `df` for the rank, step and event, how many of the three the table
    could check); (-1, 0) when none matches. The event must match where one is given."""
    if df.is_empty():
        return -1, 0
    conds = []
    if rank is not None and "rank" in df.columns and df.schema["rank"].is_integer():
        conds.append(pl.col("rank") == rank)
    if step is not None and "step" in df.columns and df.schema["step"].is_integer():
        conds.append(pl.col("step") == step)
    if event:
        texts = [c for c, t in df.schema.items() if t == pl.String or t == pl.Categorical]
        if not texts:
            return -1, 0
        conds.append(pl.any_horizontal(pl.col(c).cast(pl.String) == event for c in texts))
    if not conds:
        return -1, 0
    hits = df.with_row_index("_row").filter(pl.all_horizontal(conds).fill_null(False))
    return (int(hits["_row"][0]), len(conds)) if hits.height else (-1, 0)


def select_row(screen: Screen, row: Mapping[str, Any]) -> bool:
    """Put the cursor of the screen's table that holds the evidence's row most exactly (the
    most of rank, step and event matched; the first such; the rank and step alone where no
    cell names the event) on it, its tab shown and the table focused; False when no table
    holds it."""
    rank, step, event = row.get("rank"), row.get("step"), row.get("event")
    best: tuple[int, int, FrameTable] | None = None
    # the event named in a cell; else (a step's DataLoader time, a slow step) its rank's step
    for name in dict.fromkeys((event, None)):
        for table in screen.query(FrameTable):
            index, matched = row_index(table.view_frame, rank, step, name)
            if index >= 0 and (best is None or matched > best[1]):
                best = (index, matched, table)
        if best is not None:
            break
    if best is None:
        return False
    index, _, table = best
    pane = next((a for a in table.ancestors if isinstance(a, TabPane)), None)
    if pane is not None and pane.id:
        with contextlib.suppress(NoMatches):
            screen.query_one(TabbedContent).active = pane.id
    table.focus()
    table.call_after_refresh(table.move_cursor, row=index)
    return True


#: The parameters a view needs to show an evidence's table (view, table) -> params: the
#: Comm/comp overlap view shows the collectives per stream, step and layer after `v`.
SHOWS_TABLE: dict[tuple[str, str], dict[str, Any]] = {
    ("overlap", "collectives_hidden"): {"layers": True},
}


def open_evidence(screen: Screen, row: Mapping[str, Any]) -> None:
    """Enter on a finding or an evidence row: its view and row, or the timeline there."""
    app = hta_app(screen)
    view = str(row.get("view") or "")
    moment = evidence_moment(row)
    if view == "timeline" or (view not in BY_MODE and view != DIFF.mode):
        if moment is None:
            app.notify(f"{row.get('label') or view}: no view or moment to open", timeout=4)
            return
        app.show_view("timeline")
        target = app.screen
        if hasattr(target, "show_moment"):
            target.show_moment(moment)
        return
    app.show_view(view)
    target = app.screen
    if app.current_mode != view or not hasattr(target, "select_when_shown"):
        return
    rank = row.get("rank")
    follows = getattr(target, "FOLLOWS_RANK", False)
    if follows and rank is not None and app.rank_choice not in (None, rank):
        app.rank_choice = int(rank)  # the row is of a rank the view does not show now
    params = SHOWS_TABLE.get((view, str(row.get("table") or "")))
    if params and hasattr(target, "set_params"):
        target.set_params(**params)
    target.select_when_shown(lambda: _select_or_say(target, row))


def _select_or_say(screen: Screen, row: Mapping[str, Any]) -> None:
    if not select_row(screen, row):
        what = ", ".join(
            f"{k} {row[k]}" for k in ("rank", "step", "event") if row.get(k) is not None
        )
        screen.app.notify(f"No row here for {what}", timeout=5)
