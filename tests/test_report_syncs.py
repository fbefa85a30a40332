"""The sync finder and module view through `hta-tui report` (JSON, CSV, --only) and the API."""

from __future__ import annotations

import io
from pathlib import Path

import orjson
import polars as pl
import pytest

from hta_tui import TraceAnalysis
from hta_tui.analysis import catalog
from hta_tui.report import run_report
from hta_tui.synth import sync_story
from hta_tui.synth.files import write_trace
from hta_tui.trace.cache import Cache

KEYS = ("syncs", "sync_summary", "sync_verdict", "module_stats")
STEPS = 2


@pytest.fixture
def story(tmp_path: Path) -> Path:
    d = tmp_path / "story"
    d.mkdir()
    write_trace(sync_story.make_sync_story(steps=STEPS), d / "rank-0.json")
    return d


def test_report_json_has_the_sync_and_module_tables(story: Path, tmp_path: Path) -> None:
    out = io.StringIO()
    rc = run_report(
        story, as_json=True, out=out, cache=Cache(tmp_path / "c"), only=["syncs", "module_stats"]
    )
    assert rc == 0
    doc = orjson.loads(out.getvalue())
    assert list(doc) == ["files", *KEYS, "scope"]  # scope: what each covers (issue 24)
    # 2 steps x (pageable copy + forward sync + backward sync), as generated.
    assert len(doc["syncs"]) == 3 * STEPS
    backward = [r for r in doc["syncs"] if r["phase"] == "backward"]
    assert {r["module"] for r in backward} == {sync_story.BACKWARD_SYNC_MODULE}
    (verdict,) = doc["sync_verdict"]
    assert verdict["verdict"].endswith(
        f"the largest: aten::copy_ in {sync_story.BACKWARD_SYNC_CALL_SITE}, backward"
    )
    assert verdict["call_sites"] == 2
    assert sorted(r["path"] for r in doc["module_stats"])[0] == "Net_0"


def test_report_csv_and_default_selection(story: Path, tmp_path: Path) -> None:
    assert {"syncs", "module_stats"} <= {a.name for a in catalog.select(None)}
    csv_dir = tmp_path / "csv"
    rc = run_report(
        story, csv_dir=csv_dir, cache=Cache(tmp_path / "c"), only=["syncs", "module_stats"]
    )
    assert rc == 0
    for key in KEYS:
        assert (csv_dir / f"{key}.csv").is_file()
    table = pl.read_csv(csv_dir / "syncs.csv")
    assert table.height == 3 * STEPS
    assert set(table["call"]) == {"cudaStreamSynchronize", "cudaMemcpyAsync"}


def test_api_methods(story: Path, tmp_path: Path) -> None:
    ta = TraceAnalysis(story, cache=Cache(tmp_path / "c"))
    table = ta.get_syncs()
    assert table.height == 3 * STEPS
    assert (table.filter(pl.col("phase") == "backward")["forward_op"] == "aten::gather").all()
    summary = ta.get_sync_summary()
    assert summary["count"].sum() == 3 * STEPS
    assert summary.row(0, named=True)["module"] == sync_story.BACKWARD_SYNC_MODULE
    assert ta.get_sync_verdict().height == 1
    assert set(ta.get_module_stats()["module"]) == {
        "Net_0",
        "Linear_0",
        sync_story.BACKWARD_SYNC_MODULE,
        sync_story.FORWARD_SYNC_MODULE,
    }
