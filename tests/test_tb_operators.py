"""Operator view against the TensorBoard plugin's operation tables (../shared/oracle-tb)."""

from __future__ import annotations

import polars as pl
import pytest

from hta_tui.analysis.operators import rank_operator_stacks, rank_operator_stats
from tests.tb_oracle import answer, close, events, profiles_with

pytestmark = pytest.mark.shared

BY_NAME = "operation_table.Operation.json"
BY_SHAPE = "operation_table.OperationAndInputShape.json"
COLUMNS = (
    "calls",
    "host_self_duration",
    "host_total_duration",
    "device_self_duration",
    "device_total_duration",
    "tc_self_ratio",
    "tc_total_ratio",
)


def _cases(file: str) -> list[str]:
    return profiles_with(file)


def mismatches(
    got: pl.DataFrame, want: list[dict[str, object]], keys: list[str], *, eligible: bool = True
) -> list[str]:
    ours = {tuple(r[k] for k in keys): r for r in got.iter_rows(named=True)}
    bad = [f"{len(ours)} rows, plugin {len(want)}"] if len(ours) != len(want) else []
    for row in want:
        key = tuple(row[k] for k in keys)
        mine = ours.get(key)
        if mine is None:
            bad.append(f"missing {key}")
            continue
        for col in COLUMNS:
            if col in row:
                value = mine.get(col, mine.get(f"{col} (us)"))
                # the plugin rounds durations to whole us
                if not close(float(value), float(row[col]), abs_=1.01):  # type: ignore[arg-type]
                    bad.append(f"{key} {col}: {value} vs {row[col]}")
        if eligible and (row["tc_eligible"] == "Yes") != mine["tc_eligible"]:
            bad.append(f"{key} tc_eligible")
    return bad


@pytest.mark.parametrize("profile", _cases(BY_NAME))
def test_compat_matches_plugin_operator_table(profile: str) -> None:
    got = rank_operator_stats(events(profile), tb_compat=True)
    assert not mismatches(got, answer(profile, BY_NAME)["data"], ["name"])


@pytest.mark.parametrize("profile", _cases(BY_SHAPE))
def test_compat_matches_plugin_by_input_shape(profile: str) -> None:
    got = rank_operator_stats(events(profile), by_input_shape=True, tb_compat=True)
    assert not mismatches(got, answer(profile, BY_SHAPE)["data"], ["name", "input_shape"])


CPU_ONLY = [
    p
    for p in profiles_with(BY_NAME)
    if p.split("/")[0] in ("cpu_only", "pytorch_cpu_ddp_gloo_4", "pytorch_cpu_vit_memory")
]


@pytest.mark.parametrize("profile", CPU_ONLY)
def test_default_mode_matches_on_cpu_only_traces(profile: str) -> None:
    """Every figure but eligibility, which the modern list extends (next test)."""
    got = rank_operator_stats(events(profile))
    assert "device_self_duration" not in answer(profile, BY_NAME)["data"][0]
    assert not mismatches(got, answer(profile, BY_NAME)["data"], ["name"], eligible=False)


def test_modern_list_marks_pytorch2_backward_ops_eligible() -> None:
    """PyTorch 2 names backward nodes `...Backward0`; the plugin's list has the old names, so a
    convolution's backward is not tensor-core eligible there. The modern list knows it."""
    profile = "pytorch_cpu_vit_memory/worker0/1"
    plugin = {r["name"]: r["tc_eligible"] for r in answer(profile, BY_NAME)["data"]}
    ours = dict(rank_operator_stats(events(profile)).select("name", "tc_eligible").iter_rows())
    assert plugin["ConvolutionBackward0"] == "No"
    assert ours["ConvolutionBackward0"] is True
    assert ours["aten::convolution"] is True and plugin["aten::convolution"] == "Yes"


def test_deviation_runtime_belongs_to_the_op_around_it() -> None:
    """DEVIATION: the plugin links runtime calls to ops by External id, which this PyTorch 2
    trace sets to the call's correlation: every op shows device time 0. Here the innermost op
    around each cudaLaunchKernel on its thread launched that kernel (found below from the raw
    events), so it has the kernel's time as device self time."""
    profile = "execution_trace/benchmark_simple_add_trace/default"
    ev = events(profile)
    plugin = answer(profile, BY_NAME)["data"]
    assert all(row["device_self_duration"] == 0 for row in plugin)
    ops = ev.filter(pl.col("kind") == "cpu_op").to_dicts()
    want: dict[str, float] = {}
    for kernel in ev.filter(pl.col("kind") == "kernel").to_dicts():
        [launch] = ev.filter(
            (pl.col("kind") == "runtime") & (pl.col("correlation") == kernel["correlation"])
        ).to_dicts()
        around = [
            o
            for o in ops
            if o["tid"] == launch["tid"]
            and o["ts"] <= launch["ts"]
            and launch["ts"] + launch["dur"] <= o["ts"] + o["dur"]
        ]
        inner = min(around, key=lambda o: o["dur"])
        want[inner["name"]] = want.get(inner["name"], 0.0) + kernel["dur"] / 1000
    got = rank_operator_stats(ev)
    assert want
    for name, device_us in want.items():
        row = got.filter(pl.col("name") == name).row(0, named=True)
        assert close(row["device_self_duration (us)"], device_us)


def test_call_stacks_grouped_per_stack() -> None:
    """`Call stack` args (with_stack on PyTorch < 2) give one row per operator and stack."""
    ev = pl.DataFrame(
        {
            "name": ["aten::mm", "aten::mm", "aten::mm"],
            "cat": ["cpu_op"] * 3,
            "kind": ["cpu_op"] * 3,
            "tid": [1, 1, 1],
            "ts": [0, 100, 200],
            "dur": [10, 20, 40],
            "external_id": [1, 2, 3],
            "correlation": [None, None, None],
            "input_dims": ["[[2,3],[3,4]]"] * 3,
            "call_stack": ["a.py(1): f", "a.py(1): f", "b.py(2): g"],
        },
        schema_overrides={"correlation": pl.Int64},
    )
    stacks = rank_operator_stacks(ev).sort("call_stack")
    assert stacks["call_stack"].to_list() == ["a.py(1): f", "b.py(2): g"]
    assert stacks["calls"].to_list() == [2, 1]
    assert stacks["host_total_duration (us)"].to_list() == [0.03, 0.04]
    table = rank_operator_stats(ev, by_input_shape=True)
    assert table["input_shape"].to_list() == ["[[2, 3], [3, 4]]"]
    assert table["has_call_stack"].to_list() == [True]
