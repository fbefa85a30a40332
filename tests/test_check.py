"""`hta-tui check`: the relative gates through the diff, the config, the verdict's exit codes
and the JUnit file CI dashboards read."""

from __future__ import annotations

from pathlib import Path

import polars as pl
import pytest

from hta_tui.analysis.baseline_gate import OPS_GATE, STEP_GATE, GateConfig, baseline_gates
from hta_tui.check import CheckConfig, ConfigError, load_config, parse_config
from hta_tui.session import open_session
from hta_tui.trace.cache import Cache


def _pair(root: Path, run: str, baseline: str, tmp_path: Path) -> tuple[pl.DataFrame, ...]:
    """(baseline events, run events, baseline rank, run rank): the smallest rank of each."""
    session = open_session(root / run, Cache(tmp_path / "c"), compare=root / baseline)
    run_set, base_set = session.trace_set, session.compare_set
    assert base_set is not None
    r, b = min(run_set.loaded()), min(base_set.loaded())
    return base_set.loaded()[b].events, run_set.loaded()[r].events, b, r


def _gate(gates: pl.DataFrame, gate: str) -> dict:
    return gates.filter(pl.col("id") == gate).row(0, named=True)


@pytest.mark.shared
def test_gates_on_trace_compare(shared: Path, tmp_path: Path) -> None:
    """The pair differs only in its second step (checked by hand in the raw files): the test
    adds All2All_Pooled_Req (311 us) and AddmmBackward0 (207 us) there, so per step (2
    steps) 155.5 and 103.5 us, both over the 100 us floor; CatBackward0 (11 us, 5.5 per
    step) is under it. Both sides' ProfilerSteps last 100,298 and 122,149 us: no step gate."""
    base, run, b, r = _pair(shared / "traces" / "trace_compare", "test", "base", tmp_path)
    gates, evidence = baseline_gates(base, run, control_rank=b, test_rank=r)
    ops = _gate(gates, OPS_GATE)
    assert ops["severity"] == "fail" and ops["value"] == 2
    assert ops["at_stake_us"] == pytest.approx(155.5 + 103.5)
    slower = evidence.filter(pl.col("id") == OPS_GATE)
    assert slower["event"].to_list() == ["All2All_Pooled_Req", "AddmmBackward0"]
    assert set(slower["view"]) == {"diff"} and slower["n"].to_list() == [0, 1]
    step = _gate(gates, STEP_GATE)
    assert (step["severity"], step["value"]) == ("ok", 0.0)
    # a floor above both: nothing fails; the baseline against the run: nothing got slower
    higher = baseline_gates(base, run, GateConfig(op_floor_us=200), control_rank=b)[0]
    assert _gate(higher, OPS_GATE)["severity"] == "ok"
    back = baseline_gates(run, base)[0]
    assert set(back["severity"]) == {"ok"}


@pytest.mark.shared
def test_gates_on_trace_diff(shared: Path, tmp_path: Path) -> None:
    """Control rank 3, test rank 1 (as `report --compare` pairs them). Their ProfilerSteps
    (host ranges, the raw files by hand): median 76,833.5 us in the control, 114,689.5 us in
    the test, +49.3%; cudaMemcpyAsync grows most, 12,840 -> 61,588.7 us per step (38 -> 802
    calls over the 6 steps). The other way round the step time fell: only ops fail."""
    base, run, b, r = _pair(shared / "traces" / "trace_diff", "test", "control", tmp_path)
    assert (b, r) == (3, 1)
    gates, evidence = baseline_gates(base, run, control_rank=b, test_rank=r)
    step = _gate(gates, STEP_GATE)
    assert step["severity"] == "fail"
    assert step["value"] == pytest.approx((114689.5 / 76833.5 - 1) * 100)
    assert step["at_stake_us"] == pytest.approx(114689.5 - 76833.5)
    assert "76,834 -> 114,690 us" in step["advice"] and "cudaMemcpyAsync" in step["advice"]
    ops = evidence.filter(pl.col("id") == OPS_GATE).sort("n")
    assert ops["event"][0] == "cudaMemcpyAsync"
    assert ops["label"][0] == "cudaMemcpyAsync: 12840.0 -> 61588.7 us/step (+380%)"
    assert (ops["rank"] == 1).all()
    # a 60% allowance passes the step time (49%), a 1 ms floor still fails
    loose = baseline_gates(base, run, GateConfig(step_pct=60), control_rank=b)[0]
    assert _gate(loose, STEP_GATE)["severity"] == "ok"
    back = baseline_gates(run, base)[0]
    assert _gate(back, STEP_GATE)["severity"] == "ok"
    assert _gate(back, STEP_GATE)["value"] == pytest.approx((76833.5 / 114689.5 - 1) * 100)


def test_gates_abstain_without_steps(tmp_path: Path) -> None:
    """A run without ProfilerStep has no step to compare: both gates abstain, saying so."""
    from tests.test_app_support import write_rank

    write_rank(tmp_path / "run", 0, steps=0)
    write_rank(tmp_path / "base", 0)
    base, run, _, _ = _pair(tmp_path, "run", "base", tmp_path)
    gates, evidence = baseline_gates(base, run)
    assert set(gates["severity"]) == {"abstain"} and evidence.is_empty()
    assert all("no ProfilerStep in the run" in reason for reason in gates["reason"])


def test_config_parsed_and_refused() -> None:
    doc = {
        "fail_on": ["fail", "warn"],
        "required": ["gpu.util.low"],
        "disabled": ["memory.growth"],
        "rules": {"gpu.util.low": {"warn": 60, "fail": 40}},
        "baseline": {"op_pct": 25, "step_floor_us": 500, "self_time": False},
    }
    config = parse_config(doc)
    assert config.fail_on == {"fail", "warn"} and config.required == ("gpu.util.low",)
    assert config.disabled == {"memory.growth"}
    assert config.thresholds == {"gpu.util.low": {"warn": 60.0, "fail": 40.0}}
    assert config.gates == GateConfig(op_pct=25, step_floor_us=500, self_time=False)
    assert parse_config({}) == CheckConfig()
    for bad, says in (
        ({"fail_on": ["ok"]}, "fail_on"),
        ({"rules": {"gpu.util.low": {"warm": 1}}}, "warm"),
        ({"rules": {"gpu.util.low": {"warn": "x"}}}, "rules.gpu.util.low.warn"),
        ({"baseline": {"op_pct": True}}, "baseline.op_pct"),
        ({"baseline": {"step": 1}}, "'step'"),
        ({"required": "gpu.util.low"}, "required"),
        ({"failon": []}, "failon"),
        ({"disabled": ["no.such"]}, "no.such"),
    ):
        with pytest.raises(ConfigError, match=says.replace(".", r"\.")):
            parse_config(bad, frozenset({"gpu.util.low", "memory.growth"}))


def test_config_file_errors_are_one_line(tmp_path: Path) -> None:
    bad = tmp_path / "bad.toml"
    bad.write_text("fail_on = [fail\n")
    with pytest.raises(ConfigError, match="not TOML") as info:
        load_config(bad)
    assert "\n" not in str(info.value)
    with pytest.raises(ConfigError, match=r"missing\.toml"):
        load_config(tmp_path / "missing.toml")
