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

#: Profiles whose host self times still differ from the plugin's (a few us on some ops): its
#: tree is rebuilt around backward roots and same-start events differently. Open follow-up;
#: strict, so a fix shows up as an unexpected pass.
NOT_YET = (
    "critical_path",
    "distributed_info_unavailable",
    "negative_queue_length_values_check",
    "param_dlrm_8rank",
    "rank_unavailable",
    "trace_diff",
    "trace_filter",
)


def _cases(file: str) -> list[object]:
    return [
        pytest.param(p, marks=pytest.mark.xfail(strict=True, reason="host self: tree rebuild"))
        if p.split("/")[0] in NOT_YET
        else p
        for p in profiles_with(file)
    ]


def mismatches(got: pl.DataFrame, want: list[dict[str, object]], keys: list[str]) -> list[str]:
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
        if (row["tc_eligible"] == "Yes") != mine["tc_eligible"]:
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
