"""Issue 28, points 1 and 2: every rule fires on a generated trace that has its problem, stays
quiet on one that has not, and abstains (with its reason) where its inputs are missing.

Traces (tiny, built once, see MAKERS): the generator's DDP job as ever ("busy"), pushed
toward one bottleneck or away from it by `synth.tweaks.Tweaks`, or edited before writing
(GPU events or ProfilerSteps removed, steps renumbered, a smaller device).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import orjson
import polars as pl
import pytest

from hta_tui import api
from hta_tui.analysis import registry
from hta_tui.analysis.findings import FINDINGS_SCHEMA, RULES, RuleConfig, evaluate_all
from hta_tui.api import TraceAnalysis
from hta_tui.report import build_report
from hta_tui.synth import MemoryOptions, make_trace, write_trace
from hta_tui.synth.graph_replay import make_graph_replay
from hta_tui.synth.tweaks import Tweaks

GPU_CATS = (
    "kernel",
    "gpu_memcpy",
    "gpu_memset",
    "gpu_user_annotation",
    "cuda_runtime",
    "cuda_sync",
)
MIB = 1024 * 1024


def _write(d: Path, ranks: int, steps: int, kps: int, tweaks: Tweaks, **kw: Any) -> None:
    for r in range(ranks):
        trace = make_trace(
            r, world_size=ranks, steps=steps, seed=1, kernels_per_step=kps, tweaks=tweaks, **kw
        )
        if kw.get("memory") is not None and tweaks.kernel_scale < 1:  # a 140 MiB device
            for dev in trace["deviceProperties"]:
                dev["totalGlobalMem"] = 140 * MIB
        write_trace(trace, d / f"rank-{r}.json")


def _busy(d: Path) -> None:
    """The generator's job as ever: DataLoader stalls, a slow rank 1, FP32 SGEMMs."""
    for r in range(2):
        trace = make_trace(r, world_size=2, steps=4, seed=1, slow=r == 1, kernels_per_step=15)
        write_trace(trace, d / f"rank-{r}.json")


FED = Tweaks(input_wait=0.02)


def _cpu(d: Path) -> None:
    trace = make_trace(0, world_size=1, steps=2, seed=2, kernels_per_step=15)
    trace["traceEvents"] = [e for e in trace["traceEvents"] if e.get("cat") not in GPU_CATS]
    write_trace(trace, d / "rank-0.json")


def _nosteps(d: Path) -> None:
    trace = make_trace(0, world_size=1, steps=2, seed=2, kernels_per_step=15)
    steps = [e for e in trace["traceEvents"] if str(e.get("name", "")).startswith("ProfilerStep")]
    trace["traceEvents"] = [e for e in trace["traceEvents"] if e not in steps]
    write_trace(trace, d / "rank-0.json")


def _spans(d: Path) -> None:
    """Two ranks whose files cover different steps (rank 1's renumbered from #12)."""
    for r in range(2):
        trace = make_trace(r, world_size=2, steps=2, seed=1, slow=r == 1, kernels_per_step=15)
        if r == 1:
            for e in trace["traceEvents"]:
                name = str(e.get("name", ""))
                if name.startswith("ProfilerStep#"):
                    e["name"] = f"ProfilerStep#{int(name.split('#')[1]) + 10}"
        if r == 0:  # and an event the parser cannot use (no timestamp): dropped, counted
            trace["traceEvents"].append({"ph": "X", "cat": "cpu_op", "name": "aten::bad"})
        write_trace(trace, d / f"rank-{r}.json")


def _graph(d: Path) -> None:
    """A CUDA-graph replay profiled without the graph's kernels."""
    write_trace(make_graph_replay(with_kernels=False), d / "rank-0.json")


def _nosync(d: Path) -> None:
    """ "solo" profiled without enable_cuda_sync_events: its syncs' host calls, no cuda_sync."""
    trace = make_trace(0, world_size=1, steps=4, seed=1, kernels_per_step=60, tweaks=FED)
    trace["traceEvents"] = [e for e in trace["traceEvents"] if e.get("cat") != "cuda_sync"]
    write_trace(trace, d / "rank-0.json")


MAKERS: dict[str, Callable[[Path], None]] = {
    "busy": _busy,
    # one rank of a larger model whose loader keeps up; it logs the loss every step
    "solo": lambda d: _write(d, 1, 4, 60, FED),
    # two even ranks, TF32 on, no loss read back, memory events without a leak
    "clean": lambda d: _write(
        d, 2, 3, 60, Tweaks(input_wait=0.02, tf32=True, log_loss=False), memory=MemoryOptions()
    ),
    # tiny kernels, a 4 MiB read back into pageable memory, a leak, a 140 MiB device
    "tiny": lambda d: _write(
        d,
        1,
        4,
        15,
        Tweaks(input_wait=0.02, kernel_scale=0.05, readback_bytes=4 * MIB),
        memory=MemoryOptions(leak_op="aten::addmm"),
    ),
    "cpu": _cpu,
    "nosteps": _nosteps,
    "spans": _spans,
    "graph": _graph,
    "nosync": _nosync,
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
def loaded(case_dir: Callable[[str], Path]) -> Callable[[str], TraceAnalysis]:
    """case -> its traces, loaded once."""
    made: dict[str, TraceAnalysis] = {}

    def get(case: str) -> TraceAnalysis:
        if case not in made:
            made[case] = TraceAnalysis(case_dir(case), cache=False)
        return made[case]

    return get


@pytest.fixture(scope="module")
def found(loaded: Callable[[str], TraceAnalysis]) -> Callable[[str], dict[str, Any]]:
    """case -> {rule id: its findings row, with its evidence rows under "evidence"}."""
    made: dict[str, dict[str, Any]] = {}

    def get(case: str) -> dict[str, Any]:
        if case not in made:
            tables = loaded(case).tables("findings", "finding_evidence")
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
    assert "enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__" in busy["advice"]
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
    # where the idle step goes, by the step breakdown, and what to do about the largest
    assert "rest goes to DataLoader" in busy["advice"] and "(input.dataloader)" in busy["advice"]
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
    assert busy["evidence"][0]["view"] == "overlap"
    assert busy["evidence"][0]["event"] in ("all_reduce", "broadcast")
    assert found("solo")["comm.exposed"]["severity"] == "ok"
    cpu = found("cpu")["comm.exposed"]
    assert cpu["severity"] == "abstain" and "CPU-only" in cpu["reason"]


def test_data_quality(found: Any) -> None:
    graph = found("graph")["data.quality"]
    assert graph["severity"] == "warn" and graph["value"] == 1
    assert "graph launches hold no kernels" in graph["advice"]
    assert graph["evidence"][0]["table"] == "kernel_attribution"
    _check(found("busy")["data.quality"], "ok")  # and so gpu.util.low does not abstain there


def test_config_thresholds_and_rules_turned_off(loaded: Any) -> None:
    config = RuleConfig(
        thresholds={"input.dataloader": (80, 90, 95)}, off=frozenset({"gpu.util.low"})
    )
    f = api.findings(loaded("busy"), config=config)
    assert "gpu.util.low" not in f["id"].to_list()
    row = f.filter(pl.col("id") == "input.dataloader").row(0, named=True)
    assert row["severity"] == "ok" and row["threshold"] == 90


def test_report_json_nests_the_evidence_and_puts_the_findings_first(
    loaded: Any, found: Any
) -> None:
    doc = orjson.loads(orjson.dumps(build_report(loaded("busy").trace_set)))
    assert next(iter(doc)) == "findings"  # the text report follows the same order
    first = doc["findings"][0]
    assert first["id"] == "input.dataloader" and first["severity"] == "fail"
    assert first["evidence"] and first["evidence"][0]["view"] == "step_time"
    assert {"threshold", "at_stake_us", "at_stake_pct", "advice"} <= set(first)
    assert [f["id"] for f in doc["findings"]] == list(found("busy"))


def _check(row: dict[str, Any], severity: str | tuple[str, ...]) -> None:
    wanted = (severity,) if isinstance(severity, str) else severity
    assert row["severity"] in wanted, (row["id"], row["severity"], row["value"], row["reason"])


def _abstains(row: dict[str, Any], why: str) -> None:
    assert row["severity"] == "abstain" and row["value"] is None and why in row["reason"], row
    assert row["advice"] == ""


def test_launch_bound(found: Any) -> None:
    tiny = found("tiny")["launch.bound"]
    # kernel_scale 0.05: most kernels run a few us, their launches take ~5 us each
    _check(tiny, ("warn", "fail"))
    assert tiny["value"] > 50 and tiny["at_stake_us"] > 0
    assert "aten::" in tiny["advice"] and "CUDA graph" in tiny["advice"]
    assert tiny["evidence"][0]["view"] == "kernels"
    _check(found("clean")["launch.bound"], "ok")
    _abstains(found("cpu")["launch.bound"], "CPU-only")
    _abstains(found("graph")["launch.bound"], "data.quality")


def test_kernel_small(found: Any) -> None:
    tiny = found("tiny")["kernel.small"]
    _check(tiny, "fail")
    assert tiny["value"] > 40
    top = tiny["evidence"][0]
    assert top["view"] == "kernels" and top["table"] == "kernel_view_by_op"
    assert top["event"][:20] in tiny["advice"]  # the largest small kernel, named
    _check(found("clean")["kernel.small"], "ok")
    _check(found("solo")["kernel.small"], "ok")
    _abstains(found("cpu")["kernel.small"], "CPU-only")


def test_tensorcore_unused(found: Any) -> None:
    solo = found("solo")["tensorcore.unused"]
    # the generator's model runs some GEMMs as FP32 SGEMMs (no tensor cores) in aten::mm
    _check(solo, ("warn", "fail"))
    assert "ampere_sgemm_128x64" in solo["advice"] and "aten::mm" in solo["advice"]
    assert all("sgemm" in e["event"] for e in solo["evidence"])
    assert 0 < solo["at_stake_pct"] < 100
    clean = found("clean")["tensorcore.unused"]  # TF32 on: every GEMM a tensorop kernel
    _check(clean, "ok")
    assert clean["value"] == 0
    _abstains(found("cpu")["tensorcore.unused"], "CPU-only")


def test_sync_host(found: Any) -> None:
    solo = found("solo")["sync.host"]
    # the step's logging: cudaEventSynchronize waits for the step's GPU work, > 1 ms a step
    _check(solo, "fail")
    assert solo["at_stake_us"] >= 1000 and "cudaEventSynchronize" in solo["advice"]
    ev = solo["evidence"][0]
    assert ev["view"] == "syncs" and ev["event"] == "cudaEventSynchronize"
    assert ev["step"] is not None and 0 <= ev["start_us"] < ev["end_us"]
    # the same share under 1 ms a step: said, never a warning
    busy = found("busy")["sync.host"]
    assert busy["value"] > 2 and busy["at_stake_us"] < 1000
    _check(busy, "info")
    _check(found("clean")["sync.host"], "ok")  # the loss not read back every step
    _abstains(found("cpu")["sync.host"], "CPU-only")


def test_memcpy_pageable(found: Any) -> None:
    tiny = found("tiny")["memcpy.pageable"]
    # a 4 MiB read back into pageable memory every step, synchronous
    _check(tiny, "fail")
    assert "aten::_local_scalar_dense" in tiny["advice"] and "pin" in tiny["advice"]
    assert {e["event"] for e in tiny["evidence"]} == {"cudaMemcpyAsync"}
    _check(found("clean")["memcpy.pageable"], "ok")
    _check(found("solo")["memcpy.pageable"], "ok")  # 4 bytes of loss: a few us
    _abstains(found("nosteps")["memcpy.pageable"], "no steps")


def test_memory_peak(found: Any) -> None:
    tiny = found("tiny")["memory.peak"]
    # 133 MB allocated at the peak on a device of 140 MiB
    _check(tiny, ("warn", "fail"))
    assert tiny["value"] > 90 and tiny["at_stake_us"] == 0
    assert "aten::addmm" in tiny["advice"] and tiny["evidence"][0]["view"] == "memory"
    _check(found("clean")["memory.peak"], "ok")  # the same on 80 GB
    _abstains(found("busy")["memory.peak"], "no memory events")


def test_memory_growth(found: Any) -> None:
    tiny = found("tiny")["memory.growth"]
    # leak_op: aten::addmm allocates 8 MiB per call and never frees them
    _check(tiny, "fail")
    assert "aten::addmm" in tiny["advice"] and "never freed" in tiny["evidence"][0]["label"]
    _check(found("clean")["memory.growth"], "ok")
    _abstains(found("solo")["memory.growth"], "no memory events")


def test_rank_straggler(found: Any) -> None:
    busy = found("busy")["rank.straggler"]
    # rank 1's GPU work is 1.3x slower (synth's slow rank)
    _check(busy, ("warn", "fail"))
    assert busy["ranks"] == "1" and busy["advice"].startswith("rank 1 ")
    assert busy["evidence"][0]["rank"] == 1
    _check(found("clean")["rank.straggler"], "ok")
    _abstains(found("solo")["rank.straggler"], "one rank with steps: no other rank")
    _abstains(found("spans")["rank.straggler"], "data.quality")


def test_step_variance(found: Any) -> None:
    busy = found("busy")["step.variance"]
    # rank 0's DataLoader stalls make two of its four steps slow
    _check(busy, ("warn", "fail"))
    assert busy["value"] > 1.2
    slow = {e["step"] for e in busy["evidence"]}
    assert slow and all(f"step {s}" in busy["advice"] for s in slow if s is not None)
    _check(found("solo")["step.variance"], "ok")
    _abstains(found("cpu")["step.variance"], "too few steps")
    _abstains(found("nosteps")["step.variance"], "no steps")


def test_data_quality_mixed_spans_and_dropped_events(found: Any) -> None:
    spans = found("spans")["data.quality"]
    _check(spans, "warn")
    assert spans["value"] == 2
    assert "rank 1: 12-12" in spans["advice"] and "rank 0 dropped events" in spans["advice"]
    assert [e["table"] for e in spans["evidence"]] == ["files"]


def test_data_quality_missing_cuda_sync_events(found: Any) -> None:
    """Synchronising CUDA calls without one cuda_sync event: said, per rank, with the
    profiler option; no rule reads them, so none abstains and it is said at info only."""
    bare = found("nosync")["data.quality"]
    _check(bare, "info")
    assert bare["value"] == 1 and bare["ranks"] == "0"
    assert "enable_cuda_sync_events=True" in bare["advice"]
    # the generator's steps: cross-stream waits, the logging's event sync, the loss's sync
    ev = bare["evidence"][0]
    assert ev["event"] in ("cudaStreamWaitEvent", "cudaEventSynchronize", "cudaStreamSynchronize")
    assert ev["view"] == "syncs" and ev["rank"] == 0 and ev["step"] is not None
    assert 0 <= ev["start_us"] <= ev["end_us"]
    _check(found("solo")["data.quality"], "ok")  # the same job with its cuda_sync events
    _check(found("cpu")["data.quality"], "ok")  # no GPU: nothing to synchronise with
    # sync.host and memcpy.pageable read the host calls' durations: the same numbers
    for rule in ("sync.host", "memcpy.pageable"):
        with_events, without = found("solo")[rule], found("nosync")[rule]
        assert without["severity"] == with_events["severity"] != "abstain"
        assert without["value"] == pytest.approx(with_events["value"])
    # and no rule abstains for it
    assert not [r for r in found("nosync").values() if "data.quality" in (r["reason"] or "")]


def test_a_table_that_cannot_be_made_costs_only_the_rules_reading_it() -> None:
    def get(name: str) -> pl.DataFrame:
        if name == "syncs":
            raise ValueError("bad sync rows\nsecond line")
        return pl.DataFrame()

    f, _ = evaluate_all(get)
    rows = {r["id"]: r for r in f.iter_rows(named=True)}
    for rule in ("sync.host", "memcpy.pageable"):
        assert rows[rule]["severity"] == "abstain"
        assert rows[rule]["reason"] == "syncs could not be made: ValueError: bad sync rows"
    # the others read empty tables: a rule failing on one says so on one line, no raise
    assert all("\n" not in r["reason"] for r in rows.values())
    # data.quality reads syncs for one of its checks only: the others still run
    assert "syncs" not in rows["data.quality"]["reason"]


def test_run_evaluates_the_rules_on_the_tables_the_others_made(
    loaded: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The report's run (and the API's): findings read the step table its analysis made,
    not one made again."""
    from hta_tui.analysis import step_breakdown

    made = []
    real = step_breakdown.step_time_breakdown

    def counted(*a: Any, **k: Any) -> pl.DataFrame:
        made.append(1)
        return real(*a, **k).with_columns(pl.lit(0.0).alias("DataLoader (us)"))

    monkeypatch.setattr(step_breakdown, "step_time_breakdown", counted)
    ta = loaded("busy")
    names = ["step_time_breakdown", "findings"]
    out = registry.run(ta._ranks(), names, frames=registry.trace_frames(ta.trace_set))
    assert list(out)[-2:] == ["findings", "finding_evidence"] and len(made) == 1
    row = out["findings"].filter(pl.col("id") == "input.dataloader").row(0, named=True)
    assert row["severity"] == "ok" and row["value"] == 0  # the table made, as made


def test_a_split_run_evaluates_findings_on_the_one_path(
    loaded: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The report's split run (rank-wise tables made rank by rank) hands the findings to
    `registry.run`, which evaluates them last, once, on the tables made before: the
    rank-wise step table among them, not made again."""
    from hta_tui.exec.split import run_split

    asked, given = [], []
    real_run, real_findings = registry.run, registry.findings_tables

    def run(ranks: Any, names: Any = None, *a: Any, **k: Any) -> Any:
        asked.append(list(names or []))
        return real_run(ranks, names, *a, **k)

    def findings_tables(*a: Any, made: Any = None, **k: Any) -> Any:
        given.append(set(made or {}))
        return real_findings(*a, made=made, **k)

    monkeypatch.setattr(registry, "run", run)
    monkeypatch.setattr(registry, "findings_tables", findings_tables)
    out = run_split(
        loaded("busy").trace_set, ["step_time_breakdown", "findings"], registry.Options()
    )
    assert ["findings"] in asked  # not an evaluation of its own beside registry.run
    assert len(given) == 1 and "step_time_breakdown" in given[0]
    assert out["findings"]["id"].n_unique() == len(RULES)


def test_check_reads_the_tables_on_the_reports_polars_engine(
    loaded: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`check` (and the API, the app) make the tables the rules read on the report's polars
    engine, not polars' default one, which costs them 5-20% more CPU (bench/FINDINGS.md)."""
    import os

    from hta_tui.check import CheckConfig, rule_findings

    engines = []
    real_getter = registry.table_getter

    def getter(*a: Any, **k: Any) -> Callable[[str], pl.DataFrame]:
        get = real_getter(*a, **k)

        def recorded(name: str) -> pl.DataFrame:
            engines.append(os.environ.get("POLARS_ENGINE_AFFINITY"))
            return get(name)

        return recorded

    monkeypatch.setattr(registry, "table_getter", getter)
    found, _ = rule_findings(loaded("busy").trace_set, CheckConfig())
    assert found.height == len(RULES)
    assert engines and set(engines) == {registry.ENGINE}


def test_every_evidence_row_opens_a_view_of_the_app(found: Any) -> None:
    from hta_tui.app.screens.registry import SCREENS

    modes = {s.mode for s in SCREENS}
    views = {
        e["view"]
        for case in ("busy", "solo", "tiny", "spans", "graph", "nosync")
        for row in found(case).values()
        for e in row["evidence"]
    }
    assert views and views <= modes, views - modes
