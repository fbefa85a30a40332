"""The overview's first lines: what costs this job the most time, worst first by time at
stake per step (the rules' findings; `Z` opens them all with their evidence).

It computes in a worker of the overview's group (the app counts it as the overview's work,
`HtaApp.settled`), once no file is loading and the overview's numbers of that set are drawn
(`HtaApp.overview_drawn`: a first computation runs every analysis of every rank, ~0.2 s of
CPU a small rank, and must not take the cores the last files and the overview need), on a
thread of lower priority (`findings_data.in_background`): until
then it says it is computing, never a verdict about data it has not seen. At 80x24 it is a
title line and the two worst findings.
"""

from __future__ import annotations

import logging

from textual import on, work
from textual.app import ComposeResult
from textual.containers import Vertical
from textual.message import Message
from textual.worker import get_current_worker

from hta_tui.app.access import hta_app
from hta_tui.app.environment import one_line
from hta_tui.app.findings_data import (
    Findings,
    block_lines,
    compute_findings,
    counts_text,
    in_background,
)
from hta_tui.app.widgets.text_line import TextBlock, TextLine
from hta_tui.trace.model import TraceSet

#: Findings shown on a terminal of fewer than TALL rows, and on a taller one.
SHORT_LINES, TALL_LINES, TALL = 2, 4, 32
COMPUTING = "computing findings…"


class FindingsReady(Message):
    """The worker's findings (or its one-line failure) for a trace-set generation."""

    def __init__(self, result: Findings | None, generation: int, error: str = "") -> None:
        super().__init__()
        self.result = result
        self.generation = generation
        self.error = error


class FindingsBlock(Vertical):
    """Title line with the counts, then the worst findings that fired (see the module)."""

    class Changed(Message):
        """The block's height changed (the overview fits its other parts again)."""

    def __init__(self, **kw: object) -> None:
        super().__init__(**kw)  # type: ignore[arg-type]
        self.result: Findings | None = None
        self._asked: int | None = None  # the generation being computed or shown
        self._answered: int | None = None  # the generation whose findings (or error) are shown
        #: lines it takes (0 when off): the overview leaves out its step bar to make room
        self.rows = 0

    def compose(self) -> ComposeResult:
        yield TextLine("Findings · Z: all, with evidence", id="findings-title")
        yield TextBlock(COMPUTING, id="findings-lines")

    def on_mount(self) -> None:
        if not hta_app(self).overview_findings:
            self.display = False  # `$HTA_TUI_FINDINGS=0`: nothing computed here
            return
        self._set_rows(2)
        self.watch(self.app, "data", self._data_changed, init=True)

    def on_resize(self) -> None:
        self._draw()

    @property
    def current(self) -> bool:
        """The findings of the current trace set are shown (tests wait for it)."""
        ts = hta_app(self).trace_set
        return self.result is not None and self.result.generation == ts.generation

    @property
    def settled(self) -> bool:
        """Nothing left to show for the current set: its findings (or why there are none)
        drawn, or the block off (`HtaApp.settled` waits for it)."""
        if not self.is_mounted or not self.display:
            return True
        ts = hta_app(self).trace_set
        return not ts.loaded() or self._answered == ts.generation

    def _data_changed(self, _data: object = None) -> None:
        ts = hta_app(self).trace_set
        entries = list(ts.entries.values())
        busy = sum(e.status in ("pending", "loading") for e in entries)
        scanning = any(s.scanning for s in hta_app(self).session.sides.values())
        if busy or scanning:  # never a verdict before the data
            self._say(f"{COMPUTING} (waiting for {busy} of {len(entries)} files)")
            return
        if not ts.loaded():
            self.result = None
            self._say("No findings: no trace loaded.")
            return
        if self._asked == ts.generation:
            return
        if not hta_app(self).overview_drawn:  # `overview_drawn()` asks again once it is
            self._say(f"{COMPUTING} (after the overview)")
            return
        self._asked = ts.generation
        if not self.current:
            self._say(COMPUTING)
        self._compute(ts.snapshot())

    def overview_drawn(self) -> None:
        """The overview screen drew its numbers: the findings' turn, if they wait for it."""
        if self.is_mounted and self.display:
            self._data_changed()

    @work(thread=True, exclusive=True, group="overview", exit_on_error=False, name="findings")
    def _compute(self, ts: TraceSet) -> None:
        worker = get_current_worker()
        try:
            # at a lower priority: the UI thread, and a file landing meanwhile, come first
            # ... and waiting at its checkpoints while a screen just shown is drawn
            app = hta_app(self)
            wait = app.foreground.while_drawing()
            result = in_background(compute_findings, ts, app.kept_answers, checkpoint=wait)
        except Exception as exc:  # the rest of the overview shows all the same
            logging.getLogger("hta_tui").exception("the overview's findings failed")
            self.post_message(FindingsReady(None, ts.generation, one_line(exc)))
            return
        if not worker.is_cancelled:
            self.post_message(FindingsReady(result, ts.generation))

    @on(FindingsReady)
    def _ready(self, msg: FindingsReady) -> None:
        msg.stop()
        if msg.generation != self._asked:
            return  # an older set's
        self._answered = msg.generation
        if msg.result is None:
            self._say(f"Findings not computed: {msg.error}")
            return
        self.result = msg.result
        self._draw()

    def _set_rows(self, rows: int) -> None:
        if rows != self.rows:
            self.rows = rows
            self.post_message(self.Changed())

    def _say(self, text: str) -> None:
        self.query_one("#findings-title", TextLine).update("Findings · Z: all, with evidence")
        self.query_one("#findings-lines", TextBlock).update(text)
        self._set_rows(2)

    def _draw(self) -> None:
        if self.result is None or not self.is_mounted:
            return
        width = max(self.size.width, 20)
        most = TALL_LINES if self.app.size.height >= TALL else SHORT_LINES
        findings = self.result.findings
        title = f"Findings · {counts_text(findings)} · Z: all, with evidence"
        self.query_one("#findings-title", TextLine).update(title)
        lines = block_lines(findings, width, most)
        self.query_one("#findings-lines", TextBlock).update("\n".join(lines))
        self._set_rows(1 + len(lines))
