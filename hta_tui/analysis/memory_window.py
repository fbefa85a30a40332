"""One device's memory over a time window of one file: what the memory screen shows when zoomed
(the curve inside the window reduced for drawing, its peak, what is alive at that peak, the
memory events and per-operator statistics of the window, the profiler steps it crosses)."""

from __future__ import annotations

from dataclasses import dataclass

import polars as pl

from hta_tui.analysis import (
    memory_curve,
    memory_device,
    memory_events,
    memory_peak,
    memory_stats,
)
from hta_tui.analysis.hta_view import job_cached
from hta_tui.analysis.memory_records import start_ns
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
    #: why the device has no curve although it has memory events (else None)
    no_curve: str | None = None


NO_TOTALS = memory_device.NO_TOTALS


def default_device(devices: list[str]) -> str | None:
    """The plugin's choice: the first GPU, else the CPU, else whatever there is."""
    gpus = [d for d in devices if d.startswith("GPU")]
    return gpus[0] if gpus else (devices[0] if devices else None)


def curve_window(
    events: pl.DataFrame,
    memory: pl.DataFrame,
    device: str | None = None,
    view: tuple[float, float] | None = None,
    origin_ns: int | None = None,
) -> MemoryWindow:
    """The curve, peak and steps of the window, without the tables: it needs no operator
    attribution, so a screen can draw it first. The file's sorted events and each device's
    curve are kept (`memory_device`): a zoom only slices them. Times in ms from `origin_ns`
    (default: the file's first event, the plugin's profiler start)."""
    origin = origin_ns if origin_ns is not None else start_ns(events, memory) or 0
    devices = memory_device.devices(memory)
    device = device if device in devices else default_device(devices)
    if device is None:
        curve = pl.DataFrame(schema={"time_ms": pl.Float64, "allocated_mb": pl.Float64})
    else:
        curve = memory_device.device_curve(memory, device, origin)
    full = (
        (min(0.0, float(curve["time_ms"].min() or 0.0)), float(curve["time_ms"].max() or 0.0))
        if not curve.is_empty()
        else (0.0, 0.0)
    )
    lo, hi = view if view is not None else full
    shown = _clip(curve, lo, hi)
    recs = memory_device.sorted_records(memory)
    inside = recs if device is None else memory_device.device_rows(memory, recs, "recs", device)
    inside = memory_device.ts_slice(inside, *_ns((lo, hi), origin))
    peaks = memory_curve.memory_peaks(inside, origin)
    no_curve = None
    if device is not None and curve.is_empty():
        mine = memory_device.device_rows(memory, recs, "recs", device)
        if not mine.is_empty() and mine["total_allocated"].is_null().all():
            no_curve = NO_TOTALS
    spans = job_cached({0: events}, "memory_step_spans", lambda: memory_peak.step_spans(events))
    spans = spans.with_columns(((pl.col("start") - origin) / 1e6).alias("start_ms"))
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
        no_curve=no_curve,
    )


def memory_window(
    f: FileMemory,
    device: str | None = None,
    view: tuple[float, float] | None = None,
    curve: MemoryWindow | None = None,
) -> MemoryWindow:
    """The window `view` (ms; None: everything) of `device` (None: the default one); `curve`:
    its `curve_window` when already computed. The whole file's tables are computed once and
    kept; a zoomed window's from the events inside it (a slice of the sorted records)."""
    w = curve if curve is not None else curve_window(f.events, f.memory, device, view, f.origin_ns)
    if w.device is None:
        return w
    lo_ns, hi_ns = _ns(w.view, f.origin_ns)
    mine = memory_device.device_rows(f.memory, f.recs, "memory_records", w.device)
    every = memory_device.device_rows(f.memory, f.plain_table(), "memory_plain_table", w.device)
    if w.view == w.full:
        w.events = every
        stats = job_cached(
            {0: f.memory}, "memory_stats", lambda: memory_stats.memory_stats(f.events, f.recs)
        )
        w.stats = memory_device.device_rows(f.memory, stats, "memory_stats", w.device)
    else:
        inside = memory_device.ts_slice(mine, lo_ns, hi_ns)
        w.events = memory_events.memory_events(inside, f.origin_ns)
        w.stats = memory_stats.memory_stats(f.events, mine, lo_ns, hi_ns)
    w.live = f.live(every, w.peaks)  # alive at the view's peak: allocated before it too
    return w


def _ns(view: tuple[float, float], origin_ns: int) -> tuple[int, int]:
    return origin_ns + round(view[0] * 1e6), origin_ns + round(view[1] * 1e6)


def _clip(curve: pl.DataFrame, lo: float, hi: float) -> pl.DataFrame:
    """The step curve inside [lo, hi], starting at lo with the value held there and ending at
    hi with the last value, so a zoomed line spans the whole view."""
    first, stop = memory_device.time_slice(curve, lo, hi)
    before = curve.slice(max(0, first - 1), 1 if first > 0 else 0)
    before = before.with_columns(pl.lit(lo).alias("time_ms"))
    head = pl.concat([before, curve.slice(first, max(0, stop - first))])
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
