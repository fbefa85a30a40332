"""The trace itself: a zoomable timeline of every CPU thread and GPU stream (key `T`, or `t` on a
table row that names a moment). The rows and their level-of-detail summaries are the registry's
`timeline_model` (`analysis.timeline_rows`), asked for in the screen's worker; a key only
slices and searches them; drawing is the view's (`widgets.timeline_view`).

Keys: `w`/`s` (`+`/`-`) zoom around the cursor, `a`/`d` pan (`A`/`D` a page), left/right move
the cursor, up/down change rows, `[`/`]` previous/next event on the row, `enter` selects the
event under the cursor (or folds a rank/device group), `f` follows its flow, `m` marks a
range, `/` highlights matching names, `z` shows the whole trace.
"""

from __future__ import annotations

from typing import Any, ClassVar

import numpy as np
import polars as pl
from textual import on
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.widgets import Input, Static

from hta_tui.analysis import registry, timeline_rows
from hta_tui.analysis import timeline_events as te
from hta_tui.analysis.timeline_counters import QUEUE_LANE
from hta_tui.analysis.timeline_rows import Timeline, busy_before, innermost_at
from hta_tui.app.access import hta_app
from hta_tui.app.moment import Moment
from hta_tui.app.screens.base import AnalysisScreen, Params
from hta_tui.app.widgets.text_line import TextBlock
from hta_tui.app.widgets.timeline_view import TimelineView, fmt_time
from hta_tui.printable import printable
from hta_tui.trace.model import TraceSet

#: About the most events the timeline of a rank too large to hold draws: the trace's first
#: part, the share of its time that holds this many of its events were they spread evenly
#: (17 columns of 22 M events need 4 GB, and its rows as much again).
WINDOW_EVENTS = 2_000_000


def window_bounds(meta: dict[str, Any], at: int | None = None) -> tuple[int, int] | None:
    """The part of a large rank's time its timeline reads (ns as in the file): from `at`
    (default: its first event) for the share of its time that holds WINDOW_EVENTS events
    were they spread evenly; None: the whole rank (small enough)."""
    n, lo, hi = meta.get("n_events") or 0, meta.get("min_ts"), meta.get("max_end")
    if n <= WINDOW_EVENTS or lo is None or hi is None:
        return None
    start = lo if at is None else max(int(at), lo)
    return start, start + max((hi - lo) * WINDOW_EVENTS // n, 1)


def window(meta: dict[str, Any], at: int | None = None) -> pl.Expr | None:
    """The events a large rank's timeline draws: those starting in its first part (see
    WINDOW_EVENTS), or, from `at` on, those overlapping the part from there; None: every
    event."""
    bounds = window_bounds(meta, at)
    if bounds is None:
        return None
    start, end = bounds
    if start == meta.get("min_ts"):
        return pl.col("ts") < end
    return (pl.col("ts") < end) & (pl.col("ts") + pl.col("dur").fill_null(0) >= start)


class TimelineScreen(AnalysisScreen):
    TITLE = "Trace timeline"
    STEPS = "whole trace"
    #: A rank too large to hold whole draws from these (its rows, flows and the details'
    #: main fields; the details show no other argument); any other rank keeps every column.
    EVENTS_COLUMNS = (
        *("idx", "ts", "dur", "name", "cat", "kind", "pid", "tid", "stream", "device"),
        *("correlation", "external_id", "bytes", "bandwidth", "input_dims", "seq"),
        "wait_on_stream",
    )
    EVENTS_COLUMNS_ALWAYS = False
    #: ... and only a part of its time (`window`): the first, then the one the view moves to.
    EVENTS_ROWS = staticmethod(window)

    @classmethod
    def events_rows(cls, params: Params) -> Any:
        at = params.get("window_at")
        return cls.EVENTS_ROWS if at is None else lambda meta: window(meta, at)

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("w,plus,equals_sign", "zoom(0.5)", "Zoom in", key_display="w/+"),
        Binding("s,minus", "zoom(2)", "Zoom out", key_display="s/-"),
        Binding("a", "pan(-0.125)", "Pan left", show=False),
        Binding("d", "pan(0.125)", "Pan right", show=False),
        Binding("A,shift+a", "pan(-1)", "Page left", show=False),
        Binding("D,shift+d", "pan(1)", "Page right", show=False),
        Binding("left,h", "cursor_time(-1)", "Cursor left", show=False),
        Binding("right,l", "cursor_time(1)", "Cursor right", show=False),
        Binding("up,k", "cursor_row(-1)", "Row up", show=False),
        Binding("down,j", "cursor_row(1)", "Row down", show=False),
        Binding("left_square_bracket", "step_event(False)", "Prev event", key_display="["),
        Binding("right_square_bracket", "step_event(True)", "Next event", key_display="]"),
        Binding("enter", "select", "Select"),
        Binding("f", "follow", "Flow"),
        Binding("m", "mark", "Mark"),
        Binding("slash", "filter", "Find", key_display="/"),
        Binding("space", "toggle_group", "Fold", show=False),
        Binding("z", "reset_zoom", "Whole trace", show=False),
    ]

    def __init__(self, **kw: Any) -> None:
        super().__init__(**kw)
        self.target: Moment | None = None
        #: the ranks drawn only in part (too large to hold: `window`)
        self.partial: list[int] = []
        #: the part of their time read (ns from the origin): the view moving past it reads
        #: the part it then shows (`_follow_view`)
        self.read_ns: tuple[int, int] | None = None
        self.flow_targets: list[te.Ref] = []

    def compose_body(self) -> ComposeResult:
        yield TimelineView(ascii=hta_app(self).ascii, id="timeline-view")
        yield TextBlock("", id="timeline-details")

    @property
    def view(self) -> TimelineView:
        return self.query_one(TimelineView)

    def on_mount(self) -> None:
        super().on_mount()
        self.query_one("#filter", Input).placeholder = "highlight names containing..."
        self.view.focus()

    # -- compute -------------------------------------------------------------------------------
    #: The registry's result (`timeline_rows`'s): the rows' numpy arrays, which the view
    #: slices and searches per key.
    MODEL = "timeline_model"

    @staticmethod
    def compute(frames: dict[int, pl.DataFrame], params: Params) -> Timeline:
        origin = params.get("origin_ns")
        options = registry.Options(origin_ns=-1 if origin is None else origin)
        return registry.tables(frames, [TimelineScreen.MODEL], options)[TimelineScreen.MODEL]

    def compute_on(self, ts: TraceSet, frames: dict[int, pl.DataFrame], params: Params) -> Timeline:
        """Threads, flows and memory besides the events; ranks stay aligned on the common
        origin even when one rank is shown. Only the ranks whose rows fill the screen are
        made here; the others come after them (`compute_later`)."""
        return self._model(ts, frames, params, {"timeline_first_rows": self.rows_on_screen()})

    def _model(
        self, ts: TraceSet, frames: dict[int, pl.DataFrame], params: Params, given: dict[str, Any]
    ) -> Timeline:
        origin = ts.origin_ns
        options = registry.Options(origin_ns=-1 if origin is None else origin)
        at = params.get("window_at")
        large = {r: d for r, d in ts.loaded().items() if r in frames and d.large()}
        parts = {r: b for r, d in large.items() if (b := window_bounds(d.meta, at)) is not None}
        self.partial = sorted(parts)
        every_row = None
        if parts:  # every row and the whole span listed: each rank's row keys, read here
            keys = {r: large[r].distinct(timeline_rows.lane_keys()) for r in parts}
            every_row = (keys, max(int(large[r].meta["max_end"]) for r in parts))
        given = {**given, "every_row": every_row}
        tl = registry.tables(frames, [self.MODEL], options, frames=ts.frames, given=given)[
            self.MODEL
        ]
        # the part read (relative to the origin)
        self.read_ns = (
            (
                max(b[0] for b in parts.values()) - tl.origin_ns,
                min(b[1] for b in parts.values()) - tl.origin_ns,
            )
            if parts
            else None
        )
        return tl

    #: Lines filled first when the terminal's height is not known (no app: a test, the
    #: bench's `view_cpu.py`): about the view's at 120 x 40.
    FIRST_ROWS = 32

    def rows_on_screen(self) -> int:
        """Worker thread: the lines the view can show (rows and their groups' headings), at
        most the terminal's height: the ranks whose rows fill them are made first. The
        terminal's, not the view's: the first computation starts before the view is laid
        out (and a worker does not walk the DOM)."""
        try:
            height = self.app.size.height - self.CHROME
        except Exception:  # no app (a test's screen, the bench)
            return self.FIRST_ROWS
        return height if height > 0 else self.FIRST_ROWS

    #: Lines of the screen around the view at least (title, a line of details, ruler,
    #: status bar, footer).
    CHROME = 5

    #: The ranks below the screen's rows are made after those on it are drawn (about 0.1 s
    #: of CPU a rank of 100 MB: 8 ranks took the first visit past 1 s).
    LATER = True

    def compute_later(
        self, ts: TraceSet, frames: dict[int, pl.DataFrame], params: Params, result: Timeline
    ) -> Timeline:
        """Worker thread: the pending ranks' rows beside those drawn (the same timeline a
        single call makes)."""
        if not result.pending:
            return result
        return self._model(ts, frames, params, {"timeline_model": result})

    def show_later(self, result: Timeline, later: Timeline) -> None:
        """The other ranks' rows below those drawn: the rows drawn keep their place (they
        come first), so the cursor, zoom and selection stay."""
        self.result = later
        if later is result:
            return
        view = self.view
        selected = view.selected
        view.set_timeline(later)
        view.selected = selected
        self._mark_critical_path()
        if self.target is not None:
            self._go_to_target()
        elif selected is None:
            self._say(self._summary(later))

    def show(self, result: Timeline) -> None:
        self.view.set_timeline(result)
        self._mark_critical_path()
        if self.target is not None and self.target.rank not in result.pending:
            self._go_to_target()
        else:
            self._say(self._summary(result))

    def _summary(self, tl: Timeline) -> str:
        part = ""
        if self.partial and self.read_ns is not None:  # too large to draw whole
            part = (
                f"rank {', '.join(map(str, self.partial))}: "
                f"{fmt_time(self.read_ns[0])}-{fmt_time(self.read_ns[1])} read · "
            )
        if tl.pending:  # below the screen's rows: made next
            part += f"{ranks_text(tl.pending)}: rows being made · "
        return (
            f"{part}{len(tl.rows)} rows · {fmt_time(tl.span_ns)} · "
            "w/s zoom  a/d pan  [/] events  enter select  f flow  m mark  / find"
        )

    # -- linked from tables --------------------------------------------------------------------
    def show_moment(self, moment: Moment) -> None:
        """Zoom to a moment (and select its event when one starts there)."""
        self.target = moment
        views = self.query(TimelineView)  # empty until the screen's first compose
        tl = views.first().timeline if views else None
        if tl is not None and moment.rank not in tl.pending:  # else once its rows are made
            self._mark_critical_path()
            self._go_to_target()

    def _mark_critical_path(self) -> None:
        """The events of the path the Critical path view shows last are highlighted (as `/`
        highlights names; a name typed after `/` replaces them)."""
        marks = hta_app(self).critical_path_marks
        tl = self.view.timeline
        if not marks or tl is None or self.query_one("#filter", Input).value.strip():
            return
        self.view.set_matches(te.marked(tl, marks))

    def _go_to_target(self) -> None:
        m, self.target = self.target, None
        view = self.view
        tl = view.timeline
        if m is None or tl is None:
            return
        place = te.resolve(
            tl,
            m.rank,
            m.t,
            base=m.base,
            dur=m.dur,
            name=m.name,
            correlation=m.correlation,
            stream=m.stream,
            name_at_end=m.name_at_end,
            side=m.side,
        )
        pad = max(place.t1 - place.t0, 1000.0) / 2
        view.cursor_t = place.t0
        view.show_range(place.t0 - pad, place.t1 + pad)
        if place.row is not None:
            view.goto_row(place.row)
        if place.ref is not None:
            self._select(place.ref)
        else:
            self._say(f"rank {m.rank} at {fmt_time(place.t0)}, {fmt_time(m.dur)} long")
        self._follow_view()  # a moment past the part read of a large rank: read its part

    # -- actions -------------------------------------------------------------------------------
    def _say(self, text: str) -> None:
        self.query_one("#timeline-details", Static).update(text)

    def action_zoom(self, factor: float) -> None:
        self.view.zoom(factor)
        self._follow_view()

    def action_pan(self, fraction: float) -> None:
        self.view.pan(fraction)
        self._follow_view()

    def _follow_view(self) -> None:
        """A rank drawn only in part: the view moved past the part read reads the part it
        now shows (from its left edge), in the screen's worker; the rows stay."""
        read, view = self.read_ns, self.view
        if read is None or view.timeline is None:
            return
        t0, t1 = view.t0, view.t0 + view.span
        if read[0] <= t0 and t1 <= read[1]:
            return
        # the left edge left the part, or the right one is past it and the left one moved
        moved = not read[0] <= t0 < read[1] or (t1 > read[1] and t0 > read[0])
        at = int(view.timeline.origin_ns + max(t0, 0))
        if moved and at != self.params.get("window_at"):
            self._say(f"reading from {fmt_time(max(t0, 0))}...")
            self.set_params(window_at=at)

    def action_reset_zoom(self) -> None:
        tl = self.view.timeline
        if tl is not None:
            self.view.show_range(0, tl.span_ns)
            self._follow_view()

    def action_cursor_time(self, cells: int) -> None:
        self.view.move_cursor_time(cells)
        self._follow_view()

    def action_cursor_row(self, delta: int) -> None:
        self.view.move_cursor_row(delta)

    def action_toggle_group(self) -> None:
        self.view.toggle_group()

    def _row(self):
        tl, row = self.view.timeline, self.view.current_row
        return (None, None) if tl is None or row is None else (row, tl.rows[row])

    def action_step_event(self, forward: bool) -> None:
        index, row = self._row()
        if row is None or row.counter:
            return
        sel = self.view.selected
        # from the selected event's start when it is on this row, else from the cursor
        t = float(row.starts[sel[1]]) if sel is not None and sel[0] == index else self.view.cursor_t
        pos = te.next_event(row, t, forward)
        if pos is None:
            more = " in the part read: pan (a/d) to read on" if self.read_ns is not None else ""
            self._say(f"no more events on this row{more}")
            return
        self._select(te.Ref(index, pos))

    def action_select(self) -> None:
        index, row = self._row()
        if row is None:
            self.view.toggle_group()
            return
        if row.counter:
            self._say(self._counter_text(row))
            return
        pos = int(innermost_at(row, np.array([self.view.cursor_t]))[0])
        if pos < 0:
            self._say("no event under the cursor: [ and ] jump to the nearest ones")
            return
        self._select(te.Ref(index, pos))

    def _counter_text(self, row) -> str:
        """A counter track's value over the cell under the cursor."""
        view = self.view
        step = view.span / view.track_width
        t = view.cursor_t
        busy = busy_before(row, np.array([t - step / 2, t + step / 2]))
        frac = float(busy[1] - busy[0]) / step
        if row.level is None:
            return f"GPU utilisation at {fmt_time(t)}: {100 * frac:.0f}% (union of its streams)"
        if row.key[3] <= QUEUE_LANE:
            return (
                f"queue length of stream {QUEUE_LANE - row.key[3]} at {fmt_time(t)}: "
                f"{frac * row.scale:.1f} on average over the cell (max {row.scale:.0f})"
            )
        gb = frac * row.scale / 2**30
        return f"memory allocated at {fmt_time(t)}: {gb:.3f} GiB (peak {row.scale / 2**30:.3f})"

    def _select(self, ref: te.Ref) -> None:
        """Select an event: cursor on its start (in view), details below."""
        view = self.view
        tl = view.timeline
        assert tl is not None
        row = tl.rows[ref.row]
        view.selected = (ref.row, ref.pos)
        view.goto_row(ref.row)
        start, end = float(row.starts[ref.pos]), float(row.ends[ref.pos])
        view.cursor_t = start + min((end - start) / 2, view.span / view.track_width / 2)
        view.follow_cursor()
        self.flow_targets = []
        self._say(self._describe(te.details(tl, ref)))

    @staticmethod
    def _describe(d: dict[str, Any]) -> str:
        args = "  ".join(f"{k}={v}" for k, v in d["args"].items())
        stack = " > ".join(str(s) for s in d["stack"][-4:]) or "-"
        lines = [
            f"{d['name']}",
            f"{d['kind']} · rank {d['rank']} {d['row']} · "
            f"start {d['start_us']:,.3f} us from trace start · dur {d['dur_us']:,.3f} us",
            f"stack: {stack}",
            args,
        ]
        return "\n".join(printable(line) for line in lines)

    def action_follow(self) -> None:
        view = self.view
        tl = view.timeline
        if tl is None or view.selected is None:
            self._say("select an event first (enter)")
            return
        if not self.flow_targets:
            self.flow_targets = te.flow_partners(tl, te.Ref(*view.selected))
            if not self.flow_targets:
                self._say("this event has no flow (launch, kernel or forward/backward)")
                return
        target = self.flow_targets[0]
        rest = self.flow_targets[1:]
        self._select(target)
        self.flow_targets = []
        if rest:
            self._say(self.query_one("#timeline-details", Static).content + f"  (+{len(rest)})")

    def action_mark(self) -> None:
        view = self.view
        tl = view.timeline
        if tl is None:
            return
        if view.mark is None or view.mark[1] is not None:
            if view.mark is not None and view.mark[1] is not None:
                view.mark = None
                view.changed()
                self._say("mark cleared")
                return
            view.mark = (view.cursor_t, None)
            view.changed()
            self._say("mark set: move the cursor and press m again")
            return
        a, b = sorted((view.mark[0], view.cursor_t))
        view.mark = (a, b)
        view.changed()
        rows = [it.row for it in view.items if it.row is not None]
        s = te.range_summary(tl, a, b, rows)
        top = "\n".join(f"  {printable(n)[:50]}  {us:.1f} us  x{c}" for n, us, c in s["top"][:3])
        inside = ", ".join(printable(n)[:30] for n in s["around"][:3])
        where = f" · inside {inside}" if inside else ""
        self._say(f"marked {fmt_time(b - a)} · {s['events']} events{where}\n{top}")

    # -- find (the base screen's filter box) ---------------------------------------------------
    @on(Input.Changed, "#filter")
    def _filter_typed(self, event: Input.Changed) -> None:
        event.stop()  # highlights are computed on enter, not per keystroke

    def _apply_filter(self) -> None:
        tl = self.view.timeline
        if tl is None:
            return
        text = self.query_one("#filter", Input).value.strip()
        self.view.set_matches(te.matching(tl, text))
        if not text:
            self._mark_critical_path()
        if text:
            total = sum(int(m.sum()) for m in self.view.matches.values())
            self._say(f"{total} events match {printable(text)!r}")

    @on(Input.Submitted, "#filter")
    def _filter_done(self, event: Input.Submitted) -> None:
        event.stop()
        self._apply_filter()
        event.input.display = False
        self.view.focus()


def ranks_text(ranks: tuple[int, ...]) -> str:
    """ "rank 3", "ranks 2-7" or "ranks 1, 4, 6"."""
    if len(ranks) == 1:
        return f"rank {ranks[0]}"
    if list(ranks) == list(range(ranks[0], ranks[-1] + 1)):
        return f"ranks {ranks[0]}-{ranks[-1]}"
    return "ranks " + ", ".join(map(str, ranks))
