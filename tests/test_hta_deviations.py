"""README's list of deliberate differences from HTA: every test it names exists, and the
tests of the rows that had none, each showing HTA's figure and ours (HTA's from its own runs
kept in tests/data/hta, or from its documented rule where HTA raises)."""

from __future__ import annotations

import ast
import functools
import re
from pathlib import Path

import polars as pl
import pytest

from hta_tui.analysis import diff
from hta_tui.analysis import memory as mem
from hta_tui.analysis.temporal import temporal_breakdown
from hta_tui.synth.shapes import write_shape
from tests.conftest import REPO, SHARED
from tests.hta_parity import reference, report
from tests.test_analysis_oracle import _events
from tests.test_diff import US, _frame, _launched, _step

DATA = Path(__file__).parent / "data" / "hta"


def _readme_rows() -> list[str]:
    text = (REPO / "README.md").read_text()
    section = text.split("### Where the numbers differ from HTA, on purpose", 1)[1]
    section = section.split("\n### ", 1)[0]
    return [line for line in section.splitlines() if line.startswith("| ")][2:]


def test_every_difference_names_tests_that_exist() -> None:
    rows = _readme_rows()
    assert len(rows) >= 30
    for row in rows:
        named = re.findall(r"`(tests/[\w/]+\.py)::(\w+)`", row.split("|")[-2])
        assert named, f"no test named: {row[:60]}"
        for file, name in named:
            assert name in _functions(file), f"{file}::{name}"


@functools.cache
def _functions(file: str) -> frozenset[str]:
    """The top-level function names of a test module."""
    tree = ast.parse((REPO / file).read_text())
    return frozenset(n.name for n in tree.body if isinstance(n, ast.FunctionDef))


def test_aten_ops_per_rank_where_hta_adds_the_ranks_before(tmp_path: Path) -> None:
    """DEVIATION (both modes): HTA's list of launches is never reset between ranks, so its
    table of rank 1 mixes rank 0's launches in; ours of rank 1 is HTA's when asked for rank 1
    alone (and rank 0 is HTA's)."""
    write_shape("epoch_ns", tmp_path)
    ours = report(tmp_path, True)["aten_op_kernels_and_delay"]
    cols = ["aten_op_name", "kernel_sequence", "occurrence_count", "avg_aten_op_launch_delay"]
    cols.append("avg_runtime_delay")
    for rank, file in ((0, "rank0"), (1, "only_rank1")):
        hta = reference(DATA / "epoch_ns", f"aten_op_kernels_and_delay.{file}.json")
        assert hta is not None
        mine = ours.filter(pl.col("rank") == rank).select(cols)
        assert sorted(mine.rows()) == sorted(hta.select(cols).rows())
    mixed = reference(DATA / "epoch_ns", "aten_op_kernels_and_delay.rank1.json")
    assert mixed is not None
    ours_1 = ours.filter(pl.col("rank") == 1)
    assert mixed["occurrence_count"].sum() > ours_1["occurrence_count"].sum()
    assert mixed.height > ours_1.height  # sequences no rank launched


@pytest.mark.shared
def test_idle_rows_by_stream_where_hta_keeps_first_appearance(shared: Path) -> None:
    """DEVIATION (both modes): idle rows come by rank, stream, category; HTA's in the order
    its streams first appear. The rows themselves are HTA's (the parity walk)."""
    hta = reference(shared / "oracle" / "trace_filter", "idle_time_breakdown.json")
    assert hta is not None
    ours = report(SHARED / "traces" / "trace_filter", True)["idle_time_breakdown"]
    keys = ["rank", "stream", "idle_category"]
    hta_streams = hta["stream"].unique(maintain_order=True).to_list()
    assert hta_streams != sorted(hta_streams)
    assert ours.select(keys).rows() == sorted(ours.select(keys).rows())
    assert sorted(ours.select(keys).rows()) == sorted(hta.select(keys).rows())


def test_temporal_percentages_null_where_the_kernel_time_is_zero() -> None:
    """DEVIATION (both modes): a rank whose only kernel lasts 0 us has kernel time 0; HTA
    divides by it (NaN, which JSON cannot hold); its percentages are null here."""
    k = {"cat": "kernel", "kind": "kernel", "stream": 7, "name": "k", "correlation": 1}
    events = _events([k | {"ts": 1_000, "dur": 0}])
    for compat in (True, False):
        (row,) = temporal_breakdown({0: events}, hta_compat=compat).to_dicts()
        assert row["kernel_time(us)"] == 0
        assert row["idle_time_pctg"] is None and row["compute_time_pctg"] is None


def test_memset_of_another_name_is_a_memset_by_default() -> None:
    """DEVIATION (default mode): a GPU memset whose name does not start with `Memset` (a
    vendor's spelling) counts as "Memset" in the memory bandwidth tables; HTA goes by the
    name only, for which it is not a memory op at all (no row)."""
    us = 1000
    fill = {"cat": "gpu_memset", "kind": "memset", "stream": 7, "name": "fill_buffer"}
    events = _events([fill | {"ts": 10 * us, "dur": 2 * us, "bytes": 4_000_000, "correlation": 1}])
    ours = mem.memory_bw_summary({0: events})
    assert ours.select("name", "count", "mean").rows() == [("Memset", 1.0, 2000.0)]
    assert mem.memory_bw_summary({0: events}, hta_compat=True).is_empty()


def test_diff_iterations_come_from_cpu_side_steps_only() -> None:
    """DEVIATION (both modes): HTA's TraceDiff puts a CPU event into any event named
    ProfilerStep#N that spans its start, a GPU-side `gpu_user_annotation` too, whose span is
    on the GPU's clock; here only CPU-side steps do, so an op after its step is in none."""
    gpu_step = _step(1, 25 * US, 40 * US) | {
        "cat": "gpu_user_annotation",
        "kind": "gpu_annotation",
        "stream": 7,
        "pid": 0,
        "tid": 7,
    }
    rows = [_step(1, 0, 20 * US), gpu_step, *_launched("aten::mm", 1 * US, 5 * US, "gemm", 30, 1)]
    rows.append({"name": "aten::add", "ts": 30 * US, "dur": 2 * US})  # after step 1 ended
    view = diff.with_iterations(diff.side_view(_frame(rows)))
    iteration = dict(view.select("name", "iteration").rows())
    assert iteration["aten::mm"] == 1 and iteration["gemm"] == 1
    assert iteration["aten::add"] is None  # HTA: 1, inside the GPU-side annotation
    assert "aten::add" not in diff.iteration_events(_frame(rows), iteration=1)["name"].to_list()


def test_diff_overlapping_steps_take_the_latest_start() -> None:
    """DEVIATION (both modes): where two steps overlap, an event starting in both belongs to
    the one that started last; HTA takes the last in file order that contains it (here step
    1, written after step 2)."""
    rows = [_step(2, 30 * US, 50 * US), _step(1, 0, 50 * US)]
    rows.append({"name": "aten::add", "ts": 40 * US, "dur": 2 * US})
    view = diff.with_iterations(diff.side_view(_frame(rows)))
    assert dict(view.select("name", "iteration").rows())["aten::add"] == 2  # HTA: 1


def test_rocm_aten_ops_answer_where_hta_raises(tmp_path: Path) -> None:
    """DEVIATION: HTA 0.5's aten-op analysis raises on ROCm traces (KeyError 'thread_id', in
    its meta.json), on the generator's ROCm shape as on the MI300 trace; compat answers with
    HTA's launch names, none of them hip's: no row. The default mode knows the hip launches:
    every op that launched a kernel is listed, with every kernel of the trace (copies are not
    kernel launches, for HTA either)."""
    for case in ("rocm", "tracelens_mi300_ddp_resnet18"):
        assert "KeyError: 'thread_id'" in (DATA / case / "meta.json").read_text()
    write_shape("rocm", tmp_path)
    assert report(tmp_path, True)["aten_op_kernels_and_delay"].is_empty()
    got = report(tmp_path, False)["aten_op_kernels_and_delay"]
    assert set(got["aten_op_name"]) == {"aten::op_kernel", "aten::op_comm"}
    kernels = report(tmp_path, False)["kernel_duration_stats"].filter(pl.col("cat") == "kernel")
    assert got["occurrence_count"].sum() == kernels["count"].sum()


@pytest.mark.parametrize("shape", ["epoch_ns", "rocm", "mtia"])
def test_stragglers_answer_where_hta_raises(shape: str, tmp_path: Path) -> None:
    """DEVIATION (both modes): HTA 0.5's get_potential_stragglers raises on every generated
    shape (it wants one dominant `ncclKernel`, and fails on `ncclDevKernel_*`, on one rank,
    and on MTIA's: its meta.json); here each rank gets its scores and the list is HTA's
    type, a list of ranks (none stands out in these jobs)."""
    meta = (DATA / shape / "meta.json").read_text()
    assert '"potential_stragglers": "' in meta  # HTA's error
    write_shape(shape, tmp_path)
    for compat in (True, False):
        got = report(tmp_path, compat)
        ranks = sorted(set(got["iterations"]["rank"].to_list()))
        assert got["straggler_scores"]["rank"].to_list() == ranks
        assert got["potential_stragglers"]["rank"].to_list() == []
