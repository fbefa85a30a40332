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
from tests.test_app_support import synth_job


@pytest.fixture(scope="module")
def job_dir(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    return synth_job(tmp_path_factory, seed=11)


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


@pytest.fixture(scope="module")
def pair(tmp_path_factory: pytest.TempPathFactory):
    """Two runs of a generated job (different seeds: ops and kernels that differ)."""
    sets = []
    for seed in (3, 4):
        d = tmp_path_factory.mktemp(f"side{seed}")
        write_trace_dir(d, ranks=1, steps=4, seed=seed)
        sets.append(open_set(d, Cache(tmp_path_factory.mktemp(f"cache{seed}"))))
    return sets


@pytest.mark.parametrize(
    "params",
    [
        {},
        {"device": "GPU", "short": True, "self_time": True},
        {"control_iteration": "all", "test_iteration": None},
    ],
)
def test_diff_asks_the_door_once_per_side_with_its_trace_set(pair, params, monkeypatch) -> None:
    """The diff screen's numbers come from each side's trace set asked once through the
    registry (`set_tables`), and are HTA's TraceDiff of the two sides' events."""
    from hta_tui.analysis import diff, step_pairs
    from hta_tui.app.screens.base import Params
    from hta_tui.app.screens.diff import CONTROL_KEY, TEST_KEY, DiffScreen, set_door

    control_ts, test_ts = pair
    asked: list[tuple[int, tuple[str, ...]]] = []
    real = registry.set_tables

    def recording(ts, names, options=None, **kw):
        asked.append((id(ts), tuple(names)))
        return real(ts, names, options, **kw)

    monkeypatch.setattr(registry, "set_tables", recording)
    c, t = control_ts.loaded()[0].events, test_ts.loaded()[0].events
    doors = {"control": set_door(control_ts, 0), "test": set_door(test_ts, 0)}
    p = Params(extra={"control_iteration": None, "test_iteration": None, **params})
    got = DiffScreen.compute({CONTROL_KEY: c, TEST_KEY: t}, p, doors)
    assert sorted(asked) == sorted(
        [(id(control_ts), DiffScreen.ANALYSES), (id(test_ts), DiffScreen.ANALYSES)]
    )
    average = "all" in (p.get("control_iteration"), p.get("test_iteration"))
    kw = {
        "device_type": p.get("device", "ALL"),
        "use_short_name": bool(p.get("short", False)),
        "average_iterations": average,
        "control_iteration": diff.complete_iterations(c) if average else None,
        "test_iteration": diff.complete_iterations(t)[:1] if average else None,
    }
    want = diff.compare_traces(c, t, **kw, self_time=bool(p.get("self_time", False)))
    assert want.height > 0 and (want["diff_duration"] != 0).any()
    assert_frame_equal(got["compare"], want)
    assert got["ops"] == diff.ops_diff(c, t, **kw)
    assert_frame_equal(got["temporal"], diff.breakdown_diff(c, t)["temporal"])
    assert got["step_time"] == step_pairs.paired_steps(c, t)
    assert got["control_iterations"] == diff.complete_iterations(c)
    assert got["test_steps"] == diff.step_numbers(t)


def test_diff_detail_from_each_side_is_htas_kernel_diff_detail(pair) -> None:
    """The drill-down's two sides, each asked through the door, put together give
    `kernel_diff_detail` of the two sides' events, for a CPU op and for a kernel."""
    from hta_tui.analysis import diff

    control_ts, test_ts = pair
    c, t = control_ts.loaded()[0].events, test_ts.loaded()[0].events
    comp = diff.compare_traces(c, t)
    op = comp.join(c.filter(pl.col("stream").is_null()).select("name").unique(), on="name").sort(
        "Control_total_duration", descending=True
    )["name"][0]
    kernel = c.filter(pl.col("kind") == "kernel")["name"][0]
    first = {s: diff.complete_iterations(e)[:1] for s, e in (("c", c), ("t", t))}
    for name in (op, kernel):
        parts = []
        for ts, side, iters in ((control_ts, "Control", first["c"]), (test_ts, "Test", first["t"])):
            options = registry.Options(
                diff_item=name, diff_side=side, iteration=",".join(map(str, iters))
            )
            got = registry.set_tables(
                ts, ["diff_side_item", "diff_side_item_kernels", "diff_side_item_ops"], options
            )
            parts.append(
                {
                    "stats": got["diff_side_item"],
                    "launched": got["diff_side_item_kernels"],
                    "ops": got["diff_side_item_ops"],
                }
            )
        joined = diff.detail_from_sides(*parts)
        want = diff.kernel_diff_detail(c, t, name)
        assert_frame_equal(joined["stats"], want["stats"])
        assert_frame_equal(joined["kernels"], want["kernels"])
        assert want["stats"]["count"].sum() > 0
        assert parts[0]["ops"]["cpu_side"][0] == (name == op)
        assert want["kernels"].is_empty() == (name == kernel)  # an op launches kernels


def test_api_gives_the_overview_tables_of_its_trace_set(job, job_dir) -> None:
    """The API's door hands the registry its trace set: `get_overview_temporal` is the
    report's temporal breakdown, made from the per-file summaries."""
    ta = TraceAnalysis(job_dir[0], cache=Cache(job_dir[1]))
    assert_frame_equal(
        ta.get_overview_temporal(),
        build_tables(job, names=["temporal_breakdown"])["temporal_breakdown"],
    )
    assert ta.get_overview_files().height == len(job.files())
