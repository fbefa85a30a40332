"""Timeline frame time per zoom level (issue 15), and the memory the view adds.

Opens a trace folder (warm cache), builds the timeline as the screen's worker does, mounts the
real `TimelineView` in a 120x40 app and times one whole frame: every visible line drawn by
`render_line` (what Textual asks the widget for), at zoom levels from the whole trace down to
a few microseconds, centred on the middle of the trace.
- cold: the first frame at that zoom (no line cached, the rows' arrays not touched there yet);
- warm: the same frame drawn again after the line cache is dropped (median of 5);
- cached: a redraw Textual asks for without any change (the line cache answers).
Memory: the bytes of the rows' own arrays and LOD summaries against the loaded frames'.

    python bench/bench_timeline.py                       # 8 x 100 MB (bench/out, generated)
    python -m hta_tui.synth /tmp/big --ranks 1 --target-mb 2220 --lean --no-gzip  # 9.8 M events
    python bench/bench_timeline.py --folder /tmp/big --label "1 x 2 GB" --append   # delete after
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent))

ZOOMS = (1, 8, 64, 512, 4096, 32768, 262144)


def frame_ms(view, height: int) -> tuple[float, float]:
    """Wall and CPU (this thread's) milliseconds of one frame: on this shared 2-core VM the
    wall time also holds whatever the scheduler gave other processes meanwhile."""
    t0, c0 = time.perf_counter(), time.thread_time()
    for y in range(height):
        view.render_line(y)
    return (time.perf_counter() - t0) * 1e3, (time.thread_time() - c0) * 1e3


async def measure(folder: Path, cache_dir: Path, size: tuple[int, int]) -> dict:
    from textual.app import App

    from hta_tui.analysis.timeline_rows import build_timeline
    from hta_tui.app.widgets.timeline_view import TimelineView
    from hta_tui.trace.cache import Cache
    from hta_tui.trace.model import open_set

    ts = open_set(folder, Cache(cache_dir))
    frames = ts.frames()
    threads = ts.frames("threads")
    frame_bytes = sum(f.estimated_size() for f in frames.values())
    events = sum(f.height for f in frames.values())
    t0 = time.perf_counter()
    tl = build_timeline(frames, ts.origin_ns, threads)
    build_s = time.perf_counter() - t0

    class Bench(App):
        CSS_PATH = str(HERE.parent / "hta_tui/app/screens/timeline.tcss")

        def compose(self):
            yield TimelineView(id="timeline-view")

    app = Bench()
    out: list[dict] = []
    async with app.run_test(size=size) as pilot:
        view = app.query_one(TimelineView)
        view.set_timeline(tl)
        await pilot.pause()
        height = view.size.height
        mid = tl.span_ns / 2
        for z in ZOOMS:
            span = tl.span_ns / z
            view.cursor_t = mid
            view.show_range(mid - span / 2, mid + span / 2)
            cold = frame_ms(view, height)
            warm = []
            for _ in range(5):
                view.changed()
                warm.append(frame_ms(view, height))
            cached = frame_ms(view, height)
            out.append(
                {
                    "zoom": z,
                    "span_ns": span,
                    "cold_ms": cold[0],
                    "cold_cpu_ms": cold[1],
                    "warm_ms": statistics.median(w for w, _ in warm),
                    "warm_cpu_ms": statistics.median(c for _, c in warm),
                    "cached_ms": cached[0],
                }
            )
    return {
        "events": events,
        "rows": len(tl.rows),
        "frame_mb": frame_bytes / 1e6,
        "view_mb": tl.nbytes / 1e6,
        "build_s": build_s,
        "zooms": out,
        "load": os.getloadavg()[0],
    }


def fmt_span(ns: float) -> str:
    from hta_tui.app.widgets.timeline_view import fmt_time

    return fmt_time(ns)


def report(label: str, size: str, r: dict) -> str:
    lines = [
        f"### {label}: {r['events']:,} events, {r['rows']} rows, {size} terminal",
        "",
        f"Rows built in {r['build_s']:.2f} s (the screen's worker, once per load); memory added "
        f"by the view {r['view_mb']:.0f} MB = {100 * r['view_mb'] / r['frame_mb']:.1f}% of the "
        f"loaded frames ({r['frame_mb']:.0f} MB).",
        "",
        "| zoom | window | cold frame: wall (CPU) ms | warm: wall (CPU) ms | cached redraw ms |",
        "|---|---|---|---|---|",
    ]
    for z in r["zooms"]:
        lines.append(
            f"| 1/{z['zoom']} | {fmt_span(z['span_ns'])} | {z['cold_ms']:.1f} "
            f"({z['cold_cpu_ms']:.1f}) | {z['warm_ms']:.1f} ({z['warm_cpu_ms']:.1f}) | "
            f"{z['cached_ms']:.2f} |"
        )
    worst = max(max(z["cold_ms"], z["warm_ms"]) for z in r["zooms"])
    worst_cpu = max(max(z["cold_cpu_ms"], z["warm_cpu_ms"]) for z in r["zooms"])
    lines += [
        "",
        f"Worst frame {worst:.1f} ms wall, {worst_cpu:.1f} ms CPU (target 50 ms); load "
        f"average {r['load']:.1f} on 2 cores during the run.",
    ]
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--folder", type=Path, default=None)
    ap.add_argument("--label", default=None)
    ap.add_argument("--ranks", type=int, default=8)
    ap.add_argument("--mb", type=float, default=100.0)
    ap.add_argument("--size", default="120x40")
    ap.add_argument("--cache", type=Path, default=None, help="keep the parsed cache here")
    ap.add_argument("--out", type=Path, default=HERE / "TIMELINE.md")
    ap.add_argument("--append", action="store_true", help="add a section to --out")
    from trace_sets import add_set_arg
    from trace_sets import label as set_label

    add_set_arg(ap)
    args = ap.parse_args()
    folder = args.folder or args.trace_set
    label = args.label or (set_label(folder) if args.trace_set else None)
    if folder is None:
        from bench_open import ensure_traces

        folder = HERE / "out" / f"{args.ranks}x{args.mb:g}MB"
        ensure_traces(folder, args.ranks, args.mb)
        label = label or f"{args.ranks} x {args.mb:g} MB"
    cols, rows = (int(v) for v in args.size.split("x"))
    with tempfile.TemporaryDirectory(prefix="hta-tui-timeline-") as tmp:
        cache = args.cache or Path(tmp)
        r = asyncio.run(measure(folder, cache, (cols, rows)))
    text = report(label or folder.name, args.size, r)
    print(text)
    head = (
        "# Timeline frame time (issue 15)\n\n"
        "`bench/bench_timeline.py`: one frame = every visible line of the real TimelineView "
        "drawn by `render_line`, centred on the middle of the trace; cold = first frame at a "
        "zoom, warm = redrawn with the line cache dropped (median of 5), cached = a redraw "
        "without change.\n"
    )
    if args.append and args.out.exists():
        args.out.write_text(args.out.read_text().rstrip() + "\n\n" + text + "\n")
    else:
        args.out.write_text(head + "\n" + text + "\n")


if __name__ == "__main__":
    main()
