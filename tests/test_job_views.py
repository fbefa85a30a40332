"""The app's job-wide Operator and Kernel views (summed over ranks) against the plugin's
per-worker answers added up, and the overview's per-file step breakdown against the analysis
over the frames."""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path

import polars as pl
import pytest

from hta_tui.analysis import kernel_view, operators, step_breakdown, step_overview
from hta_tui.synth import write_trace_dir
from hta_tui.trace.cache import Cache
from hta_tui.trace.model import open_set
from tests.tb_oracle import PROFILES, answer, close, events


def _case(case: str, file: str) -> list[str]:
    return [p for p in PROFILES if p.startswith(case + "/") and (PROFILES[p][0] / file).is_file()]


@pytest.mark.shared
def test_cpu_job_operators_are_the_workers_summed() -> None:
    """4 CPU-only gloo ranks: per operator, calls and host self/total are the plugin's four
    workers' added (each rounded to the us by the plugin)."""
    profiles = _case("pytorch_cpu_ddp_gloo_4", "operation_table.Operation.json")
    if len(profiles) < 2:
        pytest.skip("no multi-worker operator oracle")
    want: dict[str, list[float]] = defaultdict(lambda: [0, 0.0, 0.0])
    for p in profiles:
        for row in answer(p, "operation_table.Operation.json")["data"]:
            w = want[row["name"]]
            w[0] += row["calls"]
            w[1] += row["host_self_duration"]
            w[2] += row["host_total_duration"]
    ranks = {i: events(p) for i, p in enumerate(profiles)}
    got = operators.job_operator_tables(ranks, tb_compat=True)["name"]
    assert got.height == len(want)
    slack = len(profiles)  # one rounded us per worker
    for row in got.iter_rows(named=True):
        calls, self_us, total_us = want[row["name"]]
        assert row["calls"] == calls, row["name"]
        assert close(row["host_self_duration (us)"], self_us, abs_=slack), row["name"]
        assert close(row["host_total_duration (us)"], total_us, abs_=slack), row["name"]


@pytest.mark.shared
def test_job_kernels_are_the_workers_summed() -> None:
    """8 DLRM ranks: per kernel, calls and total time are the plugin's eight workers' added,
    and the mean blocks per SM their duration-weighted mean (the plugin rounds to 2 dp)."""
    profiles = _case("param_dlrm_8rank", "kernel_table.Kernel.json")
    if len(profiles) < 2:
        pytest.skip("no multi-worker kernel oracle")
    calls: dict[str, int] = defaultdict(int)
    total: dict[str, float] = defaultdict(float)
    blocks: dict[str, float] = defaultdict(float)
    for p in profiles:
        doc = answer(p, "kernel_table.Kernel.json")["data"]
        names = [c["name"] for c in doc["columns"]]
        for values in doc["rows"]:
            row = dict(zip(names, values, strict=True))
            calls[row["Name"]] += row["Calls"]
            total[row["Name"]] += row["Total Duration (us)"]
            blocks[row["Name"]] += row.get("Mean Blocks Per SM", 0) * row["Total Duration (us)"]
    ranks = {i: events(p) for i, p in enumerate(profiles)}
    got = kernel_view.job_kernel_table(ranks, tb_compat=True)
    assert got.height == len(calls)
    for row in got.iter_rows(named=True):
        name = row["name"]
        assert row["calls"] == calls[name], name
        assert close(row["total (us)"], total[name], abs_=len(profiles)), name
        if total[name] > 0:
            assert close(row["mean_blocks_per_sm"], blocks[name] / total[name], abs_=0.01), name


def test_job_kernels_by_operator_count_every_kernel_once(tmp_path: Path) -> None:
    """By operator, every kernel the generator wrote is in exactly one row."""
    files = write_trace_dir(tmp_path / "t", ranks=2, steps=2, seed=3)
    ts = open_set(tmp_path / "t", Cache(tmp_path / "cache"))
    frames = ts.frames()
    assert len(frames) == len(files) == 2
    kernels = sum(ev.filter(pl.col("cat") == "kernel").height for ev in frames.values())
    got = kernel_view.job_kernel_table(frames, by_operator=True)
    assert int(got["calls"].sum()) == kernels > 0


def test_overview_step_table_is_the_breakdown_of_the_frames(tmp_path: Path) -> None:
    """The per-file memos (computed in the parser worker) concatenate to the analysis over
    the frames; the generator's three steps per rank, one left out as the plugin does."""
    write_trace_dir(tmp_path / "t", ranks=2, steps=3, seed=1)
    ts = open_set(tmp_path / "t", Cache(tmp_path / "cache"), after_parse=step_overview.precompute)
    got = step_overview.step_table(ts)
    want = step_breakdown.step_time_breakdown(ts.frames())
    assert got.height == want.height > 0
    assert got.sort("rank", "step").equals(want.sort("rank", "step"))
