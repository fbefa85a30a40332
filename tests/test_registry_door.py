"""The registry's door for the views that read more than events (issue 26's one door): an
analysis may answer objects for the app besides tables (`results`: the critical path's
paths, the overview's kept rows), read inputs the caller gives (`inputs`: the trace set,
what it answered last time), and be asked with a trace set (`set_tables`), once per side of
the diff."""

from __future__ import annotations

from pathlib import Path

import polars as pl
import pytest
from polars.testing import assert_frame_equal

from hta_tui.analysis import overview, registry
from hta_tui.analysis.critical_path.path import NS_PER_US
from hta_tui.analysis.overview import file_table, precompute, temporal_table
from hta_tui.analysis.step_overview import step_table
from hta_tui.api import TraceAnalysis
from hta_tui.report import build_tables
from hta_tui.synth import write_trace_dir
from hta_tui.trace.cache import Cache
from hta_tui.trace.model import open_set


@pytest.fixture(scope="module")
def job_dir(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    d = tmp_path_factory.mktemp("synth")
    write_trace_dir(d, ranks=2, steps=3, seed=11)
    return d, tmp_path_factory.mktemp("cache")


@pytest.fixture(scope="module")
def job(job_dir: tuple[Path, Path]):
    return open_set(job_dir[0], Cache(job_dir[1]), after_parse=precompute)


def test_critical_path_paths_come_through_the_door_beside_its_tables(job, job_dir) -> None:
    """The critical path screen's path objects (its overlay export) are the registry's result,
    made by the same run as its tables: one path per rank and step the table shows."""
    options = registry.Options(critical_path_steps="all")
    got = registry.set_tables(job, ["critical_path", "critical_path_paths"], options)
    rows = got["critical_path"].filter(pl.col("rank").is_not_null() & pl.col("error").is_null())
    assert rows.height >= 4  # 2 ranks, every step HTA's annotation names
    paths = got["critical_path_paths"]
    assert set(paths) == set(rows.select("rank", "instance_id").iter_rows())
    for rank, instance, length_us in rows.select(
        "rank", "instance_id", "path_length_us"
    ).iter_rows():
        assert paths[(rank, instance)].length_ns / NS_PER_US == pytest.approx(length_us)
    # a result, not a table: not in the report, --only or the API's get_ methods
    assert not registry.known("critical_path_paths")
    assert "critical_path_paths" not in build_tables(job, names=["critical_path"])
    with pytest.raises(AttributeError):
        TraceAnalysis(job_dir[0], cache=Cache(job_dir[1])).get_critical_path_paths  # noqa: B018


def test_overview_tables_through_the_door_read_no_frame(job, monkeypatch) -> None:
    """The overview's file table, temporal breakdown and step time are registry analyses
    reading the per-file summaries from the set: equal to the functions behind them, and no
    events frame read (a warm open reads none)."""
    want_files, want_temporal = file_table(job), temporal_table(job, every_step=True)
    want_steps = step_table(job, tb_compat=True)
    monkeypatch.setattr(
        type(job.loaded()[0]), "events", property(lambda self: pytest.fail("read a frame"))
    )
    options = registry.Options(every_step=True, tb_compat=True)
    names = ["overview_files", "overview_temporal", "overview_steps"]
    got = registry.set_tables(job, names, options)
    assert_frame_equal(got["overview_files"], want_files)
    assert_frame_equal(got["overview_temporal"], want_temporal)
    assert_frame_equal(got["overview_steps"], want_steps)
    assert got["overview_temporal"].height == 2 and got["overview_steps"].height > 0
    for name in names:
        assert registry.BY_NAME[name].cost_class == "light"
        assert registry.BY_NAME[name].scope == "rank"


def test_overview_file_rows_are_made_again_only_when_changed(job, monkeypatch) -> None:
    """Given back what it answered (`overview_kept_rows`), the file table makes no row of a
    file that did not change (the overview's rows follow the changed files only)."""
    first = registry.set_tables(job, ["overview_files", "overview_kept_rows"])
    assert first["overview_kept_rows"] is not None
    made: list[object] = []
    real = overview.file_row
    monkeypatch.setattr(overview, "file_row", lambda *a, **k: made.append(a) or real(*a, **k))
    again = registry.set_tables(
        job,
        ["overview_files", "overview_kept_rows"],
        given={"overview_kept_rows": first["overview_kept_rows"]},
    )
    assert made == []
    assert_frame_equal(again["overview_files"], first["overview_files"])
    registry.set_tables(job, ["overview_files"])  # nothing kept given: every row made
    assert len(made) == len(job.files())
