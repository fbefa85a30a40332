"""Issue 27, point 2: the plugin's operator tree of a rank (its ops, nn.Module frames,
ProfilerSteps and collectives on each thread) is nested once per rank (`shared.tree_levels`)
and read by every analysis that nests it (the memory tables and the module view), and each
analysis's tables are the same as when it runs alone; the host context's ancestors (module
device time, syncs) found by climbing parent links are the true enclosing events."""

from __future__ import annotations

import json
from typing import Any

import polars as pl
import pytest

from hta_tui.analysis import (
    enclosing,
    host_context,
    kernel_owners,
    module_view,
    nesting,
    registry,
    sequences,
)
from hta_tui.trace.parse import parse_bytes

#: The analyses that read the operator tree (module_stats and the memory tables).
TREE_READERS = ["memory_curve", "memory_events", "memory_stats", "memory_peak", "module_stats"]


class _Trace:
    """One host thread (pid 1, tid 1) and a GPU stream (pid 0, tid 7)."""

    def __init__(self) -> None:
        self.events: list[dict[str, Any]] = []
        self.py_id = 0
        self.corr = 0

    def x(self, cat: str, name: str, ts: float, dur: float, **args: Any) -> None:
        self.events.append(
            {"ph": "X", "cat": cat, "name": name, "pid": 1, "tid": 1, "ts": ts, "dur": dur,
             "args": args}
        )  # fmt: skip

    def frame(self, name: str, ts: float, dur: float, parent: int | None, **extra: Any) -> int:
        self.py_id += 1
        args = {"Python id": self.py_id, "Python parent id": parent, **extra}
        self.x("python_function", name, ts, dur, **args)
        return self.py_id

    def module(self, name: str, ts: float, dur: float, parent: int | None) -> int:
        return self.frame(f"nn.Module: {name}", ts, dur, parent, **{"Python module id": 0})

    def launch(self, ts: float, kernel_dur: float) -> None:
        self.corr += 1
        self.x("cuda_runtime", "cudaLaunchKernel", ts, 4, correlation=self.corr)
        self.events.append(
            {"ph": "X", "cat": "kernel", "name": "gemm", "pid": 0, "tid": 7, "ts": ts + 10,
             "dur": kernel_dur, "args": {"correlation": self.corr, "stream": 7, "device": 0}}
        )  # fmt: skip

    def memory(self, ts: float, size: int, addr: int, total: int) -> None:
        self.events.append(
            {"ph": "i", "cat": "cpu_instant_event", "s": "t", "name": "[memory]", "pid": 1,
             "tid": 1, "ts": ts, "args": {"Total Reserved": 1 << 20, "Total Allocated": total,
             "Bytes": size, "Addr": addr, "Device Id": 0, "Device Type": 1}}
        )  # fmt: skip


def _trace(zero_length_op: bool = False, gpu: bool = True) -> bytes:
    """Two steps of Net_0 > forward frame > Linear_0 / ReLU_0 modules, each running ops that
    launch kernels (unless not `gpu`) and allocate; a second Linear_0 call inside ReLU_0's
    frame."""
    t = _Trace()
    if not gpu:
        t.launch = lambda ts, kernel_dur: None  # type: ignore[method-assign]
    for step in range(2):
        t0 = step * 1000.0
        t.x("user_annotation", f"ProfilerStep#{step}", t0, 900)
        net = t.module("Net_0", t0 + 10, 800, None)
        code = t.frame("model.py(12): forward", t0 + 11, 790, net)
        lin = t.module("Linear_0", t0 + 20, 300, code)
        t.x("cpu_op", "aten::linear", t0 + 30, 200)
        t.x("cpu_op", "aten::addmm", t0 + 40, 100)
        t.memory(t0 + 45, 4096, 0x1000 + step, 4096)
        t.launch(t0 + 50, 30 + step)
        t.x("cpu_op", "aten::t", t0 + 150, 20)
        relu = t.module("ReLU_0", t0 + 400, 300, code)
        t.x("cpu_op", "aten::relu", t0 + 410, 100)
        t.launch(t0 + 420, 12)
        t.module("Linear_0", t0 + 550, 100, relu)
        t.x("cpu_op", "aten::linear", t0 + 560, 60)
        t.memory(t0 + 570, 2048, 0x2000 + step, 6144)
        t.launch(t0 + 580, 7)
        t.memory(t0 + 680, -4096, 0x1000 + step, 2048)
        if zero_length_op:
            t.x("cpu_op", "aten::empty", t0 + 600, 0)
        assert lin
    return json.dumps({"traceEvents": t.events}).encode()


def _frames(zero_length_op: bool = False, gpu: bool = True) -> dict[str, pl.DataFrame]:
    return parse_bytes(_trace(zero_length_op, gpu)).frames


def _tables(frames: dict[str, pl.DataFrame], names: list[str]) -> dict[str, registry.Tables]:
    return registry.rank_parts(
        {0: frames["events"]},
        names,
        registry.Options(),
        threads=1,
        frames=lambda f: {0: frames[f]},
        meta={0: {}},
    )


def _counting(monkeypatch: pytest.MonkeyPatch, tree_ids: set[int]) -> list[str]:
    """Record every nesting sort (`enclosing`'s, on polars or numpy, HTA's `_levels` as the
    module view and the call graph import it) whose ranges include every tree node of the
    thread."""
    seen: list[str] = []
    ends, swept, hta_levels = enclosing._ends, enclosing._swept, sequences._levels

    def counted_ends(nodes: pl.DataFrame, probes: pl.DataFrame) -> pl.DataFrame:
        if tree_ids <= set(nodes["node"].to_list()):
            seen.append("enclosing")
        return ends(nodes, probes)

    def counted_sweep(nodes: pl.DataFrame, probes: pl.DataFrame) -> enclosing._Sweep | None:
        made = swept(nodes, probes)  # the sort on numpy, or None: `_ends` then
        if made is not None and tree_ids <= set(nodes["node"].to_list()):
            seen.append("enclosing")
        return made

    def counted_levels(nodes: pl.DataFrame) -> pl.DataFrame:
        if tree_ids <= set(nodes["idx"].to_list()):
            seen.append("hta")
        return hta_levels(nodes)

    monkeypatch.setattr(enclosing, "_ends", counted_ends)
    monkeypatch.setattr(enclosing, "_swept", counted_sweep)
    for holder in (sequences, module_view, host_context):
        monkeypatch.setattr(holder, "_levels", counted_levels)
    return seen


def _tree_ids(events: pl.DataFrame) -> set[int]:
    tree = events.filter(
        (pl.col("kind") == "cpu_op")
        | ((pl.col("kind") == "annotation") & pl.col("name").str.starts_with("ProfilerStep#"))
        | ((pl.col("kind") == "python") & pl.col("python_module_id").is_not_null())
    )
    return set(tree["idx"].to_list())


def test_the_tree_is_nested_once_per_rank(monkeypatch: pytest.MonkeyPatch) -> None:
    frames = _frames()
    events = frames["events"]
    assert not frames["memory"].is_empty() and (events["kind"] == "kernel").sum() == 6
    seen = _counting(monkeypatch, _tree_ids(events))
    together = _tables(frames, TREE_READERS)
    assert seen == ["enclosing"]  # the memory tables' one sort, read by the module view too
    modules = together["module_stats"]["module_stats"]
    assert set(modules["path"]) == {
        "Net_0",
        "Net_0/Linear_0",
        "Net_0/ReLU_0",
        "Net_0/ReLU_0/Linear_0",
    }
    lin = modules.filter(pl.col("path") == "Net_0/Linear_0").row(0, named=True)
    # Linear_0's occurrences: 2 steps x 2 calls, each one launch (30 + 31 + 7 + 7 us)
    assert (lin["occurrences"], lin["device total (us)"]) == (4, 75.0)
    # each analysis alone (fresh frames: nothing kept from another) gives the same tables
    for name in TREE_READERS:
        alone = _tables({k: v.clone() for k, v in frames.items()}, [name])[name]
        for table, df in together[name].items():
            assert alone[table].equals(df), (name, table)


def test_module_view_nests_itself_where_the_tree_could_differ() -> None:
    """A zero-length op on a module thread (HTA's rules and `enclosing`'s place it apart where
    another range ends): the view nests the thread itself, as before; elsewhere the shared
    nesting gives the same nodes, levels and parents as the view's own."""
    for zero in (False, True):
        events = _frames(zero_length_op=zero)["events"]
        mods = events.filter(module_view._is_module())
        shared_graph = module_view._shared_graph(events, mods)
        assert (shared_graph is None) == zero
        if shared_graph is not None:
            own = module_view._own_graph(events, mods)
            assert shared_graph.sort("idx").cast(own.schema).equals(own.sort("idx"))
        table = module_view.module_view({0: events})
        assert table.height == 4


def test_host_context_finds_the_true_enclosing_events() -> None:
    """Every launch's enclosing ops and modules (climbing parent links) are the events of
    its thread that contain it, outermost first, as an inequality join finds them."""
    events = _frames()["events"]
    launches = events.filter(pl.col("kind") == "runtime").select("idx", "pid", "tid", "ts", "dur")
    found = host_context.enclosing(events, launches)
    ctx = host_context.context_events(events).collect()
    expected = (
        launches.join(ctx, left_on=["pid", "tid"], right_on=["c_pid", "c_tid"])
        .filter(
            (pl.col("c_ts") <= pl.col("ts"))
            & (pl.col("c_end") >= pl.col("ts") + pl.col("dur"))
            & (pl.col("c_idx") != pl.col("idx"))
        )
        .sort(["idx", "c_ts", "c_end", "c_idx"], descending=[False, False, True, False])
    )
    # a step: 6 around the addmm's launch, 5 around relu's, 6 around the inner linear's
    assert found.height == 2 * (6 + 5 + 6)
    assert found["q"].to_list() == expected["idx"].to_list()
    assert found["c_idx"].to_list() == expected["c_idx"].to_list()


def test_kernel_attribution_nests_no_host_range_on_a_rank_without_gpu_ops(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Kernel owners nest a rank's ops, modules and annotations around its launches; a rank
    that launched nothing (a CPU-only trace) has nothing to place, so nothing is nested, and
    its attribution row is the one of no kernels."""
    calls: list[int] = []
    depths = nesting.depths

    def counted(*args: Any) -> Any:
        calls.append(len(args[0]))
        return depths(*args)

    monkeypatch.setattr(nesting, "depths", counted)
    for gpu in (True, False):
        calls.clear()
        events = _frames(gpu=gpu)["events"]
        row = kernel_owners.kernel_attribution({0: events}).row(0, named=True)
        if gpu:  # the launches and the host ranges around them, nested once
            assert len(calls) == 1 and calls[0] > 6
            assert (row["kernels"], row["kernel_time (us)"]) == (6, 30 + 31 + 2 * (12 + 7))
            assert row["no_operator (us)"] == 0
        else:
            assert calls == []
            assert (row["kernels"], row["kernel_time (us)"], row["graph_launches"]) == (0, 0, 0)
        owners = kernel_owners.kernel_owners(events)
        assert owners.height == (6 if gpu else 0)
        assert owners["operator"].to_list() == (
            ["aten::addmm", "aten::relu", "aten::linear"] * 2 if gpu else []
        )
