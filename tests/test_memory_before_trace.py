"""Issue 24, point 12: memory at the peak accounts for memory allocated before the trace (a row
of its own), so the shares add up to the peak; a trace whose memory events carry no
`Total Allocated` (PyTorch's 2021 format) says why there is no curve, not "no memory event
in view" while its operator table has rows."""

from __future__ import annotations

import gzip
import json
import re
from pathlib import Path

import polars as pl
import pytest

from hta_tui import TraceAnalysis
from hta_tui.analysis import memory_stats
from hta_tui.analysis.memory_peak import BEFORE_TRACE
from hta_tui.analysis.memory_view import FileMemory
from hta_tui.analysis.memory_window import memory_window
from hta_tui.app.screens.memory import _summary
from hta_tui.trace.parse import parse_file

MB = 1024 * 1024


@pytest.mark.shared
def test_h100_peak_shares_add_up_with_memory_from_before(shared: Path) -> None:
    """tracelens_h100_bert_memory: 87 MB of GPU0's 96.6 MB peak were allocated before the
    trace started (the first event's total allocated less its own bytes); the table showed
    the trace's 9.8% only."""
    folder = shared / "traces" / "tracelens_h100_bert_memory"
    (path,) = folder.glob("*.json.gz")
    raw = json.loads(gzip.decompress(path.read_bytes()))["traceEvents"]
    gpu = sorted(
        (e for e in raw if e.get("name") == "[memory]" and e["args"].get("Device Type") == 1),
        key=lambda e: e["ts"],
    )
    baseline_mb = (gpu[0]["args"]["Total Allocated"] - gpu[0]["args"]["Bytes"]) / MB
    peak_mb = max(e["args"]["Total Allocated"] for e in gpu) / MB
    table = TraceAnalysis(folder).get_memory_peak().filter(pl.col("device") == "GPU0")
    assert table["live_mb"].sum() == pytest.approx(peak_mb, rel=1e-9)
    assert table["share_of_peak_pct"].sum() == pytest.approx(100.0, rel=1e-9)
    before = table.filter(pl.col("operator") == BEFORE_TRACE)
    assert before["live_mb"].to_list() == [pytest.approx(baseline_mb, rel=1e-9)]
    assert before["share_of_peak_pct"][0] > 85


@pytest.mark.shared
def test_2021_memory_events_say_why_there_is_no_curve(shared: Path, tmp_path: Path) -> None:
    """The ViT trace with `Total Allocated` / `Total Reserved` taken out of its memory events,
    as 2021's profiler wrote them: allocations and frees, no totals."""
    (source,) = sorted((shared / "traces" / "pytorch_cpu_vit_memory").glob("*.json.gz"))[:1]
    text = gzip.decompress(source.read_bytes()).decode()
    old = re.sub(r'"Total (Allocated|Reserved)": *-?\d+(\.\d+)?, *', "", text)
    assert "Total Allocated" not in old and '"Bytes"' in old
    path = tmp_path / "worker0.pt.trace.json"
    path.write_text(old)
    frames = parse_file(path).frames
    f = FileMemory(frames["events"], frames["memory"])
    window = memory_window(f)
    assert window.peak is None and window.no_curve is not None
    line = _summary(window)
    assert "Total Allocated" in line and "no memory event" not in line
    stats = memory_stats.memory_stats(f.events, f.recs)
    assert stats.height > 10  # the operators' allocations are still attributed

    # the report says it too, in text and in JSON (it said "no rows: nothing for this table")
    import io

    import orjson

    from hta_tui.report import run_report
    from hta_tui.trace.cache import Cache

    only = ["memory_curve", "memory_peak"]
    text, doc = io.StringIO(), io.StringIO()
    run_report(tmp_path, only=only, out=text, cache=Cache(tmp_path / "c"), width=200)
    run_report(tmp_path, only=only, as_json=True, out=doc, cache=Cache(tmp_path / "c"))
    why = "rank 0 CPU: no Total Allocated in its memory events (2021 format)"
    sections = text.getvalue().split("\n# ")
    for name in ("memory_curve", "memory_peak", "memory_device_peaks"):
        [body] = [s for s in sections if s.startswith(name + "\n")]
        assert f"(no rows: {why}" in body, body
    scope = orjson.loads(doc.getvalue())["scope"]
    assert scope["memory_curve"]["why_empty"].startswith(why)
    [row] = orjson.loads(doc.getvalue())["memory_no_curve"]
    assert row["memory_events"] == f.recs.height and row["device"] == "CPU"
