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
    spans = memory_peak.kept_step_spans(events)
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


# -- the window as tables (the registry's `memory_window`: the screen's zoom keys ask for it) --

#: The window's tables: its curve (drawn first: it needs no operator attribution), what it is
#: (device, extent, peak), the steps starting in it, then what is alive at its peak, its
#: memory events and per-operator statistics.
CURVE_TABLES = ("memory_window", "memory_window_summary", "memory_window_steps")
WINDOW_TABLES = (*CURVE_TABLES, "memory_window_peak", "memory_window_events", "memory_window_stats")

SUMMARY_SCHEMA = {
    "device": pl.String,
    "devices": pl.List(pl.String),
    "full_start_ms": pl.Float64,
    "full_end_ms": pl.Float64,
    "view_start_ms": pl.Float64,
    "view_end_ms": pl.Float64,
    "peak_allocated_mb": pl.Float64,
    "peak_time_ms": pl.Float64,
    "peak_reserved_mb": pl.Float64,
    "no_curve": pl.String,
}


def summary_table(w: MemoryWindow) -> pl.DataFrame:
    """The window in one row: its device (and every device the file has), the whole curve's
    extent and the window's (ms), the window's peak, why there is no curve (if so)."""
    peak = w.peak or {}
    row = {
        "device": [w.device],
        "devices": [list(w.devices)],
        "full_start_ms": [w.full[0]],
        "full_end_ms": [w.full[1]],
        "view_start_ms": [w.view[0]],
        "view_end_ms": [w.view[1]],
        **{k: [peak.get(k)] for k in ("peak_allocated_mb", "peak_time_ms", "peak_reserved_mb")},
        "no_curve": [w.no_curve],
    }
    return pl.DataFrame(row, schema=SUMMARY_SCHEMA)


def steps_table(w: MemoryWindow) -> pl.DataFrame:
    """The profiler steps starting in the window (step, start ms)."""
    step, start = zip(*w.steps, strict=True) if w.steps else ((), ())
    return pl.DataFrame(
        {"step": list(step), "start_ms": list(start)},
        schema={"step": pl.Int64, "start_ms": pl.Float64},
    )


def window_table(w: MemoryWindow, name: str) -> pl.DataFrame:
    """One of `WINDOW_TABLES` of a window (KeyError for another name)."""
    made = {
        "memory_window": lambda: w.curve,
        "memory_window_summary": lambda: summary_table(w),
        "memory_window_steps": lambda: steps_table(w),
        "memory_window_peak": lambda: w.live,
        "memory_window_events": lambda: w.events,
        "memory_window_stats": lambda: w.stats,
    }
    return made[name]()


def from_tables(tables: dict[str, pl.DataFrame]) -> MemoryWindow | None:
    """One rank's window again from its tables (`WINDOW_TABLES`, or `CURVE_TABLES` only),
    for drawing; None when no rank has memory events (no summary row)."""
    summary = tables["memory_window_summary"]
    if summary.is_empty():
        return None
    s = summary.row(0, named=True)
    peak = {k: s[k] for k in ("peak_allocated_mb", "peak_time_ms", "peak_reserved_mb")}

    def own(name: str) -> pl.DataFrame:
        df = tables.get(name, pl.DataFrame())
        return df.drop("rank", strict=False) if df.width > 1 else pl.DataFrame()

    steps = tables["memory_window_steps"]
    return MemoryWindow(
        devices=list(s["devices"] or []),
        device=s["device"],
        full=(s["full_start_ms"], s["full_end_ms"]),
        view=(s["view_start_ms"], s["view_end_ms"]),
        curve=own("memory_window"),
        peak=peak if s["peak_time_ms"] is not None else None,
        peaks=pl.DataFrame(),
        live=own("memory_window_peak"),
        events=own("memory_window_events"),
        stats=own("memory_window_stats"),
        steps=list(steps.select("step", "start_ms").iter_rows()),
        no_curve=s["no_curve"],
    )
