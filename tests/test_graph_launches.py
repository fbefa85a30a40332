"""Issue 31 point 1 and issue 24 point 13: the kernels of a CUDA / HIP graph launch belong to
the launch and to the operator and module around it, and kernel time that belongs to no
operator is said, with its share and why (a graph replay outside any operator, no launch
event), as are graph launches whose kernels were not recorded."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import numpy as np
import polars as pl
import pytest

from hta_tui.analysis import diff, kernel_view, launch, module_view, operators, step_breakdown
from hta_tui.analysis import kernel_owners as ko
from hta_tui.synth import graph_replay as gr
from hta_tui.synth.files import write_trace
from hta_tui.trace.parse import parse_bytes, read_bytes
from tests.shared_sets import parsed


def _events(tmp_path: Path, **kw: object) -> pl.DataFrame:
    path = write_trace(gr.make_graph_replay(**kw), tmp_path / "graph.json")  # type: ignore[arg-type]
    return parse_bytes(read_bytes(path)).frames["events"]


def test_every_kernel_of_a_graph_replay_belongs_to_its_launchs_operator(tmp_path: Path) -> None:
    events = _events(tmp_path, steps=2, kernels=12)
    owners = ko.kernel_owners(events)
    graph = owners.filter(pl.col("launch") == gr.GRAPH_LAUNCH)
    assert graph.height == 24  # every kernel of both replays
    assert graph["graph"].all()
    assert set(graph["launch_ops"]) == {12}
    assert set(graph["operator"]) == {gr.COMPILED_OP}
    assert set(graph["module"]) == {gr.MODULE}
    assert set(graph["step"]) == {"ProfilerStep#1", "ProfilerStep#2"}
    assert set(owners["owner"]) == {ko.OWNED}
    row = ko.kernel_attribution({0: events}).row(0, named=True)
    assert row["no_operator_pct"] == 0.0
    assert row["no_operator (us)"] == 0.0
    assert (row["graph_launches"], row["graph_kernels"]) == (2, 24)
    assert row["graph_kernel_time (us)"] == 24 * gr.KERNEL_US
    assert row["verdict"] == "every kernel's time belongs to an operator"
    assert ko.unattributed_kernels({0: events}).is_empty()
    # the views count the graph's kernels where its launch sits
    graph_us = 24 * gr.KERNEL_US
    ops = operators.operator_stats({0: events}).filter(pl.col("name") == gr.COMPILED_OP)
    assert ops["device_self_duration (us)"].item() == graph_us
    by_op = kernel_view.kernel_op_table({0: events}).filter(pl.col("operator") == gr.COMPILED_OP)
    assert by_op["total (us)"].sum() == graph_us
    modules = module_view.module_view({0: events}).filter(pl.col("module") == gr.MODULE)
    assert modules["device total (us)"].item() == graph_us + 2 * gr.COPY_KERNEL_US
    stats = launch.cuda_kernel_launch_stats({0: events})[0]
    graphs = stats.filter(pl.col("launch") == gr.GRAPH_LAUNCH)
    assert graphs["gpu_ops"].to_list() == [12]  # HTA's steps: the last one left out


@pytest.mark.parametrize("launch", ["cudaGraphLaunch", "hipGraphLaunch"])
def test_graph_replay_outside_any_operator_is_said_with_its_share(
    tmp_path: Path, launch: str
) -> None:
    """vLLM's shape: the replay is called from Python, no operator around it (CUDA or HIP)."""
    events = _events(tmp_path, steps=2, kernels=12, inside_op=False, launch=launch)
    owners = ko.kernel_owners(events)
    graph = owners.filter(pl.col("graph"))
    assert set(graph["owner"]) == {ko.OUTSIDE}
    assert set(graph["module"]) == {gr.MODULE}  # still in its module
    row = ko.kernel_attribution({0: events}).row(0, named=True)
    graph_us, copy_us = 24 * gr.KERNEL_US, 2 * gr.COPY_KERNEL_US
    assert row["no_operator (us)"] == graph_us
    assert row["no_operator_pct"] == pytest.approx(100 * graph_us / (graph_us + copy_us))
    assert row["verdict"] == (
        f"99.7% of kernel time (1,200 us) belongs to no operator: "
        f"2 {launch} calls outside any operator"
    )
    table = ko.unattributed_kernels({0: events})
    assert table.select("reason", "launch", "launches", "kernels").rows() == [
        (ko.OUTSIDE, launch, 2, 24)
    ]


def test_graph_launch_without_kernel_events_is_said_with_its_cpu_time(tmp_path: Path) -> None:
    events = _events(tmp_path, steps=3, kernels=12, with_kernels=False)
    row = ko.kernel_attribution({0: events}).row(0, named=True)
    assert (row["graph_launches"], row["graph_kernels"]) == (3, 0)
    assert row["graph_launches_without_kernels"] == 3
    assert row["graph_launch_cpu_without_kernels (us)"] == 3 * gr.LAUNCH_US
    assert "3 graph launches with no kernel events (90 us on the CPU)" in row["verdict"]


def _raw(shared: Path, case: str) -> list[dict]:
    (path,) = (shared / "traces" / case).iterdir()
    with gzip.open(path) as f:
        return json.load(f)["traceEvents"]


def _load(shared: Path, case: str) -> pl.DataFrame:
    (path,) = (shared / "traces" / case).iterdir()
    return parsed(path).frames["events"]


@pytest.mark.shared
def test_real_graph_launches_own_all_their_kernels(shared: Path) -> None:
    """negative_queue_length_values_check replays CUDA graphs of Triton kernels: each kernel
    of a cudaGraphLaunch's correlation is that launch's, and the kernel time with no launch
    event is what the raw JSON says (kernels whose correlation no runtime call has)."""
    case = "negative_queue_length_values_check"
    raw = _raw(shared, case)
    runtime = {
        e["args"]["correlation"]: e["name"]
        for e in raw
        if e.get("cat") in ("cuda_runtime", "cuda_driver") and "correlation" in e.get("args", {})
    }
    kernels = [e for e in raw if e.get("cat") == "kernel"]
    per_graph: dict[int, int] = {}
    ops_per_graph: dict[int, int] = {}  # kernels, memcpys and memsets of each graph
    for k in raw:
        corr = k.get("args", {}).get("correlation")
        if k.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset") and (
            runtime.get(corr) == "cudaGraphLaunch"
        ):
            ops_per_graph[corr] = ops_per_graph.get(corr, 0) + 1
            if k["cat"] == "kernel":
                per_graph[corr] = per_graph.get(corr, 0) + 1
    no_launch_us = sum(k["dur"] for k in kernels if k["args"]["correlation"] not in runtime)
    events = _load(shared, case)
    owners = ko.kernel_owners(events).filter(pl.col("kind") == "kernel")
    graph = owners.filter(pl.col("graph"))
    assert graph.height == sum(per_graph.values()) > 0
    got = dict(graph.group_by("correlation").agg(pl.len()).rows())
    assert got == per_graph
    assert dict(graph.select("correlation", "launch_ops").unique().rows()) == ops_per_graph
    row = ko.kernel_attribution({0: events}).row(0, named=True)
    assert row["no_launch_event (us)"] == pytest.approx(no_launch_us)
    assert f"{no_launch_us:,.0f} us of kernels with no launch event" in row["verdict"]


@pytest.mark.shared
def test_triton_launches_outside_any_operator_on_b200(shared: Path) -> None:
    """tracelens_b200_eager_nccl: the kernels whose driver launch no cpu_op encloses (raw
    JSON, by time on the launch's thread) are the ones said to belong to no operator."""
    case = "tracelens_b200_eager_nccl"
    raw = _raw(shared, case)
    ops = [e for e in raw if e.get("cat") == "cpu_op"]
    op_pid = np.array([o["pid"] for o in ops])
    op_tid = np.array([o["tid"] for o in ops])
    op_ts = np.array([o["ts"] for o in ops])
    op_end = op_ts + np.array([o["dur"] for o in ops])
    launches = [
        e
        for e in raw
        if e.get("cat") in ("cuda_runtime", "cuda_driver") and "correlation" in e.get("args", {})
    ]

    def inside(e: dict) -> bool:
        mine = (op_pid == e["pid"]) & (op_tid == e["tid"])
        return bool((mine & (op_ts <= e["ts"]) & (op_end >= e["ts"] + e["dur"])).any())

    bare = {e["args"]["correlation"]: e["name"] for e in launches if not inside(e)}
    kernels = [e for e in raw if e.get("cat") == "kernel" and e["args"]["correlation"] in bare]
    assert kernels  # the trace has some
    table = ko.unattributed_kernels({0: _load(shared, case)})
    assert table.filter(pl.col("reason") == ko.OUTSIDE)["kernels"].sum() == len(kernels)
    assert set(table["launch"]) == {bare[k["args"]["correlation"]] for k in kernels}
    expected = sum(k["dur"] for k in kernels)
    assert table["time (us)"].sum() == pytest.approx(expected)


def test_step_breakdown_and_diff_count_every_graph_kernel(tmp_path: Path) -> None:
    """The step breakdown puts each replay's kernels in its step, and the diff of a
    12-kernel and an 8-kernel graph counts the kernels each replay ran (one iteration)."""
    events = _events(tmp_path, steps=3, kernels=12)
    steps = step_breakdown.step_time_breakdown({0: events})
    assert set(steps["Kernel (us)"]) == {12 * gr.KERNEL_US + gr.COPY_KERNEL_US}
    path = write_trace(gr.make_graph_replay(steps=3, kernels=8), tmp_path / "b.json")
    test = parse_bytes(read_bytes(path)).frames["events"]
    table = diff.compare_traces(events, test, device_type="GPU")
    counts = dict(table.select("name", "Control_counts").rows())
    assert counts == {name: 3 for name in gr.GRAPH_KERNELS} | {"copy_kernel": 1}
    assert dict(table.select("name", "Test_counts").rows()) == (
        {name: 2 for name in gr.GRAPH_KERNELS} | {"copy_kernel": 1}
    )


def test_cuda_graph_annotations_name_each_graph_kernels_module(tmp_path: Path) -> None:
    """PyTorch's CUDA-graph kernel annotations (module_fqn, a bare string under `name`, or the
    older `annotation` / `str`): the parser keeps them in one column, and a graph kernel's
    module is its annotation, not the module around the launch, which runs every layer."""
    events = _events(tmp_path, steps=2, kernels=12, annotations=True)
    kernels = events.filter(pl.col("kind") == "kernel").sort("idx")
    per_step = [gr.fqn_of(i) for i in range(12)] + [None]  # the plain copy's kernel: none
    assert kernels["annotation"].to_list() == per_step * 2
    owners = ko.kernel_owners(events).filter(pl.col("kind") == "kernel").sort("idx")
    assert owners["module"].to_list() == [*per_step[:-1], gr.MODULE] * 2
    graph = owners.filter(pl.col("graph"))
    assert set(graph["module_from"]) == {ko.ANNOTATED}
    assert set(graph["operator"]) == {gr.COMPILED_OP}  # the operator stays the launch's
    assert owners.filter(~pl.col("graph"))["module_from"].to_list() == [ko.AROUND] * 2
    modules = ko.kernel_modules({0: events})
    layer_us = 2 * 4 * gr.KERNEL_US  # four kernels of each layer, in each of two replays
    assert modules.select("module", "module_from", "kernels", "time (us)").rows() == [
        *((f"layers.{n}.attention.wq", ko.ANNOTATED, 8, layer_us) for n in range(3)),
        (gr.MODULE, ko.AROUND, 2, 2 * gr.COPY_KERNEL_US),
    ]
    row = ko.kernel_attribution({0: events}).row(0, named=True)
    assert row["graph_kernels_annotated"] == 24
    assert row["no_operator_pct"] == 0.0
    assert "24 graph kernels in modules by their CUDA-graph annotation" in row["verdict"]
    said = ko.job_verdict({0: events})  # the Kernels and Operators views' line
    assert said is not None and "24 graph kernels in modules by their" in said
    # without annotations: the module around the launch, as before
    plain = ko.kernel_owners(_events(tmp_path, steps=1, kernels=4)).filter(pl.col("graph"))
    assert set(plain["module"]) == {gr.MODULE}
    assert set(plain["module_from"]) == {ko.AROUND}
    assert set(plain["annotation"].to_list()) == {None}


def test_odd_cuda_graph_annotations_cost_only_themselves(tmp_path: Path) -> None:
    """An annotation of an odd type (an object, true, an empty string) is none; a number is
    its text; the other kernels keep theirs."""
    from hta_tui.synth.events import complete

    odd: list[dict] = [
        {"annotation": {"nested": 1}},
        {"module_fqn": "", "name": "block.mlp"},
        {"str": True},
        {"name": 7},
        {"module_fqn": ["x"], "annotation": "old.one"},
        {"str": ""},
    ]
    events = [complete("kernel", f"k{i}", 0, 7, 10.0 * i, 5.0) for i in range(len(odd))]
    for e, args in zip(events, odd, strict=True):
        e["args"].update(args, stream=7, device=0)
    path = write_trace({"traceEvents": events}, tmp_path / "odd.json")
    frame = parse_bytes(read_bytes(path)).frames["events"].sort("idx")
    assert frame["name"].to_list() == [f"k{i}" for i in range(len(odd))]
    assert frame["annotation"].to_list() == [None, "block.mlp", None, "7", "old.one", None]


def test_owners_made_over_a_batch_equal_each_rank_alone(tmp_path: Path) -> None:
    """Every rank's kernel owners made at once (`ranks_owners`, one query set with `rank`
    in every key) are each rank's own, to the row and dtype: tiny ranks of several steps,
    without GPU ops, without steps, and graph replays; a batch costs as many queries as
    two ranks (a tiny rank's own cost ~26)."""
    from polars.lazyframe.frame import LazyFrame

    from hta_tui.synth.small_job import Dialect, JobShape, write_job

    files = write_job(tmp_path / "tiny", Dialect(), JobShape(ranks=4, steps=3, ops_per_step=2))
    tiny = [parse_bytes(read_bytes(f)).frames["events"] for f in files]
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    batches = [
        {
            0: tiny[0],
            1: tiny[1].filter(pl.col("stream").is_null()),
            2: tiny[2].filter(~pl.col("name").str.starts_with("ProfilerStep")),
            3: tiny[3],
        },
        {5: _events(tmp_path / "a", steps=2, kernels=12), 6: _events(tmp_path / "b", steps=1)},
    ]
    for ranks in batches:
        ko.ranks_owners(ranks)
        for events in ranks.values():
            alone = ko._owners(events)
            kept = ko.kernel_owners(events)  # the batch's, kept as the rank's own
            assert kept.equals(alone) and kept.schema == alone.schema
    counted = [0]
    real = LazyFrame._collect_eager, LazyFrame.collect

    def count(i: int) -> object:
        def call(self: LazyFrame, *a: object, **k: object) -> pl.DataFrame:
            counted[0] += 1
            return real[i](self, *a, **k)  # type: ignore[operator]

        return call

    def queries(ranks: list[pl.DataFrame]) -> int:
        counted[0] = 0
        ko.ranks_owners({r: ev.clone() for r, ev in enumerate(ranks)})  # (none kept yet)
        return counted[0]

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(LazyFrame, "_collect_eager", count(0))
        mp.setattr(LazyFrame, "collect", count(1))
        assert queries(tiny) == queries(tiny[:2])


def test_launch_stats_made_once_for_both_tables(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`kernel_launch_summary` reads the launch table `cuda_kernel_launch_stats` makes (a
    rank's worker makes both: once it made the table twice); other options, another."""
    from hta_tui.analysis import registry
    from hta_tui.analysis.findings.gpu import launch_summary

    events = _events(tmp_path, steps=2, kernels=3)
    made: list[float] = []
    real = launch._launch_stats

    def counted(*args: object) -> dict[int, pl.DataFrame]:
        made.append(args[1])  # type: ignore[arg-type]  # (its runtime_cutoff)
        return real(*args)  # type: ignore[arg-type]

    monkeypatch.setattr(launch, "_launch_stats", counted)
    names = ["cuda_kernel_launch_stats", "kernel_launch_summary"]
    got = registry.run({0: events}, names, registry.Options())
    assert made == [50] and not got["cuda_kernel_launch_stats"].is_empty()
    assert got["kernel_launch_summary"].equals(launch_summary(got["cuda_kernel_launch_stats"]))
    other = registry.run({0: events}, names, registry.Options(runtime_cutoff_us=1.0))
    assert made == [50, 1.0]
    assert not other["cuda_kernel_launch_stats"].equals(got["cuda_kernel_launch_stats"])


def test_the_launch_table_and_each_ranks_launches_are_kept_apart(tmp_path: Path) -> None:
    """After the registry's launch table, `launch` still answers each rank's tables (a frame
    once kept under their key, where a rank's dict is read back, broke the findings' launch
    summary after the report's table)."""
    from hta_tui.analysis import registry

    ranks = {0: _events(tmp_path, steps=2, kernels=3)}
    table = registry.run(ranks, ["cuda_kernel_launch_stats"], registry.Options())
    per_rank = launch.cuda_kernel_launch_stats(ranks, runtime_cutoff=50)
    assert isinstance(per_rank, dict) and set(per_rank) == {0}
    assert per_rank[0].height == table["cuda_kernel_launch_stats"].height > 0
