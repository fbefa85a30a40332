"""The ranks' frames read ahead of the first view (issue 27), mixed into HtaApp.

Every view reads every rank's events frame, and most start from HTA's view of each rank
(`hta_view.rank_view`): the first one visited paid for both (0.5-0.8 s and ~0.35 s of CPU
on 8 real ranks of 100 MB, most of its second); the Operators view also builds each rank's
operator tree (~0.9 s of CPU there, +120-160 MB kept). Once the open is done and the overview
drawn, a worker makes them (`read_ahead`: only for sets whose frames the views would hold
anyway), while the user looks at the overview. Before each rank it passes the foreground's
checkpoint as a view of its own that is never shown: it waits while the view shown
computes, so it never holds up a view's numbers by more than one rank's piece; and it runs
on a thread of lower priority (`in_background`, as the overview's findings do).
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from textual import work
from textual.worker import get_current_worker

from hta_tui.analysis import op_tree, tb_steps
from hta_tui.analysis.checkpoint import hooked
from hta_tui.analysis.hta_view import CACHED_COLUMNS, hta_view
from hta_tui.app.findings_data import in_background
from hta_tui.app.foreground import Foreground, Superseded
from hta_tui.app.mixin import AppMixin
from hta_tui.session import LiveSession
from hta_tui.trace.model import READ_AHEAD_RANKS, TraceSet

#: Files above which the set is not even looked at (its ranks are more than read ahead).
READ_AHEAD_FILES = 4 * READ_AHEAD_RANKS


def read_ahead(ts: TraceSet, checkpoint: Callable[[], None] = lambda: None) -> bool:
    """Every rank's frames (`TraceSet.read_ahead`), then HTA's view of each, as a view of
    every rank with the default options builds it, then each rank's steps as the plugin's
    views move them to their GPU work (`tb_steps`: the Step time, GPU metrics and Syncs
    views' and the overview's; ~25 ms of CPU a rank of 100 MB, a fifth of the Syncs view's
    first visit), then each rank's operator tree (the Operators view's and the
    kernels-by-operator table's: ~0.05 s of CPU a rank, most of the Operators view's first
    visit); each kept while its frame is, shared by the views; `checkpoint` before each
    rank's piece. The steps and the trees are made outside the locks a view's build holds
    (`hta_view.made_ahead`): a view asking for one meanwhile never waits for this thread
    of lower priority. False for a set not read ahead."""
    if not ts.reads_ahead():
        return False
    ts.read_ahead(checkpoint)
    with hooked(checkpoint):  # each piece below passes a checkpoint before each rank
        frames = ts.frames()
        hta_view(frames, columns=CACHED_COLUMNS)
        for _rank, events in sorted(frames.items()):
            tb_steps.steps_ahead(events)
        for _rank, events in sorted(frames.items()):
            op_tree.build_ahead(events)
    return True


class ReadAhead:
    """The read-ahead's place among the views (`Foreground`): never shown, so it gives way
    to whichever view is shown and computing."""


class ReadAheadMixin(AppMixin):
    """Reads the main side's frames once per set generation; `session` and `foreground`
    are HtaApp's."""

    session: LiveSession
    foreground: Foreground
    _read_ahead_generation: int = -1
    _overview_shown: int  # RefreshMixin's: the generation whose overview is drawn

    def start_read_ahead(self) -> None:
        """UI thread, once the overview is drawn: read the frames if the set is complete
        (nothing listing or loading), its overview is the one drawn (a set that moved on since
        gets its own overview, then this call again) and its frames were not read ahead yet."""
        ts = self.session.trace_set
        if ts.generation == self._read_ahead_generation or len(ts.entries) > READ_AHEAD_FILES:
            return
        if ts.generation != self._overview_shown:
            return
        counts = ts.counts()
        listing = any(side.scanning for side in self.session.sides.values())
        if counts.get("pending", 0) or counts.get("loading", 0) or listing:
            return
        self._read_ahead_generation = ts.generation
        self._read_ahead(ts.snapshot())

    @work(thread=True, exclusive=True, group="read_ahead", exit_on_error=False)
    def _read_ahead(self, ts: TraceSet) -> None:
        # work every view needs: it goes on as soon as the view shown has its numbers
        checkpoint = self.foreground.give_way(ReadAhead(), get_current_worker(), lingers=False)
        try:
            in_background(read_ahead, ts, checkpoint)
        except Superseded:  # a newer set's read-ahead took over
            return
        except Exception:  # the views make them again, and say why
            logging.getLogger("hta_tui").exception("reading the frames ahead failed")
