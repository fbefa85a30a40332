"""Key latency on a table of a million rows (`FrameTable`, drawn by `FrameView`).

    python bench/bench_frame_view.py                 # 1,000,000 rows, writes FRAME_VIEW.md
    python bench/bench_frame_view.py --rows 100000   # quicker

One table alone in a headless app (Textual's Pilot), fed a kernel-like frame (a name, a
duration, a stream, a count); each key is pressed once the previous one has settled, and the
longest the UI thread was busy while handling it and repainting is what counts (as
bench_keys.py measures it). Run from another checkout (`cd ../main && python
/path/to/bench_frame_view.py --out /tmp/x.md`) to measure that checkout's table.
"""

from __future__ import annotations

import argparse
import asyncio
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


async def measure(rows: int, size: tuple[int, int]) -> dict:
    from textual.app import App, ComposeResult

    from hta_tui.app.widgets.frame_table import FrameTable

    class OneTable(App[None]):
        def compose(self) -> ComposeResult:
            yield FrameTable(id="t", key_column="name")

    frame = kernel_frame(rows)
    lag = {"max": 0.0}

    async def heartbeat() -> None:
        """The longest the event loop went without running us: how long a key could wait."""
        tick = 0.002
        while True:
            t = time.perf_counter()
            await asyncio.sleep(tick)
            lag["max"] = max(lag["max"], time.perf_counter() - t - tick)

    blocks: list[tuple[str, float]] = []
    app = OneTable()
    async with app.run_test(size=size) as pilot:
        table = app.query_one(FrameTable)
        table.focus()
        await pilot.pause()
        beat = asyncio.ensure_future(heartbeat())
        await pilot.pause(0.05)
        lag["max"] = 0.0
        t = time.perf_counter()
        table.show_frame(frame)
        await pilot.pause(GAP)
        blocks.append(("show_frame", max(lag["max"], time.perf_counter() - t - GAP)))
        rows_reachable = table.row_count
        steps: list[tuple[str, str]] = [("key", k) for k in KEYS] + [("filter", f) for f in FILTERS]
        for kind, what in steps:
            await pilot.pause(GAP)
            lag["max"] = 0.0
            if kind == "key":
                await pilot.press(what)
            else:
                table.set_filter(what)
            await pilot.pause(GAP)
            blocks.append((what if kind == "key" else f"filter '{what}'", lag["max"]))
        last = table.cursor_row
        beat.cancel()
    return {"blocks": blocks, "rows": rows_reachable, "last": last}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rows", type=int, default=1_000_000)
    ap.add_argument("--size", default="120x40")
    ap.add_argument("--label", default="FrameView (Line API)")
    ap.add_argument("--out", type=Path, default=HERE / "FRAME_VIEW.md")
    ap.add_argument("--append", action="store_true")
    args = ap.parse_args()
    cols, lines_ = (int(v) for v in args.size.split("x"))
    res = asyncio.run(measure(args.rows, (cols, lines_)))
    times = [t for _, t in res["blocks"]]
    worst_key, worst = max(res["blocks"], key=lambda kt: kt[1])
    lines = [
        f"## {args.label}: {args.rows:,} rows, {args.size}; {time.strftime('%Y-%m-%d')}",
        "",
        f"- rows the cursor can reach: {res['rows']:,}",
        f"- UI thread busy per key: median **{statistics.median(times) * 1000:.0f} ms**, worst "
        f"**{worst * 1000:.0f} ms** (`{worst_key}`); target: every key < 100 ms.",
        "",
        "UI thread busy (ms): " + ", ".join(f"`{k}` {t * 1000:.0f}" for k, t in res["blocks"]),
        "",
    ]
    head = [
        "# Benchmark results: a table of a million rows",
        "",
        "Command: `python bench/bench_frame_view.py [--rows N]`: one FrameTable in a headless",
        "app; the longest the UI thread was busy while a key was handled and drawn.",
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
