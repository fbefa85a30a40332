"""Key latency on a table of a million rows (`FrameTable`, drawn by `FrameView`).

    python bench/bench_frame_view.py                 # 1,000,000 rows, writes FRAME_VIEW.md
    python bench/bench_frame_view.py --rows 100000   # quicker
    python bench/bench_frame_view.py --no-pacer      # without the app's GC pacing

One table alone in a headless app (Textual's Pilot), fed a kernel-like frame (a name, a
duration, a stream, a count); each key is pressed once the previous one has settled. Per key:
- the UI thread's CPU time (`time.thread_time` of the event loop's thread) from the press
  until the table has settled: the work a key costs the UI, whatever the machine's load;
- the process's CPU time meanwhile (workers included: a big sort runs in a thread);
- the longest the event loop went without running a 2 ms heartbeat (as bench_keys.py
  measures it): what a key could have waited, inflated on a busy machine.
The app paces Python's garbage collector as the real app does (`app/gc_pacing.py`: full
collections in quiet moments only), unless `--no-pacer`. Run from another checkout (`cd
../main && python /path/to/bench_frame_view.py --out /tmp/x.md`) to measure that checkout.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import time
from pathlib import Path

import polars as pl

HERE = Path(__file__).resolve().parent

#: Moves, paging, both ends, sort (picker: the duration column), reverse, filter typed by the
#: screen (`set_filter`, here called between keys), and clearing it.
KEYS = ["j", "j", "k", "down", "pagedown", "pagedown", "pageup", "G", "k", "g", "s", "down",
        "enter", "S", "G", "g", "end", "home"]  # fmt: skip
FILTERS = ["kernel_7654", ""]
GAP = 0.15


def kernel_frame(rows: int) -> pl.DataFrame:
    i = pl.int_range(0, rows)
    return pl.select(
        name=pl.format("void kernel_{}<float, 128>(float const*, float*)", i),
        dur=(i * 7919 % 1_000_003).cast(pl.Float64) / 10,
        stream=(i % 8).cast(pl.Int64),
        calls=(i % 97 + 1).cast(pl.Int64),
    ).rename({"dur": "dur (us)"})


class LongestStep:
    """The longest the UI thread ran one step of the event loop (a callback, a task's step
    between two awaits), in its CPU time: how long a key pressed then waits for the UI,
    without the machine's load (`time.thread_time` counts this thread's running only)."""

    def __init__(self) -> None:
        self.longest = 0.0
        self._run = asyncio.events.Handle._run

    def __enter__(self) -> LongestStep:
        real = self._run

        def timed(handle: asyncio.events.Handle) -> None:
            t = time.thread_time()
            real(handle)
            self.longest = max(self.longest, time.thread_time() - t)

        asyncio.events.Handle._run = timed  # type: ignore[method-assign]
        return self

    def __exit__(self, *exc: object) -> None:
        asyncio.events.Handle._run = self._run  # type: ignore[method-assign]


def _cpu() -> float:
    """The process's CPU seconds, every thread."""
    return time.process_time()


async def measure(rows: int, size: tuple[int, int], pacer: bool = True) -> dict:
    from textual import events
    from textual.app import App, ComposeResult

    from hta_tui.app.gc_pacing import GcPacer
    from hta_tui.app.widgets.frame_table import FrameTable

    class OneTable(App[None]):
        def __init__(self) -> None:
            super().__init__()
            self.pacer = GcPacer()

        def compose(self) -> ComposeResult:
            yield FrameTable(id="t", key_column="name")

        def on_mount(self) -> None:
            if pacer:  # as HtaApp does (app/app.py)
                self.set_interval(0.1, self.pacer.tick)
                self.pacer.start()

        async def on_event(self, event: events.Event) -> None:
            if isinstance(event, events.Key):
                self.pacer.activity()
            await super().on_event(event)

    frame = kernel_frame(rows)
    lag = {"max": 0.0}

    async def heartbeat() -> None:
        """The longest the event loop went without running us: how long a key could wait."""
        tick = 0.002
        while True:
            t = time.perf_counter()
            await asyncio.sleep(tick)
            lag["max"] = max(lag["max"], time.perf_counter() - t - tick)

    async def settled(pilot, table) -> None:
        await pilot.pause(GAP)
        while table.rows_pending:
            await pilot.pause(0.02)

    # key, lag, UI CPU, process CPU, the UI thread's longest step (CPU)
    blocks: list[tuple[str, float, float, float, float]] = []
    app = OneTable()
    step = LongestStep()
    with step:
        async with app.run_test(size=size) as pilot:
            table = app.query_one(FrameTable)
            table.focus()
            await pilot.pause()
            beat = asyncio.ensure_future(heartbeat())
            await pilot.pause(0.05)
            # what settling costs with nothing to do (the heartbeat, Textual's idle work)
            ui, cpu = time.thread_time(), _cpu()
            await settled(pilot, table)
            idle = (time.thread_time() - ui, _cpu() - cpu)
            steps = [("show", ""), *(("key", k) for k in KEYS), *(("filter", f) for f in FILTERS)]
            for kind, what in steps:
                await pilot.pause(GAP)
                lag["max"] = step.longest = 0.0
                ui, cpu = time.thread_time(), _cpu()
                if kind == "key":
                    await pilot.press(what)
                elif kind == "filter":
                    table.set_filter(what)
                else:
                    table.show_frame(frame)
                await settled(pilot, table)
                name = {"key": what, "filter": f"filter '{what}'", "show": "show_frame"}[kind]
                used = (time.thread_time() - ui, _cpu() - cpu)
                blocks.append((name, lag["max"], *used, step.longest))
            rows_reachable, last = table.row_count, table.cursor_row
            beat.cancel()
    return {"blocks": blocks, "rows": rows_reachable, "last": last, "idle": idle}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rows", type=int, default=1_000_000)
    ap.add_argument("--size", default="120x40")
    ap.add_argument("--label", default="FrameView (Line API)")
    ap.add_argument("--out", type=Path, default=HERE / "FRAME_VIEW.md")
    ap.add_argument("--append", action="store_true")
    ap.add_argument("--no-pacer", action="store_true", help="without the app's GC pacing")
    args = ap.parse_args()
    cols, lines_ = (int(v) for v in args.size.split("x"))
    load = os.getloadavg()[0]
    res = asyncio.run(measure(args.rows, (cols, lines_), pacer=not args.no_pacer))
    load_end = os.getloadavg()[0]
    blocks = res["blocks"]
    longest = [b[4] for b in blocks]
    worst = max(blocks, key=lambda b: b[4])
    worst_total = max(blocks, key=lambda b: b[2])
    worst_lag = max(blocks, key=lambda b: b[1])
    idle_ui, _ = res["idle"]
    pacing = "without GC pacing" if args.no_pacer else "the app's GC pacing"
    lines = [
        f"## {args.label}: {args.rows:,} rows, {args.size}, {pacing}; "
        f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}",
        "",
        f"- load average {load:.1f} at the start, {load_end:.1f} at the end (2 cores)",
        f"- rows the cursor can reach: {res['rows']:,}",
        "- the UI thread's longest step (its CPU time in one step of the event loop: how long "
        f"a key pressed then waits) per key: median **{statistics.median(longest) * 1000:.0f} "
        f"ms**, worst **{worst[4] * 1000:.0f} ms** (`{worst[0]}`); target: every key < 100 ms",
        f"- the UI thread's CPU time from the press until the view settled, every step: worst "
        f"{worst_total[2] * 1000:.0f} ms (`{worst_total[0]}`: the key, then the new view landing "
        f"from its thread); settling with nothing to do costs {idle_ui * 1000:.0f} ms of it",
        f"- longest the event loop waited (load included): worst {worst_lag[1] * 1000:.0f} ms "
        f"(`{worst_lag[0]}`)",
        "",
        "| key | UI longest step, CPU (ms) | UI thread CPU (ms) | process CPU (ms) "
        "| event loop waited (ms) |",
        "|---|---:|---:|---:|---:|",
        *(
            f"| `{k}` | {one * 1000:.0f} | {u * 1000:.0f} | {c * 1000:.0f} | {lag * 1000:.0f} |"
            for k, lag, u, c, one in blocks
        ),
        "",
    ]
    head = [
        "# Benchmark results: a table of a million rows",
        "",
        "Command: `python bench/bench_frame_view.py [--rows N] [--no-pacer]`: one FrameTable in",
        "a headless app; per key the UI thread's CPU time, the process's, and the event loop's",
        "longest wait.",
        "",
    ]
    text = "\n".join(lines) + "\n"
    if args.append and args.out.exists():
        args.out.write_text(args.out.read_text() + "\n" + text)
    else:
        args.out.write_text("\n".join(head) + "\n" + text)
    print(text)


if __name__ == "__main__":
    main()
