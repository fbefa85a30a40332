"""Frequent CUDA kernel sequences and ATen-op kernels against HTA 0.5 (../shared/oracle).

HTA's frequent sequences are in `frequent_cuda_kernel_sequences.json`, with the operator and rank
in `.params.json`; `tried` there lists other operators HTA was asked for and how many patterns it
found (0 is an answer too). HTA has no oracle file for `get_aten_op_kernels_and_delay`: the
numbers in the ATen tests below come from running HTA 0.5 on the same traces.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import polars as pl
import pytest

from hta_tui.analysis.aten_ops import COLUMNS as ATEN_COLUMNS
from hta_tui.analysis.aten_ops import aten_op_kernels_and_delay
from hta_tui.analysis.hta_view import hta_view
from hta_tui.analysis.sequences import COLUMNS, call_graph, frequent_cuda_kernel_sequences
from hta_tui.trace.parse import parse_bytes
from hta_tui.trace.schema import EVENTS_SCHEMA
from tests import dialects
from tests.conftest import SHARED
from tests.test_analysis_oracle import METAS, REL, assert_same, cases_with, load_case, modes, oracle

FREQ = "frequent_cuda_kernel_sequences.json"
PARAMS = "frequent_cuda_kernel_sequences.params.json"
DURS = ["GPU kernel duration (us)", "CPU op duration (us)"]

#: (case, operator) where our patterns differ from HTA's on purpose; each has a named test below.
SEQUENCE_DEVIATIONS = {
    ("negative_queue_length_values_check", "aten::mm"): "HTA's stack loses an op: see below",
}


def _deviates(case: str) -> bool:
    return any(c == case for c, _ in SEQUENCE_DEVIATIONS)


def _params(case: str) -> dict[str, Any]:
    return json.loads((SHARED / "oracle" / case / PARAMS).read_text())


def _rank(case: str) -> int:
    params = _params(case)["params"]
    return int(params["rank"]) if params else min(int(r) for r in METAS[case]["hta_rank_map_as_is"])


# --- frequent CUDA kernel sequences vs HTA -----------------------------------------------------


@pytest.mark.shared
@pytest.mark.parametrize("case", [c for c in cases_with(FREQ) if not _deviates(c)])
def test_frequent_sequences_match_hta(case: str) -> None:
    """Same patterns in the same order, exact counts, durations within 0.1%."""
    params = _params(case)["params"]
    want = oracle(case, FREQ)
    for compat in modes(case):
        got = frequent_cuda_kernel_sequences(
            load_case(case),
            params["operator_name"],
            rank=params["rank"],
            min_pattern_len=params["min_pattern_len"],
            top_k=params["top_k"],
            hta_compat=compat,
        )
        assert got.columns == want.columns == list(COLUMNS)
        assert got["pattern"].to_list() == want["pattern"].to_list()
        tol = {"count": (0, 0)} | {c: (REL, 1e-6) for c in DURS}
        assert_same(got, want, ["pattern"], tol)


@pytest.mark.shared
@pytest.mark.parametrize("case", cases_with(PARAMS))
def test_frequent_sequences_pattern_counts_of_every_operator_tried(case: str) -> None:
    """Every operator HTA was asked for gives as many patterns as HTA found (often none: the
    shallowest matching ops launch fewer than 3 kernels)."""
    ranks = load_case(case)
    for tried in _params(case)["tried"]:
        if (case, tried["operator_name"]) in SEQUENCE_DEVIATIONS:
            continue
        for compat in modes(case):
            got = frequent_cuda_kernel_sequences(
                ranks, tried["operator_name"], rank=_rank(case), hta_compat=compat
            )
            assert got.height == tried["rows"], tried["operator_name"]


@pytest.mark.shared
@pytest.mark.parametrize("case", list(METAS))
def test_frequent_sequences_answer_on_every_trace(case: str) -> None:
    """HTA 0.5 raises on pandas 3 and on traces its call graph cannot take; we answer."""
    ranks = load_case(case)
    for op, rank in (("ProfilerStep", None), ("no such operator", max(ranks))):
        got = frequent_cuda_kernel_sequences(ranks, op, rank=rank, min_pattern_len=1)
        assert got.columns == list(COLUMNS)
        assert (got["count"] > 0).all()


#: More HTA 0.5 answers, from running its frequent sequences (with a pandas-3 fix for its
#: `np.unique` call) on other operators: (case, rank, operator, patterns, sum of counts,
#: sum of GPU kernel durations, sum of CPU op durations). They exercise the backward-thread
#: hanging (ProfilerStep, autograd::engine) and substring matches. HTA took 751 s for
#: ProfilerStep on trace_diff/control.
HTA_MORE = [
    ("trace_filter", 0, "ProfilerStep", 1, 1, 302241.0, 607312.0),
    ("trace_filter", 0, "Optimizer", 2, 2, 45572.0, 204216.0),
    ("trace_filter", 0, "autograd::engine", 11, 11, 40379.0, 12941.0),
    ("trace_filter", 0, "aten::", 0, 0, 0.0, 0.0),
    ("critical_path/alexnet", 0, "aten::conv2d", 5, 10, 6343.0, 11919366.0),
    ("critical_path/alexnet", 0, "aten::relu", 0, 0, 0.0, 0.0),
    ("negative_queue_length_values_check", 0, "Optimizer", 1, 4, 25628.0, 5509.0),
    ("negative_queue_length_values_check", 0, "aten::copy_", 0, 0, 0.0, 0.0),
    ("trace_diff/control", 3, "ProfilerStep", 5, 5, 413947.0, 383825.0),
    ("trace_diff/control", 3, "autograd::engine", 49, 680, 112786.0, 82879.0),
    ("trace_diff/control", 3, "Optimizer", 1, 5, 6376.0, 12748.0),
]


@pytest.mark.shared
@pytest.mark.parametrize(("case", "rank", "op", "rows", "count", "gpu", "cpu"), HTA_MORE)
def test_frequent_sequences_match_more_hta_runs(
    case: str, rank: int, op: str, rows: int, count: int, gpu: float, cpu: float
) -> None:
    for compat in modes(case):
        got = frequent_cuda_kernel_sequences(load_case(case), op, rank=rank, hta_compat=compat)
        assert (got.height, got["count"].sum()) == (rows, count)
        assert got[DURS[0]].sum() == pytest.approx(gpu, rel=REL)
        assert got[DURS[1]].sum() == pytest.approx(cpu, rel=REL)


def test_sequences_count_every_backward_pass_where_hta_loses_its_stack(shared: Path) -> None:
    """DEVIATION: on negative_queue_length_values_check HTA reports aten::mm's pattern once
    (46 us GPU, 95 us CPU); we report it 4 times, once per step.

    In step 550's backward pass, a 1 us `aten::item` ends at the very microsecond where a
    0-length `aten::_local_scalar_dense` sits and the next `aten::select` starts. HTA's end-point
    comparator is not transitive for that triple (zero-length before a closing end, an opening
    end before a zero-length one, a closing end before an opening one), its sort then orders
    the ends so that a pop takes the wrong event, and the `aten::item` stays on HTA's stack for
    the rest of the trace: every later backward op becomes its descendant, one level deeper.
    HTA keeps only the roots at the smallest depth, so the `aten::mm` of steps 551-553 drop out.
    All four steps run the same `aten::mm` with the same three kernels at the same place in the
    call tree (under their own `## backward ##`), so they are four occurrences."""
    case = "negative_queue_length_values_check"
    ranks = load_case(case)
    hta = oracle(case, FREQ).row(0, named=True)
    ours = frequent_cuda_kernel_sequences(ranks, "aten::mm", hta_compat=True)
    assert ours.height == 1
    row = ours.row(0, named=True)
    assert row["pattern"] == hta["pattern"]
    assert (hta["count"], row["count"]) == (1, 4)
    assert hta["GPU kernel duration (us)"] == 46.0 and hta["CPU op duration (us)"] == 95.0
    assert row["GPU kernel duration (us)"] > 3 * hta["GPU kernel duration (us)"]
    # the four roots: one per backward pass, all at the same depth, the first one HTA's
    view = hta_view(ranks, hta_compat=True, columns=("pid", "tid"))[0]
    graph = call_graph(view)
    mm = view.filter(pl.col("name") == "aten::mm").join(graph, on="idx").sort("start")
    assert mm["depth"].unique().to_list() == [4]
    assert mm["anchor"].n_unique() == 4  # four different "## backward ##" annotations
    first = mm.filter(pl.col("idx") == 13514)  # HTA's only root (index 13514, 95 us)
    assert first["dur"].item() == 95_000
    # the trigger: the aten::item whose end meets a zero-length op and a starting op
    item = view.filter(pl.col("idx") == 14423).row(0, named=True)
    at_end = view.filter((pl.col("start") == item["end"]) & (pl.col("tid") == item["tid"]))
    assert sorted(at_end["dur"].to_list())[0] == 0 and at_end["dur"].max() > 0


@pytest.mark.shared
def test_sequences_answer_where_hta_rounds_an_op_to_a_negative_duration(shared: Path) -> None:
    """DEVIATION (hta_compat): HTA rounds nccl_parser_config's ns timestamps inward, so some
    sub-microsecond CPU ops end before they start; HTA's end-point comparator then raises
    ("Unexpected case: ...") and HTA has no answer for any operator. We treat such an op as
    zero-length and answer."""
    case = "nccl_parser_config"
    errors = [
        api.get("error", "")
        for name, api in METAS[case]["apis"].items()
        if name.startswith("get_frequent_cuda_kernel_sequences")
    ]
    assert any(e.startswith("Unexpected case") for e in errors)
    ranks = load_case(case)
    view = hta_view(ranks, hta_compat=True)[0]
    assert view.filter(pl.col("stream").is_null() & (pl.col("end") < pl.col("start"))).height
    for compat in (True, False):
        got = frequent_cuda_kernel_sequences(ranks, "autograd::engine", hta_compat=compat)
        assert got.height >= 3 and got["count"].is_sorted(descending=True)


# --- frequent sequences on hand-made traces ---------------------------------------------------

US = 1000
RT = {"cat": "cuda_runtime", "kind": "runtime", "name": "cudaLaunchKernel"}


def _frame(rows: list[dict[str, Any]]) -> pl.DataFrame:
    base = {"pid": 1, "tid": 1, "cat": "cpu_op", "kind": "cpu_op"}
    data = [base | {"idx": i + 1} | r for i, r in enumerate(rows)]
    return pl.DataFrame(data, schema=EVENTS_SCHEMA)


def _op(name: str, ts: int, dur: int, **kw: Any) -> dict[str, Any]:
    return {"name": name, "ts": ts * US, "dur": dur * US} | kw


def _launches(op_ts: int, kernels: list[str], corr0: int, *, tid: int = 1) -> list[dict]:
    """Launches at op_ts+1, +2, ... and their kernels on stream 7, 10 us apart."""
    rows: list[dict[str, Any]] = []
    for i, k in enumerate(kernels):
        c = corr0 + i
        rows.append(_op("cudaLaunchKernel", op_ts + 1 + i, 1, correlation=c, tid=tid) | RT)
        gpu = {"cat": "kernel", "kind": "kernel", "stream": 7, "pid": 0, "tid": 7}
        rows.append(_op(k, 1000 + op_ts + 10 * i, 5, correlation=c) | gpu)
    return rows


def test_sequences_empty_without_kernels_or_operator() -> None:
    events = _frame([_op("aten::linear", 0, 10), _op("aten::addmm", 1, 5)])
    for op in ("aten::linear", "", "missing"):
        got = frequent_cuda_kernel_sequences({0: events}, op, min_pattern_len=0 if op else 3)
        assert got.columns == list(COLUMNS)
        if op != "aten::linear":
            assert got.is_empty()
    assert frequent_cuda_kernel_sequences({0: events}, "aten::linear").is_empty()
    # min_pattern_len 0 (HTA's `num_kernels >= 0`): a root without kernels is its own pattern
    none = frequent_cuda_kernel_sequences({0: events}, "aten::linear", min_pattern_len=0)
    assert none.rows() == [("aten::linear", 1, 0.0, 10.0)]


def test_sequences_take_the_rank_asked_for_or_the_smallest() -> None:
    rows = [_op("aten::linear", 0, 20), *_launches(0, ["a", "b", "c"], 100)]
    ranks = {5: _frame(rows), 7: _frame(rows[:1])}
    assert frequent_cuda_kernel_sequences(ranks, "linear")["count"].to_list() == [1]
    assert frequent_cuda_kernel_sequences(ranks, "linear", rank=5).height == 1
    assert frequent_cuda_kernel_sequences(ranks, "linear", rank=7).is_empty()
    assert frequent_cuda_kernel_sequences(ranks, "linear", rank=0).is_empty()  # not in the job
    assert frequent_cuda_kernel_sequences({}, "linear").is_empty()


def test_sequences_start_at_the_shallowest_match_and_order_kernels_by_start() -> None:
    """Nested matches (aten::linear > aten::linear_impl) count once, at the outer op; a match
    deeper elsewhere is not a root; kernels are listed by GPU start, not launch order."""
    rows = [
        _op("aten::linear", 0, 50),
        _op("aten::linear_impl", 0, 40),
        *_launches(0, ["gemm", "bias", "relu"], 100),
        _op("aten::linear", 100, 50),
        *_launches(100, ["gemm", "bias", "relu"], 200),
        _op("wrapper", 200, 100),
        _op("aten::linear", 210, 50),  # depth 1: not a root
        *_launches(210, ["x", "y", "z"], 300),
    ]
    rows[3]["ts"] = 1040 * US  # the first kernel ("gemm") of instance 1 now runs last
    got = frequent_cuda_kernel_sequences({0: _frame(rows)}, "aten::linear")
    assert got.rows() == [
        ("aten::linear|bias|relu|gemm", 1, 15.0, 50.0),
        ("aten::linear|gemm|bias|relu", 1, 15.0, 50.0),
    ]
    assert frequent_cuda_kernel_sequences({0: _frame(rows)}, "linear", min_pattern_len=4).is_empty()


def test_sequences_hang_the_backward_thread_under_the_main_one() -> None:
    """HTA moves the backward thread's top-level ops under the main thread's ProfilerStep, so an
    op at the top of the backward thread is as deep as the same op inside a step."""
    main = [
        _op("ProfilerStep#1", 0, 500, kind="annotation", cat="user_annotation"),
        _op("MyOp", 10, 50),
        *_launches(10, ["k1", "k2", "k3"], 100),
        _op("ProfilerStep#2", 500, 100, kind="annotation", cat="user_annotation"),
    ]
    bwd = [
        _op("autograd::engine::evaluate_function: MyOpBackward", 100, 80, tid=2),
        _op("MyOp", 300, 50, tid=2),
        *_launches(300, ["k1", "k2", "k3"], 200, tid=2),
    ]
    got = frequent_cuda_kernel_sequences({0: _frame(main + bwd)}, "MyOp")
    # both MyOp are at depth 1 (main: in the step; bwd: hung under it) and give one pattern
    assert got.rows() == [("MyOp|k1|k2|k3", 2, 30.0, 100.0)]
    graph = call_graph(hta_view({0: _frame(main + bwd)}, columns=("pid", "tid"))[0])
    assert graph.filter(pl.col("offset") > 0).height == 2 + 3  # bwd ops + launches moved down


def test_sequences_match_a_kernel_name_as_hta_does() -> None:
    """A GPU event whose name contains the operator is its own stack in HTA: pattern name|name."""
    rows = [_op("aten::linear", 0, 20), *_launches(0, ["gemm_a", "gemm_b", "c"], 100)]
    got = frequent_cuda_kernel_sequences({0: _frame(rows)}, "gemm", min_pattern_len=1)
    assert got.rows() == [("gemm_a|gemm_a", 1, 5.0, 5.0), ("gemm_b|gemm_b", 1, 5.0, 5.0)]


# --- ATen op kernels and delays ---------------------------------------------------------------

#: HTA 0.5 `get_aten_op_kernels_and_delay(ranks=[0])` on critical_path/alexnet (every row):
#: op, len(kernel_sequence), count, avg launch delay, avg runtime delay.
HTA_ALEXNET = [
    ("aten::clamp_min_", 567, 14, 9.357, 705.643),
    ("aten::add_", 350, 10, 18.3, 609.0),
    ("aten::cudnn_convolution", 472, 6, 643.167, 467.667),
    ("aten::addmm", 209, 6, 3650.5, 396.667),
    ("aten::max_pool2d_with_indices", 177, 6, 138929.333, 372.333),
    ("aten::native_dropout", 298, 4, 57.75, 738.75),
    ("aten::_adaptive_avg_pool2d", 128, 2, 41.5, 741.5),
    ("aten::cudnn_convolution", 138, 2, 3896893.5, 1527802.0),
    ("aten::cudnn_convolution", 554, 2, 529283.5, 30.0),
    ("aten::uniform_", 5123, 1, 94.0, 35.0),
]


def _aten_rows(df: pl.DataFrame) -> list[tuple]:
    return sorted(
        (
            r["aten_op_name"],
            len(r["kernel_sequence"]),
            r["occurrence_count"],
            r["avg_aten_op_launch_delay"],
            r["avg_runtime_delay"],
        )
        for r in df.iter_rows(named=True)
    )


@pytest.mark.shared
def test_aten_op_kernels_match_hta_on_alexnet() -> None:
    ranks = load_case("critical_path/alexnet")
    for compat in (True, False):
        got = aten_op_kernels_and_delay(ranks, hta_compat=compat)
        assert got.columns == list(ATEN_COLUMNS)
        assert _aten_rows(got) == sorted(HTA_ALEXNET)
        assert got["occurrence_count"].is_sorted(descending=True)


@pytest.mark.shared
def test_aten_op_kernels_match_hta_on_trace_filter_in_compat_mode() -> None:
    """HTA: 179 (op, sequence) rows, 487 op instances; e.g. aten::matmul, 2 x, 27 / 10449 us."""
    got = aten_op_kernels_and_delay(load_case("trace_filter"), rank=0, hta_compat=True)
    assert (got.height, got["occurrence_count"].sum()) == (179, 487)
    matmul = got.filter(pl.col("aten_op_name") == "aten::matmul").sort("occurrence_count")
    assert matmul.height == 6
    assert matmul.row(-1)[3:] == (2, 27.0, 10449.0)


@pytest.mark.shared
def test_aten_op_kernels_charge_the_inner_op_of_equal_starts_unlike_hta() -> None:
    """DEVIATION: `aten::matmul` and the `aten::mm` it calls often start in the same
    microsecond. HTA charges the launch to the first of them in the file, the outer matmul (6 of
    its 179 rows are matmul's); we charge the inner mm, which is the op that launched it: no
    matmul row is left and mm's rows gain those instances (179 -> 172 rows, 487 instances
    either way)."""
    ranks = load_case("trace_filter")
    hta_like = aten_op_kernels_and_delay(ranks, rank=0, hta_compat=True)
    ours = aten_op_kernels_and_delay(ranks, rank=0)
    assert (hta_like.height, ours.height) == (179, 172)
    assert hta_like["occurrence_count"].sum() == ours["occurrence_count"].sum() == 487
    assert ours.filter(pl.col("aten_op_name") == "aten::matmul").is_empty()
    count = pl.col("occurrence_count").sum()
    mm = pl.col("aten_op_name") == "aten::mm"
    assert ours.filter(mm).select(count).item() > hta_like.filter(mm).select(count).item()


def test_aten_op_kernels_use_the_launch_thread_by_default() -> None:
    """DEVIATION: HTA looks for the containing op on every thread; an op on another thread that
    overlaps the launch (and starts later) takes it there. With `hta_compat` we do the same."""
    rows = [
        _op("aten::linear", 0, 100),
        _op("aten::addmm", 10, 50),
        *_launches(10, ["gemm"], 100),
        _op("aten::empty", 5, 30, tid=2),  # another thread: starts later, still contains it
    ]
    events = {0: _frame(rows)}
    ours = aten_op_kernels_and_delay(events)
    assert ours.select("aten_op_name", "kernel_sequence", "occurrence_count").rows() == [
        ("aten::addmm", "gemm", 1)
    ]
    assert ours.select("avg_aten_op_launch_delay", "avg_runtime_delay").row(0) == (1.0, 999.0)
    hta = aten_op_kernels_and_delay(events, hta_compat=True)
    assert hta.select("aten_op_name", "avg_aten_op_launch_delay").rows() == [("aten::addmm", 1.0)]
    rows[-1]["ts"] = 10_500  # ns: now it starts after aten::addmm
    assert aten_op_kernels_and_delay({0: _frame(rows)}, hta_compat=True)[
        "aten_op_name"
    ].to_list() == ["aten::empty"]


def test_aten_op_kernel_sequence_and_first_delays() -> None:
    rows = [_op("aten::addmm", 0, 50), *_launches(0, ["gemm", "bias"], 100)]
    rows += [_op("aten::addmm", 100, 50), *_launches(100, ["gemm", "bias"], 200)]
    rows += [_op("aten::add", 300, 5), _op("cudaLaunchKernel", 301, 1, correlation=999) | RT]
    got = aten_op_kernels_and_delay({0: _frame(rows)})
    # the launch without a kernel is skipped (HTA raises on it)
    assert got.drop("rank").rows() == [("aten::addmm", "gemm -> bias", 2, 1.0, 999.0)]
    empty = aten_op_kernels_and_delay({0: _frame(rows[:1])})
    assert empty.is_empty() and empty.columns == list(ATEN_COLUMNS)
    assert aten_op_kernels_and_delay({0: _frame(rows)}, rank=3).is_empty()


def test_sequences_and_aten_ops_on_a_legacy_trace() -> None:
    """PyTorch 1.8 categories (Operator / Runtime / Kernel, "stream 7" tids), where HTA 0.5's
    call graph cannot be built."""
    events = parse_bytes(json.dumps(dialects.legacy()).encode()).frames["events"]
    got = frequent_cuda_kernel_sequences({0: events}, "aten::add", min_pattern_len=1)
    assert got.rows() == [("aten::add|void add_kernel<float>()", 1, 12.0, 30.0)]
    aten = aten_op_kernels_and_delay({0: events})
    assert aten.drop("rank").rows() == [("aten::add", "void add_kernel<float>()", 1, 5.0, 15.0)]
