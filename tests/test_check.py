"""`hta-tui check`: the relative gates through the diff, the config, the verdict's exit codes
and the JUnit file CI dashboards read."""

from __future__ import annotations

from pathlib import Path

import orjson
import polars as pl
import pytest

from hta_tui.analysis.baseline_gate import OPS_GATE, STEP_GATE, GateConfig, baseline_gates
from hta_tui.check import CheckConfig, ConfigError, load_config, parse_config
from hta_tui.session import open_session
from hta_tui.trace.cache import Cache
from tests.shared_sets import cases_cache


def _pair(root: Path, run: str, baseline: str, cache: Cache) -> tuple[pl.DataFrame, ...]:
    """(baseline events, run events, baseline rank, run rank): the smallest rank of each."""
    session = open_session(root / run, cache, compare=root / baseline)
    run_set, base_set = session.trace_set, session.compare_set
    assert base_set is not None
    r, b = min(run_set.loaded()), min(base_set.loaded())
    return base_set.loaded()[b].events, run_set.loaded()[r].events, b, r


def _gate(gates: pl.DataFrame, gate: str) -> dict:
    return gates.filter(pl.col("id") == gate).row(0, named=True)


@pytest.mark.shared
def test_gates_on_trace_compare(shared: Path) -> None:
    """The pair differs only in its second step (checked by hand in the raw files): the test
    adds All2All_Pooled_Req (311 us) and AddmmBackward0 (207 us) there, so per step (2
    steps) 155.5 and 103.5 us, both over the 100 us floor; CatBackward0 (11 us, 5.5 per
    step) is under it. Both sides' ProfilerSteps last 100,298 and 122,149 us: no step gate."""
    base, run, b, r = _pair(shared / "traces" / "trace_compare", "test", "base", cases_cache())
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
def test_gates_on_trace_diff(shared: Path) -> None:
    """Control rank 3, test rank 1 (as `report --compare` pairs them). Their ProfilerSteps
    (host ranges, the raw files by hand): median 76,833.5 us in the control, 114,689.5 us in
    the test, +49.3%; cudaMemcpyAsync grows most, 12,840 -> 61,588.7 us per step (38 -> 802
    calls over the 6 steps). The other way round the step time fell: only ops fail."""
    base, run, b, r = _pair(shared / "traces" / "trace_diff", "test", "control", cases_cache())
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
    base, run, _, _ = _pair(tmp_path, "run", "base", Cache(tmp_path / "c"))
    gates, evidence = baseline_gates(base, run)
    assert set(gates["severity"]) == {"abstain"} and evidence.is_empty()
    assert all("no ProfilerStep in the run" in reason for reason in gates["reason"])
    # a frame the diff cannot read: both gates abstain with the reason, nothing raises
    broken, _ = baseline_gates(pl.DataFrame({"name": ["ProfilerStep#1"]}), run)
    assert set(broken["severity"]) == {"abstain"}
    assert all(r.startswith("the diff failed: ") for r in broken["reason"])


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


# -- the command: exit codes, its lines, JSON and JUnit -----------------------------------------


def _check(capsys: pytest.CaptureFixture[str], *args: str | Path) -> tuple[int, str]:
    from hta_tui.cli import main

    code = main(["check", *map(str, args), "--no-cache"])
    return code, capsys.readouterr().out


def _only(tmp_path: Path, body: str, keep: tuple[str, ...]) -> Path:
    """A config turning off every rule but `keep` (rules added later cannot move the test)."""
    from hta_tui.analysis.findings import BY_ID

    off = sorted(set(BY_ID) - set(keep))
    path = tmp_path / "check.toml"
    path.write_text(f"disabled = {off!r}\n{body}".replace("'", '"'))
    return path


@pytest.fixture
def two_ranks(tmp_path: Path) -> Path:
    """Two ranks of the tests' trace: per 990 us step an all-reduce of 200 us that nothing
    overlaps (the GEMM ends before it starts), so 20.2% of the step is exposed
    communication: comm.exposed fails (> 20%)."""
    from tests.test_app_support import write_ranks

    write_ranks(tmp_path / "t", 2)
    return tmp_path / "t"


def test_check_fails_with_evidence_and_junit(
    two_ranks: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    import xml.etree.ElementTree as ET

    junit = tmp_path / "check.xml"
    config = _only(tmp_path, "", ("comm.exposed", "gpu.util.low"))  # rules added later
    code, out = _check(capsys, two_ranks, "--junit", junit, "--config", config)
    assert code == 1
    fails = [line for line in out.splitlines() if line.startswith("FAIL ")]
    assert len(fails) == 1 and fails[0].startswith("FAIL comm.exposed: ")
    assert "evidence: rank 0 all_reduce" in fails[0] and "20.2 (threshold 20)" in fails[0]
    assert out.splitlines()[-1].startswith("hta-tui check: FAIL (1 fail")
    # the JUnit schema's required structure (Ant's junit.xsd, which CI dashboards read)
    root = ET.parse(junit).getroot()
    assert root.tag == "testsuites"
    (suite,) = root.findall("testsuite")
    required = ("name", "tests", "failures", "errors", "time", "timestamp", "hostname")
    assert all(suite.get(a) for a in required)
    assert suite[0].tag == "properties" and suite[-2].tag == "system-out"
    assert suite[-1].tag == "system-err"
    cases = suite.findall("testcase")
    assert all(c.get("name") and c.get("classname") and c.get("time") for c in cases)
    assert int(suite.get("tests")) == len(cases) == int(root.get("tests"))
    failed = [c for c in cases if c.find("failure") is not None]
    assert [c.get("name") for c in failed] == ["comm.exposed"]
    assert int(suite.get("failures")) == 1 and suite.get("errors") == "0"
    failure = failed[0].find("failure")
    assert failure.get("type") == "fail" and failure.get("message") == fails[0]
    assert "rank 0 all_reduce" in failure.text
    skipped = [c.get("name") for c in cases if c.find("skipped") is not None]
    assert int(suite.get("skipped")) == len(skipped)
    assert {c.get("name") for c in cases} == {"comm.exposed", "gpu.util.low"}


def test_check_passes_under_its_config(
    two_ranks: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """comm.exposed's fail threshold moved to 25%: 20.2% crosses only its warn one (10%),
    which fails the job only when the config says warnings do."""
    config = _only(
        tmp_path, '[rules."comm.exposed"]\nfail = 25\n', ("comm.exposed", "gpu.util.low")
    )
    code, out = _check(capsys, two_ranks, "--config", config, "--json")
    assert code == 0
    doc = orjson.loads(out)
    assert (doc["verdict"], doc["exit"], doc["failing"]) == ("pass", 0, [])
    rows = {r["id"]: r for r in doc["findings"]}
    assert set(rows) == {"comm.exposed", "gpu.util.low"}
    assert (rows["comm.exposed"]["severity"], rows["comm.exposed"]["threshold"]) == ("warn", 10)
    assert rows["comm.exposed"]["evidence"][0]["rank"] == 0
    config.write_text('fail_on = ["fail", "warn"]\n' + config.read_text())
    assert _check(capsys, two_ranks, "--config", config)[0] == 1


def test_check_without_verdict(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Exit 2: nothing loaded; every rule the config requires abstained (a CPU-only trace
    has no GPU to be idle); a config that is not TOML."""
    from tests.test_app_support import write_rank

    (tmp_path / "empty").mkdir()
    code, out = _check(capsys, tmp_path / "empty")
    assert code == 2 and "NO VERDICT" in out
    (tmp_path / "bad").mkdir()
    (tmp_path / "bad" / "rank-0.trace.json").write_text("[1, 2]")
    code, out = _check(capsys, tmp_path / "bad")
    assert code == 2 and "note: rank-0.trace.json: not_trace: not a Kineto trace" in out
    write_rank(tmp_path / "cpu", 0, gpu=False)
    config = tmp_path / "need.toml"
    config.write_text('required = ["gpu.util.low"]\n')
    junit = tmp_path / "cpu.xml"
    code, out = _check(capsys, tmp_path / "cpu", "--config", config, "--junit", junit)
    assert code == 2
    assert "abstained gpu.util.low: no GPU kernels" in out
    import xml.etree.ElementTree as ET

    suite = ET.parse(junit).getroot().find("testsuite")
    assert suite.get("errors") == "1" and suite.find("testcase/error") is not None
    assert "gpu.util.low" in [c.get("name") for c in suite if c.find("skipped") is not None]
    config.write_text("required = [gpu\n")
    assert _check(capsys, tmp_path / "cpu", "--config", config)[0] == 2


@pytest.mark.shared
def test_check_baseline_on_trace_compare(
    shared: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The gate through the command: the ops the test added fail it (see
    test_gates_on_trace_compare), each with its evidence; against itself nothing is slower."""
    pair = shared / "traces" / "trace_compare"
    config = _only(tmp_path, "", ())
    code, out = _check(capsys, pair / "test", "--baseline", pair / "base", "--config", config)
    assert code == 1
    line = next(x for x in out.splitlines() if x.startswith("FAIL "))
    assert line.startswith("FAIL baseline.ops: ") and "All2All_Pooled_Req" in line
    code, out = _check(capsys, pair / "base", "--baseline", pair / "base", "--config", config)
    assert code == 0 and "PASS (2 ok)" in out
