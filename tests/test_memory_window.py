"""The memory screen's per-view tables: a zoomed window's statistics and events from the events
inside it (values from the fixed trace's raw events), dense temporaries from the generator as
pairs, ties in the peak table in a fixed order, and the per-frame caches freed without a
deadlock."""

from __future__ import annotations

import gc
import threading
from pathlib import Path

import polars as pl
import pytest

from hta_tui.analysis import hta_view, memory_peak
from hta_tui.analysis.memory_curve import memory_peaks
from hta_tui.analysis.memory_device import ts_slice
from hta_tui.analysis.memory_events import in_range
from hta_tui.analysis.memory_view import FileMemory
from hta_tui.analysis.memory_window import MemoryWindow, memory_window
from hta_tui.synth import MemoryOptions, make_trace, write_trace
from hta_tui.trace.parse import parse_file
from tests.test_screen_memory import MIB, fixed_root


def _file(root: Path) -> FileMemory:
    parsed = parse_file(next(root.iterdir()))
    return FileMemory(parsed.frames["events"], parsed.frames["memory"])


def _stats(window: MemoryWindow) -> dict[str, dict]:
    return {r["operator"]: r for r in window.stats.iter_rows(named=True)}


def test_zoomed_stats_clip_operators_to_the_window(tmp_path: Path) -> None:
    """Step 1 of the fixed trace (ms from the first event): linear 0.1-0.3 holds addmm
    0.12-0.28 (4 MiB at 0.15, freed at 0.9), relu 0.4-0.5 (2 MiB at 0.42, freed at 0.45)."""
    f = _file(fixed_root(tmp_path))
    # 0.2-0.5: inside linear and addmm, but after addmm's allocation
    stats = _stats(memory_window(f, view=(0.2, 0.5)))
    assert "aten::addmm" not in stats and "aten::linear" not in stats
    relu = stats["aten::relu"]
    assert relu["allocation_count"] == 1 and relu["allocation_size_kb"] == 2 * 1024
    assert relu["size_increase_kb"] == 0  # allocated and freed inside the window
    # 0.0-0.44: the addmm allocation and relu's allocation, not relu's free (at 0.45)
    stats = _stats(memory_window(f, view=(0.0, 0.44)))
    assert stats["aten::linear"]["allocation_size_kb"] == 4 * 1024
    assert stats["aten::linear"]["self_allocation_size_kb"] == 0
    assert stats["aten::addmm"]["self_size_increase_kb"] == 4 * 1024
    assert stats["aten::relu"]["size_increase_kb"] == 2 * 1024


def test_window_edges_are_inclusive_as_the_plugin(tmp_path: Path) -> None:
    """The plugin keeps events with start <= ts <= end: the relu free at exactly 0.45 ms."""
    f = _file(fixed_root(tmp_path))
    relu = _stats(memory_window(f, view=(0.42, 0.45)))["aten::relu"]
    assert relu["allocation_count"] == 1 and relu["size_increase_kb"] == 0
    events = memory_window(f, view=(0.42, 0.45)).events
    assert events.select("status", "size_kb").rows() == [("freed", 2048.0)]


def test_time_slices_match_the_filter(tmp_path: Path) -> None:
    f = _file(fixed_root(tmp_path))
    ts = f.recs["ts"]
    for lo, hi in ((None, None), (ts[2], ts[5]), (ts[3], ts[3]), (ts[-1] + 1, None)):
        assert ts_slice(f.recs, lo, hi).equals(in_range(f.recs, lo, hi))


def test_dense_temporaries_are_pairs(tmp_path: Path) -> None:
    """`extra_per_op` temporaries: every one an allocation / free pair of `temp_bytes` (they
    once shared a timestamp, so in time order they were allocations in a row)."""
    extra, temp = 3, 256 * 1024
    trace = make_trace(
        0, world_size=1, steps=2, seed=0, memory=MemoryOptions(extra_per_op=extra, temp_bytes=temp)
    )
    n_ops = sum(1 for e in trace["traceEvents"] if e.get("cat") == "cpu_op")
    write_trace(trace, tmp_path / "rank-0.json")
    events = memory_window(_file(tmp_path)).events
    temps = events.filter(pl.col("size_kb") == temp / 1024)
    assert temps.height == n_ops * extra
    assert set(temps["status"]) == {"freed"}


def test_peak_ties_are_ordered_by_every_group_key() -> None:
    """Equal sizes and operator: module, then stack, decide (group_by's order is random)."""
    rows = [
        ("GPU0", "aten::mm", module, stack, 1.0)
        for module in ("b", "a", None)
        for stack in ("y", "x")
    ]
    live = pl.DataFrame(
        rows, schema=["device", "operator", "module", "stack", "size_kb"], orient="row"
    ).with_columns(
        pl.lit("freed").alias("status"),
        pl.lit(1.0).alias("peak_allocated_mb"),
        pl.lit(0.0).alias("allocation_ms"),
        pl.lit(1.0).alias("duration_ms"),
        pl.lit(0.5).alias("peak_time_ms"),
    )
    for seed in range(5):
        shuffled = live.sample(fraction=1.0, shuffle=True, seed=seed)
        order = memory_peak.group_live(shuffled).select("module", "stack").rows()
        assert order == [
            ("a", "x"), ("a", "y"), ("b", "x"), ("b", "y"), (None, "x"), (None, "y")
        ]  # fmt: skip


def test_live_rows_get_their_context_alone(tmp_path: Path) -> None:
    """The screen's live table finds the context of the live rows only; the report's from
    the whole table: the same rows."""
    f = _file(fixed_root(tmp_path))
    whole = memory_window(f)
    assert whole.live.height > 0
    peaks = memory_peaks(f.recs, f.origin_ns)
    full = memory_peak.live_at_peak(f.table(), peaks, f.origin_ns)
    assert f.live(f.plain_table(), peaks).equals(full)
    assert full["live_mb"].sum() == pytest.approx(7 * MIB / MIB)


def test_dropping_frames_with_nested_caches_does_not_deadlock(tmp_path: Path) -> None:
    """Values cached for a frame key other values (records -> their prefix sums): freeing
    the memory frame frees the records inside `_forget`, whose finalizer runs `_forget`
    again. It once waited forever on its own lock."""
    root = fixed_root(tmp_path)
    done = threading.Event()
    frame_ids: list[int] = []

    def run() -> None:
        f = _file(root)
        memory_window(f, view=(0.0, 0.5))  # caches keyed by the records and by the memory
        frame_ids.extend((id(f.memory), id(f.recs)))
        del f
        gc.collect()
        done.set()

    worker = threading.Thread(target=run, daemon=True)
    worker.start()
    worker.join(60)  # a deadlock, not a speed: the work takes milliseconds
    assert done.is_set()
    with hta_view._views_lock:
        kept = [k for k in hta_view._views if k[0] == "job" and set(frame_ids) & set(k[1])]
    assert not kept


@pytest.mark.parametrize("view", [None, (2.0, 9.0)])
def test_inclusive_counts_from_the_raw_events(tmp_path: Path, view: tuple | None) -> None:
    """Per operator name, allocations inside its calls (on the call's thread, start <= ts <
    end, and inside the view), counted from the raw events: forward and backward threads,
    so the prefix sums of several thread groups are read."""
    trace = make_trace(0, world_size=1, steps=2, seed=1, memory=MemoryOptions(extra_per_op=2))
    write_trace(trace, tmp_path / "rank-0.json")
    f = _file(tmp_path)
    ns = [(e, round(e["ts"] * 1000)) for e in trace["traceEvents"] if e.get("ph") in "Xi"]
    allocs = [
        (e["tid"], t, e["args"]["Bytes"])
        for e, t in ns
        if e.get("name") == "[memory]" and e["args"]["Bytes"] > 0
    ]
    if view is not None:
        lo, hi = (f.origin_ns + round(v * 1e6) for v in view)
        allocs = [a for a in allocs if lo <= a[1] <= hi]
    want: dict[str, tuple[int, int]] = {}
    for e, t in ns:
        if e.get("cat") != "cpu_op" or e["name"].startswith("ProfilerStep#"):
            continue
        end = t + round(e["dur"] * 1000)
        inside = [b for tid, ts, b in allocs if tid == e["tid"] and t <= ts < end]
        n, size = want.get(e["name"], (0, 0))
        want[e["name"]] = (n + len(inside), size + sum(inside))
    assert len({tid for tid, _, _ in allocs}) >= 2
    stats = memory_window(f, view=view).stats
    assert stats.height > 10
    for row in stats.iter_rows(named=True):
        n, size = want[row["operator"]]
        assert (row["allocation_count"], row["allocation_size_kb"]) == (n, size / 1024)
    assert {name for name, (n, _) in want.items() if n} <= set(stats["operator"])
