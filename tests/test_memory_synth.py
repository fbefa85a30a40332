"""GPU memory events from the generator: a caching allocator's behaviour in the raw events,
and the memory analyses finding what the generator was told to write (peak holders, a leak)."""

from __future__ import annotations

import itertools
import json
from pathlib import Path

import polars as pl
import pytest

from hta_tui import TraceAnalysis
from hta_tui.report import build_tables, write_csv
from hta_tui.synth import MemoryOptions, make_trace, write_trace
from hta_tui.synth.memory import ACTIVATION_MB, MIB
from hta_tui.trace.cache import Cache

STEPS = 3
LEAK_OP = "aten::nll_loss_forward"
LEAK_BYTES = 8 * MIB


def _trace(memory: MemoryOptions | None) -> dict:
    return make_trace(1, world_size=2, steps=STEPS, seed=3, memory=memory)


@pytest.fixture(scope="module")
def leaky(tmp_path_factory: pytest.TempPathFactory) -> tuple[dict, TraceAnalysis]:
    trace = _trace(MemoryOptions(leak_op=LEAK_OP, leak_bytes=LEAK_BYTES))
    folder = tmp_path_factory.mktemp("leaky")
    write_trace(trace, folder / "rank-1.json")
    return trace, TraceAnalysis(folder, cache=Cache(folder / "cache"))


@pytest.fixture(scope="module")
def clean(tmp_path_factory: pytest.TempPathFactory) -> tuple[dict, TraceAnalysis]:
    trace = _trace(MemoryOptions())
    folder = tmp_path_factory.mktemp("clean")
    write_trace(trace, folder / "rank-1.json")
    return trace, TraceAnalysis(folder, cache=Cache(folder / "cache"))


def _memory_events(trace: dict) -> list[dict]:
    mem = [e for e in trace["traceEvents"] if e.get("name") == "[memory]"]
    return sorted(mem, key=lambda e: e["ts"])


def test_default_output_has_no_memory_events() -> None:
    assert _trace(None) == make_trace(1, world_size=2, steps=STEPS, seed=3)
    assert not _memory_events(_trace(None))


def test_caching_allocator_behaviour(clean: tuple[dict, TraceAnalysis]) -> None:
    mem = _memory_events(clean[0])
    assert len(mem) > 100
    args = [e["args"] for e in mem]
    assert {(a["Device Type"], a["Device Id"]) for a in args} == {(1, 1)}
    assert all(a["Total Reserved"] >= a["Total Allocated"] >= 0 for a in args)
    # every event moves Total Allocated by its Bytes; reserved never shrinks (frees are cached)
    for before, after in itertools.pairwise(args):
        assert after["Total Allocated"] - before["Total Allocated"] == after["Bytes"]
        assert after["Total Reserved"] >= before["Total Reserved"]
    frees = [a for a in args if a["Bytes"] < 0]
    assert frees and any(b["Total Reserved"] > b["Total Allocated"] for b in frees)
    # a freed block's address is handed out again
    addrs = [a["Addr"] for a in args if a["Bytes"] > 0]
    assert len(set(addrs)) < len(addrs)


def test_live_allocations_explain_the_peak(clean: tuple[dict, TraceAnalysis]) -> None:
    trace, ta = clean
    peak_bytes = max(e["args"]["Total Allocated"] for e in _memory_events(trace))
    peaks = ta.get_memory_device_peaks()
    assert peaks["peak_allocated_mb"].to_list() == [peak_bytes / MIB]
    live = ta.get_memory_peak()
    assert live["live_mb"].sum() == pytest.approx(peak_bytes / MIB)
    by_op = live.group_by("operator").agg(pl.col("live_mb").sum()).sort("live_mb", descending=True)
    biggest = max(ACTIVATION_MB, key=ACTIVATION_MB.__getitem__)  # the generator's largest
    assert by_op["operator"][0] == biggest
    assert by_op["live_mb"][0] % ACTIVATION_MB[biggest] == 0


def test_no_growing_leak_without_one(clean: tuple[dict, TraceAnalysis]) -> None:
    assert not clean[1].get_memory_leaks()["growing"].any()


def test_leak_is_found(leaky: tuple[dict, TraceAnalysis]) -> None:
    _, ta = leaky
    leaks = ta.get_memory_leaks()
    growing = leaks.filter(pl.col("growing"))
    assert growing["operator"].to_list() == [LEAK_OP]
    row = growing.row(0, named=True)
    assert row["never_freed"] == STEPS and row["steps"] == STEPS
    assert row["never_freed_mb"] == pytest.approx(STEPS * LEAK_BYTES / MIB)
    steps = ta.get_memory_step_peaks()
    assert steps.height == STEPS
    assert steps["growth_mb"][-1] == pytest.approx(LEAK_BYTES / MIB)
    assert (steps["growth_mb"].drop_nulls() > 0).all()


def test_report_keys_only_and_csv(leaky: tuple[dict, TraceAnalysis], tmp_path: Path) -> None:
    ta = leaky[1]
    names = ["memory_curve", "memory_events", "memory_stats", "memory_peak"]
    tables = build_tables(ta.trace_set, names=names)
    assert set(names) <= set(tables)
    assert "temporal_breakdown" not in tables
    assert tables["memory_events"].height == ta.get_memory_events().height
    n_mem = len(_memory_events(leaky[0]))
    assert tables["memory_curve"].height == 2 * n_mem - 1  # step plot, under the LTTB cap
    paths = write_csv(tables, tmp_path)
    assert {p.stem for p in paths} >= set(names)
    json.dumps(tables["memory_stats"].to_dicts())


def test_curve_downsampled_keeps_ends(clean: tuple[dict, TraceAnalysis]) -> None:
    ta = clean[1]
    full = ta.get_memory_curve(max_points=None)
    small = ta.get_memory_curve(max_points=50)
    assert small.height == 50
    assert small.row(0) == full.row(0) and small.row(-1) == full.row(-1)
    # every kept point is a point of the full curve, in order
    assert set(small.rows()) <= set(full.rows())
    assert small["time_ms"].is_sorted()


def test_odd_memory_events_never_crash(tmp_path: Path) -> None:
    """ROCm's Device Type 6, events without an address, totals or thread, a string tid, a float
    size: every table is built; type 6 is a GPU (the plugin drops or fails on it)."""
    op = {
        "ph": "X",
        "cat": "cpu_op",
        "pid": 1,
        "tid": 1,
        "name": "aten::empty",
        "ts": 10,
        "dur": 50,
    }

    def mem(ts: float, args: dict, tid: object = 1) -> dict:
        return {"ph": "i", "cat": "cpu_instant_event", "name": "[memory]", "pid": 1, "tid": tid,
                "ts": ts, "args": args}  # fmt: skip

    full = {"Total Allocated": 512, "Total Reserved": 2048, "Device Type": 6, "Device Id": 0}
    events = [
        op,
        mem(20, {**full, "Bytes": 512, "Addr": 7}),
        mem(30, {"Bytes": 256, "Addr": 9}),  # no totals, no device
        mem(40, {**full, "Bytes": 64.0}),  # no address, float size
        mem(50, {**full, "Bytes": -512, "Addr": 7}, tid="main"),
        mem(None, {**full, "Bytes": 1, "Addr": 3}),  # type: ignore[arg-type]
    ]
    write_trace({"traceEvents": events}, tmp_path / "rank-0.json")
    ta = TraceAnalysis(tmp_path, cache=Cache(tmp_path / "cache"))
    tables = build_tables(
        ta.trace_set,
        names=["memory_curve", "memory_events", "memory_stats", "memory_peak", "memory_leaks",
               "memory_step_peaks"],
    )  # fmt: skip
    events_table = tables["memory_events"]
    pair = events_table.filter(pl.col("status") == "freed").row(0, named=True)
    # the plugin names a top-level aten::empty after its tree root
    assert pair["device"] == "GPU0" and pair["operator"] == "CallTreeRoot (aten::empty)"
    assert pair["size_kb"] == 0.5
    assert set(tables["memory_curve"]["device"]) == {"GPU0"}
    stats = tables["memory_stats"].select("device", "operator").rows()
    assert stats == [("GPU0", "aten::empty"), ("unknown device", "aten::empty")]
