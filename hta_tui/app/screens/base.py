"""What every analysis screen shares: compute in a worker, show on the main thread, follow the
trace set as it changes, pick a rank, filter, and keep the user's place.

A screen subclass says what to compute (`compute`, a pure function of the loaded frames and the
screen's parameters, run in a thread worker: it must not touch widgets) and how to show it
(`show`, main thread). The base class runs `compute` whenever the trace set or a parameter
changes, drops results of an older state, and shows a loading state meanwhile.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any, ClassVar

import polars as pl
from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Vertical
from textual.message import Message
from textual.screen import Screen
from textual.widgets import Input, Static
from textual.worker import get_current_worker

from hta_tui.analysis import scope
from hta_tui.app.environment import one_line
from hta_tui.app.screens.rank_picker import RankPicker
from hta_tui.app.screens.scope_line import EVERY_STEP_BINDING, one_rank, span_scope
from hta_tui.app.widgets.footer import KeysFooter
from hta_tui.app.widgets.frame_table import FrameTable
from hta_tui.app.widgets.plot import CHART_DELAY, SafePlot
from hta_tui.app.widgets.status import StatusBar
from hta_tui.app.widgets.title_line import TitleLine
from hta_tui.trace.model import TraceSet

#: How often a screen looks for a changed trace set (seconds); results arrive when ready.
POLL = 0.25
#: While files are still landing, recompute at most this often (seconds).
MIN_INTERVAL = 1.0


@dataclass(frozen=True)
class Params:
    """What a screen's numbers depend on besides the data. `rank` None means every rank."""

    rank: int | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    def get(self, key: str, default: Any = None) -> Any:
        return self.extra.get(key, default)


class ComputeFailed(Message):
    """A screen's worker raised: `reason` is one line; the traceback went to the debug log."""

    def __init__(self, reason: str, generation: int, params: Params) -> None:
        super().__init__()
        self.reason = reason
        self.generation = generation
        self.params = params


class Computed(Message):
    """A screen's worker finished: `result` for the trace set at `generation` with `params`;
    `scope` says what the numbers cover (ranks, span, steps)."""

    def __init__(self, result: Any, generation: int, params: Params, scope: str = "") -> None:
        super().__init__()
        self.result = result
        self.generation = generation
        self.params = params
        self.scope = scope


class AnalysisScreen(Screen):
    """Base of the numbered analysis screens (see the module docstring)."""

    #: What the numbers cover in time, when it is not HTA's steps (the last ProfilerStep left
    #: out unless `a`): "whole trace", "every ProfilerStep", ... so two screens whose numbers
    #: differ say why.
    STEPS: ClassVar[str | None] = None

    #: Shown in the header line and the command palette.
    TITLE: ClassVar[str] = ""
    #: Shows the rank chosen with `r` on any screen (the app's `rank_choice`).
    FOLLOWS_RANK: ClassVar[bool] = True
    #: Worker groups whose results the screen shows (a screen with lookups of its own adds
    #: theirs), so `shows_current` waits for them too.
    WORKER_GROUPS: ClassVar[tuple[str, ...]] = ("screen",)

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("r", "pick_rank", "Rank", tooltip="Show one rank or all ranks"),
        EVERY_STEP_BINDING,
        Binding("slash", "filter", "Filter", key_display="/", tooltip="Filter the table"),
        Binding("escape", "back", "Clear filter, then back", show=False),
    ]

    def __init__(self, **kw: Any) -> None:
        super().__init__(**kw)
        self.params = Params(extra=dict(self.default_params()))
        self.result: Any = None
        self._shown_key: tuple[int, Params] | None = None
        self._computing: tuple[int, Params] | None = None
        self._last_compute = -1e9
        self._charts_scheduled = 0  # by `draw_later`, not drawn yet
        self.scope_text = ""  # what the shown numbers cover (`_scope`)

    # -- subclass API --------------------------------------------------------------------------
    def default_params(self) -> dict[str, Any]:
        return {}

    @staticmethod
    def compute(frames: dict[int, pl.DataFrame], params: Params) -> Any:
        """Run in a thread worker: the screen's tables from rank -> events frames."""
        raise NotImplementedError

    def compute_on(self, ts: TraceSet, frames: dict[int, pl.DataFrame], params: Params) -> Any:
        """Worker thread: `compute`, for a screen that needs more of the trace set than the
        chosen ranks' events frames (the flows, say) to override."""
        return self.compute(frames, params)

    def show(self, result: Any) -> None:
        """Main thread: put `result` into the widgets."""
        raise NotImplementedError

    @property
    def charts_pending(self) -> int:
        """Charts not on the screen yet: scheduled, or being built (tests wait for none)."""
        return self._charts_scheduled + sum(p.building for p in self.query(SafePlot))

    @property
    def shows_current(self) -> bool:
        """The numbers of the current trace set and parameters are on the screen, whole: no
        computation, chart, row batch or lookup of its own still to land (tests, screenshots
        and benchmarks wait for this)."""
        return (
            self.result is not None
            and self._shown_key == (self.trace_set.generation, self.params)
            and self.charts_pending == 0
            and not any(t.rows_pending for t in self.query(FrameTable))
            and not any(
                w.group in self.WORKER_GROUPS and not w.is_finished for w in self.app.workers
            )
        )

    def draw_later(self, draw: Callable[[], None], order: int = 1) -> None:
        """Draw a chart `order` frames after the tables, so the tables show first and a key
        can get in between (`SafePlot` builds the picture in a thread)."""
        self._charts_scheduled += 1

        def run() -> None:
            self._charts_scheduled -= 1
            draw()

        self.set_timer(CHART_DELAY * order, run)

    def compose_body(self) -> ComposeResult:
        """The screen's own widgets, between its title line and the footer."""
        raise NotImplementedError

    # -- layout --------------------------------------------------------------------------------
    def compose(self) -> ComposeResult:
        yield TitleLine(self.TITLE, id="screen-title", classes="screen-title")
        with Vertical(id="body"):
            yield from self.compose_body()
        yield Input(placeholder="filter (enter to keep, escape to clear)", id="filter")
        yield StatusBar()
        yield KeysFooter(compact=True)

    def on_mount(self) -> None:
        self.query_one("#filter", Input).display = False
        self.set_interval(POLL, self._maybe_refresh)
        self._maybe_refresh()

    def on_screen_resume(self) -> None:
        info = getattr(self.app, "status_info", None)
        if info is not None:
            for bar in self.query(StatusBar):
                bar.show(info)
        self._maybe_refresh()

    # -- refresh -------------------------------------------------------------------------------
    @property
    def trace_set(self) -> TraceSet:
        return self.app.trace_set  # type: ignore[attr-defined]

    def _title_text(self) -> str:
        return self._with_scope(self._where())

    def _where(self) -> str:
        if self.params.rank is not None:
            return f"{self.TITLE}  ·  rank {self.params.rank}"
        loaded = sorted(self.trace_set.loaded())
        if len(loaded) == 1:  # "all ranks" of a one-rank trace left its number unsaid
            return f"{self.TITLE}  ·  rank {loaded[0]}"
        return f"{self.TITLE}  ·  {f'all {len(loaded)} ranks' if loaded else 'all ranks'}"

    def _where_one(self, rank: int | None, which: str = "first", of: int | None = None) -> str:
        """The title of a view that shows one rank at a time (`scope_line.one_rank`)."""
        n = len(self.trace_set.loaded()) if of is None else of
        return f"{self.TITLE}  ·  {one_rank(rank, self.params.rank, n, which)}"

    def text_room(self, reserve: int = 48, least: int = 24) -> int:
        """How wide a table's name column may be drawn (longer names are elided in the
        middle) so that `reserve` columns of numbers stay in view at 80 columns."""
        return max(least, min(100, self.size.width - reserve))

    def _with_scope(self, title: str) -> str:
        """The title with what the numbers cover (steps, spans), once they are computed."""
        return f"{title}  ·  {self.scope_text}" if self.scope_text else title

    def set_params(self, **changes: Any) -> None:
        """Change parameters (rank=..., or screen-specific ones) and recompute."""
        rank = changes.pop("rank", self.params.rank)
        self.params = replace(self.params, rank=rank, extra={**self.params.extra, **changes})
        if self.is_mounted:  # else on_mount computes with these
            self._maybe_refresh(force=True)

    def _follow_rank(self) -> None:
        """The rank chosen with `r` and the steps chosen with `a` on any screen hold on every
        screen."""
        rank = getattr(self.app, "rank_choice", self.params.rank)
        if rank != self.params.rank and self.FOLLOWS_RANK:
            self.params = replace(self.params, rank=rank)
        every = bool(getattr(self.app, "every_step", False))
        if every != bool(self.params.get("every_step", False)):
            self.params = replace(self.params, extra={**self.params.extra, "every_step": every})

    def _maybe_refresh(self, force: bool = False) -> None:
        if not self.is_current and not force:
            return
        self._follow_rank()
        ts = self.trace_set
        want = (ts.generation, self.params)
        if want == self._shown_key or want == self._computing:
            return
        if self._computing is not None and not force:
            return  # the running one finishes first; the next poll starts ours
        loading = any(e.status in ("pending", "loading") for e in ts.entries.values())
        now = time.monotonic()
        if loading and self._shown_key is not None and now - self._last_compute < MIN_INTERVAL:
            return
        self._last_compute = now
        self._computing = want
        self.query_one("#screen-title", Static).update(self._title_text())
        body = self.query_one("#body")
        if self._shown_key is None:
            body.loading = True
        self._compute(ts.snapshot(), self.params)

    @staticmethod
    def frames_for(ts: TraceSet, params: Params) -> dict[int, pl.DataFrame]:
        """The events frames a screen's numbers come from: the chosen rank's (or all), with
        the last step put back when `H` asks for every step."""
        frames = ts.frames()
        if params.rank is not None:
            frames = {r: f for r, f in frames.items() if r == params.rank}
        if params.get("every_step", False):
            frames = scope.every_step_frames(frames)
        return frames

    @work(thread=True, exclusive=True, group="screen", exit_on_error=False)
    def _compute(self, ts: TraceSet, params: Params) -> None:
        worker = get_current_worker()
        frames = self.frames_for(ts, params)
        every = bool(params.get("every_step", False))
        if worker.is_cancelled:
            return
        try:
            result = self.compute_on(ts, frames, params)
        except Exception as exc:  # a screen that fails says so, instead of loading forever
            logging.getLogger("hta_tui").exception("%s failed", self.TITLE)
            self.post_message(ComputeFailed(one_line(exc), ts.generation, params))
            return
        if worker.is_cancelled:
            return
        self.post_message(Computed(result, ts.generation, params, self._scope(ts, frames, every)))

    @on(ComputeFailed)
    def _compute_failed(self, msg: ComputeFailed) -> None:
        """Shown once per trace-set state: the next change of data or parameters retries."""
        msg.stop()
        if self._computing == (msg.generation, msg.params):
            self._computing = None
        if msg.params != self.params:
            self._maybe_refresh()
            return
        self._shown_key = (msg.generation, msg.params)
        self.scope_text = f"failed: {msg.reason}"
        self.query_one("#screen-title", Static).update(self._title_text())
        self.query_one("#body").loading = False
        self.app.notify(f"{self.TITLE} failed: {msg.reason}", severity="error", timeout=10)

    def _scope(self, ts: TraceSet, frames: dict[int, pl.DataFrame], every: bool) -> str:
        """Worker thread: the steps and spans the numbers cover (the title says the ranks)."""
        if not frames:
            return ""
        spans = span_scope(ts, sorted(frames))
        steps = self.steps_text(frames, every)
        return "  ·  ".join([steps, spans] if spans else [steps])

    def steps_text(self, frames: dict[int, pl.DataFrame], every: bool) -> str:
        """Worker thread: the steps part of the scope. HTA's analyses: its steps, the last
        one left out unless `H`; other screens say their own (`STEPS`, or override)."""
        if self.STEPS is None:
            return scope.describe_steps(scope.step_scope(frames), every_step=every)
        return self.STEPS

    @on(Computed)
    def _computed(self, msg: Computed) -> None:
        msg.stop()
        if self._computing == (msg.generation, msg.params):
            self._computing = None
        if msg.params != self.params:
            self._maybe_refresh()
            return  # the user changed something meanwhile
        self.result = msg.result
        self._shown_key = (msg.generation, msg.params)
        self.scope_text = msg.scope
        self.query_one("#screen-title", Static).update(self._title_text())
        self.query_one("#body").loading = False
        self.show(msg.result)
        self._apply_filter()
        self._maybe_refresh()

    # -- actions -------------------------------------------------------------------------------
    def action_pick_rank(self) -> None:
        ranks = sorted(self.trace_set.loaded())

        def chosen(value: int | None) -> None:
            if value is not None:
                rank = None if value == -1 else value
                self.app.rank_choice = rank  # type: ignore[attr-defined]
                self.set_params(rank=rank)

        self.app.push_screen(RankPicker(ranks, self.params.rank), chosen)

    def action_every_step(self) -> None:
        """Include HTA's left-out last step on every screen, or leave it out again."""
        app = self.app
        app.every_step = not getattr(app, "every_step", False)  # type: ignore[attr-defined]
        self._maybe_refresh(force=True)

    def action_filter(self) -> None:
        box = self.query_one("#filter", Input)
        box.display = True
        box.focus()

    @on(Input.Submitted, "#filter")
    def _filter_done(self, event: Input.Submitted) -> None:
        self._apply_filter()
        tables = list(self.query(FrameTable))
        if tables:
            tables[0].focus()
        if not event.value:
            event.input.display = False

    @on(Input.Changed, "#filter")
    def _filter_typed(self, event: Input.Changed) -> None:
        self._apply_filter()

    def _apply_filter(self) -> None:
        text = self.query_one("#filter", Input).value
        for table in self.query(FrameTable):
            if table.filter_text != text.strip():
                table.set_filter(text)

    @on(FrameTable.OpenTimeline)
    def _open_timeline(self, msg: FrameTable.OpenTimeline) -> None:
        """`t` on a table row: the timeline screen, zoomed to the row's moment."""
        msg.stop()
        self.app.action_goto("timeline")  # type: ignore[attr-defined]
        screen = self.app.screen
        if hasattr(screen, "show_moment"):
            screen.show_moment(msg.moment)

    def action_back(self) -> None:
        """Escape: clear a filter first (typed or kept), and only then leave the screen."""
        box = self.query_one("#filter", Input)
        if box.has_focus or box.value:
            box.value = ""
            box.display = False
            self._apply_filter()
            tables = list(self.query(FrameTable))
            if tables:
                tables[0].focus()
            return
        self.app.action_go_back()  # type: ignore[attr-defined]
