"""The TensorBoard plugin's Operator view: per operator (and per operator + input shape) calls,
host and device self/total time, tensor-core eligibility and share, call stacks.

Host total = the op's duration; host self = minus its direct child nodes and its runtime calls
(PyTorch >= 1.8 keeps runtime time out of an op's self time); device self = GPU work launched
by its own runtime calls, device total = by its subtree (see op_tree). Ops of every thread are
aggregated. CPU-only traces get the host columns with zero device time.

tc_self / tc_total ratios use the modern tensor-core list (analysis/tensor_cores.py); with
`tb_compat=True` the plugin's list and its runtime rule (no `cuda_runtime` link, so device time 0
on PyTorch >= 1.10 traces) are reproduced. An op is tensor-core eligible as its first call
(the plugin's rule): by name, by an eligible op below it, or by launching a tensor-core kernel.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import polars as pl

from hta_tui.analysis import op_tree, tensor_cores
from hta_tui.analysis.checkpoint import checkpoint
from hta_tui.analysis.hta_view import us
from hta_tui.analysis.per_rank import batching, by_rank, divided_as_alone, each_rank
from hta_tui.analysis.rank_column import ranked, tagged, untagged


def _input_shape() -> pl.Expr:
    """`Input Dims` as the plugin prints it (Python's str of the list; "[]" when absent)."""
    text = pl.col("input_dims").fill_null("[]").str.replace_all(r"\s+", "")
    return text.str.replace_all(",", ", ", literal=True).alias("input_shape")


def _calls(events: pl.DataFrame, *, tb_compat: bool) -> pl.DataFrame:
    checkpoint()  # each rank's tree is a piece a view left behind stops after
    nodes = op_tree.tree(events, tb_compat=tb_compat)
    if nodes.is_empty():
        return nodes
    return _walk(nodes, tb_compat=tb_compat, tell=pl.lit(tensor_cores.names_tell(events)))


def _walk(
    nodes: pl.DataFrame, *, tb_compat: bool, tell: pl.Expr, keep: tuple[str, ...] = ()
) -> pl.DataFrame:
    """`_calls` of a tree (`op_tree.tree`, rows in `pos` order and `pos` their row numbers);
    `tell`: `names_tell`'s column; `keep`: columns of the nodes kept before it."""
    nodes = op_tree.fold_same_name(nodes)
    if not nodes["pos"].is_sorted():
        nodes = nodes.sort("pos")
    tc_col = "tc_self_plugin" if tb_compat else "tc_self"
    eligible_by_name = tensor_cores.tc_eligible_op(pl.col("name"), modern=not tb_compat)
    nodes = nodes.with_columns(
        (eligible_by_name & pl.col("is_op")).cast(pl.Int64).alias("eligible_self"),
        pl.col(tc_col).alias("tc"),
    )
    # the direct children's time of each node (pos is the row number), by bincount
    parent = nodes["parent"].cast(pl.Int64).fill_null(-1).to_numpy()
    has = parent >= 0
    own = (nodes["end"] - nodes["start"]).to_numpy()
    per_parent = np.bincount(parent[has], own[has].astype(np.float64), minlength=nodes.height)
    children = per_parent.astype(np.int64)[nodes["children_from"].cast(pl.Int64).to_numpy()]
    nodes = nodes.with_columns(
        pl.Series("children", children),
        op_tree.subtree_sum(nodes, "dev_self"),
        op_tree.subtree_sum(nodes, "tc").alias("tc_total"),
        op_tree.subtree_sum(nodes, "eligible_self").alias("eligible_below"),
    )
    host_total = pl.col("end") - pl.col("start")
    top_tc = pl.col(f"top_{tc_col}")
    # the columns read below first, then the calls: filtering the tree's 30 columns (three of
    # text) copied each
    calls = nodes.select(
        "name",
        "input_dims",
        pl.col("call_stack").fill_null(""),
        "start",
        host_total.alias("host_total"),
        (host_total - pl.col("children").fill_null(0) - pl.col("top_rt_dur")).alias("host_self"),
        pl.col("top_dev_self").alias("dev_self"),
        "dev_total",
        top_tc.alias("tc_self"),
        "tc_total",
        ((pl.col("eligible_below") > 0) | (top_tc > 0)).alias("tc_eligible"),
        *keep,
    ).filter(pl.Series(nodes.select(pl.col("is_op") & ~pl.col("folded")).to_series()))
    # the shape text per distinct `Input Dims` (a few thousand), not per call
    shapes = calls.select(pl.col("input_dims").unique()).with_columns(_input_shape())
    return calls.join(
        shapes, on="input_dims", how="left", nulls_equal=True, maintain_order="left"
    ).select(
        "name",
        "input_shape",
        *calls.columns[2:],
        tell.alias("names_tell"),
    )


def _aggregate(calls: pl.DataFrame, keys: list[str], *, by: tuple[str, ...] = ()) -> pl.DataFrame:
    """Per `keys`: calls, times in us, tensor-core eligibility and shares. `by` ("rank"): a
    batch's calls at once, each rank's rows as its own table makes them (integer sums; the
    division to us as polars makes it on a table of that rank's rows alone: a one-row one
    exactly, a longer one by the reciprocal, `divided_as_alone`)."""
    if by:
        alone = pl.len().over(by) == 1
        to_us = lambda c: divided_as_alone(pl.col(c), 1000, alone)  # noqa: E731  (ns, as `us`)
    else:
        to_us = lambda c: us(pl.col(c))  # noqa: E731
    # null (n/a) where the kernel names cannot say tensor-core use (tensor_cores.names_tell)
    ratio = lambda num, den: (  # noqa: E731
        pl.when(~pl.col("names_tell"))
        .then(None)
        .when(pl.col(den) > 0)
        .then(100 * pl.col(num) / pl.col(den))
        .otherwise(0.0)
    )
    return (  # (one query, not three: the same steps on the same rows)
        calls.lazy()
        .group_by([*by, *keys])
        .agg(
            pl.len().alias("calls"),
            pl.col("dev_self", "dev_total", "host_self", "host_total", "tc_self", "tc_total").sum(),
            pl.col("tc_eligible").sort_by("start").first(),
            (pl.col("call_stack") != "").any().alias("has_call_stack"),
            pl.col("names_tell").all(),
        )
        .select(
            *by,
            *keys,
            "calls",
            to_us("dev_self").alias("device_self_duration (us)"),
            to_us("dev_total").alias("device_total_duration (us)"),
            to_us("host_self").alias("host_self_duration (us)"),
            to_us("host_total").alias("host_total_duration (us)"),
            "tc_eligible",
            ratio("tc_self", "dev_self").alias("tc_self_ratio"),
            ratio("tc_total", "dev_total").alias("tc_total_ratio"),
            "has_call_stack",
        )
        .sort(
            [*by, "device_self_duration (us)", "host_self_duration (us)", *keys],
            descending=[*([False] * len(by)), True, True, *([False] * len(keys))],
        )
        .collect()
    )


def rank_operator_stats(
    events: pl.DataFrame, *, by_input_shape: bool = False, tb_compat: bool = False
) -> pl.DataFrame:
    """One rank's Operator table (no `rank` column)."""
    calls = _calls(events, tb_compat=tb_compat)
    keys = ["name", "input_shape"] if by_input_shape else ["name"]
    if calls.is_empty():
        calls = pl.DataFrame(
            schema={
                "name": pl.String, "input_shape": pl.String, "call_stack": pl.String,
                **{c: pl.Int64 for c in ("host_total", "host_self", "dev_self", "dev_total")},
                "tc_self": pl.Int64, "tc_total": pl.Int64, "tc_eligible": pl.Boolean,
                "start": pl.Int64, "names_tell": pl.Boolean,
            }
        )  # fmt: skip
    return _aggregate(calls, keys)


def rank_operator_stacks(events: pl.DataFrame, *, tb_compat: bool = False) -> pl.DataFrame:
    """Per operator and call stack (`with_stack` traces that record `Call stack`)."""
    calls = _calls(events, tb_compat=tb_compat)
    if calls.is_empty():
        return pl.DataFrame()
    return _aggregate(calls.filter(pl.col("call_stack") != ""), ["name", "call_stack"])


def operator_stats(
    ranks: Mapping[int, pl.DataFrame], *, by_input_shape: bool = False, tb_compat: bool = False
) -> pl.DataFrame:
    op_tree.prime_trees(ranks, tb_compat=tb_compat)  # a batch's trees made at once
    return each_rank(
        ranks,
        lambda ev: rank_operator_stats(ev, by_input_shape=by_input_shape, tb_compat=tb_compat),
    )


def operator_stacks(ranks: Mapping[int, pl.DataFrame], *, tb_compat: bool = False) -> pl.DataFrame:
    op_tree.prime_trees(ranks, tb_compat=tb_compat)
    return each_rank(ranks, lambda ev: rank_operator_stacks(ev, tb_compat=tb_compat))


#: The job tables (`job_operator_table`): by name, by name + input shape, by call stack.
JOB_TABLES = ("name", "shape", "stack")


def job_operator_calls(
    ranks: Mapping[int, pl.DataFrame], *, tb_compat: bool = False
) -> pl.DataFrame | None:
    """Every rank's operator calls one after another (`_calls`), what the job tables sum;
    None when no rank has one."""
    parts = [_calls(ev, tb_compat=tb_compat) for _, ev in sorted(ranks.items())]
    parts = [p for p in parts if not p.is_empty()]
    return pl.concat(parts) if parts else None


def job_operator_table(calls: pl.DataFrame | None, table: str) -> pl.DataFrame:
    """One of `JOB_TABLES` from `job_operator_calls`: each made only when asked (the
    Operators view shows one grouping at a time; a third of its numbers' work each)."""
    if calls is None:
        return pl.DataFrame()
    if table == "name":
        return _aggregate(calls, ["name"])
    if table == "shape":
        return _aggregate(calls, ["name", "input_shape"])
    return _aggregate(calls.filter(pl.col("call_stack") != ""), ["name", "call_stack"])


def job_operator_tables(
    ranks: Mapping[int, pl.DataFrame], *, tb_compat: bool = False
) -> dict[str, pl.DataFrame]:
    """`operator_tables` summed over the ranks (no `rank` column): the app's view of a job.
    Tensor-core eligibility is the earliest call's across the ranks."""
    calls = job_operator_calls(ranks, tb_compat=tb_compat)
    return {t: job_operator_table(calls, t) for t in JOB_TABLES}


def operator_tables(
    ranks: Mapping[int, pl.DataFrame], *, tb_compat: bool = False
) -> dict[str, pl.DataFrame]:
    """By name, by name + input shape and by call stack, from one walk of each rank's tree."""
    op_tree.prime_trees(ranks, tb_compat=tb_compat)  # a batch's trees made at once
    made = _calls_at_once(ranks, tb_compat=tb_compat) if len(ranks) > 1 and batching() else {}
    at_once = _tables_at_once({r: c for r, c in made.items() if not c.is_empty()})
    out: dict[str, list[pl.DataFrame]] = {"name": [], "shape": [], "stack": []}
    # a rank without call stacks (most: `with_stack` traces only) aggregates none: its empty
    # table is the one of its calls' schema, made once (a query a tiny rank)
    no_stacks: dict[tuple[object, ...], pl.DataFrame] = {}
    for r, ev in sorted(ranks.items()):
        if r in at_once:
            for k, table in at_once[r].items():
                out[k].append(table)
            continue
        calls = made[r] if r in made else _calls(ev, tb_compat=tb_compat)
        if calls.is_empty():
            continue
        out["name"].append(ranked(r, _aggregate(calls, ["name"])))
        out["shape"].append(ranked(r, _aggregate(calls, ["name", "input_shape"])))
        if (calls["call_stack"] != "").any():
            stacks = _aggregate(calls.filter(pl.col("call_stack") != ""), ["name", "call_stack"])
        else:
            schema = tuple(calls.schema.items())
            if schema not in no_stacks:
                no_stacks[schema] = _aggregate(calls.clear(), ["name", "call_stack"])
            stacks = no_stacks[schema]
        out["stack"].append(ranked(r, stacks))
    return {k: pl.concat(v) if v else pl.DataFrame() for k, v in out.items()}


def _tables_at_once(calls: Mapping[int, pl.DataFrame]) -> dict[int, dict[str, pl.DataFrame]]:
    """rank -> its three tables (`operator_tables`' parts, with `rank`), from a batch's
    calls (`_calls_at_once`: one schema) aggregated at once with `rank` in the keys and
    split back (one chunk a rank, as its own query makes it): six queries a tiny rank made
    alone. Empty with fewer than two ranks or when a query fails (each rank makes its own)."""
    if len(calls) < 2:
        return {}
    every = tagged(sorted(calls.items()))
    try:
        name = by_rank(_aggregate(every, ["name"], by=("rank",)))
        shape = by_rank(_aggregate(every, ["name", "input_shape"], by=("rank",)))
        stacked = every.filter(pl.col("call_stack") != "")
        stack = by_rank(_aggregate(stacked, ["name", "call_stack"], by=("rank",)))
        empty = _aggregate(every.drop("rank").clear(), ["name", "call_stack"])
    except pl.exceptions.PolarsError:
        return {}
    return {
        r: {
            "name": ranked(r, name[r]),
            "shape": ranked(r, shape[r]),
            "stack": ranked(r, stack.get(r, empty)),
        }
        for r in calls
    }


def _calls_at_once(
    ranks: Mapping[int, pl.DataFrame], *, tb_compat: bool
) -> dict[int, pl.DataFrame]:
    """`_calls` of every rank with a tree (each rank's tree kept, `op_tree.prime_trees`),
    made over their trees one after another at once: each rank's positions moved past the
    ranks before it, so the tree's walks by row number (folds, children, subtree sums:
    integers only) keep to its own rows. rank -> its calls as `_calls` makes them; a rank
    with an empty tree is left out (`_calls` of it, as alone)."""
    trees = [(r, op_tree.tree(ev, tb_compat=tb_compat)) for r, ev in sorted(ranks.items())]
    trees = [(r, t) for r, t in trees if t.height]
    if len(trees) < 2 or len({tuple(t.dtypes) for _, t in trees}) > 1:
        return {}  # (one schema: a concatenation would cast a column)
    told = tensor_cores.ranks_tell(ranks)
    offsets = np.cumsum([0, *(t.height for _, t in trees[:-1])])
    nodes = tagged(trees)
    offset = pl.Series(np.repeat(offsets, [t.height for _, t in trees]))
    nodes = nodes.with_columns(
        (pl.col("pos").cast(pl.Int64) + offset).cast(pl.UInt32).alias("pos"),
        (pl.col("parent").cast(pl.Int64) + offset).cast(pl.UInt32).alias("parent"),
        pl.col("last") + offset,
    )
    tells = pl.DataFrame(
        {
            "rank": [r for r, _ in trees],
            "names_tell": [told[r] for r, _ in trees],
        },
        schema={"rank": pl.Int64, "names_tell": pl.Boolean},
    )
    calls = _walk(nodes, tb_compat=tb_compat, tell=pl.lit(True), keep=("rank",))
    calls = calls.drop("names_tell").join(tells, on="rank", how="left", maintain_order="left")
    return untagged(calls, [r for r, _ in trees])
