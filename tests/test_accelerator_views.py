"""Issue 17, point 1, in the analyses added since: ROCm GPU work (hip launches with `"0x0"`
stream labels, kernels on integer streams, GPU-side ProfilerSteps), and any accelerator's
(MTIA device ops, `dma_*` copies), is GPU work in the operators' device time, the kernel
views, the GPU metrics and their series, and the timeline. Expected figures are summed from
the trace's raw events, on the generator's ROCm and MTIA shapes and on the shared MI300
trace."""

from __future__ import annotations

import functools
import gzip
import json
from pathlib import Path

import polars as pl
import pytest

from hta_tui.analysis import gpu_metric_series, gpu_metrics, kernel_view, operators
from hta_tui.analysis.timeline_rows import build_timeline
from tests.hta_parity import trace_set
from tests.rocm_cases import NAMES, rocm_trace

GPU_CATS = ("kernel", "gpu_memcpy", "gpu_memset", "mtia_ccp_events")
#: kernels as written: CUDA / ROCm's category, or an MTIA device op other than a `dma_` copy
KERNELS = (pl.col("cat") == "kernel") | (
    (pl.col("cat") == "mtia_ccp_events") & ~pl.col("name").str.starts_with("dma")
)


@functools.cache
def _raw(path: Path) -> pl.DataFrame:
    """The file's complete events as written: cat, name, dur (us), args.device, arg keys."""
    (file,) = [p for p in path.iterdir() if ".json" in p.name]
    opener = gzip.open if file.name.endswith(".gz") else open
    with opener(file, "rt") as f:
        events = [e for e in json.load(f)["traceEvents"] if e.get("ph") == "X"]
    return pl.DataFrame(
        {
            "cat": [e.get("cat") for e in events],
            "name": [e.get("name") for e in events],
            "dur": [float(e.get("dur", 0)) for e in events],
            "device": [(e.get("args") or {}).get("device") for e in events],
            "arg_keys": [sorted(e.get("args") or {}) for e in events],
        },
        schema_overrides={"device": pl.Int64},
    )


@pytest.fixture(scope="module", params=[*NAMES, "mtia"])
def trace(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Path:
    return rocm_trace(request.param, tmp_path_factory)


def test_traces_are_what_they_say(trace: Path) -> None:
    """ROCm: what made ROCm traces show no GPU data (issue 18, cause 2); MTIA: device ops of
    MTIA's own category (cause 3)."""
    raw = _raw(trace)
    events = trace_set(trace).frames()[0]
    if trace.name == "mtia":
        assert raw.filter(pl.col("cat") == "mtia_ccp_events").height > 0
        assert raw.filter(pl.col("cat") == "kernel").is_empty()
        return
    assert raw.filter(pl.col("cat") == "kernel").height > 0
    assert raw.filter(pl.col("cat") == "gpu_user_annotation").height > 0
    assert events.filter(pl.col("name").str.starts_with("hip")).height > 0


def test_operator_device_time_is_every_gpu_event(trace: Path) -> None:
    """Every kernel, memcpy and memset (MTIA: device op) of these traces is launched inside an
    operator, so
    the operators' device self times add up to the raw GPU events' durations."""
    raw = _raw(trace).filter(pl.col("cat").is_in(GPU_CATS))
    ops = operators.operator_tables(trace_set(trace).frames())["name"]
    assert ops["device_self_duration (us)"].sum() == pytest.approx(raw["dur"].sum(), rel=1e-9)


def test_kernel_views_hold_every_kernel(trace: Path) -> None:
    raw = _raw(trace).filter(KERNELS)
    frames = trace_set(trace).frames()
    for table in (kernel_view.kernel_table(frames), kernel_view.kernel_op_table(frames)):
        assert table["calls"].sum() == raw.height
        assert table["total (us)"].sum() == pytest.approx(raw["dur"].sum(), rel=1e-9)


def test_gpu_metrics_of_an_accelerator(trace: Path) -> None:
    """The device is the kernels' `args.device`, busy some of the time; ROCm and MTIA kernels
    give no blocks per SM or occupancy, so those are unknown (null) in the summary and in every
    bucket of the series, never 0."""
    raw = _raw(trace).filter(KERNELS)
    assert not any({"blocks per SM", "est. achieved occupancy %"} & set(k) for k in raw["arg_keys"])
    frames = trace_set(trace).frames()
    summary = gpu_metrics.gpu_metrics(frames)
    assert summary["device"].to_list() == raw["device"].unique().to_list()
    (row,) = summary.to_dicts()
    assert 0 < row["gpu_utilization_pct"] <= 100
    assert row["est_sm_efficiency_pct"] is None and row["est_achieved_occupancy_pct"] is None
    series = gpu_metric_series.metric_series(frames)
    assert series["utilization_pct"].max() > 0
    assert series["sm_efficiency_pct"].null_count() == series.height
    assert series["occupancy_pct"].null_count() == series.height


def test_timeline_draws_every_gpu_event_on_its_stream(trace: Path) -> None:
    raw = _raw(trace).filter(pl.col("cat").is_in(GPU_CATS))
    timeline = build_timeline(trace_set(trace).frames())
    streams = [r for r in timeline.rows if r.key[1] == "gpu" and r.key[3] >= 0 and not r.counter]
    assert sum(len(r) for r in streams) == raw.height
    busy = sum(int((r.ends - r.starts).sum()) for r in streams) / 1000
    assert busy == pytest.approx(raw["dur"].sum(), abs=1e-3 * raw.height)
