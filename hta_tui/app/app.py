"""The Textual app: owns the TraceSet, runs the loading, overview and watch workers.

Flow:

    mount -> _load_all (thread): discover, FilesFound, then one FileLoaded per file
          -> _run_watch (async): FilesChanged per batch; added/modified -> _reload_files (thread)
    handlers apply FilesFound / FileLoaded / FileGone / FilesChanged to the TraceSet (main thread)
    _tick (10/s): refresh the status bars; if the set changed and no overview computation is
          running, snapshot the set and start _compute_overview (thread) -> OverviewReady
    _recheck_incomplete (1/s, while watching): stat the incomplete files; reload changed ones
          (a watcher can miss a rewrite: polling compares whole-second mtimes)

Comparing (`compare=TEST`): the test side is a second TraceSet (`compare_set`) loaded and
watched by the same workers and handlers; every loading message carries the side it belongs to
(`msg.side`, "main" or "test"), and each side has its own scan generation.
"""

from __future__ import annotations

import asyncio
import locale
import os
import sys
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

from textual import events, on, work
from textual.app import App, SystemCommand
from textual.binding import Binding, BindingType
from textual.filter import LineFilter
from textual.screen import Screen
from textual.worker import Worker, WorkerState, get_current_worker

from hta_tui.analysis.overview import precompute
from hta_tui.app.control_filter import ControlFilter
from hta_tui.app.format import file_columns, file_rows, temporal_rows
from hta_tui.app.gc_pacing import GcPacer
from hta_tui.app.messages import (
    FileGone,
    FileLoaded,
    FilesChanged,
    FilesFound,
    OverviewReady,
    WatchState,
)
from hta_tui.app.screens.help import HelpScreen
from hta_tui.app.screens.navigation import help_rows, nav_bindings, palette_entries
from hta_tui.app.screens.overview import OverviewData, OverviewScreen
from hta_tui.app.screens.registry import BY_MODE, BY_SECTION, DIFF, SCREENS
from hta_tui.app.widgets.status import StatusBar, StatusInfo
from hta_tui.printable import printable
from hta_tui.themes import DEFAULT as DEFAULT_THEME
from hta_tui.themes import THEMES
from hta_tui.trace.cache import Cache, take_notices
from hta_tui.trace.discover import TraceFile, describe, discover
from hta_tui.trace.load import LoadResult, load_files, prepare_pool
from hta_tui.trace.model import TraceSet

#: Status bars and the overview are refreshed at most this often (seconds).
TICK = 0.1
#: How often the garbage-collection pacer looks for a quiet moment (seconds).
GC_TICK = 0.1
#: While watching, incomplete files are stat'ed this often (seconds) in case an event was missed.
RECHECK = 1.0

#: The screens' style files (hta_tui/app/screens/NAME.tcss), all loaded with the app's.
SCREEN_STYLES = (
    "detail",
    "diff",
    "distributed",
    "idle",
    "kernels",
    "launch",
    "memory",
    "modules",
    "overlap",
    "sequences",
    "step_time",
    "steps",
    "syncs",
    "timelines",
)

#: The two trace sets: the app's own (the control side when comparing) and the test side.
MAIN, TEST = "main", "test"


def _folder_label(path: Path) -> str:
    """A folder's or file's name, never its absolute path (screenshots, shared terminals)."""
    return printable(path.name or str(path)) + ("" if path.is_file() else "/")


def _same_path(a: Path, b: Path) -> bool:
    try:
        return a.resolve() == b.resolve()
    except OSError:
        return a == b


@dataclass
class SideState:
    """Loading state of one trace set: its scan generation, whether a full scan is under way,
    and the files known when that scan started (those it does not list again are gone)."""

    root: Path
    trace_set: TraceSet
    generation: int = 0
    scanning: bool = False
    before: set[Path] = field(default_factory=set)


def tag(msg: Any, side: str) -> Any:
    """Mark a loading message with the side (trace set) it belongs to."""
    msg.side = side
    return msg


def side_of(msg: Any) -> str:
    return getattr(msg, "side", MAIN)


def unicode_ok() -> bool:
    """Can the terminal show block and box glyphs? (HTA_TUI_ASCII=1 forces the ASCII look.)"""
    if os.environ.get("HTA_TUI_ASCII", "") not in ("", "0"):
        return False
    stream = sys.__stdout__
    enc = getattr(stream, "encoding", None) or locale.getpreferredencoding(False) or ""
    return "utf" in enc.lower()


def export_dir(trace_root: Path) -> Path:
    """Where `e` writes CSV files: $HTA_TUI_EXPORT_DIR, else the current directory - unless
    that is inside the trace folder, which hta-tui never writes into: then the home folder."""
    env = os.environ.get("HTA_TUI_EXPORT_DIR")
    if env:
        return Path(env)
    cwd = Path.cwd().resolve()
    root = trace_root.resolve()
    root = root if root.is_dir() else root.parent
    return Path.home() if cwd == root or root in cwd.parents else cwd


def one_line(exc: BaseException | None) -> str:
    if exc is None:
        return "unknown error"
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0] if text else ''}"[:200]


class HtaApp(App[int]):
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
    ]
    TITLE = "hta-tui"
    DEFAULT_MODE = "overview"

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("q", "quit", "Quit", tooltip="Quit hta-tui"),
        Binding("question_mark", "help", "Help", key_display="?", tooltip="Show every key"),
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
        self.ascii = (not unicode_ok()) if ascii is None else ascii
        if theme is not None:
            self.theme = theme
        self.trace_set = TraceSet(self.root)
        #: comparing: the test side (`path` is the control), and each side's chosen rank
        self.compare_root = Path(compare) if compare is not None else None
        self.compare_set = TraceSet(self.compare_root) if self.compare_root is not None else None
        self.control_rank = control_rank
        self.test_rank = test_rank
        self._sides: dict[str, SideState] = {MAIN: SideState(self.root, self.trace_set)}
        if self.compare_set is not None and self.compare_root is not None:
            self._sides[TEST] = SideState(self.compare_root, self.compare_set)
        self._label = _folder_label(self.root)
        #: the status bar's: comparing, both sides'
        self._status_label = self._label
        self._status_sides = [self._sides[MAIN]]
        if self.compare_root is not None and not _same_path(self.compare_root, self.root):
            self._status_label += " vs " + _folder_label(self.compare_root)
            self._status_sides.append(self._sides[TEST])
        self.watcher_state = "off"
        self.status_info = StatusInfo(root=self._status_label, scanning=True)
        self.overview_data: OverviewData | None = None
        self._overview_worker: Worker | None = None
        self._overview_requested: tuple[Any, ...] | None = None
        self._overview_shown = -1
        self._worker_paths: dict[Worker, list[Path]] = {}
        self._worker_side: dict[Worker, str] = {}
        self._stop_watch: asyncio.Event | None = None
        self._recheck_workers: dict[str, Worker] = {}
        #: the kernel the detail screen shows (set by enter on the kernels screen)
        self.selected_kernel: str | None = None
        self._mode_history: list[str] = []
        #: section key -> the view last shown in it (its digit opens that one)
        self._section_last: dict[str, str] = {}
        self.gc_pacer = GcPacer()
        self._control_filter = ControlFilter()
        prepare_pool()  # before Textual takes over stderr (see trace.load.prepare_pool)
        self.export_dir = export_dir(self.root)
        for entry in SCREENS:
            if entry.mode == "overview":
                self.add_mode("overview", lambda: self._styled(OverviewScreen(ascii=self.ascii)))
            else:
                self.add_mode(entry.mode, lambda entry=entry: self._styled(entry.load()()))
        if self.comparing:
            self.add_mode(DIFF.mode, lambda: self._styled(DIFF.load()()))

    def get_line_filters(self) -> list[LineFilter]:
        """Textual's filters, then the guard that keeps control characters off the terminal."""
        return [*super().get_line_filters(), self._control_filter]

    def notify(self, message: str, *, title: str = "", markup: bool = False, **kw: Any) -> None:
        """Every notice, from any screen: its text may hold file and kernel names, so it is
        shown as written (`printable`, never markup)."""
        super().notify(printable(message), title=printable(title), markup=False, **kw)

    def _styled(self, screen: Screen) -> Screen:
        """Mark a new screen as styled by the current stylesheet. Otherwise Textual restyles
        the whole app, every screen already shown included, twice on a screen's first visit
        (30-120 ms of frozen UI each). Every style file is loaded at start (CSS_PATH) and a
        new screen's widgets get their styles as they mount, so that pass changes nothing; a
        later theme change still restyles this screen when it is next shown. Uses a private
        attribute of the pinned Textual (tests/test_app_screens.py snapshot every screen)."""
        screen._css_update_count = self._css_update_count  # type: ignore[attr-defined]
        return screen

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

    @property
    def comparing(self) -> bool:
        return self.compare_set is not None

    def scanning(self, side: str = MAIN) -> bool:
        """Is a full scan of that side's folder ("main" or "test") still listing files?"""
        state = self._sides.get(side)
        return state is not None and state.scanning

    @property
    def scan_generation(self) -> int:
        """Bumps on every full scan of the main set; results of an older scan are dropped."""
        return self._sides[MAIN].generation

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        # the diff's keys do nothing unless comparing
        diff = (action == "goto" and parameters == (DIFF.mode,)) or (
            action == "section" and parameters == (DIFF.section,)
        )
        return not (diff and not self.comparing)

    # -- lifecycle ------------------------------------------------------------------------------
    def on_mount(self) -> None:
        self.set_interval(TICK, self._tick)
        self.set_interval(GC_TICK, self.gc_pacer.tick)
        self.gc_pacer.start()
        self.set_interval(RECHECK, self._recheck_incomplete)
        if self.watch_enabled:
            for side in self._sides:
                self._run_watch(side)
        self.action_reload()

    def on_unmount(self) -> None:
        self.gc_pacer.stop()

    async def action_quit(self) -> None:
        if self._stop_watch is not None:
            self._stop_watch.set()
        self.exit(0)

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

    # -- actions --------------------------------------------------------------------------------
    def action_reload(self) -> None:
        """Discover the folder (both sides' when comparing) again and load everything (cache
        hits are instant)."""
        for side, state in self._sides.items():
            for worker, owner in list(self._worker_side.items()):
                if owner == side and worker.group == "load" and not worker.is_finished:
                    worker.cancel()  # an older scan of this side; its messages are dropped
            state.generation += 1
            state.scanning = True
            state.before = set(state.trace_set.entries)
            worker = self._load_all(state.root, state.generation, side)
            self._worker_side[worker] = side

    def action_goto(self, mode: str) -> None:
        """Show a numbered screen (each keeps its own state: its mode's screen stack)."""
        if isinstance(self.screen, HelpScreen):
            self.screen.dismiss(None)
        if mode == self.current_mode:
            return
        entry = BY_MODE.get(mode)
        if entry is not None:
            self._section_last[entry.section] = mode
        self._mode_history.append(self.current_mode)
        self.switch_mode(mode)

    def action_section(self, key: str) -> None:
        """A section's digit: the view last shown in that section; pressed again inside it,
        the section's next view."""
        views = BY_SECTION.get(key, (DIFF,) if key == DIFF.section else ())
        modes = [e.mode for e in views]
        if not modes:
            return
        if self.current_mode in modes and not isinstance(self.screen, HelpScreen):
            self.action_goto(modes[(modes.index(self.current_mode) + 1) % len(modes)])
            return
        self.action_goto(self._section_last.get(key, modes[0]))

    def action_go_back(self) -> None:
        """Back to the screen shown before this one (escape on a numbered screen)."""
        if len(self.screen_stack) > 1:
            self.pop_screen()
        elif self._mode_history:
            self.switch_mode(self._mode_history.pop())

    def show_kernel(self, name: str) -> None:
        """Drill down: the kernel detail screen for `name`."""
        self.selected_kernel = name
        self.action_goto("detail")
        screen = self.screen
        if hasattr(screen, "set_params"):
            screen.set_params(name=name)

    def action_help(self) -> None:
        if isinstance(self.screen, HelpScreen):
            self.screen.dismiss(None)
            return
        self.push_screen(HelpScreen(self.binding_rows(self.screen)))

    def binding_rows(self, screen: Screen) -> list[tuple[str, str, str]]:
        """(keys, description, where): the keys of `screen` (shown in the footer or not;
        keys doing the same thing in the same place share a row), then every view by
        section, from the registry."""
        merged: dict[tuple[str, str], list[str]] = {}
        screen_name = type(screen).__name__.removesuffix("Screen").lower() or "screen"
        for key, active in screen.active_bindings.items():
            binding = active.binding
            node = active.node
            if isinstance(node, App):
                if binding.action.startswith(("goto(", "section(")):
                    continue  # listed by section below
                where = "everywhere"
            elif isinstance(node, Screen):
                where = screen_name
            else:
                where = node.id or type(node).__name__
            desc = binding.description or binding.action.replace("_", " ")
            keys = merged.setdefault((desc, where), [])
            display = self.get_key_display(binding) or key
            if display not in keys:
                keys.append(display)
        rows = [(", ".join(keys), desc, where) for (desc, where), keys in merged.items()]
        rows.sort(key=lambda r: {screen_name: 0, "everywhere": 2}.get(r[2], 1))
        return rows + help_rows(self.comparing)

    def get_system_commands(self, screen: Screen) -> Iterable[SystemCommand]:
        yield from super().get_system_commands(screen)
        yield SystemCommand(
            "Reload", "Discover and load the trace folder again", self.action_reload
        )
        yield SystemCommand("Help", "Show every key binding", self.action_help)
        for title, help_text, mode in palette_entries(self.comparing):
            yield SystemCommand(title, help_text, lambda mode=mode: self.action_goto(mode))

    # -- workers --------------------------------------------------------------------------------
    # Not `exclusive`: both sides load at once; action_reload cancels a side's older scan.
    @work(thread=True, group="load", exit_on_error=False, name="load")
    def _load_all(self, root: Path, generation: int, side: str = MAIN) -> None:
        worker = get_current_worker()
        files = discover(root)
        if worker.is_cancelled:
            return
        self.post_message(tag(FilesFound(files, generation, full=True), side))
        self._load_and_post(files, generation, side, worker)

    @work(thread=True, group="reload", exit_on_error=False, name="reload")
    def _reload_files(
        self,
        paths: list[Path],
        generation: int,
        known: dict[Path, tuple[str, int, int]] | None = None,
        side: str = MAIN,
    ) -> None:
        """Stat and load `paths` again; with `known`, only those whose key changed."""
        worker = get_current_worker()
        files = []
        for path in paths:
            try:
                tf = describe(path)
            except OSError:
                self.post_message(tag(FileGone(path, generation), side))
                continue
            if known is None or known.get(path) != tf.key:
                files.append(tf)
        if not files or worker.is_cancelled:
            return
        self.post_message(tag(FilesFound(files, generation, full=False), side))
        self._load_and_post(files, generation, side, worker)

    def _load_and_post(
        self, files: list[TraceFile], generation: int, side: str, worker: Worker
    ) -> None:
        """In a worker thread: load `files`, one FileLoaded message per file as it lands."""
        results = load_files(
            files,
            self.cache,
            workers=self.load_workers,
            cancelled=lambda: worker.is_cancelled,
            after_parse=precompute,
        )
        for result in results:
            self.post_message(tag(FileLoaded(result, generation), side))

    @work(group="watch", exit_on_error=False, name="watch")
    async def _run_watch(self, side: str = MAIN) -> None:
        from hta_tui.trace.watch import watch

        if self._stop_watch is None:
            self._stop_watch = asyncio.Event()  # one for both sides: quitting stops both
        stop = self._stop_watch
        root = self._sides[side].root
        self.post_message(tag(WatchState("polling" if self.poll else "watching"), side))
        try:
            async for changes in watch(root, poll=self.poll, stop_event=stop):
                if changes:
                    self.post_message(tag(FilesChanged(list(changes)), side))
        except Exception as exc:  # inotify limits, vanished folder: keep the app, say why
            self.post_message(tag(WatchState("off", one_line(exc)), side))
            return
        self.post_message(tag(WatchState("off"), side))

    @work(thread=True, exclusive=True, group="overview", exit_on_error=False, name="overview")
    def _compute_overview(self, ts: TraceSet, generation: int, ctx: dict[str, Any]) -> None:
        from hta_tui.analysis.overview import file_table, temporal_table

        worker = get_current_worker()
        files = file_table(ts)
        if worker.is_cancelled:
            return
        temporal = temporal_table(ts)
        if worker.is_cancelled:
            return
        columns = file_columns(files, show_timings=ctx["timings"])
        data = OverviewData(
            columns=columns,
            rows=file_rows(files, watching=ctx["watching"]),
            temporal=temporal_rows(temporal),
            generation=generation,
            loaded_ranks=len(ts.loaded()),
            loading=ctx["loading"],
            watching=ctx["watching"],
            root=ctx["root"],
        )
        self.post_message(OverviewReady(files, temporal, generation, data))

    # -- message handlers (main thread: the only place the TraceSet changes) -------------------
    def _current(self, msg: Any) -> SideState | None:
        """The side a loading message belongs to, if the message is of its current scan."""
        state = self._sides.get(side_of(msg))
        if state is None or msg.generation != state.generation:
            return None
        return state

    @on(FilesFound)
    def _files_found(self, msg: FilesFound) -> None:
        state = self._current(msg)
        if state is None:
            return
        ts = state.trace_set
        if msg.full:
            state.scanning = False
            listed = {tf.path for tf in msg.files}
            for path in state.before - listed:
                ts.remove(path)
        fresh = []
        for tf in msg.files:
            current = ts.entries.get(tf.path)
            if current is not None and current.file.mtime_ns > tf.mtime_ns:
                continue  # an older stat than the one we already have
            fresh.append(tf)
        ts.add_pending_many(fresh)

    @on(FileLoaded)
    def _file_loaded(self, msg: FileLoaded) -> None:
        state = self._current(msg)
        if state is None:
            return
        result = msg.result
        current = state.trace_set.entries.get(result.file.path)
        if current is None or current.file.key != result.file.key:
            return  # removed, or changed again since this load started: a newer load follows
        state.trace_set.apply(result)
        if side_of(msg) == TEST and result.status in ("error", "not_trace"):
            # the overview lists the control side's files; the test side's problems show here
            name = result.file.path.name
            self.notify(f"test side: {name}: {result.error}", severity="warning", timeout=10)

    @on(FileGone)
    def _file_gone(self, msg: FileGone) -> None:
        state = self._current(msg)
        if state is not None:
            state.trace_set.remove(msg.path)

    @on(FilesChanged)
    def _files_changed(self, msg: FilesChanged) -> None:
        side = side_of(msg)
        state = self._sides.get(side)
        if state is None:
            return
        reload: list[Path] = []
        for change in msg.changes:
            if change.kind == "deleted":
                state.trace_set.remove(change.path)
            else:
                reload.append(change.path)
        if reload:
            worker = self._reload_files(reload, state.generation, side=side)
            self._worker_paths[worker] = reload
            self._worker_side[worker] = side

    @on(WatchState)
    def _watch_state(self, msg: WatchState) -> None:
        if side_of(msg) == MAIN:
            self.watcher_state = msg.state
        if msg.reason:
            hint = "" if self.poll else " (try --poll)"
            self.notify(f"not watching: {msg.reason}{hint}", severity="warning", timeout=8)

    @on(OverviewReady)
    def _overview_ready(self, msg: OverviewReady) -> None:
        if msg.generation < self._overview_shown or msg.data is None:
            return  # older than what is on screen
        self._overview_shown = msg.generation
        self.overview_data = msg.data
        for screen in self.screen_stack:
            if isinstance(screen, OverviewScreen):
                screen.show_overview(self.overview_data)

    def on_worker_state_changed(self, event: Worker.StateChanged) -> None:
        worker = event.worker
        if event.state not in (WorkerState.SUCCESS, WorkerState.ERROR, WorkerState.CANCELLED):
            return
        paths = self._worker_paths.pop(worker, None)
        side = self._worker_side.pop(worker, MAIN)
        if worker is self._overview_worker:
            self._overview_worker = None
        if self._recheck_workers.get(side) is worker:
            del self._recheck_workers[side]
        if event.state != WorkerState.ERROR:
            return
        reason = one_line(worker.error)
        if worker.group in ("load", "reload"):
            state = self._sides[side]
            if worker.group == "load":
                state.scanning = False
            self._fail_pending(paths, f"loader failed: {reason}", state.trace_set)
            self.notify(f"loading failed: {reason}", severity="error", timeout=10)
        elif worker.group == "overview":
            self.notify(f"overview failed: {reason}", severity="error", timeout=10)

    def _fail_pending(
        self, paths: list[Path] | None, reason: str, ts: TraceSet | None = None
    ) -> None:
        """Entries a crashed loader left pending get its error, so nothing waits forever."""
        ts = self.trace_set if ts is None else ts
        for path, entry in list(ts.entries.items()):
            if entry.status in ("pending", "loading") and (paths is None or path in paths):
                ts.apply(LoadResult(entry.file, "error", error=reason))

    # -- throttled refresh ----------------------------------------------------------------------
    def _recheck_incomplete(self) -> None:
        """Files left incomplete wait for their next change; while watching, also look for
        that change here, as a watcher can miss it (a rewrite within the same second in
        polling mode, an event lost on a network file system)."""
        if self.watcher_state == "off":
            return
        for side, state in self._sides.items():
            if side in self._recheck_workers:
                continue
            known = {
                p: e.file.key
                for p, e in state.trace_set.entries.items()
                if e.status == "incomplete"
            }
            if known:
                worker = self._reload_files(list(known), state.generation, known, side=side)
                self._recheck_workers[side] = worker
                self._worker_paths[worker] = list(known)
                self._worker_side[worker] = side

    def _overview_key(self) -> tuple[Any, ...]:
        return (self.trace_set.generation, self.watcher_state != "off")

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
            }
            self._overview_worker = self._compute_overview(ts.snapshot(), ts.generation, ctx)


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
) -> int:
    """Run the app until the user quits; the exit code (2 for an unknown theme).
    `compare`: a test trace folder or file to diff `path` (the control) with, on the ranks
    `control_rank` / `test_rank` (default: each side's smallest)."""
    app = HtaApp(
        path,
        cache=cache,
        poll=poll,
        watch=watch,
        workers=workers,
        compare=compare,
        control_rank=control_rank,
        test_rank=test_rank,
    )
    if theme is not None:
        if theme not in app.available_themes:
            names = ", ".join(sorted(app.available_themes))
            print(f"hta-tui: unknown theme {theme!r}; one of: {names}", file=sys.stderr)
            return 2
        app.theme = theme
    result = app.run(mouse=mouse)
    return int(result or 0) if app.return_code in (None, 0) else int(app.return_code)
