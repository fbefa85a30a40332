"""The memory view against the TensorBoard plugin's own answers (../shared/oracle-tb): curve
points, memory-events table and per-operator statistics of every shared case with memory
events, within 0.1% (the plugin rounds its table values to 2 decimals; compared after the same
rounding)."""

from __future__ import annotations

import json
import math
from pathlib import Path

import polars as pl
import pytest

from hta_tui.analysis.memory_curve import memory_curve, memory_peaks
from hta_tui.analysis.memory_events import memory_events
from hta_tui.analysis.memory_records import memory_records, start_ns
from hta_tui.analysis.memory_stats import memory_stats

from . import shared_sets
from .conftest import SHARED


def _cases() -> list[tuple[str, str, str]]:
    """(case, source file, oracle folder) of every file the plugin answered memory routes for."""
    root = SHARED / "oracle-tb"
    out = []
    for meta_path in sorted(root.glob("*/meta.json")) if root.is_dir() else []:
        case = meta_path.parent.name
        for f in json.loads(meta_path.read_text())["files"]:
            folder = meta_path.parent / f["worker"] / f["span"]
            if (folder / "memory.json").exists():
                out.append((case, f["source"], str(folder.relative_to(root))))
    return out


CASES = _cases()


def _round(v: float | None) -> float | None:
    """The plugin's DisplayRounder(2): 2 decimals, or the first significant digit of tinier."""
    if v is None:
        return None
    if abs(v) >= 0.01 or v == 0:
        return round(v, 2)
    return round(v, abs(math.floor(math.log10(abs(v)))))


def _close(a: float | None, b: float | None, rounded: bool) -> bool:
    if a is None or b is None:
        return a is None and b is None
    slack = 0.0100001 if rounded else 1e-9  # one unit of the plugin's last rounded digit
    return abs(a - b) <= max(slack, 1e-3 * abs(a))


@pytest.fixture(scope="module")
def parsed() -> dict[str, tuple]:
    return {}


def _load(parsed: dict, case: str, source: str) -> tuple:
    key = f"{case}/{source}"
    if key not in parsed:
        p = shared_sets.parsed(SHARED / "traces" / case / source)
        events, memory = p.frames["events"], p.frames["memory"]
        parsed[key] = (events, memory_records(events, memory), start_ns(events, memory))
    return parsed[key]


@pytest.mark.shared
def test_every_memory_case_is_covered() -> None:
    cases = {c for c, _, _ in CASES}
    assert {
        "pytorch_cpu_vit_memory",
        "pytorch_cpu_ddp_gloo_4",
        "tracelens_h100_bert_memory",
    } <= cases
    assert "tracelens_mi300_ddp_resnet18" in cases
    assert len([c for c in CASES if c[0] == "pytorch_cpu_vit_memory"]) == 2  # both spans


@pytest.mark.shared
@pytest.mark.parametrize(("case", "source", "folder"), CASES)
def test_curve_matches_plugin(parsed: dict, case: str, source: str, folder: str) -> None:
    _, recs, origin = _load(parsed, case, source)
    doc = json.loads((SHARED / "oracle-tb" / folder / "memory_curve.json").read_text())
    assert doc["metadata"]["first_ts"] * 1000 == pytest.approx(origin, abs=1)
    curve = memory_curve(recs, origin)
    assert sorted(curve["device"].unique()) == sorted(doc["rows"])
    for device, rows in doc["rows"].items():
        mine = curve.filter(pl.col("device") == device).select(
            "time_ms", "allocated_mb", "reserved_mb"
        )
        assert mine.height == len(rows)
        for theirs, ours in zip(rows, mine.rows(), strict=True):
            assert all(_close(a, b, rounded=False) for a, b in zip(theirs, ours, strict=True))
    peaks = memory_peaks(recs, origin)
    for device, text in doc["metadata"]["peaks"].items():
        mb = peaks.filter(pl.col("device") == device)["peak_allocated_mb"].item()
        assert text == f"Peak Memory Usage: {mb:.1f}MB"


@pytest.mark.shared
@pytest.mark.parametrize(("case", "source", "folder"), CASES)
def test_events_match_plugin(parsed: dict, case: str, source: str, folder: str) -> None:
    _, recs, origin = _load(parsed, case, source)
    doc = json.loads((SHARED / "oracle-tb" / folder / "memory_events.json").read_text())
    table = memory_events(recs, origin)
    assert sorted(table["device"].unique()) == sorted(doc["rows"])
    for device, rows in doc["rows"].items():
        mine = table.filter(pl.col("device") == device)
        assert mine.height == len(rows)
        cols = ("operator", "size_kb", "allocation_ms", "release_ms", "duration_ms")
        for theirs, ours in zip(rows, mine.select(cols).rows(), strict=True):
            assert theirs[0] == ours[0]
            assert all(
                _close(a, _round(b), rounded=True)
                for a, b in zip(theirs[1:], ours[1:], strict=True)
            ), (theirs, ours)
        # unmatched rows are kept and marked: no release time <=> not freed in the trace
        assert (mine["release_ms"].is_null() == (mine["status"] == "never freed")).all()


@pytest.mark.shared
@pytest.mark.parametrize(("case", "source", "folder"), CASES)
def test_stats_match_plugin(parsed: dict, case: str, source: str, folder: str) -> None:
    events, recs, _ = _load(parsed, case, source)
    doc = json.loads((SHARED / "oracle-tb" / folder / "memory.json").read_text())
    stats = memory_stats(events, recs)
    assert sorted(stats["device"].unique()) == sorted(doc["rows"])
    for device, rows in doc["rows"].items():
        mine = stats.filter(pl.col("device") == device).drop("device")
        assert mine["operator"].to_list() == [r[0] for r in rows]  # the plugin's order: by name
        for theirs, ours in zip(rows, mine.rows(), strict=True):
            assert theirs[1] == ours[1]  # calls
            assert theirs[4:6] == list(ours[4:6])  # allocation counts
            sizes = (ours[2], ours[3], ours[6], ours[7])
            for a, b in zip((theirs[2], theirs[3], theirs[6], theirs[7]), sizes, strict=True):
                assert _close(a, _round(b), rounded=True), (theirs, ours)


@pytest.mark.shared
def test_stats_totals_agree_with_raw_events(parsed: dict) -> None:
    """Self allocation sizes summed over operators = the allocations inside operators, read
    straight from the trace's [memory] events (not our attribution)."""
    case, source, _ = next(c for c in CASES if c[0] == "pytorch_cpu_vit_memory")
    events, recs, _ = _load(parsed, case, source)
    stats = memory_stats(events, recs)
    raw = json.loads(_gunzip(SHARED / "traces" / case / source))["traceEvents"]
    mem = [e for e in raw if e.get("name") == "[memory]"]
    allocs = sum(e["args"]["Bytes"] for e in mem if e["args"]["Bytes"] > 0)
    outside = recs.filter((pl.col("bytes") > 0) & pl.col("node").is_null())["bytes"].sum()
    assert stats["self_allocation_size_kb"].sum() * 1024 == pytest.approx(allocs - outside)
    assert stats["self_allocation_count"].sum() + recs.filter(
        (pl.col("bytes") > 0) & pl.col("node").is_null()
    ).height == sum(1 for e in mem if e["args"]["Bytes"] > 0)


def _gunzip(path: Path) -> bytes:
    import gzip

    return gzip.decompress(path.read_bytes())
