"""Memory view benchmark: one rank with a million GPU memory events.

    python bench/bench_memory.py                  # ~1.03 M memory events (~276 MB of JSON)
    python bench/bench_memory.py --steps 6        # quick
    python bench/bench_memory.py --set /tmp/realsets/vit_memory_8x100MB   # real-shaped set

Generates the trace with `hta_tui.synth` (MemoryOptions(extra_per_op=...): every operator
allocates and frees temporaries besides its activations; few kernels per step, so memory events
are most of the file) into bench/out/ (reused), then:
- parse: the file to frames, memory frame included, in this process;
- memory analyses: records (operator attribution) and the four report tables;
- the app on the file (its cache filled by a first run): `M` opens the view; the time until the
  curve is drawn and until the tables land; then every key of the view (zoom, pan, all, device,
  rank picker, tabs, sort, filter), each pressed `--repeats` times, timing how long the UI
  thread was busy (could not answer another key) from the press until the key's tables had
  landed and were drawn, as bench_keys.py does for the other views.
Every wait has a deadline, so the benchmark reports a stuck view instead of hanging.

Size: a `[memory]` event is ~260 bytes of JSON even written compactly (PyTorch writes it
pretty-printed, ~400), so 1 M of them cannot fit in 200 MB: the trace holds the fewest other
events that still give realistic operators.
Writes bench/MEMORY.md.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

#: The view's keys, in an order that leaves each one something to do (`+` zoomed in before
#: `[`, a picker opened before its `escape`, a filter typed before `enter`).
KEYS: list[str] = [
    "plus",
    "plus",
    "left_square_bracket",
    "right_square_bracket",
    "minus",
    "z",
    "d",
    "v",  # the events table: every allocation of the view
    "s",
    "down",
    "enter",
    "slash",
    "a",
    "t",
    "e",
    "enter",
    "escape",
    "v",
    "v",
    "r",
    "escape",
    "tab",
]
#: Seconds a key may take to land its tables before the benchmark calls it stuck.
DEADLINE = 120.0


def ensure_trace(folder: Path, steps: int, extra: int, kernels: int) -> Path:
    from hta_tui.synth import MemoryOptions, write_trace_dir

    stamp = folder / ".params"
    want = f"{steps} {extra} {kernels} v2"  # v2: temporaries 1 ns apart (each one pair)
    if stamp.exists() and stamp.read_text() == want:
        return next(folder.glob("*.json*"))
    folder.mkdir(parents=True, exist_ok=True)
    for old in folder.glob("*.json*"):
        old.unlink()
    memory = MemoryOptions(extra_per_op=extra)
    (path,) = write_trace_dir(
        folder,
        ranks=1,
        steps=steps,
        seed=0,
        kernels_per_step=kernels,
        memory=memory,
        slow_rank=None,
    )
    stamp.write_text(want)
    return path


class Heartbeat:
    """The longest the event loop went without running us since `reset`: how long a key
    pressed then would have waited (`worst`, wall clock), and the CPU time the UI thread spent
    in that stretch (`worst_cpu`: on a loaded machine the wall clock also counts the time the
    thread waited for a core; the CPU time does not, nor a wait for the GIL)."""

    TICK = 0.002

    def __init__(self) -> None:
        self.worst = 0.0
        self.worst_cpu = 0.0
        self._task: asyncio.Task[None] | None = None

    async def _run(self) -> None:
        while True:
            t, cpu = time.perf_counter(), time.thread_time()
            await asyncio.sleep(self.TICK)
            self.worst = max(self.worst, time.perf_counter() - t - self.TICK)
            self.worst_cpu = max(self.worst_cpu, time.thread_time() - cpu)

    def start(self) -> None:
        self._task = asyncio.ensure_future(self._run())

    def reset(self) -> None:
        self.worst = 0.0
        self.worst_cpu = 0.0

    def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()


async def wait_for(pilot: Any, done: Callable[[], bool], what: str) -> float:
    """Seconds until `done()`; raises after DEADLINE (a stuck view, not a slow one)."""
    t = time.perf_counter()
    while not done():
        if time.perf_counter() - t > DEADLINE:
            raise TimeoutError(f"{what}: not within {DEADLINE:.0f} s")
        await pilot.pause(0.01)
    return time.perf_counter() - t


def shows_current(app: Any) -> bool:
    """The memory view shows the numbers of its parameters, tables and chart drawn."""
    from hta_tui.app.screens.memory import MemoryScreen

    screen = app.screen
    if not isinstance(screen, MemoryScreen):
        return True  # a picker on top: nothing of the view's to wait for
    return screen.shows_current


async def drive(folder: Path, cache: Path, size: tuple[int, int], repeats: int) -> dict:
    """Open the view and press its keys; the UI thread's busy time per key."""
    from hta_tui.app.app import HtaApp
    from hta_tui.app.screens.memory import MemoryScreen
    from hta_tui.app.widgets.plot import SafePlot
    from hta_tui.trace.cache import Cache

    app = HtaApp(folder, cache=Cache(cache), watch=False, timings=False)
    beat = Heartbeat()
    out: dict[str, Any] = {"keys": {}}
    async with app.run_test(size=size) as pilot:
        beat.start()
        t0 = time.perf_counter()
        await wait_for(pilot, lambda: app.settled and bool(app.trace_set.entries), "open")
        out["open_s"] = time.perf_counter() - t0
        await pilot.pause(0.3)
        beat.reset()
        t = time.perf_counter()
        await pilot.press("M")
        await wait_for(pilot, lambda: isinstance(app.screen, MemoryScreen), "the memory view")

        def curve_drawn() -> bool:
            plots = list(app.screen.query(SafePlot))
            return bool(plots) and bool(plots[0].picture.plain.strip())

        await wait_for(pilot, curve_drawn, "the curve")
        out["curve_s"] = time.perf_counter() - t
        await wait_for(pilot, lambda: shows_current(app), "the tables")
        out["tables_s"] = time.perf_counter() - t
        await pilot.pause(0.1)
        out["open_key"] = beat.worst
        out["open_key_cpu"] = beat.worst_cpu
        for _ in range(repeats):
            for i, key in enumerate(KEYS):
                beat.reset()
                t = time.perf_counter()
                await pilot.press(key)
                await wait_for(pilot, lambda: shows_current(app), f"key {key}")
                land = time.perf_counter() - t
                await pilot.pause(0.1)  # what lands after the key counts too
                name = f"{i:02d} {key}"
                busy, cpu, lands = out["keys"].setdefault(name, ([], [], []))
                busy.append(beat.worst)
                cpu.append(beat.worst_cpu)
                lands.append(land)
        beat.stop()
    return out


def main() -> None:
    import os

    from trace_sets import add_append_arg, add_set_arg, chosen, label, trace_files, write

    load = os.getloadavg()[0]
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=68)
    ap.add_argument("--extra", type=int, default=40, help="temporaries per operator")
    ap.add_argument("--kernels", type=int, default=60, help="kernels per step")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--size", default="80x24")
    ap.add_argument("--out", type=Path, default=HERE / "MEMORY.md")
    add_set_arg(ap)
    add_append_arg(ap)
    args = ap.parse_args()
    folder = HERE / "out" / f"memory-{args.steps}x{args.extra}x{args.kernels}"
    folder = chosen(
        args, folder, lambda: ensure_trace(folder, args.steps, args.extra, args.kernels)
    )
    path = trace_files(folder)[0]  # the parse and the analyses below: one rank

    import resource

    from hta_tui.analysis import memory_view
    from hta_tui.trace.parse import parse_file, read_bytes

    size_mb = len(read_bytes(path)) / 1e6
    t = time.perf_counter()
    parsed = parse_file(path)
    parse_s = time.perf_counter() - t
    events, memory = parsed.frames["events"], parsed.frames["memory"]
    n_mem = memory.height
    t = time.perf_counter()
    f = memory_view.FileMemory(events, memory)
    records_s = time.perf_counter() - t
    one_e, one_m = {0: events}, {0: memory}
    timings = {}
    for name, fn in (
        ("memory_curve", memory_view.curve),
        ("memory_events", memory_view.event_table),
        ("memory_stats", memory_view.stats),
        ("memory_peak", memory_view.live_at_peak),
    ):
        t = time.perf_counter()
        fn(one_e, one_m)
        timings[name] = time.perf_counter() - t
    del f, parsed, events, memory
    cols, rows = (int(v) for v in args.size.split("x"))
    with tempfile.TemporaryDirectory(prefix="hta-tui-mem-") as cache:
        asyncio.run(drive(folder, Path(cache), (cols, rows), 0))  # fills the cache
        res = asyncio.run(drive(folder, Path(cache), (cols, rows), args.repeats))
    peak_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    keys = res["keys"]
    every = [b for busy, _, _ in keys.values() for b in busy]
    every_cpu = [b for _, cpu, _ in keys.values() for b in cpu]
    worst_name = max(keys, key=lambda k: max(keys[k][0]))
    worst_cpu_name = max(keys, key=lambda k: max(keys[k][1]))
    if args.trace_set is not None:
        command = f"--set {args.trace_set} --repeats {args.repeats}"
        data = (
            f"{label(folder)}; the parse and the analyses on its first rank, {size_mb:.0f} MB "
            f"of JSON, {n_mem:,} memory events; the app on every rank"
        )
    else:
        command = (
            f"--steps {args.steps} --extra {args.extra} --kernels {args.kernels} "
            f"--repeats {args.repeats}"
        )
        data = f"one synthetic rank, {size_mb:.0f} MB of JSON, {n_mem:,} GPU memory events"
    lines = [
        "# Benchmark results: the memory view",
        "",
        f"Command: `python bench/bench_memory.py {command}`; {time.strftime('%Y-%m-%d %H:%M')} "
        f"UTC, load average before the run {load:.1f}",
        f"Data: {data}; app at {args.size}, warm cache, driven by Textual's Pilot, headless.",
        "",
        f"- parse (frames, memory included): {parse_s:.2f} s",
        f"- peak RSS of the whole bench (parse, analyses, both app runs, one process): "
        f"{peak_mb:.0f} MB",
        f"- operator attribution of every memory event: {records_s:.2f} s; then "
        + ", ".join(f"{k} {v:.2f} s" for k, v in timings.items()),
        f"- `M` until the curve is drawn: {res['curve_s']:.2f} s; until the tables land: "
        f"{res['tables_s']:.2f} s (in a worker); UI thread busy at most "
        f"**{res['open_key'] * 1000:.0f} ms** meanwhile "
        f"({res['open_key_cpu'] * 1000:.0f} ms of its CPU time)",
        f"- UI thread busy per key, from the press until its tables landed and were drawn, "
        f"{len(every)} presses: median **{statistics.median(every) * 1000:.0f} ms**, worst "
        f"**{max(every) * 1000:.0f} ms** (`{worst_name.split()[1]}`); the UI thread's CPU time "
        f"in its longest stretch: median {statistics.median(every_cpu) * 1000:.0f} ms, worst "
        f"{max(every_cpu) * 1000:.0f} ms (`{worst_cpu_name.split()[1]}`); target: < 100 ms",
        "",
        "| key | UI busy, median (ms) | max (ms) | its CPU, median (ms) | max (ms) "
        "| tables landed, median (s) |",
        "|---|---:|---:|---:|---:|---:|",
        *(
            f"| `{name.split()[1]}` | {statistics.median(busy) * 1000:.0f} | "
            f"{max(busy) * 1000:.0f} | {statistics.median(cpu) * 1000:.0f} | "
            f"{max(cpu) * 1000:.0f} | {statistics.median(land):.2f} |"
            for name, (busy, cpu, land) in keys.items()
        ),
    ]
    write(args.out, lines, append=args.append)
    print("\n".join(lines))


if __name__ == "__main__":
    main()
