"""The refresh, mixed into HtaApp, pushed rather than polled: when the session's state
(`HtaApp.data`) or `every_step` changes, the status bars follow the trace sets, and a snapshot
of the set goes to _compute_overview (thread) -> OverviewReady -> the overview screen. One
overview computation runs at a time; a change meanwhile starts the next when it ends. While
files are still landing, the next waits OVERVIEW_SPACING times the last one's duration: the
overview's progress takes a small share of a core from the parser workers, and the last
file's overview starts at once."""

from __future__ import annotations

import logging
import time
from collections import Counter
from collections.abc import Callable
from typing import Any

from textual import work
from textual.worker import Worker, WorkerState, get_current_worker

from hta_tui.analysis import registry, scope
from hta_tui.app.environment import one_line
from hta_tui.app.format import RowWidths, file_columns, file_rows, temporal_rows
from hta_tui.app.messages import OverviewReady
from hta_tui.app.mixin import AppMixin
from hta_tui.app.screens.base import definitions_text
from hta_tui.app.screens.overview import OverviewData, OverviewScreen
from hta_tui.app.screens.plugin_steps import describe_used
from hta_tui.app.screens.step_time import overview_rows
from hta_tui.app.widgets.findings_block import FindingsBlock
from hta_tui.app.widgets.status import StatusBar, StatusInfo
from hta_tui.session import LiveSession, Side
from hta_tui.trace.cache import take_notices
from hta_tui.trace.model import TraceSet

#: Where the overview's step time differs from the plugin's own rules (the step-time view's
#: `PLUGIN_WHY`, short enough for the box's border at 80 columns).
STEP_WHY = "cuda_runtime as Runtime, NCCL as Comm"
#: The overview's file table and the rows kept for its next update (the registry's).
OVERVIEW_FILES = ("overview_files", "overview_kept_rows")
#: While files land, an overview starts no sooner than this many times the last one's
#: duration after the last one started, and at least OVERVIEW_GAP s (at 1,000 small files
#: one takes ~0.1-0.3 s of a core, and back to back they took a core from the parsers).
OVERVIEW_SPACING = 4.0
OVERVIEW_GAP = 0.5


class RefreshMixin(AppMixin):
    """The refreshing half of HtaApp; the attributes below are set by HtaApp.__init__."""

    session: LiveSession
    timings: bool
    every_step: bool
    tb_compat: bool
    watcher_state: str
    status_info: StatusInfo
    overview_data: OverviewData | None
    _label: str
    _status_label: str
    _status_sides: list[Side]
    _overview_worker: Worker | None
    _overview_requested: tuple[Any, ...] | None
    _overview_shown: int
    #: the `_overview_key()` of the overview on screen: a recomputation of the same generation
    #: (the scan ended, a switch flipped) is not drawn until its own message is applied
    _overview_drawn_key: tuple[Any, ...] | None = None
    #: the overview's file rows of its last computation, reused where nothing changed (the
    #: registry's `overview_kept_rows`, given back to it)
    _kept_rows: Any = None
    #: when the last overview computation started (monotonic s) and how long it took (s)
    _overview_started: float = float("-inf")
    _overview_cost: float = 0.0
    _overview_timer: Any = None
    start_read_ahead: Callable[[], None]  # ReadAheadMixin's

    @property
    def overview_drawn(self) -> bool:
        """The overview's numbers of the current main set are drawn (the findings wait for
        it: until then every core goes to the files and the overview)."""
        return self._overview_shown == self.session.trace_set.generation

    @property
    def settled(self) -> bool:
        """Nothing left to do: no file loading, no overview computing or out of date, its
        findings drawn when they are on (tests)."""
        busy = not self.session.idle or any(
            w.group == "overview" and not w.is_finished for w in self.workers
        )
        sides_done = all(
            not state.scanning
            and state.trace_set.counts().get("pending", 0) == 0
            and state.trace_set.counts().get("loading", 0) == 0
            for state in self.session.sides.values()
        )
        return (
            not busy
            and sides_done
            and self._overview_requested == self._overview_key()
            and self._overview_drawn_key == self._overview_requested
            and self._overview_shown == self.session.trace_set.generation
            and all(block.settled for s in self.screen_stack for block in s.query(FindingsBlock))
        )

    @work(thread=True, exclusive=True, group="overview", exit_on_error=False, name="overview")
    def _compute_overview(self, ts: TraceSet, generation: int, ctx: dict[str, Any]) -> None:
        started = time.perf_counter()
        try:
            self._overview_of(ts, generation, ctx)
        finally:
            self._overview_cost = time.perf_counter() - started

    def _overview_of(self, ts: TraceSet, generation: int, ctx: dict[str, Any]) -> None:
        worker = get_current_worker()
        # through the registry's door, from the per-file summaries the loader made (no frame
        # read); rows made again only for the files that changed (one worker at a time)
        got = registry.set_tables(ts, OVERVIEW_FILES, given={"overview_kept_rows": self._kept_rows})
        files, self._kept_rows = got["overview_files"], got["overview_kept_rows"]
        if worker.is_cancelled:
            return
        options = registry.Options(every_step=ctx["every_step"], tb_compat=ctx["tb_compat"])
        temporal = registry.set_tables(ts, ["overview_temporal"], options)["overview_temporal"]
        if worker.is_cancelled:
            return
        landed = bool(ts.loaded())  # no verdict (no steps, no ProfilerStep) before a rank
        try:
            step_frame = registry.set_tables(ts, ["overview_steps"], options)["overview_steps"]
            step_text, step_bar = overview_rows(step_frame)
            used = tuple(step_frame["step"].unique().sort().to_list())
            names = {n for d in ts.loaded().values() for n in d.meta.get("step_names", ())}
            step_scope = describe_used(used, whole_trace=not names) if used else ""
            if not landed:
                step_text = "Step time: waiting for the first rank…" if ctx["loading"] else ""
        except Exception as exc:  # the files and the temporal breakdown show all the same
            logging.getLogger("hta_tui").exception("the overview's step time failed")
            step_text, step_bar = f"Step time not computed: {one_line(exc)}", None
            step_scope = ""
        if worker.is_cancelled:
            return
        columns = file_columns(files, show_timings=ctx["timings"])
        rows = file_rows(files, watching=ctx["watching"])
        data = OverviewData(
            columns=columns,
            rows=rows,
            widths=RowWidths.of(rows),  # here, not on the UI thread
            temporal=temporal_rows(temporal),
            temporal_ranks=temporal.height,
            step_text=step_text,
            step_bar=step_bar,
            step_scope=step_scope,
            step_definitions=definitions_text(STEP_WHY, tb_compat=ctx["tb_compat"]),
            generation=generation,
            loaded_ranks=len(ts.loaded()),
            loading=ctx["loading"],
            watching=ctx["watching"],
            root=ctx["root"],
            steps=scope.steps_from_names(
                {n for d in ts.loaded().values() for n in d.meta.get("step_names", ())},
                every_step=ctx["every_step"],
            )
            if landed
            else "",
        )
        self.post_message(OverviewReady(files, temporal, generation, data, key=ctx["key"]))

    def _on_overview_ready(self, msg: OverviewReady) -> None:
        if msg.generation < self._overview_shown or msg.data is None:
            return  # older than what is on screen
        self._overview_shown = msg.generation
        self._overview_drawn_key = msg.key
        self.overview_data = msg.data
        for screen in self.screen_stack:
            # one still mounting shows `overview_data` from its own on_mount: its widgets
            # may not all be there yet
            if isinstance(screen, OverviewScreen) and screen.is_mounted:
                screen.show_overview(self.overview_data)
        self.start_read_ahead()  # the frames, while the user looks at the overview

    def _overview_key(self) -> tuple[Any, ...]:
        # the scan's end changes what an empty overview says, not the set
        scanning = any(side.scanning for side in self.session.sides.values())
        return (
            self.session.trace_set.generation,
            self.watcher_state != "off",
            self.every_step,
            self.tb_compat,
            scanning,
        )

    # -- pushed: Textual calls these when the reactive values change -----------------------------
    def watch_data(self) -> None:
        self._show_notices()
        self._refresh_status()
        self._request_overview()

    def watch_every_step(self) -> None:
        self._request_overview()

    def watch_tb_compat(self) -> None:
        """`X`: the overview's step-time lines follow the plugin views' definitions."""
        self._request_overview()

    def on_worker_state_changed(self, event: Worker.StateChanged) -> None:
        """A worker ended (screens' too: their messages bubble here): frames it read may have
        found damaged cache entries; the overview's end starts the next one if it is due."""
        if event.state not in (WorkerState.SUCCESS, WorkerState.ERROR, WorkerState.CANCELLED):
            return
        self._show_notices()
        if event.worker is not self._overview_worker:
            return
        self._overview_worker = None
        if event.state == WorkerState.ERROR:
            reason = one_line(event.worker.error)
            self.notify(f"overview failed: {reason}", severity="error", timeout=10)
        self._request_overview()

    def _show_notices(self) -> None:
        for text in take_notices():  # damaged cache entries, parsed again
            self.notify(text, title="Cache", severity="warning", timeout=8)

    def _refresh_status(self) -> None:
        # comparing: both sides' files, so a broken file of the test side shows too
        counts: Counter[str] = Counter()
        for state in self._status_sides:
            counts.update(state.trace_set.counts())
        total = sum(len(state.trace_set.entries) for state in self._status_sides)
        info = StatusInfo(
            root=self._status_label,
            total=total,
            done=total - counts.get("pending", 0) - counts.get("loading", 0),
            loaded=counts.get("loaded", 0),
            errors=counts.get("error", 0) + counts.get("not_trace", 0),
            incomplete=counts.get("incomplete", 0),
            watch=self.watcher_state,
            scanning=any(state.scanning for state in self._status_sides),
        )
        if info != self.status_info:
            self.status_info = info
            for screen in self.screen_stack:
                for bar in screen.query(StatusBar):
                    bar.show(info)

    def _request_overview(self) -> None:
        """Compute the overview of the current set, unless it is computed or computing; while
        files land, not before its turn (OVERVIEW_SPACING): a timer asks again then."""
        key = self._overview_key()
        if self._overview_worker is not None or key == self._overview_requested:
            return
        wait = self._overview_wait()
        if wait > 0:
            if self._overview_timer is None:
                self._overview_timer = self.set_timer(wait, self._overview_due)
            return
        self._overview_requested = key
        self._overview_started = time.monotonic()
        ts = self.session.trace_set
        ctx = {
            "timings": self.timings,
            "watching": self.watcher_state != "off",
            "loading": self.status_info.loading,
            "root": self._label,
            "every_step": self.every_step,
            "tb_compat": self.tb_compat,
            "key": key,
        }
        self._overview_worker = self._compute_overview(ts.snapshot(), ts.generation, ctx)

    def _overview_wait(self) -> float:
        """Seconds until the next overview's turn: none once every file is in."""
        if not self.status_info.loading:
            return 0.0
        spacing = max(OVERVIEW_GAP, OVERVIEW_SPACING * self._overview_cost)
        return self._overview_started + spacing - time.monotonic()

    def _overview_due(self) -> None:
        self._overview_timer = None
        self._request_overview()
