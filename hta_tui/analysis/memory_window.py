"""One device's memory over a time window of one file: what the memory screen shows when zoomed
(the curve inside the window reduced for drawing, its peak, what is alive at that peak, the
memory events and per-operator statistics of the window, the profiler steps it crosses)."""

from __future__ import annotations

from dataclasses import dataclass

import polars as pl

from hta_tui.analysis import memory_curve, memory_events, memory_peak, memory_stats
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
    live: pl.DataFrame
    events: pl.DataFrame
    stats: pl.DataFrame
    steps: list[tuple[int, float]]  # (step, start ms) of the steps starting in the window


def default_device(devices: list[str]) -> str | None:
    """The plugin's choice: the first GPU, else the CPU, else whatever there is."""
    gpus = [d for d in devices if d.startswith("GPU")]
    return gpus[0] if gpus else (devices[0] if devices else None)


def memory_window(
    f: FileMemory, device: str | None = None, view: tuple[float, float] | None = None
) -> MemoryWindow:
    """The window `view` (ms; None: everything) of `device` (None: the default one)."""
    recs = f.recs
    points = memory_curve.curve_points(recs, f.origin_ns)
    devices = sorted(points["device"].unique().to_list())
    device = device if device in devices else default_device(devices)
    mine = recs.filter(pl.col("device") == device)
    curve = memory_curve.step_plot(points.filter(pl.col("device") == device))
    full = (0.0, float(curve["time_ms"].max() or 0.0)) if not curve.is_empty() else (0.0, 0.0)
    lo, hi = view if view is not None else full
    lo_ns = f.origin_ns + round(lo * 1e6)
    hi_ns = f.origin_ns + round(hi * 1e6)
    shown = _clip(curve, lo, hi)
    inside = memory_events.in_range(mine, lo_ns, hi_ns)
    peaks = memory_curve.memory_peaks(inside, f.origin_ns)
    peak = peaks.row(0, named=True) if not peaks.is_empty() else None
    table = f.table(lo_ns, hi_ns).filter(pl.col("device") == device)
    every = f.table().filter(pl.col("device") == device)
    live = memory_peak.live_at_peak(every, peaks, f.origin_ns)
    stats = memory_stats.memory_stats(f.events, mine, lo_ns, hi_ns)
    spans = memory_peak.step_spans(f.events).with_columns(
        ((pl.col("start") - f.origin_ns) / 1e6).alias("start_ms")
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
        peak=peak,
        live=live,
        events=table,
        stats=stats,
        steps=steps,
    )


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
