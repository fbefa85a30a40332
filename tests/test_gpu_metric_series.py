"""The four GPU metrics per bucket (analysis/gpu_metric_series.py), on a trace whose kernels'
times, `blocks per SM`, occupancy and names were written by hand: expected values worked out
from those events; utilization also against the plugin's own counters."""

from __future__ import annotations

import io
import json
from pathlib import Path

import orjson
import polars as pl
import pytest

from hta_tui import TraceAnalysis
from hta_tui.analysis import gpu_metric_series
from hta_tui.report import run_report
from hta_tui.trace.cache import Cache
from hta_tui.trace.parse import parse_file
from tests.tb_oracle import answer, events, profiles_with

T0 = 1_700_000_000_000_000  # us


def _kernel(name: str, ts: int, dur: int, blocks: float, occ: float, corr: int) -> dict:
    return {
        "ph": "X", "cat": "kernel", "name": name, "pid": 0, "tid": 7, "ts": T0 + ts, "dur": dur,
        "args": {"device": 0, "stream": 7, "correlation": corr, "blocks per SM": blocks,
                 "est. achieved occupancy %": occ},
    }  # fmt: skip


def written(tmp_path: Path) -> Path:
    """A 1000 us profiler span (the plugin's buckets: 100 of 10 us); a tensor-core GEMM
    [0, 10) with 0.5 blocks/SM and 40% occupancy, an elementwise kernel [5, 15) with 2 blocks/SM
    and 80%."""
    trace = {
        "traceEvents": [
            {"ph": "X", "cat": "Trace", "name": "PyTorch Profiler (0)", "pid": 1, "tid": 1,
             "ts": T0, "dur": 1000},
            _kernel("sm90_xmma_gemm_bf16bf16_bf16f32", 0, 10, 0.5, 40.0, 1),
            _kernel("vectorized_elementwise_kernel", 5, 10, 2.0, 80.0, 2),
        ]
    }  # fmt: skip
    path = tmp_path / "rank0.json"
    path.write_text(json.dumps(trace))
    return path


def test_buckets_from_the_written_kernels(tmp_path: Path) -> None:
    ev = parse_file(written(tmp_path)).frames["events"]
    got = gpu_metric_series.metric_series({0: ev})
    assert got.height == 100 and got["since_start (us)"].to_list()[:3] == [0.0, 10.0, 20.0]
    first, second, third = got.head(3).iter_rows(named=True)
    # bucket [0, 10): both kernels; union 10 us; SM 0.5 for 5 us then min(2.5, 1) for 5 us
    assert first["utilization_pct"] == pytest.approx(100.0)
    assert first["sm_efficiency_pct"] == pytest.approx(75.0)
    assert first["occupancy_pct"] == pytest.approx((40 * 10 + 80 * 5) / 15)
    assert first["tc_pct"] == pytest.approx(100 * 10 / 15)
    # bucket [10, 15): the elementwise kernel alone
    assert second["utilization_pct"] == pytest.approx(50.0)
    assert second["sm_efficiency_pct"] == pytest.approx(50.0)
    assert second["occupancy_pct"] == pytest.approx(80.0)
    assert second["tc_pct"] == pytest.approx(0.0)
    # no kernel: nothing busy, no occupancy or tensor-core share to speak of
    assert third["utilization_pct"] == third["sm_efficiency_pct"] == 0.0
    assert third["occupancy_pct"] is None and third["tc_pct"] is None


def test_no_kernels_no_rows(tmp_path: Path) -> None:
    path = tmp_path / "cpu.json"
    path.write_text(
        json.dumps({"traceEvents": [{"ph": "X", "cat": "cpu_op", "name": "aten::add",
                                     "pid": 1, "tid": 1, "ts": T0, "dur": 5}]})
    )  # fmt: skip
    got = gpu_metric_series.metric_series({0: parse_file(path).frames["events"]})
    assert got.is_empty() and set(gpu_metric_series.COLUMNS) <= set(got.columns)


@pytest.mark.shared
@pytest.mark.parametrize("profile", profiles_with("trace_gpu_metrics.json"))
def test_utilization_is_the_plugins_counter(profile: str) -> None:
    """The plugin's `GPU n Utilization` counters (fraction per bucket; it adds a 1 and a 0 at
    the start as a chart baseline and a 0 at the end) x 100, bucket by bucket, within 0.1%
    (the plugin sums float us)."""
    counters = answer(profile, "trace_gpu_metrics.json")
    got = gpu_metric_series.rank_metric_series(events(profile), tb_compat=True)
    assert not got.is_empty()
    for device in got["device"].unique().to_list():
        util = [e for e in counters if e["name"] == f"GPU {device} Utilization"][2:-1]
        mine = got.filter(pl.col("device") == device)["utilization_pct"].to_list()
        assert len(mine) == len(util) > 0
        for value, event in zip(mine, util, strict=True):
            assert value == pytest.approx(
                100 * event["args"]["GPU Utilization"], rel=1e-3, abs=1e-7
            )


def test_report_and_api(tmp_path: Path) -> None:
    """`report --only gpu_metric_series` and `get_gpu_metric_series` give the written trace's
    buckets, per rank."""
    root = tmp_path / "t"
    root.mkdir()
    written(root)
    out = io.StringIO()
    cache = Cache(tmp_path / "c")
    rc = run_report(root, as_json=True, only=["gpu_metric_series"], out=out, cache=cache)
    assert rc == 0
    rows = orjson.loads(out.getvalue())["gpu_metric_series"]
    assert len(rows) == 100 and rows[0]["rank"] == 0
    assert rows[0]["sm_efficiency_pct"] == pytest.approx(75.0)
    api = TraceAnalysis(root, cache=cache).get_gpu_metric_series()
    assert api["tc_pct"][0] == pytest.approx(100 * 10 / 15)
