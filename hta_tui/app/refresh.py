"""The throttled refresh, mixed into HtaApp: ten times a second, the status bars follow the
trace sets, and when the set has changed and no overview computation is running, a snapshot of
it goes to _compute_overview (thread) -> OverviewReady -> the overview screen."""

from __future__ import annotations

import logging
from collections import Counter
from typing import Any

from textual import work
from textual.worker import Worker, get_current_worker

from hta_tui.analysis import scope
from hta_tui.app.environment import one_line
from hta_tui.app.format import file_columns, file_rows, temporal_rows
from hta_tui.app.messages import OverviewReady
from hta_tui.app.mixin import AppMixin
from hta_tui.app.screens.overview import OverviewData, OverviewScreen
from hta_tui.app.screens.plugin_steps import describe_used
from hta_tui.app.screens.step_time import overview_rows
from hta_tui.app.sides import SideState
from hta_tui.app.widgets.status import StatusBar, StatusInfo
from hta_tui.trace.cache import take_notices
from hta_tui.trace.model import TraceSet


class RefreshMixin(AppMixin):
    """The refreshing half of HtaApp; the attributes below are set by HtaApp.__init__."""

    trace_set: TraceSet
    timings: bool
    every_step: bool
    watcher_state: str
    status_info: StatusInfo
    overview_data: OverviewData | None
    _label: str
    _status_label: str
    _sides: dict[str, SideState]
    _status_sides: list[SideState]
    _overview_worker: Worker | None
    _overview_requested: tuple[Any, ...] | None
    _overview_shown: int

    @property
    def settled(self) -> bool:
        """Nothing left to do: no file loading, no overview computing or out of date (tests)."""
        busy = any(
            w.group in ("load", "reload", "overview") and not w.is_finished for w in self.workers
        )
        sides_done = all(
            not state.scanning
            and state.trace_set.counts().get("pending", 0) == 0
            and state.trace_set.counts().get("loading", 0) == 0
            for state in self._sides.values()
        )
        return (
            not busy
            and sides_done
            and self._overview_requested == self._overview_key()
            and self._overview_shown == self.trace_set.generation
        )

    @work(thread=True, exclusive=True, group="overview", exit_on_error=False, name="overview")
    def _compute_overview(self, ts: TraceSet, generation: int, ctx: dict[str, Any]) -> None:
        from hta_tui.analysis.overview import file_table, temporal_table
        from hta_tui.analysis.step_overview import step_table

        worker = get_current_worker()
        files = file_table(ts)
        if worker.is_cancelled:
            return
        temporal = temporal_table(ts, every_step=ctx["every_step"])
        if worker.is_cancelled:
            return
        try:
            step_frame = step_table(ts)
            step_text, step_bar = overview_rows(step_frame)
            used = tuple(step_frame["step"].unique().sort().to_list())
            step_scope = describe_used(used) if used else ""
        except Exception as exc:  # the files and the temporal breakdown show all the same
            logging.getLogger("hta_tui").exception("the overview's step time failed")
            step_text, step_bar = f"Step time not computed: {one_line(exc)}", None
            step_scope = ""
        if worker.is_cancelled:
            return
        columns = file_columns(files, show_timings=ctx["timings"])
        data = OverviewData(
            columns=columns,
            rows=file_rows(files, watching=ctx["watching"]),
            temporal=temporal_rows(temporal),
            temporal_ranks=temporal.height,
            step_text=step_text,
            step_bar=step_bar,
            step_scope=step_scope,
            generation=generation,
            loaded_ranks=len(ts.loaded()),
            loading=ctx["loading"],
            watching=ctx["watching"],
            root=ctx["root"],
            steps=scope.steps_from_names(
                {n for d in ts.loaded().values() for n in d.meta.get("step_names", ())},
                every_step=ctx["every_step"],
            ),
        )
        self.post_message(OverviewReady(files, temporal, generation, data))

    def _on_overview_ready(self, msg: OverviewReady) -> None:
        if msg.generation < self._overview_shown or msg.data is None:
            return  # older than what is on screen
        self._overview_shown = msg.generation
        self.overview_data = msg.data
        for screen in self.screen_stack:
            if isinstance(screen, OverviewScreen):
                screen.show_overview(self.overview_data)

    def _overview_key(self) -> tuple[Any, ...]:
        return (self.trace_set.generation, self.watcher_state != "off", self.every_step)

    def _tick(self) -> None:
        for text in take_notices():  # damaged cache entries, parsed again
            self.notify(text, title="Cache", severity="warning", timeout=8)
        ts = self.trace_set
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
        key = self._overview_key()
        if self._overview_worker is None and key != self._overview_requested:
            self._overview_requested = key
            ctx = {
                "timings": self.timings,
                "watching": self.watcher_state != "off",
                "loading": info.loading,
                "root": self._label,
                "every_step": self.every_step,
            }
            self._overview_worker = self._compute_overview(ts.snapshot(), ts.generation, ctx)
