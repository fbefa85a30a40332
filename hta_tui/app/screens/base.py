"""What every analysis screen shares: compute in a worker, show on the main thread, follow the
trace set as it changes, pick a rank, filter, and keep the user's place.

A screen subclass says what to compute (`compute`, a pure function of the loaded frames and the
screen's parameters, run in a thread worker: it must not touch widgets) and how to show it
(`show`, main thread). The base class runs `compute` whenever the trace set or a parameter
changes, drops results of an older state, and shows a loading state meanwhile. While another
view is shown and wants its numbers, its work waits at its checkpoints (`giving_way`,
app/foreground.py), the first one before it reads its frames; numbers that land while the
view is not shown are kept and drawn when it is shown again (`on_screen_resume`), so views
left behind cost the UI thread nothing and a revisit computes nothing.

Nothing polls: a screen watches the app's reactive values (`data`, the session's state;
`rank_choice`; `every_step`) and refreshes when one changes while it is shown, or when it is
shown again (`on_screen_resume`).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from typing import Any, ClassVar

import polars as pl
from textual import events, on, work
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Vertical
from textual.css.query import NoMatches
from textual.message import Message
from textual.screen import Screen
from textual.widget import Widget
from textual.widgets import Input, Static
from textual.worker import Worker, get_current_worker

from hta_tui.analysis import scope
from hta_tui.analysis.checkpoint import checkpoint, hooked
from hta_tui.app.access import hta_app
from hta_tui.app.environment import one_line
from hta_tui.app.foreground import Superseded
from hta_tui.app.screens.rank_picker import RankPicker
from hta_tui.app.screens.scope_line import EVERY_STEP_BINDING, one_rank, span_scope
from hta_tui.app.sides import folder_label
from hta_tui.app.widgets.footer import KeysFooter
from hta_tui.app.widgets.frame_table import FrameTable
from hta_tui.app.widgets.loading import SlowLoadingIndicator
from hta_tui.app.widgets.plot import CHART_DELAY, SafePlot
from hta_tui.app.widgets.status import StatusBar
from hta_tui.app.widgets.text_line import TextBlock
from hta_tui.app.widgets.title_line import TitleLine
from hta_tui.trace.model import Rows, TraceSet

#: While files are still landing, recompute at most this often (seconds).
MIN_INTERVAL = 1.0


@dataclass(frozen=True)
class Params:
    """What a screen's numbers depend on besides the data. `rank` None means every rank."""

    rank: int | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    def get(self, key: str, default: Any = None) -> Any:
        return self.extra.get(key, default)


class ForState(Message):
    """A screen worker's message about the trace set at `generation` with `params`: what the
    screen compares with the state it wants, to drop an older state's. Never posted itself
    (each kind below has its own handler)."""

    def __init__(self, generation: int, params: Params) -> None:
        super().__init__()
        self.generation = generation
        self.params = params


class ComputeFailed(ForState):
    """A screen's worker raised: `reason` is one line; the traceback went to the debug log."""

    def __init__(self, reason: str, generation: int, params: Params) -> None:
        super().__init__(generation, params)
        self.reason = reason


#: Seconds between a later part's looks at whether its numbers are drawn (`_compute_rest`),
#: and the longest it waits for them (a message never handled must not hold it forever).
LATER_POLL, LATER_WAIT = 0.05, 5.0


class Computed(ForState):
    """A screen's worker finished: `result` for the trace set at `generation` with `params`;
    `scope` says what the numbers cover (ranks, span, steps)."""

    def __init__(self, result: Any, generation: int, params: Params, scope: str = "") -> None:
        super().__init__(generation, params)
        self.result = result
        self.scope = scope
        #: set once the numbers are on the screen (or kept for later, or not wanted): the
        #: worker's later parts wait for it (`LATER`)
        self.drawn = threading.Event()


#: One key per idea: `v` shows a view's next table (its tabs), in every view that has several,
#: and the footer shows it right after `?` and `q` (footer.FIRST). `[` and `]` move in time
#: (memory, timeline), never between tables.
TABLE_BINDING = Binding("v", "next_table", "Table", tooltip="Next table (the tabs above it)")
#: Keys that act at once even while a view loads: leaving it, help, the palette.
NOT_QUEUED = frozenset({"escape", "question_mark", "q", "ctrl+p", "ctrl+c", "tab", "shift+tab"})


class ComputedLater(ForState):
    """A screen's worker finished the parts it shows after its numbers (`compute_later`)."""

    def __init__(self, result: Any, generation: int, params: Params) -> None:
        super().__init__(generation, params)
        self.result = result


def bound_keys(node: object) -> set[str]:
    """The keys a node's class declares in BINDINGS (its bases' included): the public
    declarations, not Textual's private map of them."""
    keys: set[str] = set()
    for cls in type(node).__mro__:
        for b in vars(cls).get("BINDINGS", ()):
            key = b.key if isinstance(b, Binding) else b[0]
            keys.update(k.strip() for k in key.split(","))
    return keys


def definitions_text(why: str, *, tb_compat: bool) -> str:
    """The title part saying whose definitions a plugin view shows, and the key that
    switches them: the plugin's own, or this project's with why they differ."""
    if tb_compat:
        return "the TensorBoard plugin's own rules (X: hta-tui's)"
    return f"hta-tui's rules: {why} (X: plugin's)"


def verdict_text(table: pl.DataFrame) -> str | None:
    """A verdict the registry gives as a one-row table (`verdict`), or None."""
    return None if table.is_empty() else str(table["verdict"][0])


class AnalysisScreen(Screen):
    """Base of the numbered analysis screens (see the module docstring)."""

    #: What the numbers cover in time, when it is not HTA's steps (the last ProfilerStep left
    #: out unless `a`): "whole trace", "every ProfilerStep", ... so two screens whose numbers
    #: differ say why.
    STEPS: ClassVar[str | None] = None
    #: The steps part for a view of ProfilerSteps (`STEPS`) on a trace that has none.
    NO_STEPS: ClassVar[str] = "whole trace (no ProfilerStep)"

    #: A view of the TensorBoard plugin's: where its numbers differ from the plugin's own,
    #: and why (one short clause). Such a view follows the app's definitions switch (`X`:
    #: `tb_compat`, the plugin's rules exactly) and its title says which are shown.
    PLUGIN_WHY: ClassVar[str | None] = None
    #: Uses the step-time view's steps (the diff's step time), so follows `X` as well.
    PLUGIN_STEPS: ClassVar[bool] = False

    #: Shown in the header line and the command palette.
    TITLE: ClassVar[str] = ""
    #: The registry's tables (analysis/registry.py) the screen shows: its `compute` asks the
    #: registry for them, the one door the report and the API go through too.
    ANALYSES: ClassVar[tuple[str, ...]] = ()
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
        self._refresh_timer: Any = None  # a refresh held back by MIN_INTERVAL
        self._charts_scheduled = 0  # by `draw_later`, not drawn yet
        self.scope_text = ""  # what the shown numbers cover (`_scope`)
        #: keys typed while the view loaded, acted on once it has (`_replay_keys`)
        self._queued_keys: list[str] = []
        #: what to do once the current numbers show (`select_when_shown`)
        self._when_shown: Callable[[], None] | None = None
        #: the numbers shown, their `compute_later` part still to come
        self._later_pending = False
        #: numbers (and later parts) that landed while another view was shown: drawn when
        #: this one is shown again
        self._unshown: list[Computed | ComputedLater] = []
        #: the computation's worker (numbers, then any later parts) and the state it is of
        self._worker: Worker[Any] | None = None
        self._worker_key: tuple[int, Params] | None = None

    def post_message(self, message: Message) -> bool:
        """Shown again (or first, once built), the screen is not restyled whole when it was
        styled in the current theme (`HtaApp.styled_now`): Textual's restyle on every
        ScreenResume was 13-15% of the UI thread's time while views are walked through
        (issue 27); a theme changed meanwhile still restyles it."""
        if isinstance(message, events.ScreenResume) and hta_app(self).styled_now(self):
            message.refresh_styles = False
        return super().post_message(message)

    def get_loading_widget(self) -> Widget:
        """While computing: a loading indicator drawn 4 times a second, not 16 (widgets/loading:
        Textual's took 50-95 ms of the UI thread's CPU a second)."""
        return SlowLoadingIndicator()

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

    #: The screen has parts that cost more than its numbers and come after them
    #: (`compute_later`, `show_later`): the numbers are drawn first (issue 27).
    LATER: ClassVar[bool] = False

    def compute_later(
        self, ts: TraceSet, frames: dict[int, pl.DataFrame], params: Params, result: Any
    ) -> Any:
        """Worker thread, after `result` went to the screen: the parts shown after it."""
        raise NotImplementedError

    def show_later(self, result: Any, later: Any) -> None:
        """Main thread: put the later parts (`compute_later`'s `later`) beside `result`."""
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
            self.shows_numbers
            and not self._later_pending
            and not any(  # its own workers: another view's work left behind is not its
                w.node is self and w.group in self.WORKER_GROUPS and not w.is_finished
                for w in self.app.workers
            )
        )

    @property
    def shows_numbers(self) -> bool:
        """The numbers of the current trace set and parameters are on the screen, drawn:
        `shows_current` but for the parts shown after them (`LATER`), which may still be
        coming (benchmarks time both)."""
        return (
            self.result is not None
            and self._shown_key == (self.trace_set.generation, self.params)
            and self.charts_pending == 0
            and not any(t.rows_pending for t in self.query(FrameTable))
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
        yield TextBlock("", id="waiting", classes="summary")
        with Vertical(id="body"):
            yield from self.compose_body()
        yield Input(placeholder="filter (enter to keep, escape to clear)", id="filter")
        yield StatusBar()
        yield KeysFooter(compact=True)

    def on_mount(self) -> None:
        self.query_one("#filter", Input).display = False
        self.query_one("#waiting").display = False
        app = hta_app(self)
        for name in ("data", "rank_choice", "every_step", "tb_compat"):
            self.watch(app, name, self._app_changed, init=False)
        self._maybe_refresh()

    def _app_changed(self) -> None:
        """The session or a choice every screen follows changed: shown again if visible;
        left behind, its computation of the state before is dropped (`_drop_stale`)."""
        if not self.is_current:
            self._drop_stale()
        self._maybe_refresh()

    def _drop_stale(self) -> None:
        """Main thread, the view left behind: its computation (held while another view is
        shown, or running on) is of a state no longer wanted (a reload, a rank chosen on
        another view): cancelled, it stops at its next checkpoint instead of finishing when
        shown again and being computed anew after that. Shown again, it computes the state
        then wanted (`_maybe_refresh`)."""
        worker = self._worker
        if self._computing is None and (worker is None or worker.is_finished):
            return
        self._follow_rank()
        if self._worker_key == (self.trace_set.generation, self.params):
            return
        if worker is not None:
            worker.cancel()
        self._worker = self._worker_key = None
        if self._computing is not None:
            self._set_computing(None)

    def on_screen_resume(self) -> None:
        info = hta_app(self).status_info
        for bar in self.query(StatusBar):
            bar.show(info)
        self._show_kept()
        self._maybe_refresh()

    def _show_kept(self) -> None:
        """Main thread: draw the numbers that landed while another view was shown."""
        kept, self._unshown = self._unshown, []
        for msg in kept:
            if isinstance(msg, Computed):
                self._show_computed(msg)
            else:
                self._show_computed_later(msg)

    def _elsewhere(self) -> bool:
        """Another view is shown (a modal over this one leaves it shown): numbers landing
        now wait to be drawn (`_unshown`) rather than take the UI thread from it. None shown
        yet (the app not mounted): this one is drawn."""
        shown = hta_app(self).foreground.shown
        return shown is not None and shown is not self

    def _set_computing(self, want: tuple[int, Params] | None) -> None:
        """Main thread: the computation asked for (None: none), which the foreground knows:
        while this view is shown and wants numbers, work left behind waits."""
        self._computing = want
        hta_app(self).foreground.wants(self, want is not None)

    # -- refresh -------------------------------------------------------------------------------
    @property
    def trace_set(self) -> TraceSet:
        return hta_app(self).trace_set

    def _title_text(self) -> str:
        title = self._with_scope(self._where())
        ts = self.trace_set
        if not isinstance(ts, TraceSet):
            return title
        entries = ts.entries.values()
        busy = sum(e.status in ("pending", "loading") for e in entries)
        if busy and ts.loaded():  # numbers of the ranks landed so far
            title += f"  ·  loading {busy} of {len(entries)} files"
        return title

    def waiting_text(self) -> str | None:
        """What the view says instead of numbers while no rank is loaded (None once one is):
        never a verdict ("no GPU", "no steps") about data it has not seen."""
        ts = self.trace_set
        if not isinstance(ts, TraceSet) or ts.loaded():  # the diff waits for both sides itself
            return None
        entries = list(ts.entries.values())
        busy = sum(e.status in ("pending", "loading") for e in entries)
        scanning = hta_app(self).scanning
        root = folder_label(ts.root)
        if busy:
            return f"Loading {busy} of {len(entries)} files in {root}: numbers once a rank lands."
        if not entries and callable(scanning) and scanning():
            return f"Looking for trace files in {root}…"
        if not entries:
            watching = hta_app(self).watcher_state != "off"
            return f"No trace files in {root}" + (
                " yet; watching for new ones." if watching else "."
            )
        return f"No trace loaded: none of the {len(entries)} files could be read (1 O says why)."

    def _show_waiting(self) -> bool:
        """Main thread: the waiting text in place of the body, or the body back; True while
        waiting."""
        text = self.waiting_text()
        waiting = self.query_one("#waiting", TextBlock)
        waiting.display = text is not None
        self.query_one("#body").display = text is None
        if text is not None:
            waiting.update(text)
        return text is not None

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
        app = hta_app(self)
        rank = app.rank_choice
        if rank != self.params.rank and self.FOLLOWS_RANK:
            self.params = replace(self.params, rank=rank)
        every = bool(app.every_step)
        if every != bool(self.params.get("every_step", False)):
            self.params = replace(self.params, extra={**self.params.extra, "every_step": every})
        follows = self.PLUGIN_WHY is not None or self.PLUGIN_STEPS
        compat = hta_app(self).tb_compat and follows
        if compat != bool(self.params.get("tb_compat", False)):
            self.params = replace(self.params, extra={**self.params.extra, "tb_compat": compat})

    def _maybe_refresh(self, force: bool = False) -> None:
        if not self.is_current and not force:
            return
        self._follow_rank()
        ts = self.trace_set
        want = (ts.generation, self.params)
        if want == self._shown_key or want == self._computing:
            return
        if self._computing is not None and not force:
            return  # the running one finishes first; its result calls this again
        loading = any(e.status in ("pending", "loading") for e in ts.entries.values())
        now = time.monotonic()
        wait = MIN_INTERVAL - (now - self._last_compute)
        if loading and self._shown_key is not None and wait > 0:
            if self._refresh_timer is None:  # one deferred refresh, not a poll
                self._refresh_timer = self.set_timer(wait, self._deferred_refresh)
            return
        self._last_compute = now
        self._set_computing(want)
        self.query_one("#screen-title", Static).update(self._title_text())
        body = self.query_one("#body")
        if not self._show_waiting() and self._shown_key is None:
            body.loading = True
        self._worker_key = want
        if self._worker is None and self._shown_key is None:
            # a new screen: its worker starts once the screen is drawn, so the key's answer
            # is not slowed by it (at 1,000 ranks `P`'s worker, reading every rank's frame,
            # took the GIL from the screen being built: 0.21 s for 0.03 s of the UI's CPU)
            self.call_after_refresh(self._start_compute, ts.snapshot(), want)
        else:
            self._start_compute(ts.snapshot(), want)

    def _start_compute(self, ts: TraceSet, want: tuple[int, Params]) -> None:
        """Main thread: the computation of `want`, unless another took its place."""
        if self._worker_key == want and self._computing == want:
            self._worker = self._compute(ts, want[1])

    @contextmanager
    def giving_way(self, worker: Worker[Any]) -> Iterator[None]:
        """Worker thread: this view's computation, which waits at its checkpoints while
        another view is shown and computing, and stops there once `worker` is cancelled
        (app/foreground.py)."""
        fg = hta_app(self).foreground
        with fg.running(self), hooked(fg.give_way(self, worker)):
            yield

    def _deferred_refresh(self) -> None:
        self._refresh_timer = None
        self._maybe_refresh()

    #: The events' columns the screen reads (empty: every one): a rank too large to hold
    #: its whole events frame (a 10 GB rank) reads only these (`RankData.columns`).
    EVENTS_COLUMNS: tuple[str, ...] = ()
    #: Whether the other ranks get only those columns too (else their whole frames).
    EVENTS_COLUMNS_ALWAYS = True
    #: The rows the screen's analyses read (None: every one): a rank too large to hold reads
    #: only these, a piece at a time (`RankData.columns`); its numbers must be the same.
    EVENTS_ROWS: ClassVar[Rows] = None

    @classmethod
    def events_rows(cls, params: Params) -> Rows:
        """The rows a large rank gives these parameters (`EVENTS_ROWS`; the timeline's
        depend on the part of the trace it shows)."""
        return cls.EVENTS_ROWS

    @classmethod
    def frames_for(cls, ts: TraceSet, params: Params) -> dict[int, pl.DataFrame]:
        """The events frames a screen's numbers come from: the chosen rank's (or all), with
        the last step put back when `H` asks for every step."""
        narrow = getattr(ts, "columns", None)
        if cls.EVENTS_COLUMNS and narrow is not None:
            where = cls.events_rows(params)
            rows = {} if where is None else {"where": where}
            frames = narrow(cls.EVENTS_COLUMNS, large_only=not cls.EVENTS_COLUMNS_ALWAYS, **rows)
        else:
            frames = ts.frames()
        if params.rank is not None:
            frames = {r: f for r, f in frames.items() if r == params.rank}
        if params.get("every_step", False):
            frames = scope.every_step_frames(frames)
        return frames

    @work(thread=True, exclusive=True, group="screen", exit_on_error=False)
    def _compute(self, ts: TraceSet, params: Params) -> None:
        worker = get_current_worker()
        every = bool(params.get("every_step", False))
        try:
            with self.giving_way(worker):  # the view on screen first (app/foreground.py)
                checkpoint()  # left behind already: no frames read while another computes
                frames = self.frames_for(ts, params)
                try:
                    result = self.compute_on(ts, frames, params)
                except Superseded:
                    raise
                except Exception as exc:  # a screen that fails says so, not loading forever
                    logging.getLogger("hta_tui").exception("%s failed", self.TITLE)
                    self.post_message(ComputeFailed(one_line(exc), ts.generation, params))
                    return
                checkpoint()
                compat = bool(params.get("tb_compat", False))
                scope_text = self._scope(ts, frames, every, compat=compat)
        except Superseded:
            return
        if worker.is_cancelled:
            return
        computed = Computed(result, ts.generation, params, scope_text)
        self.post_message(computed)
        if self.LATER:
            self._compute_rest(worker, ts, frames, params, result, computed.drawn)

    def _compute_rest(
        self,
        worker: Worker[Any],
        ts: TraceSet,
        frames: dict[int, pl.DataFrame],
        params: Params,
        result: Any,
        drawn: threading.Event | None = None,
    ) -> None:
        """Worker thread: the later parts, once the numbers are drawn (the same worker, so
        `shows_current` waits for them and a newer computation cancels them). Started
        before, they took the CPU and the GIL from drawing the numbers: GPU metrics' chart
        series held its table back by seconds in the walk through every view (issue 27)."""
        waited = 0.0
        while drawn is not None and not drawn.wait(LATER_POLL) and waited < LATER_WAIT:
            waited += LATER_POLL
            if worker.is_cancelled:
                return
        try:
            with self.giving_way(worker):
                later = self.compute_later(ts, frames, params, result)
        except Superseded:
            return
        except Exception as exc:
            logging.getLogger("hta_tui").exception("%s failed", self.TITLE)
            later = exc
        if not worker.is_cancelled:
            self.post_message(ComputedLater(later, ts.generation, params))

    @on(ComputeFailed)
    def _compute_failed(self, msg: ComputeFailed) -> None:
        """Shown once per trace-set state: the next change of data or parameters retries."""
        msg.stop()
        if self._computing == (msg.generation, msg.params):
            self._set_computing(None)
        if msg.params != self.params:
            self._maybe_refresh()
            return
        self._shown_key = (msg.generation, msg.params)
        self._later_pending = False
        self.scope_text = f"failed: {msg.reason}"
        self.query_one("#screen-title", Static).update(self._title_text())
        self.query_one("#body").loading = False
        self.app.notify(f"{self.TITLE} failed: {msg.reason}", severity="error", timeout=10)
        self._maybe_refresh()  # the set may have changed while this one ran

    def _scope(
        self, ts: TraceSet, frames: dict[int, pl.DataFrame], every: bool, compat: bool = False
    ) -> str:
        """Worker thread: the steps and spans the numbers cover (the title says the ranks)."""
        if not frames:
            return ""
        spans = span_scope(ts, sorted(frames))
        steps = self.steps_text(frames, every)
        parts = [steps, spans] if spans else [steps]
        if self.PLUGIN_WHY is not None:
            parts.append(definitions_text(self.PLUGIN_WHY, tb_compat=compat))
        return "  ·  ".join(parts)

    def steps_text(self, frames: dict[int, pl.DataFrame], every: bool) -> str:
        """Worker thread: the steps part of the scope. HTA's analyses: its steps, the last
        one left out unless `H`; other screens say their own (`STEPS`, or override)."""
        if self.STEPS is None:
            return scope.describe_steps(scope.step_scope(frames), every_step=every)
        if "ProfilerStep" in self.STEPS and not scope.step_scope(frames).steps:
            # "every ProfilerStep" of a trace without any: say what the numbers cover
            return self.NO_STEPS
        return self.STEPS

    @on(Computed)
    def _computed(self, msg: Computed) -> None:
        msg.stop()
        if self._elsewhere() and msg.params == self.params:
            msg.drawn.set()  # kept: its later parts run on as work left behind
            self._unshown = [msg]  # drawn when shown again; the older kept ones are stale
            if self._computing == (msg.generation, msg.params):
                self._set_computing(None)
            return
        self._show_computed(msg)

    def _show_computed(self, msg: Computed) -> None:
        """Main thread: the numbers of `msg` on the screen (if still the ones wanted)."""
        if self._computing == (msg.generation, msg.params):
            self._set_computing(None)
        if msg.params != self.params:
            msg.drawn.set()
            self._maybe_refresh()
            return  # the user changed something meanwhile
        # its later parts once this frame is painted (after the charts' first frame too)
        self.set_timer(CHART_DELAY, lambda: self.call_after_refresh(msg.drawn.set))
        self.result = msg.result
        self._shown_key = (msg.generation, msg.params)
        self._later_pending = self.LATER
        self.scope_text = msg.scope
        self.query_one("#screen-title", Static).update(self._title_text())
        self.query_one("#body").loading = False
        self._show_waiting()
        self.show(msg.result)
        self._apply_filter()
        if self._queued_keys:  # after `show`'s own focus moves
            self.call_after_refresh(self.call_after_refresh, self._replay_keys)
        if self._computing is None:  # kept numbers drawn: wanted since the key, now shown
            hta_app(self).foreground.wants(self, False)
        self._maybe_refresh()
        self._run_when_shown()

    @on(ComputedLater)
    def _computed_later(self, msg: ComputedLater) -> None:
        msg.stop()
        if self._unshown or self._elsewhere():  # after the numbers kept, when shown again
            self._unshown.append(msg)
            return
        self._show_computed_later(msg)

    def _show_computed_later(self, msg: ComputedLater) -> None:
        """Main thread: the later parts of `msg` beside the numbers shown."""
        if self._shown_key != (msg.generation, msg.params) or not self._later_pending:
            return  # numbers of another state are shown (or coming): theirs will follow
        self._later_pending = False
        if isinstance(msg.result, Exception):  # the numbers stay; the rest says why not
            self.app.notify(
                f"{self.TITLE}: part failed: {one_line(msg.result)}", severity="error", timeout=10
            )
            return
        self.show_later(self.result, msg.result)
        self._apply_filter()

    def select_when_shown(self, select: Callable[[], None]) -> None:
        """Run `select` (a finding's evidence: put the cursor on its row) once this view
        shows the current numbers: now, if it does."""
        self._when_shown = select
        self._run_when_shown()

    def _run_when_shown(self) -> None:
        if self._when_shown is None or self._computing is not None:
            return
        if self._shown_key != (self.trace_set.generation, self.params):
            return
        select, self._when_shown = self._when_shown, None
        self.call_after_refresh(self.call_after_refresh, select)

    # -- keys typed while loading ----------------------------------------------------------
    def on_key(self, event: events.Key) -> None:
        """While the view loads, its keys (`v`, `s`, `t`, `enter`, arrows...) would reach an
        empty table and be lost: they wait and are acted on, in order, once it has loaded.
        Keys of other views (digits, capitals), `?`, `q` and `escape` act at once."""
        if not self._loading_first() or event.key in NOT_QUEUED:
            return
        if isinstance(self.focused, Input):
            return
        if self._app_key(event.key) and not self._own_key(event.key):
            return
        event.stop()
        event.prevent_default()
        self._queued_keys.append(event.key)

    def _loading_first(self) -> bool:
        """Loading and nothing shown yet: the body is the loading indicator."""
        try:
            return bool(self.query_one("#body").loading) and self._shown_key is None
        except NoMatches:
            return False

    def _app_key(self, key: str) -> bool:
        return key in bound_keys(self.app)

    def _own_key(self, key: str) -> bool:
        """Bound by this view or one of its widgets (a table's `s`, `t`, `e`)."""
        return key in bound_keys(self) or any(key in bound_keys(n) for n in self.query("*"))

    def _replay_keys(self) -> None:
        keys, self._queued_keys = self._queued_keys, []
        for key in keys:  # sent as the terminal's would be: from the app, so they reach it
            event = events.Key(key, key if len(key) == 1 else None).set_sender(self.app)
            self.app.post_message(event)

    # -- actions -------------------------------------------------------------------------------
    def action_pick_rank(self) -> None:
        ranks = sorted(self.trace_set.loaded())

        def chosen(value: int | None) -> None:
            if value is not None:
                rank = None if value == -1 else value
                hta_app(self).rank_choice = rank
                self.set_params(rank=rank)

        self.app.push_screen(RankPicker(ranks, self.params.rank), chosen)

    def action_every_step(self) -> None:
        """Include HTA's left-out last step on every screen, or leave it out again."""
        app = hta_app(self)
        app.every_step = not app.every_step  # every screen watching it follows
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
        hta_app(self).show_view("timeline")
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
        hta_app(self).action_go_back()
