"""`TraceDiff` and `report --compare`: HTA's diff through the front ends."""

from __future__ import annotations

import io
from pathlib import Path

import orjson
import pytest

from hta_tui import TraceDiff
from hta_tui.cli import main
from hta_tui.report import run_compare_report
from hta_tui.synth import write_trace_dir
from hta_tui.trace.cache import Cache
from tests.conftest import oracle_frame
from tests.shared_sets import analysis, cases_cache


@pytest.mark.shared
def test_trace_diff_api_matches_hta(shared: Path) -> None:
    base = shared / "traces" / "trace_compare" / "base"
    test = shared / "traces" / "trace_compare" / "test"
    ours = TraceDiff.compare_traces(base, test, device_type="DeviceType.GPU")
    hta = oracle_frame(shared / "oracle" / "diff" / "trace_compare" / "compare_traces.gpu.json")
    assert ours["name"].to_list() == hta["name"].to_list()
    assert ours["Test_counts"].to_list() == hta["Test_counts"].to_list()
    expected = orjson.loads((shared / "oracle/diff/trace_compare/ops_diff.json").read_bytes())
    assert TraceDiff.ops_diff(analysis(base), test) == expected


@pytest.mark.shared
def test_report_compare_json(shared: Path) -> None:
    out = io.StringIO()
    rc = run_compare_report(
        shared / "traces" / "trace_diff" / "control",
        shared / "traces" / "trace_diff" / "test",
        as_json=True,
        out=out,
        cache=cases_cache(),
    )
    assert rc == 0
    doc = orjson.loads(out.getvalue())
    assert (doc["control_rank"], doc["test_rank"]) == (3, 1)
    hta = oracle_frame(shared / "oracle" / "diff" / "trace_diff" / "compare_traces.json")
    assert [r["name"] for r in doc["compare_traces"]] == hta["name"].to_list()
    sizes = {k: len(v) for k, v in doc["ops_diff"].items()}
    assert sizes == {
        "added": 32,
        "deleted": 138,
        "increased": 35,
        "decreased": 65,
        "unchanged": 162,
    }
    assert {"temporal_diff", "kernel_type_diff", "kernels_diff"} <= set(doc)


def test_compare_ranks_inside_one_folder(tmp_path: Path) -> None:
    d = tmp_path / "t"
    write_trace_dir(d, ranks=2, steps=3, seed=5, slow_rank=1)
    out = io.StringIO()
    rc = run_compare_report(
        d, d, control_rank=0, test_rank=1, as_json=True, out=out, cache=Cache(tmp_path / "c")
    )
    assert rc == 0
    doc = orjson.loads(out.getvalue())
    assert (doc["control_rank"], doc["test_rank"]) == (0, 1)
    slower = [r for r in doc["compare_traces"] if r["diff_duration"] > 0]
    assert slower  # rank 1 is the slow rank
    out = io.StringIO()
    rc = run_compare_report(d, d, test_rank=7, as_json=True, out=out, cache=Cache(tmp_path / "c"))
    assert rc == 1 and "no such rank" in orjson.loads(out.getvalue())["error"]


def test_compare_cli_usage(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    d = tmp_path / "t"
    write_trace_dir(d, ranks=1, steps=3, seed=5)
    assert main(["report", str(d), "--compare", str(tmp_path / "missing")]) == 2
    assert main(["report", str(d), "--compare", str(d), "--device", "GPU"]) == 0
    assert "compare_traces" in capsys.readouterr().out
