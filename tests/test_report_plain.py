"""Issue 24, point 17: the text report says "no trace files" once instead of an empty section
per table, wraps sentences between words instead of cutting them, and leaves long time series
out unless they are named."""

from __future__ import annotations

import io
from pathlib import Path

import orjson
import pytest

from hta_tui.cli import main
from hta_tui.report import run_report
from hta_tui.trace.cache import Cache
from tests.test_report_text import _column, _section


def test_a_folder_without_trace_files_says_so_in_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    empty = tmp_path / "empty"
    empty.mkdir()
    assert main(["report", str(empty), "--no-cache"]) == 1
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err.splitlines() == [f"hta-tui: no trace files in {empty}"]


def test_a_folder_of_bad_files_lists_them_without_empty_sections(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "rank-0.json").write_text('{"traceEvents": [')  # truncated
    assert main(["report", str(tmp_path), "--no-cache"]) == 1
    out = capsys.readouterr().out
    assert "rank-0.json" in out
    assert "no rows" not in out
    assert out.count("# ") == 1  # the files table, no analysis section


@pytest.mark.shared
def test_sentences_are_wrapped_between_words(shared: Path, tmp_path: Path) -> None:
    """The sync verdict of a real trace is longer than 80 columns: its words come whole,
    over several lines of the row, and read back as the JSON's sentence."""
    root = shared / "traces" / "trace_compare" / "base"
    cache = Cache(tmp_path / "cache")
    doc, text = io.StringIO(), io.StringIO()
    run_report(root, as_json=True, only=["sync_verdict"], out=doc, cache=cache)
    run_report(root, only=["sync_verdict"], out=text, cache=cache, width=80)
    [verdict] = [r["verdict"] for r in orjson.loads(doc.getvalue())["sync_verdict"]]
    lines = _section(text.getvalue(), "sync_verdict")
    assert len(verdict) > 80
    assert "…" not in "\n".join(lines)
    assert max(map(len, lines)) <= 80
    assert _column(lines, "verdict") == [verdict]


@pytest.fixture(scope="module")
def gpu_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from hta_tui.synth import write_trace_dir

    d = tmp_path_factory.mktemp("series")
    write_trace_dir(d, ranks=1, steps=3, seed=5, kernels_per_step=20)
    return d


def test_time_series_only_when_named(gpu_dir: Path, tmp_path: Path) -> None:
    cache = Cache(tmp_path / "cache")
    plain, named = io.StringIO(), io.StringIO()
    run_report(gpu_dir, only=["gpu_metrics"], out=plain, cache=cache, width=100)
    run_report(gpu_dir, only=["gpu_utilization_series"], out=named, cache=cache, width=100)
    assert "# gpu_metrics" in plain.getvalue()
    assert "# gpu_utilization_series" not in plain.getvalue()
    note = " ".join(plain.getvalue().split())
    assert "time series left out: gpu_utilization_series (" in note
    assert "--only NAME prints one" in note
    rows = _section(named.getvalue(), "gpu_utilization_series")
    assert len(_column(rows, "rank")) > 1
