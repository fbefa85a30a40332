"""Issue 28, points 1 and 2: every rule fires on a generated trace that has its problem, stays
quiet on one that has not, and abstains (with its reason) where its inputs are missing.

Traces (tiny, built once): "busy" is the generator's DDP job (two ranks, rank 1 slow,
DataLoader stalls); "solo" one rank of a larger model whose loader keeps up; "cpu" a rank
with its GPU events removed; "nosteps" a rank without ProfilerStep annotations; "graph" and
"graph_ok" a CUDA-graph replay with and without its kernels in the trace.
"""

from __future__ import annotations

import io
from collections.abc import Callable
from pathlib import Path
from typing import Any

import orjson
import polars as pl
import pytest

from hta_tui import api
from hta_tui.analysis import registry
from hta_tui.analysis.findings import FINDINGS_SCHEMA, RULES, RuleConfig
from hta_tui.api import TraceAnalysis
from hta_tui.report import run_report
from hta_tui.synth import make_trace, write_trace
from hta_tui.synth.graph_replay import make_graph_replay
from hta_tui.synth.tweaks import Tweaks
from hta_tui.trace.cache import Cache

GPU_CATS = ("kernel", "gpu_memcpy", "gpu_memset", "gpu_user_annotation", "cuda_runtime")


def _busy(d: Path) -> None:
    for r in range(2):
        trace = make_trace(r, world_size=2, steps=4, seed=1, slow=r == 1, kernels_per_step=15)
        write_trace(trace, d / f"rank-{r}.json")


def _solo(d: Path) -> None:
    fed = Tweaks(input_wait=0.02)
    write_trace(make_trace(0, world_size=1, steps=4, seed=1, tweaks=fed), d / "rank-0.json")


def _cpu(d: Path) -> None:
    trace = make_trace(0, world_size=1, steps=3, seed=2, kernels_per_step=15)
    trace["traceEvents"] = [e for e in trace["traceEvents"] if e.get("cat") not in GPU_CATS]
    write_trace(trace, d / "rank-0.json")


def _nosteps(d: Path) -> None:
    trace = make_trace(0, world_size=1, steps=2, seed=2, kernels_per_step=15)
    steps = [e for e in trace["traceEvents"] if str(e.get("name", "")).startswith("ProfilerStep")]
    trace["traceEvents"] = [e for e in trace["traceEvents"] if e not in steps]
    write_trace(trace, d / "rank-0.json")


def _graph(d: Path, with_kernels: bool) -> None:
    write_trace(make_graph_replay(with_kernels=with_kernels), d / "rank-0.json")


MAKERS: dict[str, Callable[[Path], None]] = {
    "busy": _busy,
    "solo": _solo,
    "cpu": _cpu,
    "nosteps": _nosteps,
    "graph": lambda d: _graph(d, False),
    "graph_ok": lambda d: _graph(d, True),
}


@pytest.fixture(scope="module")
def case_dir(tmp_path_factory: pytest.TempPathFactory) -> Callable[[str], Path]:
    """case -> its folder, written once."""
    dirs: dict[str, Path] = {}

    def get(case: str) -> Path:
        if case not in dirs:
            dirs[case] = tmp_path_factory.mktemp(case)
            MAKERS[case](dirs[case])
        return dirs[case]

    return get


@pytest.fixture(scope="module")
def found(case_dir: Callable[[str], Path]) -> Callable[[str], dict[str, Any]]:
    """case -> {rule id: its findings row, with its evidence rows under "evidence"}."""
    made: dict[str, dict[str, Any]] = {}

    def get(case: str) -> dict[str, Any]:
        if case not in made:
            ta = TraceAnalysis(case_dir(case), cache=False)
            tables = ta.tables("findings", "finding_evidence")
            made[case] = _by_id(tables["findings"], tables["finding_evidence"])
        return made[case]

    return get


def _by_id(findings: pl.DataFrame, evidence: pl.DataFrame) -> dict[str, Any]:
    out = {}
    for row in findings.iter_rows(named=True):
        row["evidence"] = evidence.filter(pl.col("id") == row["id"]).to_dicts()
        out[row["id"]] = row
    return out


def test_every_rule_has_one_row_and_the_frames_keep_the_contract(found: Any) -> None:
    assert registry.owner("finding_evidence").name == "findings"
    rows = found("busy")
    assert set(rows) == {r.id for r in RULES}
    made = registry.findings_tables({})
    f, e = made["findings"], made["finding_evidence"]
    assert f.schema == pl.Schema(FINDINGS_SCHEMA)
    assert e.columns[:3] == ["id", "n", "view"]
    # with nothing loaded every rule abstains, each with a reason
    assert set(f["severity"]) == {"abstain"}
    assert all(f["reason"].str.len_chars() > 0)


def test_findings_are_ordered_worst_first_then_by_time_at_stake(found: Any) -> None:
    rows = list(found("busy").values())
    order = ["fail", "warn", "info", "ok", "abstain"]
    keys = [(order.index(r["severity"]), -(r["at_stake_us"] or 0)) for r in rows]
    assert keys == sorted(keys)


def test_input_dataloader(found: Any) -> None:
    busy = found("busy")["input.dataloader"]
    # the generator's stalls: 1.5-5 ms in a fifth of the steps, 150-600 us otherwise
    assert busy["severity"] == "fail" and busy["value"] > 15
    assert busy["at_stake_us"] > 500 and 0 < busy["at_stake_pct"] <= 100
    assert "enumerate(DataLoader)" in busy["advice"] or "DataLoader" in busy["advice"]
    ev = busy["evidence"]
    assert ev and ev[0]["view"] == "step_time" and ev[0]["step"] is not None
    assert ev[0]["start_us"] is not None and ev[0]["end_us"] > ev[0]["start_us"]
    assert f"step {ev[0]['step']}" in busy["advice"]
    quiet = found("solo")["input.dataloader"]
    assert quiet["severity"] == "ok" and quiet["value"] < 2 and quiet["advice"] == ""
    none = found("nosteps")["input.dataloader"]
    assert none["severity"] == "abstain" and "no steps" in none["reason"]
    assert none["value"] is None


def test_gpu_util_low(found: Any) -> None:
    busy = found("busy")["gpu.util.low"]
    assert busy["severity"] in ("warn", "fail") and busy["value"] < 50
    assert busy["ranks"] in ("all", "0")
    assert "DataLoader" in busy["advice"]  # where the idle step goes, by the step breakdown
    assert {e["view"] for e in busy["evidence"]} == {"idle"}
    assert found("solo")["gpu.util.low"]["severity"] == "ok"
    cpu = found("cpu")["gpu.util.low"]
    assert cpu["severity"] == "abstain" and "CPU-only" in cpu["reason"]
    # a graph launch without its kernels: the GPU's busy time is unknown
    graph = found("graph")["gpu.util.low"]
    assert graph["severity"] == "abstain" and graph["reason"].startswith("data.quality")


def test_comm_exposed(found: Any) -> None:
    busy = found("busy")["comm.exposed"]
    assert busy["severity"] == "warn" and 10 < busy["value"] <= 20
    assert "all_reduce" in busy["advice"]
    assert busy["evidence"][0]["view"] == "distributed"
    assert busy["evidence"][0]["event"] in ("all_reduce", "broadcast")
    assert found("solo")["comm.exposed"]["severity"] == "ok"
    cpu = found("cpu")["comm.exposed"]
    assert cpu["severity"] == "abstain" and "CPU-only" in cpu["reason"]


def test_data_quality(found: Any) -> None:
    graph = found("graph")["data.quality"]
    assert graph["severity"] == "warn" and graph["value"] == 1
    assert "graph launches hold no kernels" in graph["advice"]
    assert graph["evidence"][0]["table"] == "kernel_attribution"
    ok = found("graph_ok")["data.quality"]
    assert ok["severity"] == "ok"
    assert found("graph_ok")["gpu.util.low"]["severity"] != "abstain"


def test_config_thresholds_and_rules_turned_off(case_dir: Any) -> None:
    config = RuleConfig(
        thresholds={"input.dataloader": (80, 90, 95)}, off=frozenset({"gpu.util.low"})
    )
    f = api.findings(case_dir("busy"), config=config)
    assert "gpu.util.low" not in f["id"].to_list()
    row = f.filter(pl.col("id") == "input.dataloader").row(0, named=True)
    assert row["severity"] == "ok" and row["threshold"] == 90


def test_report_json_nests_the_evidence_and_the_text_starts_with_the_findings(
    case_dir: Any, found: Any, tmp_path: Path
) -> None:
    out = io.StringIO()
    cache = Cache(tmp_path / "cache")
    assert run_report(case_dir("busy"), as_json=True, out=out, cache=cache, only=["findings"]) == 0
    doc = orjson.loads(out.getvalue())
    assert next(iter(doc)) == "findings"
    first = doc["findings"][0]
    assert first["id"] == "input.dataloader" and first["severity"] == "fail"
    assert first["evidence"] and first["evidence"][0]["view"] == "step_time"
    assert {"threshold", "at_stake_us", "at_stake_pct", "advice"} <= set(first)
    assert [f["id"] for f in doc["findings"]] == list(found("busy"))
    text = io.StringIO()
    run_report(case_dir("busy"), out=text, cache=cache, width=80, only=["findings"])
    assert text.getvalue().startswith("# findings\n")
