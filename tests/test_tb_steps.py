"""Step-time breakdown against the TensorBoard plugin's Overview (../shared/oracle-tb).

`tb_compat=True` reproduces every step row of every profile; the default mode matches where the
plugin's rules are right, and each documented deviation (analysis/tb_roles.py) has its test."""

from __future__ import annotations

import polars as pl
import pytest

from hta_tui.analysis import tb_roles
from hta_tui.analysis.step_breakdown import rank_breakdown
from hta_tui.analysis.tb_steps import profiler_steps
from tests.tb_oracle import answer, close, events, profiles_with

pytestmark = pytest.mark.shared

OVERVIEWS = profiles_with("overview.json")


def plugin_steps(profile: str) -> list[dict[str, float | str]]:
    """The Overview's step rows as {"step": name, category: us}."""
    doc = answer(profile, "overview.json")["steps"]
    names = [c["name"] for c in doc["columns"] if c.get("type") == "number"]
    out = []
    for row in doc["rows"]:
        values = [v for v in row[1:] if not isinstance(v, str)]
        out.append({"step": row[0], **dict(zip(names, values, strict=True))})
    return out


def mismatches(got: pl.DataFrame, want: list[dict[str, float | str]]) -> list[str]:
    bad = [f"{got.height} steps, plugin {len(want)}"] if got.height != len(want) else []
    for ours, theirs in zip(got.iter_rows(named=True), want, strict=False):
        if str(ours["step"]) != theirs["step"]:
            bad.append(f"step {ours['step']} vs {theirs['step']}")
        for cat, value in theirs.items():
            if cat != "step" and not close(ours[f"{cat} (us)"], float(value)):
                bad.append(f"{theirs['step']} {cat}: {ours[f'{cat} (us)']} vs {value}")
    return bad


@pytest.mark.parametrize("profile", OVERVIEWS)
def test_compat_matches_plugin_overview(profile: str) -> None:
    got = rank_breakdown(events(profile), tb_compat=True)
    assert not mismatches(got, plugin_steps(profile))


@pytest.mark.parametrize("profile", OVERVIEWS)
def test_parts_add_up_to_step_time(profile: str) -> None:
    got = rank_breakdown(events(profile))
    parts = pl.sum_horizontal(f"{c} (us)" for c in tb_roles.CATEGORIES)
    off = got.select((parts - pl.col("step_time (us)")).abs().max()).item()
    assert off is None or off < 1e-6


#: Profiles the plugin's rules describe correctly: CPU-only traces and the 2021-format trace.
PLUGIN_RIGHT = [
    p for p in OVERVIEWS if p.split("/")[0] in ("pytorch_cpu_ddp_gloo_4", "cpu_only")
] + [p for p in OVERVIEWS if p.startswith("tb_plugin_gpu_metrics")]


@pytest.mark.parametrize("profile", PLUGIN_RIGHT)
def test_default_mode_matches_where_plugin_is_right(profile: str) -> None:
    assert not mismatches(rank_breakdown(events(profile)), plugin_steps(profile))


def test_deviation_cuda_runtime_is_runtime() -> None:
    """DEVIATION: the plugin ignores `cuda_runtime`, so its one call in this trace counts as
    CPU Exec (the op around it); here it is Runtime, and CPU Exec loses exactly that."""
    profile = "call_stack/backward_thread/default"
    ev = events(profile)
    runtime_us = ev.filter(pl.col("cat") == "cuda_runtime")["dur"].sum() / 1000
    [plugin] = plugin_steps(profile)
    [ours] = rank_breakdown(ev).iter_rows(named=True)
    assert plugin["Runtime"] == 0
    assert close(ours["Runtime (us)"], runtime_us)
    assert close(ours["CPU Exec (us)"], float(plugin["CPU Exec"]) - runtime_us)


@pytest.mark.parametrize(
    "profile", [p for p in OVERVIEWS if p.startswith("pytorch_cpu_vit_memory")]
)
def test_deviation_dataloader_annotations(profile: str) -> None:
    """DEVIATION: `enumerate(DataLoader)#...__next__` written as a user annotation (PyTorch
    >= 1.10) is DataLoader time; the plugin drops it, leaving that time in CPU Exec (the ops
    the loader runs) and Other. The step times agree."""
    got = rank_breakdown(events(profile))
    for ours, plugin in zip(got.iter_rows(named=True), plugin_steps(profile), strict=True):
        assert plugin["DataLoader"] == 0 and ours["DataLoader (us)"] > 0
        host = ours["DataLoader (us)"] + ours["Other (us)"] + ours["CPU Exec (us)"]
        assert close(host, float(plugin["Other"]) + float(plugin["CPU Exec"]))
        assert ours["CPU Exec (us)"] <= float(plugin["CPU Exec"]) + 0.01


def test_deviation_gpu_side_profiler_step_is_not_a_step() -> None:
    """DEVIATION: the plugin makes a second step "6" of the `gpu_user_annotation`
    ProfilerStep#6 on the GPU stream; the trace has one step."""
    profile = "tracelens_h100_bert_memory/h100_bert-small-uncased/default"
    ev = events(profile)
    assert [s["step"] for s in plugin_steps(profile)] == ["6", "6"]
    assert rank_breakdown(ev)["step"].to_list() == [6]


def test_deviation_nccl_kernels_are_communication() -> None:
    """DEVIATION: newer PyTorch launches NCCL kernels from `record_param_comms` / `c10d::`
    ops that the plugin does not know, so it counts them as computation. Here a kernel named
    like NCCL's is Communication: the step's GPU time moves from Kernel to Communication."""
    profile = "param_dlrm_8rank/worker0_step_12/1"
    ev = events(profile)
    nccl = ev.filter(pl.col("name").str.starts_with("nccl") & (pl.col("kind") == "kernel"))
    assert nccl.height > 0
    [plugin] = plugin_steps(profile)
    [ours] = rank_breakdown(ev).iter_rows(named=True)
    assert ours["Communication (us)"] > 10 * float(plugin["Communication"])
    assert ours["Kernel (us)"] < float(plugin["Kernel"])


def test_steps_used_and_dropped_with_reasons() -> None:
    """The plugin's tail rule, on runtime-linked GPU work: a last step that launched no GPU
    work is not used, and says why (no cuda_runtime call inside 1010 has GPU work)."""
    profile = "trace_compare/test/test/default"
    ev = events(profile)
    steps = profiler_steps(ev)
    assert steps["step"].to_list() == [1009, 1010]
    assert steps["used"].to_list() == [True, False]
    assert steps["gpu_ops"].to_list()[1] == 0
    assert "no GPU work" in steps["reason"][1]
    # in compat mode the plugin sees no runtime link (cuda_runtime) and keeps both
    assert profiler_steps(events(profile), tb_compat=True)["used"].all()


def test_report_and_api_keys(shared) -> None:  # type: ignore[no-untyped-def]
    """The report's new keys and the API methods answer for a multi-rank CPU-only job."""
    from tests.shared_sets import analysis

    ta = analysis(shared / "traces" / "pytorch_cpu_ddp_gloo_4")
    table = ta.get_step_time_breakdown()
    assert sorted(table["rank"].unique().to_list()) == [0, 1, 2, 3]
    want = {
        (int(p.split("/")[1][-1]), int(s["step"])): s["CPU Exec"]
        for p in OVERVIEWS
        if p.startswith("pytorch_cpu_ddp_gloo_4")
        for s in plugin_steps(p)
    }
    for row in table.iter_rows(named=True):
        assert close(row["CPU Exec (us)"], float(want[(row["rank"], row["step"])]))
    stats, _ = ta.get_step_time_stats()
    assert stats["steps"].to_list() == [3, 3, 3, 3]
    ops = ta.get_operator_stats()
    assert ops.filter(pl.col("rank") == 0)["calls"].sum() > 0


def test_report_tb_compat_parameter(shared, tmp_path) -> None:  # type: ignore[no-untyped-def]
    """`--set tb_compat=true` gives the plugin's own answer: its duplicate step 6 (from the
    GPU-side annotation) is back; without it, one step."""
    from hta_tui.analysis import catalog
    from hta_tui.report import build_tables
    from hta_tui.trace.cache import Cache
    from hta_tui.trace.model import open_set

    ts = open_set(shared / "traces" / "tracelens_h100_bert_memory", Cache(tmp_path / "c"))
    compat = catalog.options_with({"tb_compat": "true"})
    both = build_tables(ts, names=["step_time_breakdown"], options=compat)
    assert both["step_time_breakdown"]["step"].to_list() == [6, 6]
    ours = build_tables(ts, names=["step_time_breakdown"])
    assert ours["step_time_breakdown"]["step"].to_list() == [6]
