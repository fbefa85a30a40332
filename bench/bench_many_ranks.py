"""Many small rank files: does every front end stay linear in the files?

    python bench/bench_many_ranks.py --files 1000            # app, report, trace set
    python bench/bench_many_ranks.py --files 10000 --no-app  # report and trace set only
    python bench/bench_many_ranks.py --code /work/main ...   # the same on another checkout

Writes N rank files of 14 events each (`synth.small_job`, 2 steps of 2 ops) once under
bench/out/ranks-N, then measures:
- the trace set alone (no parsing: made-up load results): N files applied one by one, then
  every rank's answers and the overview's file table; what the app and the report do per change;
- `report --json --only temporal_breakdown` cold (empty cache) and warm, and with `--full` the
  whole `report --json` warm, each in a fresh process on the checkout measured;
- the app (Textual's Pilot, headless, 120x40), cold and warm: time until every file is listed
  and the overview's numbers drawn, then until its findings are drawn too (they run the
  analyses over every rank), the longest the UI thread was busy in each stretch, then keys on
  the overview (move, page, ends) and the longest the UI thread was busy per key.
Each busy stretch is split by the kernel's own count (/proc's schedstat) into the UI thread's
CPU, its wait for a core (the load: other processes) and the rest, asleep (the GIL held by
another thread, a lock, the loop's own timeout): on a shared machine the CPU and asleep
figures are the app's, the core wait is the machine's (`--switch-interval` tries another GIL
switch interval).
Prints a Markdown section; `--out` appends it to a file (bench/RESULTS.md's section).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent

#: Keys pressed on the overview at N ranks: down, up, a page, the ends (`r` there reloads;
#: the rank picker's 10,000 ranks are tested in tests/test_many_ranks.py).
KEYS = ["j", "j", "k", "pagedown", "G", "g", "j"]
#: Views with a per-rank table (`--views`): each opened (its numbers computed in a worker,
#: then shown), then keys on its table: down, every rank (`a`), the bottom, the summary.
VIEWS = ["C", "P", "W"]
VIEW_KEYS = ["j", "a", "G", "a"]
#: On the last of `--views`: the rank picker opened, a search typed (`1`, `2`: ranks 12 and
#: 120-129 of 1,000), moves, and the pick (the view then computes that rank's numbers).
PICKER_KEYS = ["r", "1", "2", "down", "pagedown", "up", "enter"]


def ensure_files(folder: Path, n: int) -> None:
    if folder.is_dir() and sum(1 for _ in folder.iterdir()) == n:
        return
    from hta_tui.synth.small_job import Dialect, JobShape, write_job

    write_job(folder, Dialect(), JobShape(ranks=n, steps=2, ops_per_step=2))


def trace_set_alone(n: int) -> dict[str, float]:
    """Apply N made-up loaded files one by one (asking how many ranks every 10 files, as a
    screen title does), then the overview's file table: CPU seconds."""
    import polars as pl

    from hta_tui.analysis.overview import file_table
    from hta_tui.trace.discover import TraceFile
    from hta_tui.trace.load import LoadResult
    from hta_tui.trace.model import TraceSet
    from hta_tui.trace.schema import FRAME_SCHEMAS

    root = Path(tempfile.mkdtemp(prefix="hta-tui-ranks-"))
    files = [TraceFile(root / f"rank{i}.json", 100, 1000 + i, i, f"rank{i}.json") for i in range(n)]
    empty = pl.DataFrame(schema=FRAME_SCHEMAS["events"])
    meta = {"n_events": 12, "min_ts": 1, "max_end": 9, "step_names": ["ProfilerStep#1"]}
    ts = TraceSet(root)
    t = time.process_time()
    ts.add_pending_many(files)
    for i, tf in enumerate(files):
        ts.apply(
            # one cache entry for all: its overview summary is computed once, then read from
            # disk per file, as on a warm open
            LoadResult(tf, "loaded", dict(meta), root / "entry", frames={"events": empty})
        )
        if i % 10 == 0:  # a title or the status bar asks every few files
            len(ts.loaded())
    applied = time.process_time() - t
    t = time.process_time()
    table = file_table(ts)
    assert table.height == n
    return {"apply": applied, "file_table": time.process_time() - t}


class Seconds(float):
    """Wall seconds that print with the CPU seconds (user + sys of the process and the
    processes it waited for) beside them: on a shared machine the CPU figure is the one
    to compare."""

    cpu: float = 0.0

    def __format__(self, spec: str) -> str:
        return f"{float(self):{spec}} ({self.cpu:{spec}} CPU)"


def report(folder: Path, cache: Path, code: Path, only: str | None) -> Seconds:
    """Wall (and CPU) seconds of one `report --json` in a fresh process on `code`'s
    checkout."""
    import resource

    cmd = [sys.executable, "-m", "hta_tui", "report", str(folder), "--json"]
    if only:
        cmd += ["--only", only]
    env = dict(os.environ, HTA_TUI_CACHE=str(cache))
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t = time.perf_counter()
    subprocess.run(cmd, cwd=code, env=env, check=True, stdout=subprocess.DEVNULL)
    out = Seconds(time.perf_counter() - t)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    out.cpu = after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime
    return out


def made_up_loads() -> None:
    """The app's session loads made-up results (no parsing, no cache): every file lands at
    once as a warm cache would hand it over, so the UI thread's part at 10,000 files is
    measured without the hour a cold open of them takes on a shared 2-core machine."""
    import polars as pl

    import hta_tui.session.live as live
    from hta_tui.trace.load import LoadResult
    from hta_tui.trace.schema import FRAME_SCHEMAS

    empty = pl.DataFrame(schema=FRAME_SCHEMAS["events"])
    meta = {"n_events": 12, "min_ts": 1, "max_end": 9, "step_names": ["ProfilerStep#1"]}
    entry = Path(tempfile.mkdtemp(prefix="hta-tui-ranks-entry-"))

    def load_files(files: list, cache: object, **kw: object) -> object:
        for tf in files:
            yield LoadResult(tf, "loaded", dict(meta), entry, frames={"events": empty})

    live.load_files = load_files


class ProcessCpu:
    """CPU seconds (user + sys) of this process (every thread: the UI and the app's workers)
    and of its descendants (the parser pool, forked from the forkserver): each descendant
    sampled every `tick` s while it lives and kept at its last figure, so a pool that ended
    still counts (its last tick's work excepted)."""

    def __init__(self, tick: float = 0.1) -> None:
        import threading

        import psutil

        self._me = psutil.Process()
        self._seen: dict[int, float] = {}
        self._stop = threading.Event()
        self._tick = tick
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        import psutil

        while not self._stop.wait(self._tick):
            try:
                kids = self._me.children(recursive=True)
            except psutil.Error:
                continue
            for kid in kids:
                try:
                    t = kid.cpu_times()
                except psutil.Error:
                    continue
                self._seen[kid.pid] = t.user + t.system

    def split(self) -> tuple[float, float]:
        """(this process, its descendants) so far, CPU seconds."""
        t = self._me.cpu_times()
        return t.user + t.system, sum(self._seen.values())

    def stop(self) -> None:
        self._stop.set()


def schedstat(path: str = "/proc/thread-self/schedstat") -> tuple[float, float]:
    """A thread's (CPU, wait for a core) seconds so far: the kernel's own count of the time it
    ran and the time it was runnable but not running (the load), read without the GIL's help."""
    with open(path) as fh:
        ran, waited, _ = fh.read().split()
    return int(ran) / 1e9, int(waited) / 1e9


class StretchProbe:
    """What the UI thread did in each stretch over `LONG` s: its own CPU, its wait for a core
    and the rest (asleep: on the GIL, a lock or the event loop's own timeout), the full garbage
    collections in it (`gc.callbacks`: a collection is one C call no thread can sample), the
    CPU and core waits of the app's other threads meanwhile, and the UI thread's stack sampled
    by a watchdog thread every 10 ms while the heartbeat is late (the innermost frames of
    hta_tui or textual, most frequent first)."""

    LONG = 0.04
    #: A stretch this long is kept however little of it was the UI thread's own CPU, with
    #: the CPU the process's other threads used meanwhile: waiting for a core (the load) or
    #: for the GIL or a lock (another thread of the app ran) tell apart.
    WAITED = 0.08

    def __init__(self) -> None:
        import gc
        import threading

        self._main = threading.get_ident()
        self._main_native = threading.get_native_id()
        self._last = time.perf_counter()
        self._last_sched = schedstat()
        self._samples: list[str] = []
        self._gc: list[tuple[int, float]] = []
        self._gc_start = 0.0
        #: every thread's (CPU, core wait) taken by the watcher every 20 ms: (when, figures),
        #: the last eight, so a stretch's start is covered (its first 40 ms add two)
        self._snaps: list[tuple[float, dict[int, tuple[float, float]]]] = []
        self.stretches: list[dict] = []
        self._stop = threading.Event()
        self._callback = self._on_gc
        gc.callbacks.append(self._callback)
        self._thread = threading.Thread(target=self._watch, daemon=True)
        self._thread.start()

    def _on_gc(self, phase: str, info: dict) -> None:
        import threading

        if threading.get_ident() != self._main or info.get("generation", 0) < 1:
            return
        if phase == "start":
            self._gc_start = time.perf_counter()
        else:
            self._gc.append((info["generation"], time.perf_counter() - self._gc_start))

    def beat(self, t: float) -> None:
        self._last = t
        self._last_sched = schedstat()
        self._samples = []
        self._gc = []

    @staticmethod
    def threads_sched() -> dict[int, tuple[float, float]]:
        """Each thread of this process: (CPU, wait for a core) seconds so far."""
        out: dict[int, tuple[float, float]] = {}
        for task in os.listdir("/proc/self/task"):
            try:
                out[int(task)] = schedstat(f"/proc/self/task/{task}/schedstat")
            except OSError:
                continue
        return out

    def _watch(self) -> None:
        tick = 0
        while not self._stop.wait(0.01):
            tick += 1
            late = time.perf_counter() - self._last >= self.LONG
            if not late:
                if tick % 2 == 0:
                    self._snaps = [*self._snaps[-7:], (time.perf_counter(), self.threads_sched())]
                continue
            frame = sys._current_frames().get(self._main)
            where = []
            # the innermost frame, whatever its module (a wait's)
            if frame is not None and "hta_tui" not in frame.f_code.co_filename:
                inner = frame.f_code.co_filename.split("/")[-1]
                where.append(f"[{inner}:{frame.f_lineno} {frame.f_code.co_name}]")
            while frame is not None and len(where) < 4:
                name = frame.f_code.co_filename
                if "hta_tui" in name or "textual" in name:
                    short = name.split("site-packages/")[-1].split("/hta_tui/")[-1]
                    where.append(f"{short}:{frame.f_lineno} {frame.f_code.co_name}")
                frame = frame.f_back
            self._samples.append(" < ".join(where) or "?")

    def stretch(self, t: float, wall: float, cpu: float, core_wait: float, asleep: float) -> None:
        collections = [g for g in self._gc if g[1] > 0.02]
        if cpu < self.LONG and not collections and wall < self.WAITED:
            return
        import threading
        from collections import Counter

        others: list[tuple[str, float, float]] = []
        before = [s for s in self._snaps if s[0] <= t]
        if before:  # from the watcher's last look before the stretch to its end
            then = before[-1][1]
            now = self.threads_sched()
            names = {t.native_id: t.name for t in threading.enumerate()}
            for tid, (c, w) in now.items():
                c0, w0 = then.get(tid, (0.0, 0.0))
                if tid != self._main_native and (c - c0 > 0.001 or w - w0 > 0.001):
                    others.append((names.get(tid, f"native {tid}"), c - c0, w - w0))
            others.sort(key=lambda kv: -kv[1])

        self.stretches.append(
            {
                "at": t,
                "wall": wall,
                "cpu": cpu,
                "core_wait": core_wait,
                "asleep": asleep,
                "gc": collections,
                "stacks": Counter(self._samples).most_common(3),
                "others": others[:4],
                "others_since": t - before[-1][0] if before else None,
            }
        )

    def stop(self) -> None:
        import gc

        self._stop.set()
        if self._callback in gc.callbacks:
            gc.callbacks.remove(self._callback)


#: Stretches of the UI thread listed in a view key's window (`--views`) from this wall.
FINE = 0.01


def watch_compute_starts() -> list[float]:
    """When each screen's computation starts (its worker asked for, on the UI thread)."""
    from hta_tui.app.screens.base import AnalysisScreen

    starts: list[float] = []
    real = AnalysisScreen._start_compute

    def timed(self, ts, want):  # type: ignore[no-untyped-def]
        starts.append(time.perf_counter())
        return real(self, ts, want)

    AnalysisScreen._start_compute = timed  # type: ignore[method-assign]
    return starts


async def app_run(
    folder: Path, cache: Path, timeout: float, views: list[str] = (), wait: bool = True
) -> dict:
    """Open the folder in the app: until every file is listed and the overview drawn, then the
    overview's keys, then each of `views` and keys on it (with `wait` false, only each view's
    key: its numbers are not waited for, the next view's key comes 0.3 s later); the longest
    the event loop could not run (UI thread busy) meanwhile and per key."""
    from hta_tui.app.app import HtaApp
    from hta_tui.trace.cache import Cache

    app = HtaApp(folder, cache=Cache(cache), watch=False, timings=False)
    # the longest the event loop could not run: wall seconds, and the UI thread's own CPU
    # seconds in that time (on a shared machine the wall figure counts other processes'
    # turns too; the CPU figure is the UI thread's work alone)
    # seconds, the longest stretch's wait for a core (the kernel's schedstat: the load), and
    # the most any stretch slept (wall less its CPU less its core wait: on the GIL, a lock,
    # a polars call on a busy pool, or the loop's own timeout): the app's part beside its CPU
    lag = {"max": 0.0, "cpu": 0.0, "core": 0.0, "asleep": 0.0}
    probe = StretchProbe()
    #: every stretch over `FINE` (start, wall, CPU, core wait, asleep), and when each view's
    #: key was pressed and its worker started (`out["key_windows"]`: what a key's 0.3 s held)
    fine: list[tuple[float, float, float, float, float]] = []
    started = watch_compute_starts()

    async def heartbeat() -> None:
        tick = 0.002
        while True:
            t, c = time.perf_counter(), time.thread_time()
            probe.beat(t)
            ran0, waited0 = probe._last_sched
            await asyncio.sleep(tick)
            wall = time.perf_counter() - t - tick
            ran, waited = schedstat()
            core, asleep = waited - waited0, max(0.0, wall - (ran - ran0) - (waited - waited0))
            if wall > lag["max"]:
                lag["max"], lag["core"] = wall, core
            lag["cpu"] = max(lag["cpu"], time.thread_time() - c)
            lag["asleep"] = max(lag["asleep"], asleep)
            probe.stretch(t, wall, time.thread_time() - c, core, asleep)
            if wall > FINE:
                fine.append((t, wall, time.thread_time() - c, core, asleep))

    def reset() -> None:
        lag["max"] = lag["cpu"] = lag["core"] = lag["asleep"] = 0.0

    def busy() -> tuple[float, float, float, float]:
        return lag["max"], lag["cpu"], lag["core"], lag["asleep"]

    def numbers_drawn() -> bool:
        """Every file listed and landed, the overview's numbers drawn for them (its findings
        may still be computing: `findings_s`)."""
        ts = app.trace_set
        counts = ts.counts()
        return (
            len(ts.entries) >= 1
            and app.session.idle
            and not any(s.scanning for s in app.session.sides.values())
            and counts.get("pending", 0) == counts.get("loading", 0) == 0
            and app._overview_shown == ts.generation
        )

    out: dict = {"keys": []}
    cpu = ProcessCpu()
    base = cpu.split()

    def cpu_now() -> tuple[float, float]:
        now = cpu.split()
        return now[0] - base[0], now[1] - base[1]

    async with app.run_test(size=(120, 40)) as pilot:
        beat = asyncio.ensure_future(heartbeat())
        t0 = out["t0"] = time.perf_counter()
        while not numbers_drawn():
            if time.perf_counter() - t0 > timeout:
                out["timed_out"] = True
                break
            await pilot.pause(0.05)
        out["numbers_s"] = time.perf_counter() - t0
        out["numbers_lag"] = busy()
        out["numbers_cpu"] = cpu_now()
        while not (app.settled and len(app.trace_set.entries) >= 1):
            if time.perf_counter() - t0 > timeout:
                out["timed_out"] = True
                break
            await pilot.pause(0.05)
        out["open_s"] = time.perf_counter() - t0
        out["open_lag"] = busy()
        out["open_cpu"] = cpu_now()
        out["listed"] = len(app.trace_set.entries)
        for key in KEYS:
            reset()
            await pilot.press(key)
            await pilot.pause(0.3)
            out["keys"].append((key, busy()))
        out["views"] = []
        for view in views:
            reset()
            t = time.perf_counter()
            await pilot.press(view)
            await pilot.pause(0.3)
            key_lag, end = busy(), time.perf_counter()  # (the pause may last longer)
            out.setdefault("key_windows", []).append(
                (
                    view,
                    t,
                    [f for f in fine if f[0] < end and f[0] + f[1] > t],  # (begun before: < 0)
                    [s - t for s in started if s >= t],
                )
            )
            if not wait:
                out["views"].append((view, key_lag, None, None, []))
                continue
            reset()
            while not getattr(app.screen, "shows_current", False):
                if time.perf_counter() - t > timeout:
                    break
                await pilot.pause(0.05)
            await pilot.pause(0.3)
            shown_s, shown_lag = time.perf_counter() - t, busy()
            keys = []
            for key in VIEW_KEYS:
                reset()
                await pilot.press(key)
                await pilot.pause(0.3)
                keys.append((key, busy()))
            out["views"].append((view, key_lag, shown_s, shown_lag, keys))
        if views and wait:
            for key in PICKER_KEYS:
                reset()
                await pilot.press(key)
                await pilot.pause(0.3)
                out.setdefault("picker", []).append((key, busy()))
            reset()
            t = time.perf_counter()
            while not getattr(app.screen, "shows_current", False):
                if time.perf_counter() - t > timeout:
                    break
                await pilot.pause(0.05)
            out["picked"] = (time.perf_counter() - t, busy(), type(app.screen).__name__)
        beat.cancel()
    cpu.stop()
    probe.stop()
    out["stretches"] = probe.stretches
    return out


#: Stretches kept only for their wall (the UI thread's CPU under `LONG`, no collection): at
#: most this many, the longest, so a loaded machine's hundreds do not drown the others.
WAITED_SHOWN = 30


def kept_stretches(stretches: list[dict]) -> list[dict]:
    """Every stretch of the UI's own CPU or with a collection; the `WAITED_SHOWN` longest of
    those kept for their wall alone; in time order."""
    waited = [s for s in stretches if s["cpu"] < StretchProbe.LONG and not s["gc"]]
    longest = {id(s) for s in sorted(waited, key=lambda s: -s["wall"])[:WAITED_SHOWN]}
    waiting = {id(s) for s in waited}
    return [s for s in stretches if id(s) not in waiting or id(s) in longest]


def every_view_key(views: str) -> list[str]:
    """`--views`' keys; `all`: every view's key but the overview's (the screens' registry)."""
    if views != "all":
        return list(views)
    from hta_tui.app.screens.registry import SCREENS

    return [e.key for e in SCREENS if e.mode != "overview"]


def cpus(split: tuple[float, float]) -> str:
    """CPU seconds of the app's process and of its parser workers."""
    return f"{split[0]:.1f} app + {split[1]:.1f} workers"


def ui(busy: tuple[float, ...]) -> str:
    """A UI-thread busy stretch: wall seconds (the UI thread's own CPU seconds, most in one
    stretch; the longest stretch's wait for a core)."""
    core = f", {busy[2]:.3f} core wait" if len(busy) > 2 else ""
    asleep = f"; asleep at most {busy[3]:.3f}" if len(busy) > 3 else ""
    return f"{busy[0]:.3f} ({busy[1]:.3f} CPU{core}){asleep}"


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--files", type=int, default=1000)
    ap.add_argument("--code", type=Path, default=HERE.parent, help="the checkout to measure")
    ap.add_argument("--no-app", action="store_true")
    ap.add_argument("--app-only", action="store_true", help="only the app (no report)")
    ap.add_argument(
        "--app-cache", type=Path, help="the app's cache folder, kept (a second run is warm)"
    )
    ap.add_argument(
        "--views", default="", help="view keys to open, e.g. CPW; `all`: every view's key"
    )
    ap.add_argument(
        "--keys-only",
        action="store_true",
        help="with --views: only each view's key, its numbers not waited for",
    )
    ap.add_argument("--warm-only", action="store_true", help="no cold app run (--app-cache)")
    ap.add_argument(
        "--made-up", action="store_true", help="the app loads made-up results (`made_up_loads`)"
    )
    ap.add_argument("--no-cold", action="store_true", help="skip the cold report")
    ap.add_argument("--full", action="store_true", help="also the whole report --json, warm")
    ap.add_argument("--timeout", type=float, default=600)
    ap.add_argument(
        "--switch-interval",
        type=float,
        help="sys.setswitchinterval before the app runs (how long a thread waits for the GIL"
        " before asking its holder to drop it)",
    )
    ap.add_argument("--cache", type=Path, help="a cache folder to reuse (warm figures only)")
    ap.add_argument("--out", type=Path)
    ap.add_argument(
        "--folder", type=Path, help="the N files' folder (default bench/out/ranks-N, written once)"
    )
    args = ap.parse_args()
    sys.path.insert(0, str(args.code.resolve()))
    import hta_tui

    n = args.files
    if args.switch_interval is not None:
        sys.setswitchinterval(args.switch_interval)
    # kept results are keyed by each rank's path as given: a warm run must name the folder as
    # the run that kept them did (a link to it is another path)
    folder = args.folder or HERE / "out" / f"ranks-{n}"
    ensure_files(folder, n)
    lines = [
        f"### {n} rank files of 14 events ({Path(hta_tui.__file__).parent.parent})",
        "",
        f"Command: `python bench/bench_many_ranks.py --files {n}"
        + (" --full" if args.full else "")
        + (" --no-app" if args.no_app else "")
        + f"`; {time.strftime('%Y-%m-%d %H:%M')} UTC, {os.cpu_count()} cores,"
        f" load average {os.getloadavg()[0]:.1f}",
        "",
        "| measurement | s |",
        "|---|---:|",
    ]
    if not args.app_only:
        alone = trace_set_alone(n)
        lines.append(
            f"| trace set: apply {n} files one by one, ranks asked every 10 (CPU) |"
            f" {alone['apply']:.2f} |"
        )
        lines.append(f"| trace set: the overview's file table (CPU) | {alone['file_table']:.2f} |")
    if args.app_only:
        args.no_cold = True
    stretch_lines: list[str] = []
    with tempfile.TemporaryDirectory(prefix="hta-tui-ranks-cache-") as tmp:
        cache = str(args.cache) if args.cache else tmp
        if args.app_only:
            pass
        elif not args.no_cold:
            cold = report(folder, Path(cache), args.code, "temporal_breakdown")
            lines.append(f"| report --json --only temporal_breakdown, cold | {cold:.1f} |")
        else:  # fill the cache first
            report(folder, Path(cache), args.code, "temporal_breakdown")
        if not args.app_only:
            warm = report(folder, Path(cache), args.code, "temporal_breakdown")
            lines.append(f"| report --json --only temporal_breakdown, warm | {warm:.1f} |")
        if args.full and not args.app_only:
            full = report(folder, Path(cache), args.code, None)
            lines.append(f"| report --json (every analysis), warm | {full:.1f} |")
        if not args.no_app:
            with tempfile.TemporaryDirectory(prefix="hta-tui-ranks-app-") as app_cache:
                where = str(args.app_cache) if args.app_cache else app_cache
                if args.made_up:
                    made_up_loads()
                kinds = ("made-up",) if args.made_up else ("warm",) if args.warm_only else None
                for kind in kinds or ("cold", "warm"):
                    views = every_view_key(args.views) if kind != "cold" else []
                    res = asyncio.run(
                        app_run(folder, Path(where), args.timeout, views, not args.keys_only)
                    )
                    late = " (timed out)" if res.get("timed_out") else ""
                    lines += [
                        f"| app {kind}: every file listed, the overview's numbers drawn{late} |"
                        f" {res['numbers_s']:.1f} |",
                        f"| app {kind}: longest the UI thread was busy meanwhile |"
                        f" {ui(res['numbers_lag'])} |",
                        f"| app {kind}: CPU s until then | {cpus(res['numbers_cpu'])} |",
                        f"| app {kind}: ... and its findings drawn (settled){late} |"
                        f" {res['open_s']:.1f} |",
                        f"| app {kind}: longest the UI thread was busy from numbers to findings |"
                        f" {ui(res['open_lag'])} |",
                        f"| app {kind}: CPU s until the findings drawn | {cpus(res['open_cpu'])} |",
                    ]
                    worst_key, worst = max(res["keys"], key=lambda kv: kv[1])
                    lines.append(
                        f"| app {kind}: longest the UI thread was busy per overview key "
                        f"(worst `{worst_key}`) | {ui(worst)} |"
                    )
                    for view, key_lag, shown_s, shown_lag, keys in res.get("views", []):
                        if shown_s is None:  # --keys-only
                            lines.append(
                                f"| app {kind}: `{view}` pressed: UI busy at most | {ui(key_lag)} |"
                            )
                            continue
                        worst_key, worst = max(keys, key=lambda kv: kv[1])
                        lines += [
                            f"| app {kind}: `{view}` pressed: UI busy at most | {ui(key_lag)} |",
                            f"| app {kind}: `{view}`: numbers shown after (s) | {shown_s:.1f} |",
                            f"| app {kind}: `{view}`: UI busy at most until then |"
                            f" {ui(shown_lag)} |",
                            f"| app {kind}: `{view}`: keys on its table, UI busy at most"
                            f" (worst `{worst_key}`) | {ui(worst)} |",
                        ]
                    if res.get("picker"):
                        keys = ", ".join(f"`{k}` {ui(b)}" for k, b in res["picker"])
                        picked_s, picked_lag, shown = res["picked"]
                        lines += [
                            f"| app {kind}: rank picker on `{views[-1]}`, UI busy per key:"
                            f" {keys} | {ui(max(b for _, b in res['picker']))} |",
                            f"| app {kind}: the picked rank's numbers shown after (s; UI busy"
                            f" at most {ui(picked_lag)}, on {shown}) | {picked_s:.1f} |",
                        ]
                    print(f"app {kind}: t0 {res['t0']:.4f} (monotonic)", file=sys.stderr)
                    for view, t, stretches, starts in res.get("key_windows", []):
                        began = ", ".join(f"+{s:.3f}" for s in starts) or "none"
                        each = "; ".join(
                            f"+{a - t:.3f} {w:.3f} ({c:.3f} CPU, {k:.3f} core, {z:.3f} asleep)"
                            for a, w, c, k, z in stretches
                        )
                        print(
                            f"key {view} at +{t - res['t0']:.1f} s: worker asked {began};"
                            f" stretches {each}",
                            file=sys.stderr,
                        )
                    for st in kept_stretches(res["stretches"]):
                        gcs = ", ".join(f"gen{g} {d:.3f}" for g, d in st["gc"]) or "none"
                        stacks = "; ".join(f"{n}x {w}" for w, n in st["stacks"]) or "no sample"
                        others = (
                            ", ".join(f"{n} {c:.3f} (waited {w:.3f})" for n, c, w in st["others"])
                            or "none"
                        )
                        stretch_lines.append(
                            f"- {kind} +{st['at'] - res['t0']:.1f} s:"
                            f" {ui((st['wall'], st['cpu'], st['core_wait']))}, asleep"
                            f" {st['asleep']:.3f}, collections {gcs}; other threads meanwhile"
                            f" (CPU, wait for a core): {others}; {stacks}"
                        )
    if stretch_lines:
        lines += [
            "",
            f"UI-thread stretches of {StretchProbe.LONG * 1000:.0f} ms of its own CPU or more,"
            f" {StretchProbe.WAITED * 1000:.0f} ms of wall or more, or holding a collection over"
            " 20 ms (wall (CPU, wait for a core: schedstat); asleep: the rest, on the GIL, a lock"
            " or the loop's timeout; the collections' wall s; the CPU s and core waits of the"
            " app's other threads from the watcher's last look before the stretch (20 ms ticks)"
            " to its end; the UI thread's stack sampled every 10 ms once 40 ms late, innermost"
            " hta_tui/textual frames):",
            "",
        ]
        lines += stretch_lines
    text = "\n".join(lines) + "\n"
    print(text)
    if args.out:
        with args.out.open("a") as fh:
            fh.write("\n" + text)


if __name__ == "__main__":
    main()
