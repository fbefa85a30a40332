"""The Textual app: owns the TraceSet, runs the loading, overview and watch workers.

Flow:

    mount -> _load_all (thread): discover, FilesFound, then one FileLoaded per file
          -> _run_watch (async): FilesChanged per batch; added/modified -> _reload_files (thread)
    handlers apply FilesFound / FileLoaded / FileGone / FilesChanged to the TraceSet (main thread)
    _tick (10/s): refresh the status bars; if the set changed and no overview computation is
          running, snapshot the set and start _compute_overview (thread) -> OverviewReady
    _recheck_incomplete (1/s, while watching): stat the incomplete files; reload changed ones
          (a watcher can miss a rewrite: polling compares whole-second mtimes)
"""

from __future__ import annotations

import asyncio
import locale
import os
import sys
from collections.abc import Iterable
from pathlib import Path
from typing import Any, ClassVar

from textual import on, work
from textual.app import App, SystemCommand
from textual.binding import Binding, BindingType
from textual.screen import Screen
from textual.worker import Worker, WorkerState, get_current_worker

from hta_tui.analysis.overview import precompute
from hta_tui.app.format import file_columns, file_rows, temporal_rows
from hta_tui.app.messages import (
    FileGone,
    FileLoaded,
    FilesChanged,
    FilesFound,
    OverviewReady,
    WatchState,
)
from hta_tui.app.screens.help import HelpScreen
from hta_tui.app.screens.overview import OverviewData, OverviewScreen
from hta_tui.app.screens.registry import SCREENS
from hta_tui.app.widgets.status import StatusBar, StatusInfo
from hta_tui.themes import DEFAULT as DEFAULT_THEME
from hta_tui.themes import THEMES
from hta_tui.trace.cache import Cache
from hta_tui.trace.discover import describe, discover
from hta_tui.trace.load import LoadResult, load_files
from hta_tui.trace.model import TraceSet

#: Status bars and the overview are refreshed at most this often (seconds).
TICK = 0.1
#: While watching, incomplete files are stat'ed this often (seconds) in case an event was missed.
RECHECK = 1.0


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

    CSS_PATH = "app.tcss"
    TITLE = "hta-tui"
    DEFAULT_MODE = "overview"

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("q", "quit", "Quit", tooltip="Quit hta-tui"),
        Binding("question_mark", "help", "Help", key_display="?", tooltip="Show every key"),
        *(
            Binding(e.key, f"goto('{e.mode}')", e.title, show=False, tooltip=f"{e.title} screen")
            for e in SCREENS
        ),
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
    ) -> None:
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
        # the root's name, never its absolute path (screenshots, shared terminals)
        self._label = (self.root.name or str(self.root)) + ("" if self.root.is_file() else "/")
        #: bumps on every full scan; results of an older scan are dropped
        self.scan_generation = 0
        self.watcher_state = "off"
        self.status_info = StatusInfo(root=self._label, scanning=True)
        self.overview_data: OverviewData | None = None
        self._scanning = False
        self._scan_before: set[Path] = set()
        self._overview_worker: Worker | None = None
        self._overview_requested: tuple[Any, ...] | None = None
        self._overview_shown = -1
        self._worker_paths: dict[Worker, list[Path]] = {}
        self._stop_watch: asyncio.Event | None = None
        self._recheck_worker: Worker | None = None
        #: the kernel the detail screen shows (set by enter on the kernels screen)
        self.selected_kernel: str | None = None
        self._mode_history: list[str] = []
        self.export_dir = export_dir(self.root)
        for entry in SCREENS:
            if entry.mode == "overview":
                self.add_mode("overview", lambda: OverviewScreen(ascii=self.ascii))
            else:
                self.add_mode(entry.mode, lambda entry=entry: entry.load()())

    # -- lifecycle ------------------------------------------------------------------------------
    def on_mount(self) -> None:
        self.set_interval(TICK, self._tick)
        self.set_interval(RECHECK, self._recheck_incomplete)
        if self.watch_enabled:
            self._run_watch()
        self.action_reload()

    async def action_quit(self) -> None:
        if self._stop_watch is not None:
            self._stop_watch.set()
        self.exit(0)

    @property
    def settled(self) -> bool:
        """Nothing left to do: no file loading, no overview computing or out of date (tests)."""
        counts = self.trace_set.counts()
        busy = any(
            w.group in ("load", "reload", "overview") and not w.is_finished for w in self.workers
        )
        return (
            not busy
            and not self._scanning
            and counts.get("pending", 0) == 0
            and counts.get("loading", 0) == 0
            and self._overview_requested == self._overview_key()
            and self._overview_shown == self.trace_set.generation
        )

    # -- actions --------------------------------------------------------------------------------
    def action_reload(self) -> None:
        """Discover the folder again and load everything (cache hits are instant)."""
        self.scan_generation += 1
        self._scanning = True
        self._scan_before = set(self.trace_set.entries)
        self._load_all(self.root, self.scan_generation)

    def action_goto(self, mode: str) -> None:
        """Show a numbered screen (each keeps its own state: its mode's screen stack)."""
        if isinstance(self.screen, HelpScreen):
            self.screen.dismiss(None)
        if mode == self.current_mode:
            return
        self._mode_history.append(self.current_mode)
        self.switch_mode(mode)

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
        """(keys, description, where) for every active binding of `screen`, shown in the
        footer or not; keys doing the same thing in the same place share a row."""
        merged: dict[tuple[str, str], list[str]] = {}
        screen_name = type(screen).__name__.removesuffix("Screen").lower() or "screen"
        for key, active in screen.active_bindings.items():
            binding = active.binding
            node = active.node
            if isinstance(node, App):
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
        rows.sort(key=lambda r: {"everywhere": 0, screen_name: 1}.get(r[2], 2))
        return rows

    def get_system_commands(self, screen: Screen) -> Iterable[SystemCommand]:
        yield from super().get_system_commands(screen)
        yield SystemCommand(
            "Reload", "Discover and load the trace folder again", self.action_reload
        )
        yield SystemCommand("Help", "Show every key binding", self.action_help)
        for entry in SCREENS:
            yield SystemCommand(
                f"{entry.key} {entry.title}",
                f"Show the {entry.title.lower()} screen",
                lambda mode=entry.mode: self.action_goto(mode),
            )

    # -- workers --------------------------------------------------------------------------------
    @work(thread=True, exclusive=True, group="load", exit_on_error=False, name="load")
    def _load_all(self, root: Path, generation: int) -> None:
        worker = get_current_worker()
        files = discover(root)
        if worker.is_cancelled:
            return
        self.post_message(FilesFound(files, generation, full=True))
        results = load_files(
            files,
            self.cache,
            workers=self.load_workers,
            cancelled=lambda: worker.is_cancelled,
            after_parse=precompute,
        )
        for result in results:
            self.post_message(FileLoaded(result, generation))

    @work(thread=True, group="reload", exit_on_error=False, name="reload")
    def _reload_files(
        self,
        paths: list[Path],
        generation: int,
        known: dict[Path, tuple[str, int, int]] | None = None,
    ) -> None:
        """Stat and load `paths` again; with `known`, only those whose key changed."""
        worker = get_current_worker()
        files = []
        for path in paths:
            try:
                tf = describe(path)
            except OSError:
                self.post_message(FileGone(path, generation))
                continue
            if known is None or known.get(path) != tf.key:
                files.append(tf)
        if not files or worker.is_cancelled:
            return
        self.post_message(FilesFound(files, generation, full=False))
        results = load_files(
            files,
            self.cache,
            workers=self.load_workers,
            cancelled=lambda: worker.is_cancelled,
            after_parse=precompute,
        )
        for result in results:
            self.post_message(FileLoaded(result, generation))

    @work(exclusive=True, group="watch", exit_on_error=False, name="watch")
    async def _run_watch(self) -> None:
        from hta_tui.trace.watch import watch

        self._stop_watch = stop = asyncio.Event()
        self.post_message(WatchState("polling" if self.poll else "watching"))
        try:
            async for changes in watch(self.root, poll=self.poll, stop_event=stop):
                if changes:
                    self.post_message(FilesChanged(list(changes)))
        except Exception as exc:  # inotify limits, vanished folder: keep the app, say why
            self.post_message(WatchState("off", one_line(exc)))
            return
        self.post_message(WatchState("off"))

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
    @on(FilesFound)
    def _files_found(self, msg: FilesFound) -> None:
        if msg.generation != self.scan_generation:
            return
        ts = self.trace_set
        if msg.full:
            self._scanning = False
            listed = {tf.path for tf in msg.files}
            for path in self._scan_before - listed:
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
        if msg.generation != self.scan_generation:
            return
        result = msg.result
        current = self.trace_set.entries.get(result.file.path)
        if current is None or current.file.key != result.file.key:
            return  # removed, or changed again since this load started: a newer load follows
        self.trace_set.apply(result)

    @on(FileGone)
    def _file_gone(self, msg: FileGone) -> None:
        if msg.generation == self.scan_generation:
            self.trace_set.remove(msg.path)

    @on(FilesChanged)
    def _files_changed(self, msg: FilesChanged) -> None:
        reload: list[Path] = []
        for change in msg.changes:
            if change.kind == "deleted":
                self.trace_set.remove(change.path)
            else:
                reload.append(change.path)
        if reload:
            worker = self._reload_files(reload, self.scan_generation)
            self._worker_paths[worker] = reload

    @on(WatchState)
    def _watch_state(self, msg: WatchState) -> None:
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
        if worker is self._overview_worker:
            self._overview_worker = None
        if worker is self._recheck_worker:
            self._recheck_worker = None
        if event.state != WorkerState.ERROR:
            return
        reason = one_line(worker.error)
        if worker.group in ("load", "reload"):
            if worker.group == "load":
                self._scanning = False
            self._fail_pending(paths, f"loader failed: {reason}")
            self.notify(f"loading failed: {reason}", severity="error", timeout=10)
        elif worker.group == "overview":
            self.notify(f"overview failed: {reason}", severity="error", timeout=10)

    def _fail_pending(self, paths: list[Path] | None, reason: str) -> None:
        """Entries a crashed loader left pending get its error, so nothing waits forever."""
        ts = self.trace_set
        for path, entry in list(ts.entries.items()):
            if entry.status in ("pending", "loading") and (paths is None or path in paths):
                ts.apply(LoadResult(entry.file, "error", error=reason))

    # -- throttled refresh ----------------------------------------------------------------------
    def _recheck_incomplete(self) -> None:
        """Files left incomplete wait for their next change; while watching, also look for
        that change here, as a watcher can miss it (a rewrite within the same second in
        polling mode, an event lost on a network file system)."""
        if self.watcher_state == "off" or self._recheck_worker is not None:
            return
        known = {
            p: e.file.key for p, e in self.trace_set.entries.items() if e.status == "incomplete"
        }
        if known:
            worker = self._reload_files(list(known), self.scan_generation, known)
            self._recheck_worker = worker
            self._worker_paths[worker] = list(known)

    def _overview_key(self) -> tuple[Any, ...]:
        return (self.trace_set.generation, self.watcher_state != "off")

    def _tick(self) -> None:
        ts = self.trace_set
        counts = ts.counts()
        total = len(ts.entries)
        info = StatusInfo(
            root=self._label,
            total=total,
            done=total - counts.get("pending", 0) - counts.get("loading", 0),
            loaded=counts.get("loaded", 0),
            errors=counts.get("error", 0) + counts.get("not_trace", 0),
            incomplete=counts.get("incomplete", 0),
            watch=self.watcher_state,
            scanning=self._scanning,
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
) -> int:
    """Run the app until the user quits; the exit code (2 for an unknown theme)."""
    app = HtaApp(path, cache=cache, poll=poll, watch=watch, workers=workers)
    if theme is not None:
        if theme not in app.available_themes:
            names = ", ".join(sorted(app.available_themes))
            print(f"hta-tui: unknown theme {theme!r}; one of: {names}", file=sys.stderr)
            return 2
        app.theme = theme
    result = app.run(mouse=mouse)
    return int(result or 0) if app.return_code in (None, 0) else int(app.return_code)
