"""One device's memory over a time window of one file: what the memory screen shows when zoomed
(the curve inside the window reduced for drawing, its peak, what is alive at that peak, the
memory events and per-operator statistics of the window, the profiler steps it crosses)."""

from __future__ import annotations

from dataclasses import dataclass

import polars as pl

from hta_tui.analysis import memory_curve, memory_events, memory_peak, memory_stats
from hta_tui.analysis.hta_view import job_cached
from hta_tui.analysis.memory_records import device_name, start_ns
from hta_tui.analysis.memory_view import FileMemory

#: points drawn per curve: a few per braille column of a wide terminal
DRAW_POINTS = 480


@dataclass
class MemoryWindow:
    devices: list[str]
    device: str | None
    full: tuple[float, float]  # ms since the profiler start: the whole curve
    view: tuple[float, float]  # the window shown
    curve: pl.DataFrame  # time_ms, allocated_mb, reserved_mb (reduced to DRAW_POINTS)
    peak: dict[str, float] | None  # peak_allocated_mb, peak_time_ms, peak_reserved_mb
    peaks: pl.DataFrame  # the same as memory_curve.memory_peaks gives
    live: pl.DataFrame
    events: pl.DataFrame
    stats: pl.DataFrame
    steps: list[tuple[int, float]]  # (step, start ms) of the steps starting in the window


def default_device(devices: list[str]) -> str | None:
    """The plugin's choice: the first GPU, else the CPU, else whatever there is."""
    gpus = [d for d in devices if d.startswith("GPU")]
    return gpus[0] if gpus else (devices[0] if devices else None)


def curve_window(
    events: pl.DataFrame,
    memory: pl.DataFrame,
    device: str | None = None,
    view: tuple[float, float] | None = None,
) -> MemoryWindow:
    """The curve, peak and steps of the window, without the tables: it needs no operator
    attribution, so a screen can draw it first (a second or more sooner on a million events)."""
    origin = start_ns(events, memory) or 0
    recs = memory.with_columns(device_name()).sort("ts", maintain_order=True)
    points = memory_curve.curve_points(recs, origin)
    devices = sorted(points["device"].unique().to_list())
    device = device if device in devices else default_device(devices)
    curve = memory_curve.step_plot(points.filter(pl.col("device") == device))
    full = (0.0, float(curve["time_ms"].max() or 0.0)) if not curve.is_empty() else (0.0, 0.0)
    lo, hi = view if view is not None else full
    shown = _clip(curve, lo, hi)
    inside = recs.filter(pl.col("device") == device)
    inside = memory_events.in_range(inside, *_ns((lo, hi), origin))
    peaks = memory_curve.memory_peaks(inside, origin)
    spans = memory_peak.step_spans(events).with_columns(
        ((pl.col("start") - origin) / 1e6).alias("start_ms")
    )
    steps = [
        (int(s), float(t))
        for s, t in spans.filter(pl.col("start_ms").is_between(lo, hi))
        .select("step", "start_ms")
        .iter_rows()
    ]
    return MemoryWindow(
        devices=devices,
        device=device,
        full=full,
        view=(lo, hi),
        curve=memory_curve.lttb(shown, DRAW_POINTS) if not shown.is_empty() else shown,
        peak=peaks.row(0, named=True) if not peaks.is_empty() else None,
        peaks=peaks,
        live=pl.DataFrame(),
        events=pl.DataFrame(),
        stats=pl.DataFrame(),
        steps=steps,
    )


def memory_window(
    f: FileMemory,
    device: str | None = None,
    view: tuple[float, float] | None = None,
    curve: MemoryWindow | None = None,
) -> MemoryWindow:
    """The window `view` (ms; None: everything) of `device` (None: the default one); `curve`:
    its `curve_window` when already computed."""
    w = curve if curve is not None else curve_window(f.events, f.memory, device, view)
    lo_ns, hi_ns = _ns(w.view, f.origin_ns)
    mine = f.recs.filter(pl.col("device") == w.device)
    every = f.table().filter(pl.col("device") == w.device)
    whole = w.view == w.full  # the whole file's tables are kept; a zoomed view's are not
    w.events = every if whole else f.table(lo_ns, hi_ns).filter(pl.col("device") == w.device)
    w.live = memory_peak.live_at_peak(every, w.peaks, f.origin_ns)
    if whole:
        stats = job_cached(
            {0: f.memory}, "memory_stats", lambda: memory_stats.memory_stats(f.events, f.recs)
        )
        w.stats = stats.filter(pl.col("device") == w.device)
    else:
        w.stats = memory_stats.memory_stats(f.events, mine, lo_ns, hi_ns)
    return w


def _ns(view: tuple[float, float], origin_ns: int) -> tuple[int, int]:
    return origin_ns + round(view[0] * 1e6), origin_ns + round(view[1] * 1e6)


def _clip(curve: pl.DataFrame, lo: float, hi: float) -> pl.DataFrame:
    """The step curve inside [lo, hi], starting at lo with the value held there and ending at
    hi with the last value, so a zoomed line spans the whole view."""
    t = pl.col("time_ms")
    before = curve.filter(t < lo).tail(1).with_columns(pl.lit(lo).alias("time_ms"))
    inside = curve.filter(t.is_between(lo, hi))
    head = pl.concat([before, inside])
    after = head.tail(1).with_columns(pl.lit(hi).alias("time_ms"))
    if head.is_empty() or head["time_ms"][-1] >= hi:
        return head
    return pl.concat([head, after])


def zoom(
    view: tuple[float, float], full: tuple[float, float], factor: float, at: float
) -> tuple[float, float]:
    """`view` scaled by `factor` (< 1 zooms in) around `at`, kept inside `full`."""
    width = min(full[1] - full[0], max((view[1] - view[0]) * factor, 1e-6))
    lo = at - width / 2
    return _inside((lo, lo + width), full)


def pan(view: tuple[float, float], full: tuple[float, float], by: float) -> tuple[float, float]:
    """`view` moved by `by` widths, kept inside `full`."""
    width = view[1] - view[0]
    return _inside((view[0] + by * width, view[1] + by * width), full)


def _inside(view: tuple[float, float], full: tuple[float, float]) -> tuple[float, float]:
    lo, hi = view
    if lo < full[0]:
        lo, hi = full[0], full[0] + (hi - lo)
    if hi > full[1]:
        lo, hi = max(full[0], full[1] - (hi - lo)), full[1]
    return lo, hi
