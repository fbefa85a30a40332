"""Every rank's and step's critical path as tables (the report's `critical_path` key), and
the path across ranks: a collective ends on every rank only after the last rank reached it.

Across ranks: each rank's graph of step i, side by side, plus for each collective instance
(matched by `collectives`: process group, sequence) an edge from every rank's call start to
every rank's call end weighing the transfer (end - last arrival), while the call's own wait
(the edge into its end on its rank) weighs 0, like a blocking sync call in HTA. The longest
path of that graph may then run through the rank that held everyone up, and the table names
it: the rank with the most time on the path, and what bound it there.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass

import numpy as np
import polars as pl

from hta_tui.analysis import collectives
from hta_tui.analysis.checkpoint import checkpoint
from hta_tui.analysis.critical_path import graph as g
from hta_tui.analysis.critical_path.longest import CycleError, solve
from hta_tui.analysis.critical_path.path import (
    BOUND_NAMES,
    NS_PER_US,
    RankPath,
    breakdown,
    edges_tables,
    path_of,
    prepared,
    what_ifs_of,
)
from hta_tui.analysis.per_rank import ranks_events, tagged

SUMMARY_COLUMNS: dict[str, pl.DataType] = {
    "rank": pl.Int64(),  # null on the rows of the path across ranks
    "step": pl.Int64(),  # N of the instance's ProfilerStep#N, as other views name the step
    "annotation": pl.String(),
    "instance_id": pl.Int64(),  # HTA's index: the i-th instance of the annotation, from 0
    "path_length_us": pl.Float64(),
    **{f"{b}_us": pl.Float64() for b in g.BOUND_TYPES},
    **{f"{b}_pct": pl.Float64() for b in g.BOUND_TYPES},
    "negative_edges": pl.Int64(),  # edges of negative weight set to 0 (as HTA does)
    "negative_us": pl.Float64(),
    "ranks_on_path": pl.String(),  # across ranks: the ranks the path runs through
    "bound_by_rank": pl.Int64(),  # across ranks: the rank with the most time on the path
    "verdict": pl.String(),
    "error": pl.String(),  # why there is no path (no such annotation, cycles)
}


WHAT_IF_COLUMNS: dict[str, pl.DataType] = {
    "rank": pl.Int64(),
    "instance_id": pl.Int64(),
    "scenario": pl.String(),
    "step_us": pl.Float64(),
    "estimate_us": pl.Float64(),  # the path again, that bound type scaled, same dependencies
    "saved_pct": pl.Float64(),
    "sentence": pl.String(),
}


Instances = list[int | tuple[int, int]] | None


def critical_path_instances(text: str) -> Instances:
    """ "first" -> [0], "all" -> None (every instance), "3" -> [3], "2-5" -> [(2, 5)] (one
    window over steps 2 to 5, HTA's tuple); ValueError on anything else."""
    t = text.strip().lower()
    if t == "first":
        return [0]
    if t == "all":
        return None
    a, dash, b = t.partition("-")
    try:
        if dash:
            first, last = int(a), int(b)
            if 0 <= first <= last:
                return [(first, last)]
        elif int(t) >= 0:
            return [int(t)]
    except ValueError:
        pass
    raise ValueError(f"critical_path_steps wants first, all, N or N-M, not {text!r}")


def step_count(events: pl.DataFrame, annotation: str) -> int:
    """How many CPU-side instances of the annotation the rank has."""
    return events.filter(
        pl.col("stream").is_null() & pl.col("name").str.contains(annotation, literal=True)
    ).height


def instance_steps(events: pl.DataFrame, annotation: str) -> list[int | None]:
    """The step number (N of `...#N`) of each instance of the annotation, in HTA's instance
    order (as `windows` counts them): the other views name a step by N, not by its index."""
    return (
        events.filter(
            pl.col("stream").is_null() & pl.col("name").str.contains(annotation, literal=True)
        )
        .sort("start", "idx")["name"]
        .str.extract(r"#(\d+)$", 1)
        .cast(pl.Int64, strict=False)
        .to_list()
    )


def _row(rank: int | None, annotation: str, instance: int, **kw: object) -> dict[str, object]:
    row: dict[str, object] = dict.fromkeys(SUMMARY_COLUMNS)
    row.update(rank=rank, annotation=annotation, instance_id=instance, **kw)
    return row


def _summary(rp: RankPath, annotation: str, instance: int) -> dict[str, object]:
    b = breakdown(rp)
    total = rp.length_ns
    top = max(g.BOUND_TYPES, key=lambda k: b[k])
    row = _row(
        rp.rank,
        annotation,
        instance,
        path_length_us=total / NS_PER_US,
        negative_edges=rp.graph.negative_edges,
        negative_us=rp.graph.negative_ns / NS_PER_US,
        verdict=f"{top} {100 * b[top] / total:.0f}%" if total else "empty path",
    )
    for k in g.BOUND_TYPES:
        row[f"{k}_us"] = b[k] / NS_PER_US
        row[f"{k}_pct"] = 100 * b[k] / total if total else 0.0
    return row


def rank_paths(
    ranks: Mapping[int, pl.DataFrame],
    annotation: str = "ProfilerStep",
    instances: Instances = None,
    *,
    hta_compat: bool = False,
    data_loading: str | None = None,
) -> tuple[dict[tuple[int, int], RankPath], list[dict[str, object]]]:
    """Each rank's path per instance (all of them by default), and a summary row for each
    (with the reason where a rank has none). The ranks of one schema are made at once
    (`_at_once`: their windows, launch queues and graphs in one query set); a batch that
    fails is made again rank by rank, so a rank whose data it cannot read costs only its
    own rows."""
    made: dict[int, list[tuple[dict[str, object], RankPath | None]]] = {}
    for group in _same_schema(ranks):
        try:
            made.update(_at_once(group, annotation, instances, hta_compat, data_loading))
        except Exception:
            if len(group) == 1:
                raise
            for rank, raw in group.items():
                made.update(_at_once({rank: raw}, annotation, instances, hta_compat, data_loading))
    paths: dict[tuple[int, int], RankPath] = {}
    rows: list[dict[str, object]] = []
    for rank in sorted(ranks):
        for row, rp in made[rank]:
            rows.append(row)
            if rp is not None:
                paths[(rank, row["instance_id"])] = rp  # type: ignore[index]
    return paths, rows


def _same_schema(ranks: Mapping[int, pl.DataFrame]) -> list[Mapping[int, pl.DataFrame]]:
    """The ranks in groups of one schema (a concatenation would cast a column another rank
    holds in another type); all of them, the mapping itself, when they agree."""
    if len({(tuple(raw.columns), tuple(raw.dtypes)) for raw in ranks.values()}) == 1:
        return [ranks]  # (their schemas the same, in one order: no sorted schema a rank)
    groups: dict[tuple, dict[int, pl.DataFrame]] = {}
    for rank, raw in sorted(ranks.items()):
        key = tuple(sorted((c, str(t)) for c, t in raw.schema.items()))
        groups.setdefault(key, {})[rank] = raw
    return [ranks] if len(groups) == 1 else list(groups.values())


#: one window to follow: (which instance(s), its instance id, step number, row name, window)
_Todo = tuple[int | tuple[int, int], int, int | None, str, tuple[int, int] | None]


def _at_once(
    ranks: Mapping[int, pl.DataFrame],
    annotation: str,
    instances: Instances,
    hta_compat: bool,
    data_loading: str | None,
) -> dict[int, list[tuple[dict[str, object], RankPath | None]]]:
    """`rank_paths` of ranks of one schema, made at once: rank -> its (row, path or None)."""
    if hta_compat:  # (rounded or not as each rank's own timestamps say)
        every = tagged([(r, prepared(raw, hta_compat=True)) for r, raw in sorted(ranks.items())])
    else:
        every = prepared(ranks_events(ranks))
    todo = _windows(every, ranks, annotation, instances)
    wanted = [(rank, t) for rank in sorted(ranks) for t in todo[rank] if t[4] is not None]
    makers: list[Callable[[], tuple[g.Graph, np.ndarray]]] = []
    if wanted:  # (a job without steps makes no launch queues: 0.7 s of CPU on 8 x 100 MB)
        try:
            with_gpu = set(every.filter(pl.col("stream").is_not_null())["rank"].unique())
            makers = g.build_many(
                every,
                [
                    g.Window(rank, *t[4], extra=not hta_compat and rank not in with_gpu)  # type: ignore[misc]
                    for rank, t in wanted
                ],
                g.ranks_queues(every, hta_launches=hta_compat),
                data_loading,
                graph_kernels=not hta_compat,
            )
        except Exception as e:
            if len(ranks) > 1:
                raise  # (made again rank by rank)
            makers = [functools.partial(_failed, e)] * len(wanted)  # its windows' rows say why
    graphs = {(rank, t[0]): m for (rank, t), m in zip(wanted, makers, strict=True)}
    out: dict[int, list[tuple[dict[str, object], RankPath | None]]] = {}
    for rank in sorted(ranks):
        mine = out.setdefault(rank, [])
        if not todo[rank]:
            mine.append((_row(rank, annotation, 0, error=f"no {annotation!r} on this rank"), None))
        for which, i, step, name, w in todo[rank]:
            if w is None:
                mine.append(
                    (_row(rank, name, i, error=f"no instance {which} of {annotation!r}"), None)
                )
                continue
            checkpoint()  # each graph is a piece a view left behind stops after
            try:
                rp = path_of(rank, w, graphs[(rank, which)], data_loading)
            except CycleError as e:
                mine.append((_row(rank, name, i, step=step, error=f"dependencies loop: {e}"), None))
                continue
            except Exception as e:  # one rank's odd data costs only its own row
                logging.getLogger("hta_tui").exception("critical path of rank %s failed", rank)
                reason = f"{type(e).__name__}: {e}".splitlines()[0][:200]
                mine.append((_row(rank, name, i, step=step, error=reason), None))
                continue
            mine.append(({**_summary(rp, name, i), "step": step}, rp))
    return out


def _failed(e: Exception) -> tuple[g.Graph, np.ndarray]:
    """A window of a rank whose graphs could not be made: the reason, on its row."""
    raise e


def _windows(
    every: pl.DataFrame,
    ranks: Mapping[int, pl.DataFrame],
    annotation: str,
    instances: Instances,
) -> dict[int, list[_Todo]]:
    """Each rank's windows to follow (HTA's, `path.windows`; None where the instance is
    missing), from every rank's instances of the annotation found in one query."""
    ann = (
        every.filter(
            pl.col("stream").is_null() & pl.col("name").str.contains(annotation, literal=True)
        )
        .sort("rank", "start", "idx")
        .select(
            "rank",
            "start",
            "end",
            pl.col("name").str.extract(r"#(\d+)$", 1).cast(pl.Int64, strict=False).alias("step"),
        )
    )
    per = ann.partition_by("rank", as_dict=True, include_key=False, maintain_order=True)
    whole = {}
    if annotation == "":  # every window is the whole trace (`path.windows`)
        spans = every.group_by("rank").agg(pl.col("start").min(), pl.col("end").max())
        whole = {r: (int(s), int(e)) for r, s, e in spans.iter_rows()}
    out: dict[int, list[_Todo]] = {}
    for rank in sorted(ranks):
        mine = per.get((rank,))
        starts = mine["start"].to_list() if mine is not None else []
        ends = mine["end"].to_list() if mine is not None else []
        numbers = mine["step"].to_list() if mine is not None and annotation else []
        todo: list[_Todo] = []
        for which in list(instances) if instances is not None else range(len(starts)):
            first, last = which if isinstance(which, tuple) else (which, which)
            lo = max(first + len(starts) if first < 0 else first, 0)
            hi = lo + max(last - first + 1, 0)
            w = (int(min(starts[lo:hi])), int(max(ends[lo:hi]))) if starts[lo:hi] else None
            if annotation == "":
                w = whole.get(rank)
            # a range of steps is one window, shown under its first step
            i = which if isinstance(which, int) else which[0]
            step = numbers[i] if 0 <= i < len(numbers) else None
            name = annotation if isinstance(which, int) else f"{annotation} {which[0]}-{which[1]}"
            todo.append((which, i, step, name, w))
        out[rank] = todo
    return out


def _collective_nodes(
    ranks: Mapping[int, pl.DataFrame], paths: Mapping[int, RankPath]
) -> pl.DataFrame:
    """Matched collective calls inside the ranks' windows: rank, pg, seq, the call's row in
    its rank's graph, its start and end (ns)."""
    calls = collectives.calls({r: ranks[r] for r in paths})
    if calls.is_empty():
        return pl.DataFrame()
    out = [
        _rank_call_nodes(ranks[rank], rp, calls.filter(pl.col("rank") == rank))
        for rank, rp in paths.items()
    ]
    return _complete(pl.concat(out))


CALL_NODE_COLUMNS: dict[str, pl.DataType] = {
    "rank": pl.Int64(),
    "pg": pl.String(),
    "seq": pl.Int64(),
    "row": pl.Int64(),
    "issuer": pl.Int64(),
    "s": pl.Int64(),
    "e": pl.Int64(),
}


def _rank_call_nodes(raw: pl.DataFrame, rp: RankPath, calls: pl.DataFrame) -> pl.DataFrame:
    """One rank's collective calls (`collectives.rank_calls`, in (pg, seq) order) on the
    nodes of its graph: the part of `_collective_nodes` the rank makes alone."""
    if calls.is_empty():  # (no query: a rank without collectives, most tiny ones)
        return pl.DataFrame(schema=CALL_NODE_COLUMNS)
    nodes = rp.graph.nodes.join(raw.select("idx", pl.col("ts").alias("raw_ts")), on="idx")
    c = calls.join(
        nodes.select("row", "name", "raw_ts", "start", "end"),
        left_on=["name", "ts"],
        right_on=["name", "raw_ts"],
        how="inner",
    )
    # the op that issued a call on another thread (c10d::allreduce_ for a gloo worker)
    c10d = (
        nodes.filter(pl.col("name").str.starts_with("c10d::"))
        .select(pl.col("row").alias("issuer"), pl.col("raw_ts").alias("issued_ts"))
        .sort("issued_ts")
    )
    c = c.sort("arrival").join_asof(
        c10d, left_on="arrival", right_on="issued_ts", strategy="backward"
    )
    return c.select(
        "rank",
        "pg",
        "seq",
        "row",
        pl.col("issuer").cast(pl.Int64),
        pl.col("start").alias("s"),
        pl.col("end").alias("e"),
    ).cast(CALL_NODE_COLUMNS)  # type: ignore[arg-type]


def _complete(calls: pl.DataFrame) -> pl.DataFrame:
    """Complete instances only: every rank of the instance has its call in its window."""
    return calls.with_columns(pl.len().over("pg", "seq").alias("n")).filter(pl.col("n") > 1)


@dataclass(frozen=True)
class GraphArrays:
    """What the path across ranks needs of one rank's graph of a step: its edges (src, dst,
    type, weight, row), each edge's bound type and its number of nodes."""

    src: np.ndarray
    dst: np.ndarray
    type: np.ndarray
    weight: np.ndarray
    row: np.ndarray
    bound: np.ndarray
    nodes: int

    @classmethod
    def of(cls, rp: RankPath) -> GraphArrays:
        gr = rp.graph
        return cls(gr.src, gr.dst, gr.type, gr.weight, gr.row, rp.bound, gr.nodes.height)


def job_path(
    ranks: Mapping[int, pl.DataFrame],
    paths: Mapping[int, RankPath],
) -> tuple[int, np.ndarray, np.ndarray, dict[str, np.ndarray]] | None:
    """The longest path through every rank's graph of one step, joined at collectives.
    Returns (length ns, path edge ids, edge ranks, the joined edge columns); None when no
    two ranks share a collective in the step."""
    calls = _collective_nodes(ranks, paths)
    if calls.is_empty():
        return None
    return joined_path(calls, {r: GraphArrays.of(rp) for r, rp in paths.items()})


def joined_path(
    calls: pl.DataFrame, graphs: Mapping[int, GraphArrays]
) -> tuple[int, np.ndarray, np.ndarray, dict[str, np.ndarray]]:
    """`job_path` from the ranks' complete collective calls (`_collective_nodes`) and their
    graphs' arrays: what the client needs, not the events."""
    offset: dict[int, int] = {}
    total = 0
    cols: dict[str, list[np.ndarray]] = {
        k: [] for k in ("src", "dst", "type", "weight", "row", "bound", "rank")
    }
    for rank, gr in sorted(graphs.items()):
        offset[rank] = total
        w = gr.weight.copy()
        cols["src"].append(gr.src + total)
        cols["dst"].append(gr.dst + total)
        cols["type"].append(gr.type)
        cols["weight"].append(w)
        cols["row"].append(gr.row)
        cols["bound"].append(gr.bound)
        cols["rank"].append(np.full(w.size, rank))
        total += 2 * gr.nodes
    cat = {k: np.concatenate(v) for k, v in cols.items()}
    # the wait inside each call weighs 0: edges into the call's end node
    c = calls.with_columns(
        pl.col("rank").replace_strict(offset, return_dtype=pl.Int64).alias("off")
    ).with_columns(
        (pl.col("off") + 2 * pl.col("row")).alias("begin"),
        (pl.col("off") + 2 * pl.col("row") + 1).alias("finish"),
        pl.col("s").max().over("pg", "seq").alias("last_arrival"),
    )
    ends = c["finish"].to_numpy()
    cat["weight"] = np.where(np.isin(cat["dst"], ends), 0, cat["weight"])
    pairs = c.select("pg", "seq", "begin").join(
        c.select("pg", "seq", "finish", "e", "last_arrival", "rank", "row"), on=["pg", "seq"]
    )
    issued = c.filter(pl.col("issuer").is_not_null() & (pl.col("issuer") != pl.col("row")))
    add_issue = {
        "src": (issued["off"] + 2 * issued["issuer"]).to_numpy(),
        "dst": issued["begin"].to_numpy(),
        "type": np.full(issued.height, g.DEP, dtype=np.int8),
        "weight": np.zeros(issued.height, dtype=np.int64),
        "row": np.full(issued.height, -1),
        "rank": issued["rank"].to_numpy(),
        "bound": np.full(issued.height, len(BOUND_NAMES) - 1, dtype=np.int8),
    }
    add = {
        "src": pairs["begin"].to_numpy(),
        "dst": pairs["finish"].to_numpy(),
        "type": np.full(pairs.height, g.SYNC, dtype=np.int8),
        "weight": np.maximum(pairs["e"].to_numpy() - pairs["last_arrival"].to_numpy(), 0),
        "row": pairs["row"].to_numpy(),
        "rank": pairs["rank"].to_numpy(),
    }
    # the transfer is the call's own time: bound like the call's span
    call_bound = {}
    for rank, gr in graphs.items():
        span = gr.type == g.OP
        call_bound[rank] = dict(zip(gr.row[span].tolist(), gr.bound[span].tolist(), strict=False))
    add["bound"] = np.array(
        [
            call_bound[r].get(row, 0)
            for r, row in zip(add["rank"].tolist(), add["row"].tolist(), strict=True)
        ],
        dtype=np.int8,
    )
    for k in cat:
        cat[k] = np.concatenate(
            [cat[k], add[k].astype(cat[k].dtype), add_issue[k].astype(cat[k].dtype)]
        )
    length, path, _ = solve(total, cat["src"], cat["dst"], cat["weight"])
    return length, path, cat["rank"][path], cat


def _job_row(
    annotation: str, instance: int, length: int, path: np.ndarray, cat: dict[str, np.ndarray]
) -> dict[str, object]:
    w = cat["weight"][path]
    b = np.bincount(cat["bound"][path], weights=w, minlength=len(BOUND_NAMES))
    ranks_on = cat["rank"][path]
    per_rank = pl.DataFrame({"rank": ranks_on, "w": w, "bound": cat["bound"][path]})
    by_rank = per_rank.group_by("rank").agg(pl.col("w").sum()).sort("w", "rank", descending=True)
    top_rank = int(by_rank["rank"][0]) if by_rank.height else None
    top_bound = (
        per_rank.filter(pl.col("rank") == top_rank)
        .group_by("bound")
        .agg(pl.col("w").sum())
        .sort("w", descending=True)["bound"][0]
        if top_rank is not None
        else None
    )
    crossed = ", ".join(str(r) for r in dict.fromkeys(ranks_on.tolist()))
    row = _row(
        None,
        annotation,
        instance,
        path_length_us=length / NS_PER_US,
        ranks_on_path=crossed,
        bound_by_rank=top_rank,
        verdict=(
            f"bound by rank {top_rank}'s {BOUND_NAMES[top_bound] or 'dependencies'}"
            if top_rank is not None and top_bound is not None
            else "empty path"
        ),
    )
    for i, k in enumerate(g.BOUND_TYPES):
        row[f"{k}_us"] = b[i] / NS_PER_US
        row[f"{k}_pct"] = 100 * b[i] / length if length else 0.0
    return row


def critical_path_tables(
    ranks: Mapping[int, pl.DataFrame],
    annotation: str = "ProfilerStep",
    instances: Instances = None,
    *,
    hta_compat: bool = False,
    data_loading: str | None = None,
) -> dict[str, pl.DataFrame]:
    """`critical_path`: one row per rank and step (and per step across ranks, rank null);
    `critical_path_edges`: the edges of each rank's path, in path order;
    `critical_path_what_if`: each path's standard what-ifs."""
    return critical_path_result(
        ranks, annotation, instances, hta_compat=hta_compat, data_loading=data_loading
    )[0]


def critical_path_result(
    ranks: Mapping[int, pl.DataFrame],
    annotation: str = "ProfilerStep",
    instances: Instances = None,
    *,
    hta_compat: bool = False,
    data_loading: str | None = None,
) -> tuple[dict[str, pl.DataFrame], dict[tuple[int, int], RankPath]]:
    """The tables and the paths behind them ((rank, instance) -> path: the app exports one)."""
    paths, rows = rank_paths(
        ranks, annotation, instances, hta_compat=hta_compat, data_loading=data_loading
    )
    steps = sorted({i for _, i in paths})
    # across ranks, instance i is named by the ranks' step number for it
    numbers: dict[int, int] = {}
    for row in rows:
        if row["step"] is not None:
            numbers.setdefault(row["instance_id"], row["step"])  # type: ignore[call-overload]
    for i in steps:
        per_rank = {r: rp for (r, j), rp in paths.items() if j == i}
        if len(per_rank) < 2:
            continue
        try:
            joined = job_path(ranks, per_rank)
        except CycleError as e:
            error = f"dependencies loop across ranks: {e}"
            rows.append(_row(None, annotation, i, step=numbers.get(i), error=error))
            continue
        if joined is not None:
            length, path, _, cat = joined
            rows.append({**_job_row(annotation, i, length, path, cat), "step": numbers.get(i)})
    return _tables(rows, paths), paths


def _tables(rows: list[dict[str, object]], paths: Mapping[tuple[int, int], RankPath]) -> Tables:
    summary = (
        pl.DataFrame(rows, schema=SUMMARY_COLUMNS) if rows else pl.DataFrame(schema=SUMMARY_COLUMNS)
    )
    ordered = sorted(paths.items())
    answers = what_ifs_of([rp for _, rp in ordered])  # (every path's at once)
    what_if = pl.DataFrame(
        [
            {
                "rank": rp.rank,
                "instance_id": i,
                "scenario": label,
                "step_us": rp.length_ns / NS_PER_US,
                "estimate_us": new / NS_PER_US,
                "saved_pct": 100 * (rp.length_ns - new) / rp.length_ns if rp.length_ns else 0.0,
                "sentence": text,
            }
            for ((_, i), rp), mine in zip(ordered, answers, strict=True)
            for label, new, text in mine
        ],
        schema=WHAT_IF_COLUMNS,
    )
    edges = [(i, rp) for (_, i), rp in sorted(paths.items())]
    return {
        "critical_path": summary,
        "critical_path_edges": edges_tables(edges) if edges else pl.DataFrame(),
        "critical_path_what_if": what_if,
    }


Tables = dict[str, pl.DataFrame]

#: What a rank sends besides its own rows for the path across ranks (`critical_path_summary`).
GRAPH_EDGES, GRAPH_NODES, GRAPH_CALLS = "path_graph_edges", "path_graph_nodes", "path_graph_calls"


def critical_path_summary(
    ranks: Mapping[int, pl.DataFrame],
    annotation: str = "ProfilerStep",
    instances: Instances = None,
    *,
    hta_compat: bool = False,
    data_loading: str | None = None,
) -> Tables:
    """Each rank's own tables (its rows, edges, what-ifs: HTA's path is one rank's), and
    for the path across ranks each step's graph as arrays (its edges, about three per event
    of the step) with its collective calls on the graph's nodes: the path across ranks is
    a longest path over every rank's graph of the step, so it needs them all
    (`critical_path_reduce`)."""
    paths, rows = rank_paths(
        ranks, annotation, instances, hta_compat=hta_compat, data_loading=data_loading
    )
    out = _tables(rows, paths)
    keys = sorted(paths)
    arrays = [GraphArrays.of(paths[k]) for k in keys]
    cols = ("src", "dst", "type", "weight", "row", "bound")
    sizes = [a.src.size for a in arrays]
    # every path's graph in one frame (a frame per path cost a query each)
    out[GRAPH_EDGES] = (
        pl.DataFrame(
            {
                "rank": np.repeat(np.array([r for r, _ in keys], dtype=np.int64), sizes),
                "instance_id": np.repeat(np.array([i for _, i in keys], dtype=np.int64), sizes),
                **{c: np.concatenate([getattr(a, c) for a in arrays]) for c in cols},
            }
        )
        if keys
        else pl.DataFrame()
    )
    out[GRAPH_NODES] = pl.DataFrame(
        {
            "rank": [r for r, _ in keys],
            "instance_id": [i for _, i in keys],
            "nodes": [a.nodes for a in arrays],
        },
        schema={"rank": pl.Int64(), "instance_id": pl.Int64(), "nodes": pl.Int64()},
    )
    mine = _calls_by_rank(ranks) if keys else {}
    calls = []
    for (rank, i), rp in sorted(paths.items()):
        theirs = mine.get(rank)
        if theirs is not None:  # (no query for a rank without collective calls)
            c = _rank_call_nodes(ranks[rank], rp, theirs)
            calls.append(c.select(pl.lit(i, pl.Int64).alias("instance_id"), pl.all()))
    call_schema = {"instance_id": pl.Int64(), **CALL_NODE_COLUMNS}
    out[GRAPH_CALLS] = (
        pl.concat(calls).cast(call_schema)  # type: ignore[arg-type]
        if calls
        else pl.DataFrame(schema=call_schema)
    )
    return out


def _calls_by_rank(ranks: Mapping[int, pl.DataFrame]) -> dict[int, pl.DataFrame]:
    """Each rank's collective calls (`collectives.ranks_calls`, every rank's made at once)
    in (pg, seq) order, as the matched calls are; a rank without any is left out."""
    every = collectives.ranks_calls(ranks)
    if every.is_empty():
        return {}
    every = every.sort("pg", "seq", "rank", maintain_order=True)
    parts = every.partition_by("rank", as_dict=True, maintain_order=True)
    return {int(k[0]): df for k, df in parts.items()}  # type: ignore[call-overload]


def critical_path_reduce(
    parts: Mapping[str, pl.DataFrame], annotation: str = "ProfilerStep"
) -> Tables:
    """`critical_path_tables` from every rank's `critical_path_summary` (concatenated in
    rank order): the ranks' rows, then for each step two ranks or more have a path of, the
    longest path across their graphs."""
    rows = parts["critical_path"].to_dicts()
    numbers: dict[int, int] = {}
    for row in rows:
        if row["step"] is not None:
            numbers.setdefault(row["instance_id"], row["step"])
    nodes, edges, calls = parts[GRAPH_NODES], parts[GRAPH_EDGES], parts[GRAPH_CALLS]
    for i in sorted(set(nodes["instance_id"].to_list())):
        here = nodes.filter(pl.col("instance_id") == i)
        if here.height < 2:
            continue
        mine = _complete(calls.filter(pl.col("instance_id") == i).drop("instance_id"))
        if mine.is_empty():
            continue
        # one pass over the step's edges (not one filter per rank: linear in the ranks)
        by_rank = edges.filter(pl.col("instance_id") == i).partition_by(
            "rank", as_dict=True, maintain_order=True
        )
        graphs = {}
        for rank, n in here.select("rank", "nodes").iter_rows():
            e = by_rank.get((rank,), edges.clear())
            graphs[rank] = GraphArrays(
                *(e[k].to_numpy() for k in ("src", "dst", "type", "weight", "row", "bound")),
                nodes=n,
            )
        try:
            length, path, _, cat = joined_path(mine, graphs)
        except CycleError as e:
            error = f"dependencies loop across ranks: {e}"
            rows.append(_row(None, annotation, i, step=numbers.get(i), error=error))
            continue
        rows.append({**_job_row(annotation, i, length, path, cat), "step": numbers.get(i)})
    return {
        "critical_path": pl.DataFrame(rows, schema=SUMMARY_COLUMNS)
        if rows
        else pl.DataFrame(schema=SUMMARY_COLUMNS),
        "critical_path_edges": parts["critical_path_edges"],
        "critical_path_what_if": parts["critical_path_what_if"],
    }
