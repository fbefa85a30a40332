"""Trace diff against HTA 0.5's `TraceDiff` (../shared/oracle/diff) and on hand-made traces.

Oracle: every `compare_traces*.json` and `ops_diff*.json` of both diff folders, in both modes:
same names in HTA's row order, counts exactly, durations within 0.1% (and exactly with
`hta_compat=True`). The two default-mode deviations (exact nanoseconds, CPU ops with a stream
arg) do not occur in those traces; each has a named hand-made test below with both numbers.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import polars as pl
import pytest

from hta_tui.analysis import diff
from hta_tui.analysis.kernels import kernel_duration_stats
from hta_tui.analysis.temporal import temporal_breakdown
from hta_tui.trace.schema import EVENTS_SCHEMA, empty
from tests.conftest import SHARED, oracle_frame
from tests.test_analysis_oracle import parsed

REL = 1e-3
COUNTS = ["Control_counts", "Test_counts", "diff_counts"]
DURATIONS = ["Control_total_duration", "Test_total_duration", "diff_duration"]
COLUMNS = [
    "name",
    "Control_counts",
    "Control_total_duration",
    "Test_counts",
    "Test_total_duration",
    "diff_counts",
    "diff_duration",
    "counts_change_categories",
]

#: folder -> (control file, test file), under ../shared/traces/<folder>
CASES = {
    "trace_diff": ("control/control.json.gz", "test/test.json.gz"),
    "trace_compare": ("base/base.json.gz", "test/test.json.gz"),
}
#: oracle file suffix -> compare_traces kwargs (meta.json `kwargs`)
VARIANTS = {
    "": {},
    ".cpu": {"device_type": "CPU"},
    ".gpu": {"device_type": "GPU"},
    ".short_name": {"use_short_name": True},
}


def sides(case: str) -> tuple[pl.DataFrame, pl.DataFrame]:
    folder = SHARED / "traces" / case
    a, b = CASES[case]
    return parsed(folder / a).frames["events"], parsed(folder / b).frames["events"]


def hta_frame(case: str, file: str) -> pl.DataFrame:
    frame = oracle_frame(SHARED / "oracle" / "diff" / case / file)
    assert frame is not None
    if "short_name" in frame.columns:  # HTA's index is named after the grouping column
        frame = frame.rename({"short_name": "name"})
    return frame.select(COLUMNS)


def assert_matches_hta(got: pl.DataFrame, want: pl.DataFrame, *, exact: bool) -> None:
    assert got.columns == COLUMNS
    assert got["name"].to_list() == want["name"].to_list()  # same names, HTA's row order
    for col in COUNTS:
        assert got[col].to_list() == [int(v) for v in want[col]], col
    assert got["counts_change_categories"].to_list() == want["counts_change_categories"].to_list()
    for col in DURATIONS:
        a, b = got[col], want[col].cast(pl.Float64)
        off = (a - b).abs() if exact else (a - b).abs() - REL * b.abs() - 1e-9
        assert off.max() <= 0 if len(off) else True, col


# --- HTA's oracle -----------------------------------------------------------------------------


@pytest.mark.shared
def test_meta_kwargs_are_the_variants_tested(shared: Path) -> None:
    for case in CASES:
        meta = json.loads((shared / "oracle" / "diff" / case / "meta.json").read_text())
        for api, spec in meta["apis"].items():
            suffix = api.removeprefix("compare_traces").removeprefix("ops_diff")
            kwargs = {k: v.removeprefix("DeviceType.") for k, v in spec["kwargs"].items()}
            want = {k: str(v) if isinstance(v, bool) else v for k, v in VARIANTS[suffix].items()}
            assert kwargs == want, api


@pytest.mark.shared
@pytest.mark.parametrize("case", list(CASES))
@pytest.mark.parametrize("variant", list(VARIANTS))
@pytest.mark.parametrize("compat", [True, False], ids=["hta_compat", "exact"])
def test_compare_traces_matches_hta(shared: Path, case: str, variant: str, compat: bool) -> None:
    control, test = sides(case)
    got = diff.compare_traces(control, test, hta_compat=compat, **VARIANTS[variant])
    assert_matches_hta(got, hta_frame(case, f"compare_traces{variant}.json"), exact=compat)


@pytest.mark.shared
@pytest.mark.parametrize("case", list(CASES))
@pytest.mark.parametrize("variant", ["", ".gpu"])
@pytest.mark.parametrize("compat", [True, False], ids=["hta_compat", "exact"])
def test_ops_diff_matches_hta(shared: Path, case: str, variant: str, compat: bool) -> None:
    control, test = sides(case)
    want = json.loads((shared / "oracle" / "diff" / case / f"ops_diff{variant}.json").read_text())
    got = diff.ops_diff(control, test, hta_compat=compat, **VARIANTS[variant])
    assert list(got) == list(diff.CATEGORIES) == list(want)
    assert got == want  # same names, same order


#: HTA 0.5 run by hand on the trace_diff traces with explicit iterations (not in the oracle):
#: rows, column sums (Control_counts, Control_total_duration, Test_counts,
#: Test_total_duration) and how many rows per change category.
HTA_BY_HAND = {
    "control 1011 vs test [1012, 1013]": (
        {"control_iteration": 1011, "test_iteration": [1012, 1013]},
        434,
        (12686, 444911.0, 21686, 1239906.0),
        {"+": 259, "-": 170, "=": 5},
    ),
    "GPU, control 1014 (last step) vs test 1010": (
        {"control_iteration": 1014, "test_iteration": 1010, "device_type": "GPU"},
        201,
        (1575, 87620.0, 2503, 151422.0),
        {"=": 84, "-": 75, "+": 42},
    ),
}


@pytest.mark.shared
@pytest.mark.parametrize("label", list(HTA_BY_HAND))
def test_explicit_iterations_match_hta_run_by_hand(shared: Path, label: str) -> None:
    """Iteration lists are unions; the last step is compared like any other: TraceDiff's
    LabeledTrace only parses (no ProfilerStep filter), so its 1575 GPU events are all there."""
    kwargs, rows, sums, categories = HTA_BY_HAND[label]
    control, test = sides("trace_diff")
    for compat in (True, False):
        got = diff.compare_traces(control, test, hta_compat=compat, **kwargs)
        assert got.height == rows
        assert got.select(COLUMNS[1:5]).sum().row(0) == sums
        assert dict(got["counts_change_categories"].value_counts().rows()) == categories


@pytest.mark.shared
def test_iterations_of_the_reference_trace(shared: Path) -> None:
    """HTA's add_iteration on control.json.gz: 1575 GPU events in every step; CPU events by
    time (HTA: 10526 in step 1009); the last step (1014) is left out of 'every complete'."""
    control, _ = sides("trace_diff")
    assert diff.step_numbers(control) == list(range(1009, 1015))
    assert diff.complete_iterations(control) == list(range(1009, 1014))
    every = diff.iteration_events(control, all_iterations=True)
    per = every.group_by("iteration").agg(pl.col("gpu").sum()).sort("iteration")
    assert per["iteration"].to_list() == list(range(1009, 1014))
    assert set(per["gpu"].to_list()) == {1575}
    first = diff.iteration_events(control)
    assert set(first["iteration"].to_list()) == {1009}
    assert (first.height - int(first["gpu"].sum()), int(first["gpu"].sum())) == (10526, 1575)


@pytest.mark.shared
def test_breakdown_diff_on_reference_traces(shared: Path) -> None:
    control, test = sides("trace_diff")
    out = diff.breakdown_diff(control, test)
    assert set(out) == {"temporal", "kernel_type", "kernels"}
    tb_c = temporal_breakdown({0: control}).row(0, named=True)
    tb_t = temporal_breakdown({0: test}).row(0, named=True)
    for metric, c, t, d in out["temporal"].iter_rows():
        assert (c, t) == (tb_c[metric], tb_t[metric])
        assert d == pytest.approx(t - c)
    kernels = out["kernels"]
    stats = kernel_duration_stats({0: control})
    assert kernels["control_count"].sum() == stats["count"].sum()
    assert (kernels["diff_count"] == kernels["test_count"] - kernels["control_count"]).all()
    assert (kernels["diff_sum"].abs().diff().drop_nulls() <= 1e-9).all()  # largest change first
    types = out["kernel_type"]
    assert types["control_percentage"].sum() == pytest.approx(100, abs=0.5)
    it = diff.breakdown_diff(control, test, iteration_only=True)["kernels"]
    assert it["control_count"].sum() == 1575
    # several steps on one side: all of them, none dropped as a "last step"
    two = diff.breakdown_diff(control, test, iteration_only=True, control_iteration=[1010, 1011])
    assert two["kernels"]["control_count"].sum() == 2 * 1575


@pytest.mark.shared
def test_kernel_diff_detail_on_reference_traces(shared: Path) -> None:
    control, test = sides("trace_diff")
    table = diff.compare_traces(control, test).filter(pl.col("name") == "aten::mm").row(0)
    detail = diff.kernel_diff_detail(control, test, "aten::mm")
    stats = detail["stats"]
    assert stats.select("count", "sum").rows() == [(table[1], table[2]), (table[3], table[4])]
    kernels = detail["kernels"]
    assert kernels.height > 0
    assert (kernels["diff_count"] == kernels["test_count"] - kernels["control_count"]).all()
    assert kernels["control_count"].min() >= 0


# --- hand-made traces -------------------------------------------------------------------------

US = 1000  # ns


def _frame(rows: list[dict[str, Any]]) -> pl.DataFrame:
    base = {"pid": 1, "tid": 1, "cat": "cpu_op", "kind": "cpu_op"}
    return pl.DataFrame(
        [base | {"idx": i} | r for i, r in enumerate(rows)], schema=EVENTS_SCHEMA
    ).sort("ts", maintain_order=True)


def _step(n: int, ts: int, dur: int) -> dict[str, Any]:
    return {"name": f"ProfilerStep#{n}", "ts": ts, "dur": dur, "cat": "user_annotation"} | {
        "kind": "annotation"
    }


def _launched(
    op: str, ts: int, dur: int, kernel: str, kdur: int, corr: int, dims: str | None = None
) -> list[dict[str, Any]]:
    """A cpu op launching one kernel; the kernel starts 2 us after the launch."""
    return [
        {"name": op, "ts": ts, "dur": dur, "external_id": corr, "input_dims": dims},
        {
            "name": "cudaLaunchKernel",
            "ts": ts + 1 * US,
            "dur": 1 * US,
            "cat": "cuda_runtime",
            "kind": "runtime",
            "correlation": corr,
            "external_id": corr,
        },
        {
            "name": kernel,
            "ts": ts + 3 * US,
            "dur": kdur,
            "cat": "kernel",
            "kind": "kernel",
            "stream": 7,
            "correlation": corr,
            "external_id": corr,
            "pid": 0,
            "tid": 7,
        },
    ]


def toy(mm_per_step: list[int], *, dims: str = "[[4, 8], [8, 16]]", first: int = 1) -> pl.DataFrame:
    """Steps of 100 us, step i with mm_per_step[i] aten::mm (10 us, kernel 'gemm' 5 us)."""
    rows: list[dict[str, Any]] = []
    corr = 1
    for i, n_mm in enumerate(mm_per_step):
        t0 = (i + 1) * 100 * US
        rows.append(_step(first + i, t0, 100 * US))
        for j in range(n_mm):
            rows += _launched(
                "aten::mm", t0 + (1 + 12 * j) * US, 10 * US, "gemm", 5 * US, corr, dims
            )
            corr += 1
    return _frame(rows)


def test_kernel_takes_the_iteration_of_its_launch() -> None:
    """A kernel that runs after its step ended still belongs to the step that launched it."""
    rows = [_step(1, 0, 20 * US), _step(2, 20 * US, 20 * US)]
    rows += _launched("aten::mm", 1 * US, 18 * US, "gemm", 30 * US, corr=5)  # kernel 4-34 us
    ev = _frame(rows)
    one = diff.iteration_events(ev, iteration=1)
    assert sorted(one["name"].to_list()) == sorted(
        ["ProfilerStep#1", "aten::mm", "cudaLaunchKernel", "gemm"]
    )
    assert diff.iteration_events(ev, iteration=2)["name"].to_list() == ["ProfilerStep#2"]


def test_default_iteration_is_the_first_step() -> None:
    got = diff.compare_traces(toy([1, 2, 3]), toy([3, 1, 1], first=7))
    mm = got.filter(pl.col("name") == "aten::mm").row(0, named=True)
    assert (mm["Control_counts"], mm["Test_counts"], mm["diff_counts"]) == (1, 3, 2)
    assert mm["counts_change_categories"] == "+"
    steps = got.filter(pl.col("name").str.starts_with("ProfilerStep"))
    # HTA's row order: the control's names, then the test-only ones
    assert steps["name"].to_list() == ["ProfilerStep#1", "ProfilerStep#7"]
    assert diff.ops_diff(toy([1, 2, 3]), toy([3, 1, 1], first=7))["deleted"] == ["ProfilerStep#1"]


def test_average_iterations() -> None:
    """Every complete step (all but the last), per step: control (1+2)/2, test (3+5)/2."""
    got = diff.compare_traces(toy([1, 2, 9]), toy([3, 5, 9]), average_iterations=True)
    gemm = got.filter(pl.col("name") == "gemm").row(0, named=True)
    assert gemm["Control_counts"] == 1.5 and gemm["Test_counts"] == 4.0
    assert gemm["Control_total_duration"] == 7.5 and gemm["Test_total_duration"] == 20.0
    assert gemm["diff_counts"] == 2.5 and gemm["diff_duration"] == 12.5
    assert got.schema["Control_counts"] == pl.Float64
    # a single step is complete on its own
    one = diff.compare_traces(toy([2]), toy([2]), average_iterations=True)
    assert one.filter(pl.col("name") == "gemm")["Control_counts"].to_list() == [2.0]


def test_match_shapes_splits_an_op_by_input_dims() -> None:
    control = toy([2], dims="[[4, 8], [8, 16]]")
    test = toy([2], dims="[[64, 8], [8, 16]]")
    plain = diff.compare_traces(control, test, device_type="CPU")
    assert plain.filter(pl.col("name") == "aten::mm")["counts_change_categories"].to_list() == ["="]
    shaped = diff.compare_traces(control, test, device_type="CPU", match_shapes=True)
    assert shaped.columns == ["name", "input_dims", *COLUMNS[1:]]
    mm = shaped.filter(pl.col("name") == "aten::mm")
    assert mm.select("input_dims", "Control_counts", "Test_counts").rows() == [
        ("[[4, 8], [8, 16]]", 2, 0),
        ("[[64, 8], [8, 16]]", 0, 2),
    ]
    # ops without recorded shapes still match each other (null == null)
    step = shaped.filter(pl.col("name") == "ProfilerStep#1")
    assert step.select("input_dims", "Control_counts", "Test_counts").rows() == [(None, 1, 1)]


def test_side_without_profiler_step_is_empty() -> None:
    """HTA raises ("doesn't have any iteration"); we compare an empty side."""
    no_steps = toy([2]).filter(~pl.col("name").str.starts_with("ProfilerStep"))
    got = diff.compare_traces(no_steps, toy([2]))
    assert got.columns == COLUMNS
    assert got["Control_counts"].sum() == 0 and got["Test_counts"].sum() > 0
    assert set(got["counts_change_categories"]) == {"+"}
    ops = diff.ops_diff(toy([2]), no_steps)
    assert ops["added"] == [] and len(ops["deleted"]) == got.height
    assert diff.iteration_events(no_steps).is_empty()
    assert diff.compare_traces(no_steps, no_steps).is_empty()
    # an iteration the side does not have: empty as well
    assert diff.iteration_events(toy([2]), iteration=42).is_empty()


def test_cpu_only_sides_and_empty_frames() -> None:
    cpu_only = toy([2]).filter(pl.col("stream").is_null())
    gpu = diff.compare_traces(cpu_only, cpu_only, device_type="GPU")
    assert gpu.is_empty() and gpu.columns == COLUMNS
    assert diff.ops_diff(cpu_only, cpu_only, device_type="GPU") == {k: [] for k in diff.CATEGORIES}
    out = diff.breakdown_diff(cpu_only, cpu_only)
    assert out["kernels"].is_empty() and out["kernel_type"].is_empty()
    assert out["temporal"]["control"].null_count() == out["temporal"].height
    detail = diff.kernel_diff_detail(cpu_only, cpu_only, "aten::mm")
    assert detail["stats"]["count"].to_list() == [2, 2] and detail["kernels"].is_empty()
    nothing = empty("events")
    assert diff.compare_traces(nothing, nothing).is_empty()
    assert diff.compare_traces(nothing, toy([1]), match_shapes=True)["Test_counts"].sum() == 4
    assert diff.breakdown_diff(nothing, nothing, iteration_only=True)["kernels"].is_empty()
    assert diff.kernel_diff_detail(nothing, nothing, "x")["stats"]["count"].to_list() == [0, 0]
    assert diff.iteration_events(nothing, all_iterations=True).is_empty()


def test_use_short_name_groups_template_variants() -> None:
    control = toy([1]).with_columns(
        pl.col("name").replace("gemm", "void gemm<float, 4>(float const*, int)")
    )
    test = toy([1]).with_columns(
        pl.col("name").replace("gemm", "void gemm<double, 8>(double const*, int)")
    )
    long = diff.compare_traces(control, test, device_type="GPU")
    assert long["counts_change_categories"].to_list() == ["-", "+"]
    short = diff.compare_traces(control, test, device_type="GPU", use_short_name=True)
    assert short.select("name", "diff_counts").rows() == [("gemm", 0)]
    # HTA's shorten_name, checked against hta.utils.utils.shorten_name by hand
    assert diff._shorten("Memcpy DtoD (Device -> Device)") == "Memcpy DtoD (Device -> Device)"
    assert diff._shorten("void at::native::f<4, g<int> >(int, char*)") == "at::native::f"
    assert diff._shorten("aten::mm") == "aten::mm"


def test_device_type_accepts_hta_enum_spelling() -> None:
    a = diff.compare_traces(toy([1]), toy([2]), device_type="DeviceType.CPU")
    b = diff.compare_traces(toy([1]), toy([2]), device_type="cpu")
    assert a.equals(b) and "gemm" not in a["name"].to_list()
    with pytest.raises(ValueError):
        diff.compare_traces(toy([1]), toy([2]), device_type="TPU")


def test_kernel_diff_detail_counts_kernels_of_nested_ops() -> None:
    """aten::linear launches nothing itself; the gemm of its nested aten::mm counts for it."""

    def side(kernel: str, n: int) -> pl.DataFrame:
        rows = [_step(1, 0, 200 * US), _step(2, 200 * US, 10 * US)]
        corr = 1
        for j in range(n):
            t = (1 + 20 * j) * US
            rows.append({"name": "aten::linear", "ts": t, "dur": 15 * US, "external_id": 100 + j})
            rows += _launched("aten::mm", t + 1 * US, 12 * US, kernel, 4 * US, corr)
            corr += 1
        # a launch on another thread during aten::linear is not its kernel
        rows += _launched("other", 2 * US, 5 * US, "unrelated", 1 * US, 99)
        rows[-3]["tid"] = rows[-2]["tid"] = 2
        return _frame(rows)

    detail = diff.kernel_diff_detail(side("gemm_a", 2), side("gemm_b", 3), "aten::linear")
    assert detail["stats"].select("side", "iterations", "count", "sum").rows() == [
        ("Control", 1, 2, 30.0),
        ("Test", 1, 3, 45.0),
    ]
    kernels = detail["kernels"].sort("name")
    assert kernels.select("name", "control_count", "test_count", "diff_count").rows() == [
        ("gemm_a", 2, 0, -2),
        ("gemm_b", 0, 3, 3),
    ]
    assert kernels["control_per_op"].to_list() == [1.0, 0.0]
    # a kernel: statistics only
    k = diff.kernel_diff_detail(side("gemm_a", 2), side("gemm_a", 3), "gemm_a")
    assert k["stats"]["count"].to_list() == [2, 3] and k["kernels"].is_empty()


# --- deliberate deviations in the default (exact) mode ------------------------------------------


def test_exact_mode_keeps_nanosecond_durations() -> None:
    """DEVIATION: with fractional-microsecond timestamps HTA rounds each event inward to whole
    microseconds (a 1.8 us kernel from 3.6 to 5.4 us becomes 4 -> 5 = 1 us); the default mode
    reports the 1.8 us the trace recorded."""
    rows = [_step(1, 0, 50 * US)]
    rows += _launched("aten::mm", 1 * US, 10 * US, "gemm", 1800, corr=1)
    ev = _frame(rows).with_columns(
        pl.when(pl.col("name") == "gemm").then(pl.col("ts") + 600).otherwise("ts").alias("ts")
    )
    exact = diff.compare_traces(ev, ev, device_type="GPU")
    hta = diff.compare_traces(ev, ev, device_type="GPU", hta_compat=True)
    assert exact["Control_total_duration"].to_list() == [1.8]
    assert hta["Control_total_duration"].to_list() == [1.0]


def test_exact_mode_counts_a_cpu_op_with_a_stream_arg_as_cpu() -> None:
    """DEVIATION: a Triton launch's cpu_op carries a `stream` arg, so HTA (`stream != -1`)
    lists it among GPU kernels and takes its iteration from a correlation it does not have
    (so HTA drops it from every iteration); the default mode keeps it a CPU op of its step."""
    rows = [_step(1, 0, 50 * US)]
    rows.append({"name": "triton_poi_fused_add_0", "ts": 2 * US, "dur": 9 * US, "stream": 7})
    ev = _frame(rows)
    exact_cpu = diff.compare_traces(ev, ev, device_type="CPU")
    assert "triton_poi_fused_add_0" in exact_cpu["name"].to_list()
    hta_all = diff.compare_traces(ev, ev, hta_compat=True)
    assert hta_all["name"].to_list() == ["ProfilerStep#1"]
