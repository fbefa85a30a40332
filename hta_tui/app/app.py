"""The Textual app: a shell over a `session.LiveSession`, which owns the trace sets (both
sides' when comparing) and loads, reloads and watches them on its own threads.

What it does is split by concern, each a mixin of HtaApp:
    loading     the session's changes -> one reactive value, `data`, that screens watch
    refresh     status bars and the overview, when `data` or `every_step` changes
    navigation  numbered screens, back, drill-down, help, command palette
    foreground  the view shown first: other views' work waits while it computes
    read_ahead  the ranks' frames read once the overview is drawn, before any view asks
    sides       folder labels for the status bar

No timer asks whether anything changed: the session wakes the app (one coalescing message per
batch of changes), and screens `watch` the app's reactive values (`data`, `rank_choice`,
`every_step`). The one interval left is the garbage-collection pacer's, which looks for a quiet
moment (time passing, not data changing); the recheck of incomplete files runs on the
session's watcher thread.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any, ClassVar
from weakref import WeakKeyDictionary

from textual import events
from textual.app import App
from textual.binding import Binding, BindingType
from textual.filter import LineFilter
from textual.reactive import var
from textual.screen import Screen
from textual.worker import Worker

from hta_tui.analysis.registry import import_modules
from hta_tui.analysis.step_overview import precompute
from hta_tui.app.control_filter import ControlFilter
from hta_tui.app.environment import export_dir, unicode_ok
from hta_tui.app.foreground import Foreground, ForegroundMixin
from hta_tui.app.gc_pacing import GcPacer
from hta_tui.app.loading import DataState, LoadingMixin
from hta_tui.app.navigation import NavigationMixin
from hta_tui.app.read_ahead import ReadAheadMixin
from hta_tui.app.refresh import RefreshMixin
from hta_tui.app.screens.navigation import nav_bindings
from hta_tui.app.screens.overview import OverviewData, OverviewScreen
from hta_tui.app.screens.registry import DIFF, SCREENS
from hta_tui.app.sides import folder_label, same_path
from hta_tui.app.widgets.status import StatusInfo
from hta_tui.printable import printable
from hta_tui.session import MAIN, TEST, LiveSession
from hta_tui.themes import DEFAULT as DEFAULT_THEME
from hta_tui.themes import THEMES
from hta_tui.trace.cache import Cache
from hta_tui.trace.model import TraceSet
from hta_tui.trace.pool import prepare_pool

import_modules()  # the analyses the views run: imported here, not at a view's first visit

#: How often the garbage-collection pacer looks for a quiet moment (seconds). Not a poll of
#: the data: a quiet moment is time without input, which nothing can announce.
GC_TICK = 0.1

#: The screens' style files (hta_tui/app/screens/NAME.tcss), all loaded with the app's.
SCREEN_STYLES = (
    "critical_path",
    "detail",
    "diff",
    "distributed",
    "findings",
    "gpu_metrics",
    "idle",
    "kernels",
    "launch",
    "memory",
    "modules",
    "operators",
    "overlap",
    "sequences",
    "step_time",
    "steps",
    "syncs",
    "timeline",
    "timelines",
)


class HtaApp(
    NavigationMixin, LoadingMixin, RefreshMixin, ReadAheadMixin, ForegroundMixin, App[int]
):
    """hta-tui. `path` is a trace folder (searched recursively) or one trace file.

    `cache`: where parsed frames go (tests pass their own); `poll`: stat polling instead of
    native file events; `watch`: follow the folder at all; `workers`: parser processes;
    `theme`: a registered Textual theme; `timings`: show per-file load times (off for
    snapshots); `ascii`: ASCII bars (default: when the terminal encoding is not UTF-8).
    """

    #: Every screen's styles, parsed once at start: a screen's own CSS_PATH makes Textual
    #: reparse the whole stylesheet on its first visit (about 0.1-0.2 s of a frozen UI).
    CSS_PATH: ClassVar[list[str]] = [
        "app.tcss",
        *(f"screens/{name}.tcss" for name in SCREEN_STYLES),
        "ascii.tcss",
    ]
    TITLE = "hta-tui"
    DEFAULT_MODE = "overview"

    #: The session's state (each side's generation, scanning, watcher): set once per batch
    #: of changes; the status bars, the overview and the screens watch it.
    data: var[DataState] = var(DataState(), init=False)
    #: the rank every screen shows (None: all), chosen with `r` on any screen
    rank_choice: var[int | None] = var(None, init=False)
    #: every screen includes the last ProfilerStep, which HTA leaves out (`H`)
    every_step: var[bool] = var(False, init=False)
    #: the TensorBoard plugin's views use its own rules exactly (`X`), not this project's
    #: fixes for traces newer than 2021 (the report's `--set tb_compat=true`)
    tb_compat: var[bool] = var(False, init=False)

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("q", "quit", "Quit", tooltip="Quit hta-tui"),
        Binding("question_mark", "help", "Help", key_display="?", tooltip="Show every key"),
        # where no table row names a moment, `t` says why instead of doing nothing
        Binding("t", "no_timeline", "Timeline", show=False, tooltip="Why t does nothing here"),
        Binding(
            "X",
            "plugin_definitions",
            "Plugin's rules",
            show=False,
            tooltip="The TensorBoard plugin's views: its own rules exactly, or hta-tui's fixes",
        ),
        *nav_bindings(),
    ]

    def __init__(
        self,
        path: str | Path,
        *,
        cache: Cache,
        poll: bool = False,
        watch: bool = True,
        workers: int | None = None,
        theme: str | None = None,
        timings: bool = True,
        ascii: bool | None = None,
        compare: str | Path | None = None,
        control_rank: int | None = None,
        test_rank: int | None = None,
        findings: bool | None = None,
        backend: Any = None,
    ) -> None:
        if compare is not None:
            self.DEFAULT_MODE = DIFF.mode  # the diff is the first screen shown
        super().__init__()
        for t in THEMES:
            self.register_theme(t)
        self.theme = DEFAULT_THEME
        self.root = Path(path)
        self.cache = cache
        self.poll = poll
        self.watch_enabled = watch
        self.load_workers = workers
        self.timings = timings  # per-file load seconds in the table (off for snapshots)
        #: the overview opens with the findings (`$HTA_TUI_FINDINGS=0`: it does not compute
        #: them; the Findings view, Z, still does when asked)
        self.overview_findings = (
            os.environ.get("HTA_TUI_FINDINGS", "1") != "0" if findings is None else findings
        )
        self.ascii = (not unicode_ok()) if ascii is None else ascii
        if theme is not None:
            self.theme = theme
        #: comparing: the test side (`path` is the control), and each side's chosen rank
        self.compare_root = Path(compare) if compare is not None else None
        self.session = LiveSession(
            self.root,
            cache=cache,
            compare=self.compare_root,
            workers=workers,
            poll=poll,
            wake=self._wake,
            after_parse=precompute,
            backend=backend,
        )
        self.session.subscribe(self._session_changed)
        self.control_rank = control_rank
        self.test_rank = test_rank
        self._label = folder_label(self.root)
        #: rank -> trace idx of the events on the critical path the Critical path view shows
        #: last: the trace timeline marks them
        self.critical_path_marks: dict[int, list[int]] = {}
        #: the status bar's: comparing, both sides'
        self._status_label = self._label
        self._status_sides = [self.session.sides[MAIN]]
        if self.compare_root is not None and not same_path(self.compare_root, self.root):
            self._status_label += " vs " + folder_label(self.compare_root)
            self._status_sides.append(self.session.sides[TEST])
        self.watcher_state = "off"
        self.status_info = StatusInfo(root=self._status_label, scanning=True)
        self.overview_data: OverviewData | None = None
        self._overview_worker: Worker | None = None
        self._overview_requested: tuple[Any, ...] | None = None
        self._overview_shown = -1
        #: the kernel the detail screen shows (set by enter on the kernels screen)
        self.selected_kernel: str | None = None
        self._mode_history: list[str] = []
        self._section_last: dict[str, str] = {}
        self.gc_pacer = GcPacer(idle=self._nothing_pending)
        #: the style state (`_css_state`) each screen was last styled in, and of the last
        #: full restyle (`refresh_css`)
        self.css_styled: WeakKeyDictionary[Screen, tuple[Any, ...] | None] = WeakKeyDictionary()
        self.css_done: tuple[Any, ...] | None = None
        #: the view shown and whether it computes: other views' work waits for it
        self.foreground = Foreground()
        self._control_filter = ControlFilter()
        # before Textual takes over stderr (see trace.pool.prepare_pool)
        prepare_pool((precompute.__module__,))
        self.export_dir = export_dir(self.root)
        for entry in SCREENS:
            if entry.mode == "overview":
                self.add_mode("overview", lambda: self._styled(OverviewScreen(ascii=self.ascii)))
            else:
                self.add_mode(entry.mode, lambda entry=entry: self._styled(entry.load()()))
        if self.comparing:
            self.add_mode(DIFF.mode, lambda: self._styled(DIFF.load()()))

    def _nothing_pending(self) -> bool:
        """No file loading and no worker computing (a view's numbers, the findings): the GC
        pacer's full sweep waits for it, as a result about to land is when keys come."""
        return self.session.idle and all(w.is_finished for w in self.workers)

    @property
    def trace_set(self) -> TraceSet:
        """The main side's files (the control when comparing)."""
        return self.session.trace_set

    @property
    def compare_set(self) -> TraceSet | None:
        """The test side's files when comparing."""
        return self.session.compare_set

    @property
    def kept_answers(self) -> Path | None:
        """Where whole answers (the findings) are kept for the next open, as the report
        keeps them (`exec.split`): the cache, unless it is off."""
        return self.cache.root if self.cache.enabled else None

    def get_line_filters(self) -> list[LineFilter]:
        """Textual's filters, then the guard that keeps control characters off the terminal."""
        return [*super().get_line_filters(), self._control_filter]

    def notify(self, message: str, *, title: str = "", markup: bool = False, **kw: Any) -> None:
        """Every notice, from any screen: its text may hold file and kernel names, so it is
        shown as written (`printable`, never markup)."""
        super().notify(printable(message), title=printable(title), markup=False, **kw)

    def _css_state(self) -> tuple[Any, ...]:
        """What the styles of a screen built now depend on that can change while the app
        runs: the theme (a theme change restyles) and the ANSI themes."""
        return (
            self.theme,
            id(self.current_theme),
            id(self.ansi_theme_dark),
            id(self.ansi_theme_light),
        )

    def styled_now(self, screen: Screen) -> bool:
        """`screen` was styled in the current style state (`_css_state`): shown again, it
        need not be restyled whole (`AnalysisScreen.post_message`)."""
        return self.css_styled.get(screen) == self._css_state()

    def _styled(self, screen: Screen) -> Screen:
        """A new screen, marked as styled by the stylesheet of the last full restyle: every
        style file is loaded at start (CSS_PATH) and a new screen's widgets get their styles
        as they mount, so Textual's app-wide restyle on its first visit changes nothing
        (`refresh_css` skips it)."""
        self.css_styled[screen] = self.css_done
        return screen

    def refresh_css(self, animate: bool = True) -> None:
        """Textual restyles the whole app, every screen already shown included, twice on a
        screen's first visit (30-120 ms of frozen UI each): skipped when every screen of the
        current mode was styled in the current state (`_css_state`). A theme change still
        restyles the screens shown, and any other screen when it is next shown (Textual asks
        again then, and its mark is older)."""
        state = self._css_state()
        shown = list(self.screen_stack)
        if shown and all(self.css_styled.get(screen) == state for screen in shown):
            return
        super().refresh_css(animate)
        self.css_done = state
        for screen in shown:
            self.css_styled[screen] = state

    async def on_event(self, event: events.Event) -> None:
        if isinstance(
            event,
            (
                events.Key,
                events.MouseDown,
                events.MouseScrollDown,
                events.MouseScrollUp,
                events.Resize,
            ),
        ):
            self.gc_pacer.activity()
        await super().on_event(event)

    # -- lifecycle ------------------------------------------------------------------------------
    def on_mount(self) -> None:
        self.set_class(self.ascii, "-ascii")  # ascii.tcss: box borders without box glyphs
        self.set_interval(GC_TICK, self.gc_pacer.tick)
        self.gc_pacer.start()
        self.follow_foreground()
        if self.watch_enabled:
            self.session.watch()
        self.action_reload()

    def on_unmount(self) -> None:
        self.gc_pacer.stop()
        self.session.close()

    async def action_quit(self) -> None:
        self.session.close()
        self.exit(0)


def run_app(
    path: Path,
    *,
    cache: Cache,
    poll: bool = False,
    watch: bool = True,
    mouse: bool = True,
    theme: str | None = None,
    workers: int | None = None,
    compare: Path | None = None,
    control_rank: int | None = None,
    test_rank: int | None = None,
    dask: str | None = None,
) -> int:
    """Run the app until the user quits; the exit code (2 for an unknown theme or a Dask
    cluster that cannot start). `compare`: a test trace folder or file to diff `path` (the
    control) with, on the ranks `control_rank` / `test_rank` (default: each side's
    smallest). `dask`: files are parsed on this Dask cluster (hta_tui/exec)."""
    backend = None
    if dask:
        from hta_tui.exec import BackendError, open_backend

        try:  # before Textual takes over the terminal: its one line goes to stderr
            backend = open_backend(dask, workers=workers)
        except BackendError as exc:
            print(f"hta-tui: {exc}", file=sys.stderr)
            return 2
    try:
        return _run_app(
            path,
            cache=cache,
            poll=poll,
            watch=watch,
            mouse=mouse,
            theme=theme,
            workers=workers,
            compare=compare,
            control_rank=control_rank,
            test_rank=test_rank,
            backend=backend,
        )
    finally:
        if backend is not None:
            backend.close()


def _run_app(
    path: Path,
    *,
    cache: Cache,
    poll: bool,
    watch: bool,
    mouse: bool,
    theme: str | None,
    workers: int | None,
    compare: Path | None,
    control_rank: int | None,
    test_rank: int | None,
    backend: Any,
) -> int:
    app = HtaApp(
        path,
        cache=cache,
        poll=poll,
        watch=watch,
        workers=workers,
        compare=compare,
        control_rank=control_rank,
        test_rank=test_rank,
        backend=backend,
    )
    if theme is not None:
        if theme not in app.available_themes:
            names = ", ".join(sorted(app.available_themes))
            print(f"hta-tui: unknown theme {theme!r}; one of: {names}", file=sys.stderr)
            return 2
        app.theme = theme
    result = app.run(mouse=mouse)
    return int(result or 0) if app.return_code in (None, 0) else int(app.return_code)
