"""Issue 26's one door for the views that show a window: the memory view's zoom (device, time
range) and the timeline's rows are analyses declared in the registry, the window their
options; the report and the API reach them by name, and the two screens ask the registry
for them (values from the fixed trace's raw events, or counted from the events frame)."""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any

import orjson
import polars as pl
import pytest

from hta_tui.analysis import registry
from hta_tui.api import TraceAnalysis
from hta_tui.app.screens.base import Params
from hta_tui.app.screens.memory import MemoryScreen
from hta_tui.app.screens.timeline import TimelineScreen
from hta_tui.report import run_report
from hta_tui.trace.cache import Cache
from hta_tui.trace.model import open_set
from hta_tui.trace.parse import parse_file
from tests.test_screen_memory import fixed_root

WINDOW = ("memory_window", "memory_window_summary", "memory_window_steps")
TABLES = (*WINDOW, "memory_window_peak", "memory_window_events", "memory_window_stats")


def _frames(root: Path) -> tuple[dict[int, pl.DataFrame], dict[int, pl.DataFrame]]:
    parsed = parse_file(next(root.iterdir()))
    return {0: parsed.frames["events"]}, {0: parsed.frames["memory"]}


def test_memory_window_is_the_registrys_with_the_window_as_options(tmp_path: Path) -> None:
    """The fixed trace (ms from its first event): step 2 starts at 1.0 and allocates 4 MiB
    at 1.15 and 2 MiB at 1.42 (freed at 1.45), with 1 MiB of step 1 still held: 7 MiB at
    1.42 is the peak of the window 0.9-1.5, where step 1's 4 MiB (0.15) is no event."""
    events, memory = _frames(fixed_root(tmp_path))
    options = registry.options_with({"window_start_ms": "0.9", "window_end_ms": "1.5"})
    got = registry.tables(events, TABLES, options, frames=lambda f: {"memory": memory}[f])
    s = got["memory_window_summary"].row(0, named=True)
    assert (s["rank"], s["view_start_ms"], s["view_end_ms"]) == (0, 0.9, 1.5)
    assert s["device"] == "GPU0" and s["devices"] == ["GPU0"]
    assert s["peak_allocated_mb"] == pytest.approx(7.0)
    assert s["peak_time_ms"] == pytest.approx(1.42)
    assert s["full_end_ms"] == pytest.approx(1.9)  # the last event: step 2's free
    assert got["memory_window_steps"].select("step", "start_ms").rows() == [(2, 1.0)]
    curve = got["memory_window"]["time_ms"]
    assert curve.min() == pytest.approx(0.9) and curve.max() == pytest.approx(1.5)
    table = got["memory_window_events"]
    allocs = table.filter(pl.col("allocation_ms").is_not_null()).sort("allocation_ms")
    assert allocs["allocation_ms"].to_list() == pytest.approx([1.15, 1.42])
    assert allocs["size_kb"].to_list() == pytest.approx([4096, 2048])
    # and step 1's 4 MiB, freed at 0.9: a release without its allocation in the window
    freed = table.filter(pl.col("allocation_ms").is_null())
    assert freed.select("size_kb", "release_ms").rows() == [(pytest.approx(4096), 0.9)]
    alive = got["memory_window_peak"]  # at 1.42: step 1's empty, step 2's addmm and relu
    assert alive["live_mb"].sum() == pytest.approx(7.0)
    # the whole trace (no window): both steps' allocations, step 1's peak (6 MiB at 0.42) and
    # step 2's (7 MiB at 1.42): the larger
    whole = registry.tables(events, TABLES, frames=lambda f: {"memory": memory}[f])
    assert whole["memory_window_events"].height == 6
    assert whole["memory_window_summary"]["peak_time_ms"].item() == pytest.approx(1.42)
    assert whole["memory_window_steps"]["step"].to_list() == [1, 2]


def test_the_report_and_the_api_name_the_window(tmp_path: Path) -> None:
    root = fixed_root(tmp_path)
    out = io.StringIO()
    options = registry.options_with({"window_start_ms": "0.3", "window_end_ms": "0.5"})
    assert run_report(root, only=["memory_window_summary"], as_json=True, out=out,
                      options=options, no_cache=True) == 0  # fmt: skip
    [summary] = orjson.loads(out.getvalue())["memory_window_summary"]
    assert summary["peak_time_ms"] == pytest.approx(0.42)  # relu's 2 MiB beside addmm's 4
    assert summary["peak_allocated_mb"] == pytest.approx(6.0)
    with TraceAnalysis(root, cache=False) as api:  # HTA's style: options as keywords
        peak = api.get_memory_window_summary(window_start_ms=0.3, window_end_ms=0.5)
    assert peak.select("peak_time_ms", "peak_allocated_mb").rows() == [
        (summary["peak_time_ms"], summary["peak_allocated_mb"])
    ]
    out = io.StringIO()
    assert run_report(root, only=["timeline_rows"], as_json=True, out=out, no_cache=True) == 0
    rows = orjson.loads(out.getvalue())["timeline_rows"]
    # one CPU thread of six operators per step (the profiler steps among them), plus the
    # device's memory track
    thread = [r for r in rows if r["side"] == "cpu" and not r["counter"]]
    assert [r["events"] for r in thread] == [12]


def _recording(monkeypatch: pytest.MonkeyPatch, name: str) -> list[tuple[Any, ...]]:
    asked: list[tuple[Any, ...]] = []
    real = getattr(registry, name)

    def recording(ranks: Any, names: Any, options: Any = None, **kw: Any) -> Any:
        names = list(names)
        asked.append((tuple(names), options))
        return real(ranks, names, options, **kw)

    monkeypatch.setattr(registry, name, recording)
    return asked


def test_the_memory_screens_zoom_asks_the_registry(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A zoomed view (the params `+` sets) is the registry's window: the curve's tables
    first (drawn before any operator is attributed), then every table, with the view as
    the options; the screen shows what they hold."""
    root = fixed_root(tmp_path)
    events, memory = _frames(root)
    asked = _recording(monkeypatch, "tables")
    params = Params(0, {"device": None, "view": (0.9, 1.5)})
    first = MemoryScreen.compute_memory(events, memory, params, None, MemoryScreen.CURVE)
    result = MemoryScreen.compute_memory(events, memory, params)
    assert [names for names, _ in asked] == [WINDOW, TABLES]
    assert {(o.window_start_ms, o.window_end_ms) for _, o in asked} == {(0.9, 1.5)}
    assert first["window"].events.is_empty()  # the curve only
    window = result["window"]
    assert window.view == (0.9, 1.5) and window.peak["peak_time_ms"] == pytest.approx(1.42)
    assert window.steps == [(2, 1.0)]
    assert window.events["allocation_ms"].min() == pytest.approx(1.15)


def test_the_timeline_screen_slices_the_registrys_rows(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The timeline's rows are the registry's `timeline_model` (a result of `timeline_rows`);
    its table counts each
    row's events in a window as the events frame does."""
    root = fixed_root(tmp_path)
    ts = open_set(root, Cache(enabled=False))
    asked = _recording(monkeypatch, "tables")
    tl = TimelineScreen.compute_on(
        TimelineScreen.__new__(TimelineScreen), ts, ts.frames(), Params(0)
    )
    assert [names for names, _ in asked] == [("timeline_model",)]
    assert asked[0][1].origin_ns == ts.origin_ns and tl.origin_ns == ts.origin_ns
    events = ts.frames()[0]
    ops = events.filter(pl.col("kind") == "cpu_op")
    [thread] = [r for r in tl.rows if r.key[1] == "cpu" and not r.counter]
    assert len(thread) == ops.height
    # a window of 0.3-1.2 ms from the trace's start: the operators starting in it
    options = registry.options_with(
        {"window_start_ms": "0.3", "window_end_ms": "1.2", "origin_ns": str(ts.origin_ns)}
    )
    lanes = registry.table(ts.frames(), "timeline_rows", options, frames=ts.frames)
    start = (pl.col("ts") - ts.origin_ns) / 1e6
    inside = ops.filter((start >= 0.3) & (start < 1.2)).height
    assert lanes.filter(~pl.col("counter") & (pl.col("side") == "cpu"))["events"].item() == inside
    assert inside == 6  # step 1's relu, zeros, empty; step 2's ProfilerStep, linear, addmm
