"""Issue 24, point 9: module trees without cycles. torch.compile names every GraphModule
`GraphModule_0` (module id 0: each graph is a class of its own) and a GraphModule's call enters
Module.__call__ twice, so a GraphModule_0 frame appears as its own parent; the module view made
a 64-level chain of it whose levels exceeded their parent's time."""

from __future__ import annotations

import json
from typing import Any

import polars as pl

from hta_tui.analysis import module_view as module_view_mod
from hta_tui.analysis.module_view import module_view
from hta_tui.trace.parse import parse_bytes


class _Trace:
    def __init__(self) -> None:
        self.events: list[dict[str, Any]] = []
        self.py_id = 0

    def frame(self, name: str, ts: float, dur: float, parent: int | None, **extra: Any) -> int:
        self.py_id += 1
        args = {"Python id": self.py_id, "Python parent id": parent, **extra}
        self.events.append(
            {"ph": "X", "cat": "python_function", "name": name, "pid": 1, "tid": 1,
             "ts": ts, "dur": dur, "args": args}
        )  # fmt: skip
        return self.py_id

    def module(self, name: str, ts: float, dur: float, parent: int | None) -> int:
        return self.frame(f"nn.Module: {name}", ts, dur, parent, **{"Python module id": 0})

    def op(self, ts: float, dur: float) -> None:
        self.events.append(
            {"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 1, "tid": 1, "ts": ts,
             "dur": dur, "args": {}}
        )  # fmt: skip


def _compiled_trace() -> bytes:
    """Two steps of Net_0 running two compiled graphs (a graph break between them); each
    graph's call is a GraphModule_0 frame inside a GraphModule_0 frame (`_WrappedCall`), and
    the second graph runs a third one nested in it."""
    t = _Trace()
    for step in range(2):
        t0 = step * 1000.0
        t.events.append(
            {"ph": "X", "cat": "user_annotation", "name": f"ProfilerStep#{step}", "pid": 1,
             "tid": 1, "ts": t0, "dur": 900.0}
        )  # fmt: skip
        net = t.module("Net_0", t0 + 10, 800, None)
        for g0, g_dur in ((t0 + 20, 300.0), (t0 + 400, 380.0)):
            outer = t.module("GraphModule_0", g0, g_dur, net)
            wrapped = t.frame("torch/fx/graph_module.py(300): __call__", g0 + 1, g_dur - 2, outer)
            inner = t.module("GraphModule_0", g0 + 2, g_dur - 4, wrapped)
            t.op(g0 + 5, 50)
            if g_dur > 300:  # the second graph calls a third compiled graph
                nested = t.module("GraphModule_0", g0 + 100, 200, inner)
                t.module("GraphModule_0", g0 + 101, 198, nested)
                t.module("Linear_0", g0 + 110, 100, nested)
                t.op(g0 + 120, 60)
    return json.dumps({"traceEvents": t.events}).encode()


def test_compiled_graph_modules_make_no_chain() -> None:
    events = parse_bytes(_compiled_trace()).frames["events"]
    table = module_view({0: events})
    assert table["depth"].max() == 2  # Net_0 / GraphModule_0 / Linear_0
    assert sorted(table["path"]) == ["Net_0", "Net_0/GraphModule_0", "Net_0/GraphModule_0/Linear_0"]
    rows = {r["module"]: r for r in table.iter_rows(named=True)}
    net, graph = rows["Net_0"], rows["GraphModule_0"]
    # the outermost graph calls only: 300 + 380 us a step; no level above its parent's time
    assert graph["host total (us)"] == 2 * (300 + 380)
    assert net["host total (us)"] == 2 * 800
    assert graph["host total (us)"] <= net["host total (us)"]
    assert rows["Linear_0"]["host total (us)"] <= graph["host total (us)"]
    # every frame is an instance: 2 steps x (2 + 2 + 2 nested)
    assert graph["occurrences"] == 12
    # host self still adds up: the top module's total is every row's self + the operators'
    ops_us = 2 * (50 + 50 + 60)
    assert sum(r["host self (us)"] for r in rows.values()) + ops_us == net["host total (us)"]


def test_modules_calling_each_other_end_the_path() -> None:
    """A cycle between two modules (A's frame under B's under A's) ends a path instead of
    repeating it 64 times."""
    t = _Trace()
    a = t.module("A_0", 0, 100, None)
    b = t.module("B_0", 1, 98, a)
    t.module("A_0", 2, 96, b)
    table = module_view(
        {0: parse_bytes(json.dumps({"traceEvents": t.events}).encode()).frames["events"]}
    )
    assert table["depth"].max() <= 2
    assert table["path"].str.len_chars().max() < 20
    assert not table.filter(pl.col("path").str.count_matches("A_0") > 2).height


def test_modules_under_many_parents_keep_one_path_per_edge(monkeypatch) -> None:
    """Modules each under both modules of the level above, 12 levels deep: 2^11 paths to the
    deepest. Python parent ids tangled across copies of a trace gave every module ten parents
    and the view ran out of memory enumerating 10^depth paths; past `MAX_PATHS` (lowered here
    to keep the test cheap) each (module, parent) row keeps one path, a real one: a path
    ending in the row's parent, as deep as the level."""
    monkeypatch.setattr(module_view_mod, "MAX_PATHS", 1000, raising=False)
    t = _Trace()
    levels, ts = 12, 0.0
    above: list[int] = []
    for level in range(levels):
        here: list[int] = []
        for k in range(2):
            for parent in above or [None]:  # one occurrence under each module above
                here.append(t.module(f"L{level}x{k}_0", ts, 1, parent))
                ts += 2
        # the next level's parents: one occurrence of each module of this level
        above = here[:: max(1, len(above))]
    events = parse_bytes(json.dumps({"traceEvents": t.events}).encode()).frames["events"]
    table = module_view({0: events})
    edges = 2 + (levels - 1) * 4
    assert table.height == edges
    assert table.select("module", "parent").unique().height == edges
    level_of = pl.col("module").str.extract(r"^L(\d+)x").cast(pl.UInt32)
    assert (table["depth"] == table.select(level_of)["module"]).all()
    parts = pl.col("path").str.split("/")
    ok = (parts.list.last() == pl.col("module")) & (
        pl.col("parent").is_null() | (parts.list.get(-2, null_on_oob=True) == pl.col("parent"))
    )
    assert table.select(ok.all()).item()


def test_module_parents_follow_the_parent_ids() -> None:
    """`_module_parents` (numpy pointer jumping) gives each asked Python frame the nearest
    module frame up its chain of parent ids, as a walk up the chain does: past non-module
    frames, none for a chain without one, a loop of frames (tangled ids) or a missing parent;
    frames in any order, or in id order."""
    import numpy as np

    from hta_tui.analysis.module_view import _module_parents

    rng = np.random.default_rng(5)
    n = 3000
    ids = rng.permutation(np.arange(10, 10 + n))
    parents = [None if i < 20 else int(ids[rng.integers(0, i)]) for i in range(n)]
    parents[25], parents[26] = int(ids[26]), int(ids[25])  # a loop of two frames
    parents[30] = 999_999  # a parent never seen
    modules = [7 if rng.random() < 0.2 else None for _ in range(n)]
    python = pl.DataFrame(
        {"python_id": ids, "python_parent_id": parents, "python_module_id": modules},
        schema={"python_id": pl.Int64, "python_parent_id": pl.Int64, "python_module_id": pl.Int64},
    )
    parent_of = dict(zip(ids.tolist(), parents, strict=True))
    is_module = {i for i, m in zip(ids.tolist(), modules, strict=True) if m is not None}

    def walk(frame: int) -> int | None:
        seen, at = set(), parent_of.get(frame)
        while at is not None and at in parent_of and at not in seen:
            if at in is_module:
                return at
            seen.add(at)
            at = parent_of[at]
        return None

    got = dict(_module_parents(python, python["python_id"]).iter_rows())
    assert got == {i: walk(i) for i in ids.tolist()}
    assert sum(v is not None for v in got.values()) > n // 2
    # frames in id order (as written: no sort), asked for some of them only
    in_order = python.sort("python_id")
    asked = in_order["python_id"].gather_every(3)
    got = dict(_module_parents(in_order, asked).iter_rows())
    assert got == {i: walk(i) for i in asked.to_list()}
    # in id order with a gap (a frame missing: chains through it end there): a parent's row
    # searched for, not read off its id
    gap = 10 + n // 2
    gapped = in_order.filter(pl.col("python_id") != gap)
    del parent_of[gap]
    is_module.discard(gap)
    got = dict(_module_parents(gapped, gapped["python_id"]).iter_rows())
    assert got == {i: walk(i) for i in gapped["python_id"].to_list()}


def _text_paths(table: pl.DataFrame, cap: int | None) -> pl.DataFrame | None:
    """The module view's paths as it made them on "name\x00id" texts (every path of each
    row, None once there are more than `cap`; one each if no cap): what `_climb` makes on
    codes."""
    link = table.select(
        pl.col("module").alias("p_module"),
        pl.col("module_id").alias("p_id"),
        pl.col("parent").alias("p_parent"),
        pl.col("parent_id").alias("p_parent_id"),
    )
    if cap is None:
        link = link.sort(pl.all(), nulls_last=True)
    key = pl.format("{}\x00{}", "up", "up_id")
    cur = table.with_columns(
        pl.col("module").alias("path"),
        pl.lit(0, pl.UInt32).alias("depth"),
        pl.col("parent").alias("up"),
        pl.col("parent_id").alias("up_id"),
        pl.concat_list(pl.format("{}\x00{}", "module", "module_id")).alias("seen"),
    ).with_row_index("__row")
    for _ in range(64):
        cycle = pl.col("seen").list.contains(key).fill_null(False)
        cur = cur.with_columns(
            pl.when(cycle).then(None).otherwise(pl.col("up")).alias("up"),
            pl.when(cycle).then(None).otherwise(pl.col("up_id")).alias("up_id"),
        )
        if cur.filter(pl.col("up").is_not_null()).is_empty():
            break
        cur = cur.with_columns(pl.col("seen").list.concat(pl.concat_list(key)))
        cur = (
            cur.join(
                link,
                left_on=["up", "up_id"],
                right_on=["p_module", "p_id"],
                how="left",
                maintain_order="left_right",
            )
            .with_columns(
                pl.when(pl.col("up").is_not_null())
                .then(pl.format("{}/{}", "up", "path"))
                .otherwise(pl.col("path"))
                .alias("path"),
                (pl.col("depth") + pl.col("up").is_not_null().cast(pl.UInt32)).alias("depth"),
                pl.col("p_parent").alias("up"),
                pl.col("p_parent_id").alias("up_id"),
            )
            .drop("p_parent", "p_parent_id")
        )
        if cap is None:
            cur = cur.unique("__row", keep="first", maintain_order=True)
        elif cur.height > cap:
            return None
    return cur.drop("__row", "up", "up_id", "seen")


def test_climb_is_the_pass_on_texts() -> None:
    """`_climb` (the climb on integer codes) gives the pass on texts' paths, rows and
    order, and None exactly when it does, on tangled tables: several parents per module,
    cycles, self-parents, null parents and null ids, at caps around their path counts and
    without a cap (one path a row)."""
    import random

    from hta_tui.analysis.module_view import _climb

    checked = {True: 0, False: 0}
    for seed in range(14):
        rng = random.Random(seed)
        names = [f"M{i}" for i in range(rng.randint(2, 7))]
        rows = []
        for _ in range(rng.randint(2, 24)):
            mod, mid = rng.choice(names), rng.choice([0, 1, 1, 2, None])
            parent = rng.choice([*names, None])
            pid = rng.choice([0, 1, 2, None]) if parent is not None else None
            rows.append((mod, mid, parent, pid))
        table = pl.DataFrame(
            rows,
            schema={
                "module": pl.String,
                "module_id": pl.Int64,
                "parent": pl.String,
                "parent_id": pl.Int64,
            },
            orient="row",
        )
        for cap in (1, table.height, 10_000, None):
            climbed, texts = _climb(table, cap), _text_paths(table, cap)
            fits = climbed is not None
            assert fits == (texts is not None), (seed, cap)
            if climbed is not None:
                assert climbed.equals(texts), (seed, cap)
            if cap is not None:
                checked[fits] += 1
    assert checked[True] > 5 and checked[False] > 5  # both answers were tried
