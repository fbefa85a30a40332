"""`report --hta-compat` equals HTA 0.5, analysis by analysis (tests/hta_parity.py).

Three sources of HTA's answers: the shared oracle (../shared/oracle, every case it has), HTA
run by tools/make_hta_test_data.sh on the generator's parity shapes (tests/data/hta/<shape>:
epoch-microsecond ns timestamps, ROCm runtime with text streams and GPU-side steps, MTIA
device ops), and on the shared ROCm trace HTA's oracle does not cover.
"""

from __future__ import annotations

import fnmatch
import json
from pathlib import Path

import polars as pl
import pytest

from hta_tui.analysis import hta_view as hv
from hta_tui.synth.shapes import SHAPES, write_shape
from tests.conftest import SHARED
from tests.hta_parity import CHECKS, FILE_CHECKS, mismatches, report, trace_set
from tests.test_analysis_oracle import METAS

DATA = Path(__file__).parent / "data" / "hta"


def _shared_pairs() -> list[tuple[str, str]]:
    return [
        (case, analysis)
        for case in METAS
        for analysis, (needs, _) in CHECKS.items()
        if (SHARED / "oracle" / case / needs).is_file()
    ]


#: Rows that differ from HTA on purpose, each with the named test that shows why.
KNOWN: dict[tuple[str, str], tuple[pl.Expr, str]] = {
    ("trace_diff/test", "memory_bw_summary"): (
        (pl.col("rank") == 1) & (pl.col("name") == "Memcpy DtoD"),
        "HTA's unstable sort: test_analysis_counters.py::test_memory_bw_htas_tie_residue",
    ),
    ("negative_queue_length_values_check", "frequent_cuda_kernel_sequences"): (
        pl.col("pattern").str.starts_with("aten::mm|"),
        "HTA's stack loses an op: test_analysis_sequences.py::"
        "test_sequences_count_every_backward_pass_where_hta_loses_its_stack",
    ),
}


@pytest.mark.shared
@pytest.mark.parametrize(("case", "analysis"), _shared_pairs())
def test_report_hta_compat_equals_hta_on_shared_oracle(case: str, analysis: str) -> None:
    bad = mismatches(analysis, SHARED / "traces" / case, SHARED / "oracle" / case)
    if (case, analysis) in KNOWN:
        rows, _why = KNOWN[(case, analysis)]
        assert bad is not None and bad.filter(rows).height == 1  # the known row differs ...
        bad = bad.filter(~rows)  # ... and nothing else
    assert bad is None or bad.is_empty(), f"{case} {analysis}:\n{bad}"


@pytest.mark.shared
def test_every_oracle_file_is_checked(shared: Path) -> None:
    """The walk above covers every case of the oracle that HTA loaded and every file of it
    (TraceDiff's under diff/: tests/test_diff.py); only a case HTA could not load (not a
    trace) has no check."""
    root = shared / "oracle"
    cases = {str(m.parent.relative_to(root)) for m in root.rglob("meta.json")}
    diff_cases = {c for c in cases if c.startswith("diff/")}
    not_loaded = {
        c
        for c in cases - diff_cases
        if not json.loads((root / c / "meta.json").read_text()).get("loaded")
    }
    assert cases - diff_cases - not_loaded == set(METAS)
    assert not_loaded == {"memory_analysis"}
    pairs = set(_shared_pairs())
    for case in METAS:
        for file in (root / case).glob("*.json"):
            check = next(
                (c for pattern, c in FILE_CHECKS.items() if fnmatch.fnmatch(file.name, pattern)),
                None,
            )
            assert check is not None, f"{case}/{file.name}: no check reads it"
            assert (case, check) in pairs, (case, file.name)
        steps = json.loads((root / case / "profiler_steps.json").read_text())
        read = {"profiler_steps", "iterations_per_rank", "trace_duration_per_rank"}
        assert set(steps) <= read, (case, set(steps) - read)


@pytest.fixture(scope="module")
def shapes(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("shapes")
    for name in SHAPES:
        write_shape(name, root / name)
    return root


@pytest.mark.parametrize("analysis", list(CHECKS))
@pytest.mark.parametrize("shape", list(SHAPES))
def test_report_hta_compat_equals_hta_on_generated_shapes(
    shapes: Path, shape: str, analysis: str
) -> None:
    bad = mismatches(analysis, shapes / shape, DATA / shape)
    assert bad is None or bad.is_empty(), f"{shape} {analysis}:\n{bad}"


# --- the causes, one by one -------------------------------------------------------------------


def test_epoch_ns_shape_rounds_ends_from_float64_like_hta(shapes: Path) -> None:
    """Cause 1: at ~1.7e15 us a float64 resolves 0.25 us, so HTA's `ts + dur` is already on
    that grid when it floors the end. The shape has events whose end floors differently from
    the exact sum, and compat follows HTA's float64 (the parity test above checks the
    numbers)."""
    events = trace_set(shapes / "epoch_ns").frames()[0]
    exact_floor = (pl.col("ts") + pl.col("dur")) // 1000
    f64_floor = (hv.f64_us(pl.col("ts")) + hv.f64_us(pl.col("dur"))).floor().cast(pl.Int64)
    differ = events.select((exact_floor != f64_floor).sum()).item()
    assert differ > 0
    view = hv.with_times(events, hta_compat=True)
    assert (view["end"] == events.select(f64_floor * 1000).to_series()).all()


def test_rocm_runtime_calls_have_no_stream_and_kernels_stay(shapes: Path) -> None:
    """Cause 2: hip calls carry `"stream": "0x0"`; HTA reads -1 (no stream). Read as stream
    0, every launch became GPU work and the step filter dropped every kernel."""
    events = trace_set(shapes / "rocm").frames()[0]
    runtime = events.filter(pl.col("kind") == "runtime")
    assert runtime.height > 0 and runtime["stream"].null_count() == runtime.height
    for compat in (True, False):
        (row,) = report(shapes / "rocm", compat)["temporal_breakdown"].to_dicts()
        assert row["kernel_time(us)"] > 0 and row["compute_time(us)"] > 0


ROCM_BREAKDOWNS = ["temporal_breakdown", "idle_time_breakdown", "gpu_kernel_breakdown"]


@pytest.mark.parametrize("analysis", ROCM_BREAKDOWNS)
def test_rocm_default_mode_within_a_tenth_of_a_percent(shapes: Path, analysis: str) -> None:
    """Issue 17: `report --json` (the default mode) on a ROCm trace gives HTA's temporal, idle
    and kernel breakdowns within 0.1%: HTA's figures on exact times (its ns rounding off,
    HTA_DISABLE_NS_ROUNDING=1), since the default mode keeps ns on purpose."""
    bad = mismatches(analysis, shapes / "rocm", DATA / "rocm" / "exact", hta_compat=False)
    assert bad is None or bad.is_empty(), bad


def _union_us(events: pl.DataFrame) -> float:
    """Length of the union of [ts, ts + dur), straight from the raw events (us)."""
    total, end = 0, None
    for ts, dur in sorted(events.select("ts", "dur").rows()):
        if end is None or ts > end:
            total, end = total + dur, ts + dur
        elif ts + dur > end:
            total, end = total + ts + dur - end, ts + dur
    return total / 1000


def test_kernel_types_default_mode_is_the_exact_union_where_hta_truncates(
    shared: Path,
) -> None:
    """DEVIATION (default mode): the kernel-type table is the exact union of each type's
    kernels. HTA truncates every segment of its sweep to whole microseconds (`astype(int)`),
    so even with its rounding off it reports 0.34% less COMPUTATION on the MI300 trace; with
    its rounding on (compat, equal to HTA) 0.66% less."""
    path = SHARED / "traces" / MI300
    events = trace_set(path).frames()[0]
    kernels = events.filter((pl.col("cat") == "kernel") & ~pl.col("name").str.starts_with("Memcpy"))
    ours = report(path, False)["gpu_kernel_type_breakdown"]
    assert ours["kernel_type"].to_list() == ["COMPUTATION", "MEMORY"]  # no overlap rows
    assert ours["sum"][0] == pytest.approx(_union_us(kernels), abs=1e-6)
    exact = json.loads(
        (DATA / MI300 / "exact" / "gpu_kernel_breakdown.kernel_type.json").read_text()
    )
    rounded = json.loads((DATA / MI300 / "gpu_kernel_breakdown.kernel_type.json").read_text())
    assert exact["data"][0][:2] == ["COMPUTATION", 357677]
    assert rounded["data"][0][:2] == ["COMPUTATION", 356545]
    assert report(path, True)["gpu_kernel_type_breakdown"]["sum"][0] == 356545
    assert ours["sum"][0] > exact["data"][0][1] > rounded["data"][0][1]


def test_mtia_device_ops_are_kernels_and_copies(shapes: Path) -> None:
    """Cause 3: MTIA's `mtia_ccp_events` are device ops (kernels, or copies named `dma_*`), so
    the default mode's queue and launch tables are not empty; they hold HTA's streams and
    launches."""
    events = trace_set(shapes / "mtia").frames()[0]
    device = events.filter(pl.col("cat") == "mtia_ccp_events")
    dma = pl.col("name").str.starts_with("dma")
    assert device.filter(dma)["kind"].unique().to_list() == ["memcpy"]
    assert device.filter(~dma)["kind"].unique().to_list() == ["kernel"]
    default = report(shapes / "mtia", False)
    hta = report(shapes / "mtia", True)
    assert (
        default["queue_length_summary"]["stream"].to_list()
        == hta["queue_length_summary"]["stream"].to_list()
    )
    assert default["cuda_kernel_launch_stats"].height >= hta["cuda_kernel_launch_stats"].height > 0


def test_mtia_first_event_launch_is_partner_missing_in_the_queue(shapes: Path) -> None:
    """Point 4: the MTIA shape starts with a device op. HTA keeps a launch in the queue only
    when its op's event index is > 0, so that pair is left out there (compat: the same
    counts as HTA, see the parity test); the default mode counts it."""
    events = trace_set(shapes / "mtia").frames()[0]
    first = events.row(0, named=True)
    assert first["cat"] == "mtia_ccp_events"
    stream = pl.col("stream") == first["stream"]
    hta = report(shapes / "mtia", True)["queue_length_summary"].filter(stream)
    default = report(shapes / "mtia", False)["queue_length_summary"].filter(stream)
    assert default["count"].item() == hta["count"].item() + 2  # its +1 and its -1


def test_zero_length_kernel_type_rows_like_hta(shapes: Path) -> None:
    """Point 4: HTA's rounding leaves sub-microsecond memsets of the ROCm shape zero (or less)
    long inside kernels, and HTA reports the combinations they touch as kernel-type rows of
    sum 0; compat does too, with HTA's integer sums. DEVIATION (default mode): exact float
    sums, and no combination that lasts no time."""
    types = report(shapes / "rocm", True)["gpu_kernel_type_breakdown"]
    assert types.schema["sum"] == pl.Int64
    assert types.filter(pl.col("sum") == 0).height > 0
    default = report(shapes / "rocm", False)["gpu_kernel_type_breakdown"]
    assert default.schema["sum"] == pl.Float64 and (default["sum"] > 0).all()


def test_gpu_side_profiler_steps_are_not_extra_steps(shapes: Path) -> None:
    """Point 4 / issue 17: the ROCm shape writes each ProfilerStep on the CPU and the GPU.
    DEVIATION: HTA's iterations list step 1 twice (CPU and GPU rows); ours once, the CPU
    row, with HTA's times (see the parity test's profiler_steps check)."""
    hta = json.loads((DATA / "rocm" / "profiler_steps.json").read_text())
    assert [r["iter"] for r in hta["iterations"]].count(1) == 2
    its = report(shapes / "rocm", True)["iterations"]
    assert its["iter"].to_list() == sorted(set(its["iter"].to_list()))


def test_rocm_kernel_sequences_in_the_default_mode(shapes: Path) -> None:
    """DEVIATION (default mode): HTA's call graph links only kernels on streams > 0, so the
    ROCm shape's kernels (streams 0 and 3) give HTA no ProfilerStep pattern at all (its file
    is empty; compat agrees, see the parity test). The default mode links every stream: one
    pattern per step, each holding every kernel the step launched on both streams."""
    hta = json.loads((DATA / "rocm" / "frequent_cuda_kernel_sequences.json").read_text())
    assert hta["data"] == []
    settings = {"operator_name": "ProfilerStep", "min_pattern_len": "3"}
    got = report(shapes / "rocm", False, settings)["frequent_cuda_kernel_sequences"]
    events = trace_set(shapes / "rocm").frames()[0]
    device = events.filter(pl.col("kind").is_in(["kernel", "memcpy", "memset"]))
    first_step = got.filter(pl.col("pattern").str.starts_with("ProfilerStep#1|"))
    kernels = first_step["pattern"].item().split("|")[1:]
    assert set(kernels) <= set(device["name"].to_list())
    assert {0, 3} <= set(device["stream"].to_list())
    assert len(kernels) == 24  # the shape's ops_per_step: every op launched one


# --- the shared ROCm trace (no HTA oracle: HTA's answers kept in tests/data/hta) ---------------

MI300 = "tracelens_mi300_ddp_resnet18"


#: every analysis HTA answered on it (its sequences raised), in compat mode; the breakdowns
#: in the default mode too
MI300_CHECKS = [
    *((a, True) for a, (needs, _) in CHECKS.items() if (DATA / MI300 / needs).is_file()),
    *((a, False) for a in ROCM_BREAKDOWNS),
]


@pytest.mark.shared
@pytest.mark.parametrize(("analysis", "compat"), MI300_CHECKS)
def test_shared_rocm_trace_equals_hta(analysis: str, compat: bool) -> None:
    """Issue 17: the MI300 ROCm trace's analyses are HTA's: in compat mode exactly, each one
    HTA answers; the temporal, idle and kernel breakdowns in the default mode within 0.1% of
    HTA on exact times (its rounding off). Not the default mode's kernel-type table, where
    HTA truncates its segments
    (`test_kernel_types_default_mode_is_the_exact_union_where_hta_truncates`)."""
    ref = DATA / MI300 if compat else DATA / MI300 / "exact"
    bad = mismatches(analysis, SHARED / "traces" / MI300, ref, hta_compat=compat)
    assert bad is None or bad.is_empty(), bad


# --- smaller deviations, on hand-made events ---------------------------------------------------


def test_idle_default_mode_counts_every_spelling_of_a_kernel() -> None:
    """DEVIATION (default mode): HTA's idle breakdown looks at a fixed list of categories
    (kernel, gpu_memcpy, gpu_memset, mtia_ccp_events, legacy spellings); the default mode
    takes any event of kind kernel / memcpy / memset, so an XPU `xpu_kernel` counts there."""
    from hta_tui.analysis.idle import idle_time_breakdown
    from tests.test_analysis_oracle import _events

    k = {"cat": "xpu_kernel", "kind": "kernel", "stream": 3, "name": "gemm"}
    events = _events([k | {"ts": t * 100_000, "dur": 50_000, "correlation": t} for t in range(3)])
    default, _ = idle_time_breakdown({0: events})
    compat, _ = idle_time_breakdown({0: events}, hta_compat=True)
    assert default["idle_time"].sum() == pytest.approx(100.0)  # two 50 us gaps
    assert compat.is_empty()


def test_unlaunched_kernel_has_no_launch_start() -> None:
    """DEVIATION (both modes): HTA points a kernel without a CPU-side partner at event index 0
    (`min(correlation, 0)`) and reads that event's timestamp as its launch; we leave it
    null. The shared traces never show it (the step filter removes such kernels first)."""
    from tests.test_analysis_oracle import _events

    events = _events(
        [
            {"ts": 0, "dur": 5_000, "name": "aten::mm"},
            {
                "ts": 10_000,
                "dur": 3_000,
                "name": "cudaLaunchKernel",
                "cat": "cuda_runtime",
                "kind": "runtime",
                "correlation": 1,
            },
            {
                "ts": 20_000,
                "dur": 9_000,
                "name": "gemm",
                "cat": "kernel",
                "kind": "kernel",
                "stream": 7,
                "correlation": 1,
            },
            {
                "ts": 40_000,
                "dur": 9_000,
                "name": "orphan",
                "cat": "kernel",
                "kind": "kernel",
                "stream": 7,
                "correlation": 2,
            },
        ]
    )
    view = hv.hta_view({0: events})[0]
    launched = hv.gpu_events(hv.launch_start(view))
    starts = dict(launched.select("name", "launch_start").rows())
    assert starts == {"gemm": 10_000, "orphan": None}


def test_runtime_calls_never_have_a_stream(tmp_path: Path) -> None:
    """DEVIATION (both modes): a runtime or driver call runs on the CPU whatever its args say.
    HTA reads ROCm's `"stream": "0x0"` as no stream (-1) but an integer one as a stream, and
    would count such a call as GPU work; the kernel keeps its stream."""
    from hta_tui.trace.parse import parse_file

    launch = {"ph": "X", "cat": "cuda_runtime", "pid": 1, "tid": 1, "dur": 5}
    kernel = {"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": 7, "dur": 9}
    events = [
        launch | {"name": "cudaLaunchKernel", "ts": 10, "args": {"stream": 7, "correlation": 1}},
        launch | {"name": "hipLaunchKernel", "ts": 12, "args": {"stream": "0x0", "correlation": 2}},
        launch | {"name": "cuLaunchKernel", "ts": 14, "cat": "cuda_driver", "args": {"stream": 3}},
        kernel | {"ts": 20, "args": {"stream": 7, "correlation": 1}},
    ]
    path = tmp_path / "t.json"
    path.write_text(json.dumps({"traceEvents": events}))
    got = parse_file(path).frames["events"].select("name", "stream").rows()
    assert got == [
        ("cudaLaunchKernel", None),
        ("hipLaunchKernel", None),
        ("cuLaunchKernel", None),
        ("k", 7),
    ]


def test_f64_us_is_the_double_a_json_parser_reads() -> None:
    """Cause 1's building block: integer ns -> the float64 that HTA's JSON parse holds for
    the decimal microseconds in the file (Python's float() of the same text), at epoch scale
    (0.25 us resolution, ties included) and at smaller ones."""
    import random

    rnd = random.Random(7)
    values = [rnd.randrange(10**18, 2 * 10**18) for _ in range(2000)]
    values += [1_700_000_000_000_000_125, 1_700_000_000_000_000_375, 999, 0, 1_305_516_305_009_771]
    got = pl.select(hv.f64_us(pl.Series(values, dtype=pl.Int64))).to_series().to_list()
    assert got == [float(f"{v // 1000}.{v % 1000:03d}") for v in values]
