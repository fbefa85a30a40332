"""Issue 24, point 10: with `tb_compat` the operator tree keeps nn.Module frames as the plugin's
ModuleNodes. With activation checkpointing a backward op re-runs the forward's modules; their
Python time is the module's, not the op's host self time (a real trace: 5,469 us vs the
plugin's 3,444)."""

from __future__ import annotations

import json
from typing import Any

import polars as pl
import pytest

from hta_tui.analysis.operators import rank_operator_stats
from hta_tui.trace.parse import parse_bytes

BWD = "CheckpointFunctionBackward"


def _x(cat: str, name: str, ts: float, dur: float, **args: Any) -> dict[str, Any]:
    return {"ph": "X", "cat": cat, "name": name, "pid": 1, "tid": 1, "ts": ts, "dur": dur,
            "args": args}  # fmt: skip


def _checkpointed_step() -> bytes:
    """A backward op of 1000 us that re-runs a checkpointed Linear_0 (a 400 us module frame
    around a 300 us aten::linear) and calls an aten::mm of 100 us itself."""
    events = [
        _x("user_annotation", "ProfilerStep#1", 0, 2000),
        _x("cpu_op", f"autograd::engine::evaluate_function: {BWD}", 100, 1200),
        _x("cpu_op", BWD, 150, 1000),
        _x(
            "python_function",
            "torch/utils/checkpoint.py(100): recompute",
            200,
            500,
            **{"Python id": 1, "Python parent id": None},
        ),
        _x(
            "python_function",
            "nn.Module: Linear_0",
            210,
            400,
            **{"Python id": 2, "Python parent id": 1, "Python module id": 0},
        ),
        _x("cpu_op", "aten::linear", 250, 300),
        _x("cpu_op", "aten::mm", 800, 100),
    ]
    return json.dumps({"traceEvents": events}).encode()


def _self_us(tb_compat: bool) -> dict[str, float]:
    events = parse_bytes(_checkpointed_step()).frames["events"]
    table = rank_operator_stats(events, tb_compat=tb_compat)
    return dict(zip(table["name"], table["host_self_duration (us)"], strict=True))


def test_tb_compat_backward_op_excludes_module_time() -> None:
    got = _self_us(True)
    assert got[BWD] == 1000 - 400 - 100  # the module frame is a child, as in the plugin
    assert got["aten::linear"] == 300
    assert "nn.Module: Linear_0" not in got  # a node, never an operator


def test_default_mode_keeps_its_own_rule() -> None:
    """The default mode nests operators alone (its op tree is unchanged)."""
    assert _self_us(False)[BWD] == 1000 - 300 - 100


MI300 = "tracelens_mi300_ddp_resnet18/mi300_ddp_resnet18_train/default"
ROOT = "autograd::engine::evaluate_function: MseLossBackward0"


@pytest.mark.shared
def test_plugin_keeps_backward_groups_outside_modules_on_mi300() -> None:
    """Why the issue's 5,469 vs 3,444 us is not reproduced (op_tree's docstring): the
    plugin's source moves top-level backward roots under the module of their forward op and
    would drop a root whose forward op is in no top-level module. The one shared trace where
    that pass applies (top-level nn.Module frames and fwdbwd flows: the MI300 ResNet) has
    such a root, MSE loss's backward (its forward `aten::mse_loss` runs after ResNet_0
    returns), and the plugin's own Operator view still lists it: the served numbers keep
    every backward group, as the project does."""
    from tests.tb_oracle import answer, events

    ev = events(MI300)
    modules = ev.filter(pl.col("name").str.starts_with("nn.Module: ResNet_0"))
    loss = ev.filter(pl.col("name") == "aten::mse_loss")
    assert modules.height == loss.height == 5
    ends = (modules["ts"] + modules["dur"]).sort().to_list()
    assert all(t > e for t, e in zip(loss["ts"].sort(), ends, strict=True))  # outside ResNet_0
    want = {r["name"]: r for r in answer(MI300, "operation_table.Operation.json")["data"]}
    got = rank_operator_stats(ev, tb_compat=True)
    got = dict(zip(got["name"], got.iter_rows(named=True), strict=True))
    for name in (ROOT, "MseLossBackward0"):
        assert want[name]["calls"] == got[name]["calls"] == 5
        assert abs(want[name]["host_self_duration"] - got[name]["host_self_duration (us)"]) <= 1
