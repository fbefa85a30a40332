"""The HTA-name Python API and the report's analysis keys, on every shared trace."""

from __future__ import annotations

import csv
import gzip
import io
from pathlib import Path
from types import SimpleNamespace

import orjson
import polars as pl
import pytest

from hta_tui import TraceAnalysis
from hta_tui.analysis import catalog, counters_export, registry
from hta_tui.cli import main
from hta_tui.report import run_report
from hta_tui.synth import write_trace_dir
from hta_tui.trace.cache import Cache
from tests.shared_sets import analysis
from tests.test_report import shared_cases


@pytest.fixture(scope="module")
def synth_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    d = tmp_path_factory.mktemp("synth")
    write_trace_dir(d, ranks=2, steps=3, seed=3)
    return d


def every_method(ta: TraceAnalysis, out_dir: Path) -> dict[str, object]:
    """Every HTA-named method with its defaults; none may raise."""
    return {
        "temporal": ta.get_temporal_breakdown(),
        "idle": ta.get_idle_time_breakdown(show_idle_interval_stats=True),
        "kernels": ta.get_gpu_kernel_breakdown(),
        "kernel_stats": ta.get_kernel_duration_stats(),
        "overlap": ta.get_comm_comp_overlap(),
        "queue_series": ta.get_queue_length_time_series(),
        "queue": ta.get_queue_length_summary(),
        "blocked": ta.get_time_spent_blocked_on_full_queue(),
        "memory_series": ta.get_memory_bw_time_series(),
        "memory": ta.get_memory_bw_summary(),
        "launch": ta.get_cuda_kernel_launch_stats(),
        "sequences": ta.get_frequent_cuda_kernel_sequences("ProfilerStep"),
        "aten": ta.get_aten_op_kernels_and_delay(),
        "steps": ta.get_profiler_steps(),
        "iterations": ta.get_iterations(),
        "stragglers": ta.get_potential_stragglers(),
        "annotations": ta.get_gpu_user_annotation_breakdown(),
        "counters": ta.generate_trace_with_counters(output_dir=out_dir),
    }


@pytest.mark.shared
def test_api_answers_on_every_shared_trace(
    shared: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The counter traces written here are never read back (tests/test_analysis_counters reads
    # them): gzipped at the fastest level, not the product's 6 (~10% of this test's CPU).
    fastest = SimpleNamespace(compress=lambda data, compresslevel: gzip.compress(data, 1))
    monkeypatch.setattr(counters_export, "gzip", fastest)
    for case in shared_cases(shared):
        ta = analysis(shared / "traces" / case)
        out = every_method(ta, tmp_path / "out" / case)
        launch = out["launch"]
        assert isinstance(launch, dict) and sorted(launch) == ta.ranks, case
        if not ta.trace_set.loaded():
            continue
        has_gpu = any(d.meta.get("n_kernels") for d in ta.trace_set.loaded().values())
        assert (out["temporal"].height > 0) == has_gpu, case
        assert len(out["counters"]) == len(ta.ranks), case


@pytest.mark.shared
def test_ranks_other_than_zero_and_cpu_only(shared: Path, tmp_path: Path) -> None:
    ta = analysis(shared / "traces" / "cpu_only")
    assert ta.ranks == [34]
    assert ta.get_temporal_breakdown().is_empty()
    assert ta.get_idle_time_breakdown()[0].is_empty()
    kernel_type, per_kernel = ta.get_gpu_kernel_breakdown()
    assert kernel_type.is_empty() and per_kernel.is_empty()
    assert ta.get_cuda_kernel_launch_stats()[34].is_empty()
    ta = analysis(shared / "traces" / "trace_diff" / "control")
    assert ta.ranks == [3]
    assert ta.get_temporal_breakdown()["rank"].to_list() == [3]
    assert ta.get_queue_length_summary()["rank"].unique().to_list() == [3]


def test_api_options_reach_the_analyses(synth_dir: Path, tmp_path: Path) -> None:
    ta = TraceAnalysis(synth_dir, cache=Cache(tmp_path / "c"))
    assert ta.ranks == [0, 1]
    strict, _ = ta.get_idle_time_breakdown(consecutive_kernel_delay=1)
    loose, _ = ta.get_idle_time_breakdown(consecutive_kernel_delay=1000)

    def kernel_wait(df: pl.DataFrame) -> float:
        return df.filter(pl.col("idle_category") == "kernel_wait")["idle_time"].sum()

    assert kernel_wait(loose) > kernel_wait(strict)
    only7, _ = ta.get_idle_time_breakdown(streams=[7])
    assert only7["stream"].unique().to_list() == [7]
    one = ta.get_cuda_kernel_launch_stats(ranks=[1])
    assert list(one) == [1] and one[1].height > 0
    _, top3 = ta.get_gpu_kernel_breakdown(num_kernels=3, duration_ratio=1.0)
    _, all_k = ta.get_gpu_kernel_breakdown(num_kernels=10**6, duration_ratio=1.0)
    assert top3.height < all_k.height


def test_stragglers_and_steps(tmp_path: Path) -> None:
    d = tmp_path / "t"
    write_trace_dir(d, ranks=4, steps=4, seed=0, slow_rank=2)
    ta = TraceAnalysis(d, cache=Cache(tmp_path / "c"))
    assert ta.get_potential_stragglers() == [2]
    table = ta.get_straggler_candidates()
    assert table.filter(pl.col("straggler"))["rank"].to_list() == [2]
    assert ta.get_profiler_steps() == [2, 3, 4]  # the last step is dropped, like HTA
    assert sorted(ta.get_iterations()["rank"].unique().to_list()) == [0, 1, 2, 3]
    assert set(ta.get_aten_op_kernels_and_delay()) == {0, 1, 2, 3}


def test_counters_export_never_beside_the_traces(synth_dir: Path, tmp_path: Path) -> None:
    ta = TraceAnalysis(synth_dir, cache=Cache(tmp_path / "c"))
    before = sorted(p.name for p in synth_dir.iterdir())
    written = ta.generate_trace_with_counters(output_dir=tmp_path / "out")
    assert [w.path.parent for w in written] == [tmp_path / "out"] * 2
    assert all(w.queue_length > 0 for w in written)
    assert sorted(p.name for p in synth_dir.iterdir()) == before


def test_report_has_one_key_per_analysis(synth_dir: Path, tmp_path: Path) -> None:
    out = io.StringIO()
    assert run_report(synth_dir, as_json=True, out=out, cache=Cache(tmp_path / "c")) == 0
    doc = orjson.loads(out.getvalue())
    ts = TraceAnalysis(synth_dir, cache=Cache(tmp_path / "c")).trace_set
    # gpu_devices, distributed_hierarchy, process_groups come from the files' metadata, each
    # next to the analysis that declares it
    tables = catalog.run(ts.frames(), meta=registry.trace_meta(ts))
    assert list(doc) == [
        "findings",  # what to fix first (issue 28), its evidence nested
        "files",
        *(t for t in tables if t != "findings"),
        "scope",  # what each table covers (issue 24, point 5)
    ]
    assert {"distributed_hierarchy", "process_groups", "gpu_devices"} <= set(tables)
    assert set(doc["scope"]) == set(doc) - {"files", "scope"}
    for name, df in tables.items():
        assert len(doc[name]) == df.height, name
        if df.height:
            nested = ["evidence"] if name == "findings" else []
            assert list(doc[name][0]) == [*df.columns, *nested], name
    assert "queue_length_time_series" not in doc  # large series only when named


def test_report_only_and_csv(synth_dir: Path, tmp_path: Path) -> None:
    out = io.StringIO()
    rc = run_report(
        synth_dir,
        as_json=True,
        only=["comm_comp_overlap", "memory_bw_time_series"],
        csv_dir=tmp_path / "csv",
        out=out,
        cache=Cache(tmp_path / "c"),
    )
    assert rc == 0
    doc = orjson.loads(out.getvalue())
    assert list(doc) == ["files", "comm_comp_overlap", "memory_bw_time_series", "scope"]
    assert len(doc["memory_bw_time_series"]) > 0
    files = sorted(p.name for p in (tmp_path / "csv").iterdir())
    assert files == ["comm_comp_overlap.csv", "files.csv", "memory_bw_time_series.csv"]
    with (tmp_path / "csv" / "comm_comp_overlap.csv").open() as f:
        rows = list(csv.DictReader(f))
    assert [int(r["rank"]) for r in rows] == [r["rank"] for r in doc["comm_comp_overlap"]]


def test_report_rejects_unknown_analysis(synth_dir: Path) -> None:
    with pytest.raises(SystemExit) as info:
        main(["report", str(synth_dir), "--only", "temporal_breakdown,nope"])
    assert info.value.code == 2
