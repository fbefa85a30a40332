"""One file's memory events sorted once and split by device, kept while the memory frame lives
(`job_cached`): every zoom of the memory screen slices these by time (binary searches) instead
of sorting and filtering a million events again."""

from __future__ import annotations

import polars as pl

from hta_tui.analysis import memory_curve
from hta_tui.analysis.hta_view import job_cached
from hta_tui.analysis.memory_records import sorted_memory

#: A device whose memory events carry no `Total Allocated` (PyTorch's 2021 format: `Bytes`
#: and `Addr` only) has allocations and frees, which the tables attribute, but no curve.
NO_TOTALS = "no Total Allocated in its memory events (2021 format): no curve"


def sorted_records(memory: pl.DataFrame) -> pl.DataFrame:
    """The memory events with `seq` (file order) and `device`, in time order (file order among
    equal ts): what `memory_records` attributes and the curve plots."""
    return job_cached({0: memory}, "memory_sorted", lambda: sorted_memory(memory))


def devices(memory: pl.DataFrame) -> list[str]:
    names = job_cached(
        {0: memory},
        "memory_devices",
        lambda: sorted_records(memory).select(pl.col("device").unique().drop_nulls().sort()),
    )
    return names["device"].to_list()


def device_rows(memory: pl.DataFrame, frame: pl.DataFrame, name: str, device: str) -> pl.DataFrame:
    """`frame`'s rows of `device` (a frame derived from `memory`, kept under `name`): the
    frame itself when it has no other device (no copy of a million rows, and the caches
    keyed by it are shared)."""
    if devices(memory) == [device]:
        return frame
    return job_cached(
        {0: memory},
        f"{name}_device",
        lambda: frame.filter(pl.col("device") == device),
        id(frame),
        device,
    )


def device_curve(memory: pl.DataFrame, device: str, origin_ns: int) -> pl.DataFrame:
    """The plugin's step curve of one device (every point: time_ms, allocated_mb,
    reserved_mb), in time order."""
    recs = device_rows(memory, sorted_records(memory), "memory_sorted", device)
    return job_cached(
        {0: memory},
        "memory_device_curve",
        lambda: memory_curve.step_plot(memory_curve.curve_points(recs, origin_ns)),
        device,
        origin_ns,
    )


def ts_slice(frame: pl.DataFrame, start_ns: int | None, end_ns: int | None) -> pl.DataFrame:
    """The rows of `frame` (sorted by ts) with start <= ts <= end, the plugin's time filter
    (`memory_events.in_range`), by binary search."""
    lo = 0 if start_ns is None else int(frame["ts"].search_sorted(start_ns, "left"))
    hi = frame.height if end_ns is None else int(frame["ts"].search_sorted(end_ns, "right"))
    return frame.slice(lo, max(0, hi - lo))


def time_slice(curve: pl.DataFrame, lo: float, hi: float) -> tuple[int, int]:
    """Row range of `curve` (sorted by time_ms) with lo <= time_ms <= hi."""
    t = curve["time_ms"]
    return int(t.search_sorted(lo, "left")), int(t.search_sorted(hi, "right"))
