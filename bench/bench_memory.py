"""Memory view benchmark: one rank with about a million GPU memory events.

    python bench/bench_memory.py                 # ~1 M memory events (about 290 MB of JSON)
    python bench/bench_memory.py --steps 6       # quick

Generates the trace with `hta_tui.synth` (MemoryOptions(extra_per_op=...): every operator
allocates and frees temporaries besides its activations) into bench/out/ (reused), then:
- parse: the file to frames, memory frame included, in this process;
- memory analyses: records (operator attribution) and the four report tables;
- keys: the app on the file (warm cache), `m` and the zoom / pan / tab keys, timing how long
  the UI thread was busy per key (as bench_keys.py) and how long `m` takes to draw the curve.
Writes bench/MEMORY.md.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

KEYS = ["m", "plus", "plus", "plus", "left_square_bracket", "minus", "v", "v", "z", "d", "1", "m"]
GAP = 2.0  # seconds per key: the zoomed tables of a million events land within it


def ensure_trace(folder: Path, steps: int, extra: int) -> Path:
    from hta_tui.synth import MemoryOptions, write_trace_dir

    stamp = folder / ".params"
    want = f"{steps} {extra}"
    if stamp.exists() and stamp.read_text() == want:
        return next(folder.glob("*.json*"))
    folder.mkdir(parents=True, exist_ok=True)
    for old in folder.glob("*.json*"):
        old.unlink()
    memory = MemoryOptions(extra_per_op=extra)
    (path,) = write_trace_dir(
        folder, ranks=1, steps=steps, seed=0, kernels_per_step=300, memory=memory, slow_rank=None
    )
    stamp.write_text(want)
    return path


async def keys(folder: Path, cache: Path) -> dict:
    from bench_keys import measure

    return await measure(folder, cache, (80, 24), KEYS, GAP)


async def curve_time(folder: Path, cache: Path) -> tuple[float, float]:
    """From `m` until the memory screen draws its curve, and until its tables show too."""
    from hta_tui.app.app import HtaApp
    from hta_tui.app.widgets.plot import SafePlot
    from hta_tui.trace.cache import Cache

    app = HtaApp(folder, cache=Cache(cache), watch=False, timings=False)
    async with app.run_test(size=(80, 24)) as pilot:
        while not (app.settled and app.trace_set.entries):
            await pilot.pause(0.05)
        t = time.perf_counter()
        await pilot.press("m")
        curve = None
        while True:
            screen = app.screen
            plots = list(screen.query(SafePlot)) if hasattr(screen, "params") else []
            if curve is None and plots and plots[0].picture.plain.strip():
                curve = time.perf_counter() - t
            ready = getattr(screen, "result", None) is not None
            if ready and getattr(screen, "charts_pending", 1) == 0:
                done = time.perf_counter() - t
                return (curve if curve is not None else done), done
            await pilot.pause(0.01)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=52)
    ap.add_argument("--extra", type=int, default=10, help="temporaries per operator")
    ap.add_argument("--out", type=Path, default=HERE / "MEMORY.md")
    args = ap.parse_args()
    folder = HERE / "out" / f"memory-{args.steps}x{args.extra}"
    path = ensure_trace(folder, args.steps, args.extra)

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
    with tempfile.TemporaryDirectory(prefix="hta-tui-mem-") as cache:
        asyncio.run(keys(folder, Path(cache)))  # fills the cache (cold open)
        res = asyncio.run(keys(folder, Path(cache)))
        curve_s, tables_s = asyncio.run(curve_time(folder, Path(cache)))
    worst_key, worst = max(res["blocks"], key=lambda kt: kt[1])
    lines = [
        "# Benchmark results: the memory view",
        "",
        f"Command: `python bench/bench_memory.py --steps {args.steps} --extra {args.extra}`; "
        f"{time.strftime('%Y-%m-%d')}",
        f"Data: one synthetic rank, {size_mb:.0f} MB of JSON, {n_mem:,} GPU memory events.",
        "",
        f"- parse (frames, memory included): {parse_s:.2f} s",
        f"- operator attribution of every memory event: {records_s:.2f} s; then "
        + ", ".join(f"{k} {v:.2f} s" for k, v in timings.items()),
        f"- `m` until the curve is drawn (warm cache): {curve_s:.2f} s; until the tables "
        f"show too: {tables_s:.2f} s (the analyses run in a worker)",
        f"- UI thread busy per key (ms), one key every {GAP:.0f} s, 80x24: worst "
        f"**{worst * 1000:.0f} ms** (`{worst_key}`); "
        + ", ".join(f"`{k}` {v * 1000:.0f}" for k, v in res["blocks"]),
    ]
    args.out.write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
