"""The TensorBoard plugin's Kernel view: per kernel name, or per kernel name + launching operator
+ launch properties (grid, block, registers per thread, shared memory), with tensor-core use,
mean blocks per SM and mean est. achieved occupancy (both weighted by duration, a missing value
counting as 0, as the plugin does).

Tensor-core use is reported by both lists (analysis/tensor_cores.py): `tc_used_plugin_list` for
TensorBoard's figures, `tc_used` for today's kernels (AMD matrix cores too); both null (n/a) on an
accelerator whose kernel names cannot tell (tensor_cores.names_tell).

By operator, the launching op is the node owning the kernel's runtime call (op_tree); kernels
launched from outside any op (a runtime call with External id 0, or no runtime call at all)
are under `CallTreeRoot`. The plugin lists the latter under every thread that has a
ProfilerStep (its "main thread": so twice when a GPU-side ProfilerStep annotation makes a
second one) and drops them when there is none; DEVIATION (default mode): they are listed once,
always, so the table accounts for every kernel exactly once.
"""

from __future__ import annotations

from collections.abc import Mapping

import polars as pl

from hta_tui.analysis import op_tree, tb_roles, tensor_cores
from hta_tui.analysis.hta_view import _NS_PER_US, us
from hta_tui.analysis.per_rank import divided_as_alone, each_rank, ranks_events, tagged

ROOT = "CallTreeRoot"


#: `uses_tc` by the modern list, by the plugin's (`tensor_cores.tc_names`' order)
_TC_COLUMNS = ("tc_used", "tc_used_plugin_list")

_STATS_INPUT = ("dur", "blocks_per_sm", "occupancy", "names_tell")


def _kernels(events: pl.DataFrame, *, tb_compat: bool, columns: list[str]) -> pl.DataFrame:
    """The kernels' `columns` (filtered before the other 30 columns are copied);
    `names_tell`: whether this rank's kernel names can say tensor-core use."""
    kernel = tb_roles.gpu_work("Kernel", tb_compat=tb_compat)
    tells = pl.lit(tensor_cores.names_tell(events)).alias("names_tell")
    picked = [c for c in columns if c != "names_tell"]
    return events.lazy().filter(kernel).select(*picked, tells).collect()


def _weighted_means() -> list[pl.Expr]:
    """Blocks per SM and achieved occupancy, each kernel weighted by its duration (0 where
    the group has none): one rank's table and a batch's alike."""
    dur = pl.col("dur")
    total = dur.sum()

    def weighted(col: str) -> pl.Expr:
        value = (pl.col(col).fill_null(0) * dur).sum() / total
        return pl.when(total > 0).then(value).otherwise(0.0)

    return [
        weighted("blocks_per_sm").alias("mean_blocks_per_sm"),
        weighted("occupancy").alias("mean_est_achieved_occupancy_pct"),
    ]


def _tc_columns(kernels: pl.DataFrame) -> list[pl.Expr]:
    """Whether each group's kernel uses tensor cores, by the modern and the plugin's list
    (null where the launches' names do not tell)."""
    return [
        pl.when("names_tell").then(flag).alias(c)
        for flag, c in zip(tensor_cores.tc_flags(kernels["name"]), _TC_COLUMNS, strict=True)
    ]


def _stats(
    kernels: pl.DataFrame, keys: list[str], *, shown: tuple[pl.Expr, ...] = (), by: list[str]
) -> pl.DataFrame:
    """Per group of `keys`; `shown` turns the keys into the table's text keys `by` (sorted
    on them), after grouping: formatting each kernel's launch dimensions cost more than the
    rest of the view."""
    dur = pl.col("dur")
    total = dur.sum()

    return (
        kernels.group_by(keys)
        .agg(
            pl.len().alias("calls"),
            us(total).alias("total (us)"),
            us(dur.mean()).alias("mean (us)"),
            us(dur.max()).alias("max (us)"),
            us(dur.min()).alias("min (us)"),
            *_weighted_means(),
            pl.col("names_tell").all().alias("names_tell"),
        )
        .with_columns(
            *shown,
            *_tc_columns(kernels),
        )
        .drop([*(k for k in keys if k not in by), "names_tell"])
        .sort(["total (us)", *by], descending=[True, *([False] * len(by))])
    )


def rank_kernel_table(events: pl.DataFrame, *, tb_compat: bool = False) -> pl.DataFrame:
    """Per kernel name (the plugin's `group_by=Kernel`)."""
    kernels = _kernels(events, tb_compat=tb_compat, columns=["name", *_STATS_INPUT])
    return _stats(kernels, ["name"], by=["name"])


def _dim_parts(col: str) -> list[pl.Expr]:
    """A launch dimension as three integers, all null when any is (it prints as "None")."""
    parts = [pl.col(col).arr.get(i, null_on_oob=True) for i in range(3)]
    whole = pl.all_horizontal(p.is_not_null() for p in parts)
    return [pl.when(whole).then(p).alias(f"{col}{i}") for i, p in enumerate(parts)]


def _dims(col: str) -> pl.Expr:
    """A launch dimension as Python prints the list ("[1, 2, 3]"; "None" when absent), from
    its `_dim_parts`."""
    parts = [pl.col(f"{col}{i}").cast(pl.String) for i in range(3)]
    text = pl.concat_str([pl.lit("["), pl.concat_str(parts, separator=", "), pl.lit("]")])
    return text.fill_null("None").alias(col)


def _launchers(events: pl.DataFrame, *, tb_compat: bool) -> pl.DataFrame:
    """correlation -> `operator` (the owning node's name, CallTreeRoot for External id 0 in
    compat mode or a call outside any node by default; null for a call the plugin's rule
    attaches nowhere)."""
    nodes, links = op_tree.build(events, tb_compat=tb_compat)
    named = links.select("correlation", nodes["name"].gather(links["pos"]).alias("name"))
    runtimes = (
        events.lazy()
        .filter(tb_roles.runtime_rows(tb_compat=tb_compat) & pl.col("correlation").is_not_null())
        .select("correlation", "external_id")
        .collect()
    )
    linked = runtimes.join(named, on="correlation", how="left")
    outside = pl.col("external_id").fill_null(0) == 0 if tb_compat else pl.col("name").is_null()
    operator = pl.when(outside).then(pl.lit(ROOT)).otherwise("name")
    return linked.select("correlation", operator.alias("operator")).unique(
        "correlation", keep="first", maintain_order=True
    )


def _keyed(events: pl.DataFrame, *, tb_compat: bool) -> pl.DataFrame:
    """Kernels with their launching `operator` and launch properties as text keys."""
    columns = ["name", "correlation", "grid", "block", "registers", "shared_memory"]
    kernels = _kernels(events, tb_compat=tb_compat, columns=[*columns, *_STATS_INPUT])
    launchers = _launchers(events, tb_compat=tb_compat)
    with_op = kernels.join(launchers, on="correlation", how="left")
    has_runtime = pl.col("correlation").is_in(launchers["correlation"].implode())
    # no runtime call: CallTreeRoot; a runtime call whose op is unknown: not in the tree
    unattached = ~has_runtime.fill_null(False)
    main_threads = 1
    if tb_compat:
        main_threads = events.filter(tb_roles.step_rows(tb_compat=True))["tid"].n_unique()
        unattached = unattached & pl.lit(main_threads > 0)
    operator = pl.when(unattached).then(pl.lit(ROOT)).otherwise("operator")
    if not tb_compat:
        operator = operator.fill_null(ROOT)
    with_op = with_op.with_columns(operator.alias("operator"), unattached.alias("__stray"))
    with_op = with_op.filter(pl.col("operator").is_not_null())
    if main_threads > 1:  # the plugin hangs them under every thread that has a ProfilerStep
        stray = with_op.filter("__stray")
        with_op = pl.concat([with_op, *([stray] * (main_threads - 1))])
    return with_op.select(
        "name",
        "operator",
        *_dim_parts("grid"),
        *_dim_parts("block"),
        pl.col("registers").fill_null(0),
        pl.col("shared_memory").fill_null(0),
        *_STATS_INPUT,
    )


OP_KEYS = ["name", "operator", "grid", "block", "registers", "shared_memory"]
#: what `_keyed` groups on: the launch dimensions as integers (text after grouping)
_GROUP_KEYS = [
    "name", "operator", *(f"{d}{i}" for d in ("grid", "block") for i in range(3)),
    "registers", "shared_memory",
]  # fmt: skip


def _op_columns(*, tb_compat: bool) -> tuple[pl.Expr, tuple[pl.Expr, ...]]:
    """The by-operator table's tensor-core eligibility and its shown launch columns: one
    rank's table and several ranks' at once make them alike."""
    eligible = tensor_cores.tc_eligible_op(pl.col("operator"), modern=not tb_compat)
    shown = (
        _dims("grid"),
        _dims("block"),
        pl.col("registers").cast(pl.String),
        pl.col("shared_memory").cast(pl.String),
    )
    return eligible, shown


def _op_stats(keyed: pl.DataFrame, *, tb_compat: bool) -> pl.DataFrame:
    eligible, shown = _op_columns(tb_compat=tb_compat)
    table = _stats(keyed, _GROUP_KEYS, shown=shown, by=OP_KEYS)
    return table.select(*OP_KEYS, pl.exclude(OP_KEYS)).with_columns(
        eligible.alias("op_tc_eligible")
    )


def rank_kernel_op_table(events: pl.DataFrame, *, tb_compat: bool = False) -> pl.DataFrame:
    """Per kernel name, launching operator, grid, block, registers and shared memory (the
    plugin's `group_by=KernelNameAndOpName`)."""
    return _op_stats(_keyed(events, tb_compat=tb_compat), tb_compat=tb_compat)


def job_kernel_table(
    ranks: Mapping[int, pl.DataFrame], *, by_operator: bool = False, tb_compat: bool = False
) -> pl.DataFrame:
    """The Kernel view over every kernel of the ranks together (no `rank` column): the app's
    view of a job, weighted means over all of them."""
    if by_operator:
        parts = [_keyed(ev, tb_compat=tb_compat) for _, ev in sorted(ranks.items())]
    else:
        parts = [
            _kernels(ev, tb_compat=tb_compat, columns=["name", *_STATS_INPUT])
            for _, ev in sorted(ranks.items())
        ]
    if not parts:
        return pl.DataFrame()
    kernels = pl.concat(parts, how="diagonal_relaxed")
    if by_operator:
        return _op_stats(kernels, tb_compat=tb_compat)
    return _stats(kernels, ["name"], by=["name"])


def kernel_table(ranks: Mapping[int, pl.DataFrame], *, tb_compat: bool = False) -> pl.DataFrame:
    if len(ranks) > 1:
        return _ranks_table(ranks, tb_compat=tb_compat, by_operator=False)
    return each_rank(ranks, lambda ev: rank_kernel_table(ev, tb_compat=tb_compat))


def kernel_op_table(ranks: Mapping[int, pl.DataFrame], *, tb_compat: bool = False) -> pl.DataFrame:
    if len(ranks) > 1:
        return _ranks_table(ranks, tb_compat=tb_compat, by_operator=True)
    return each_rank(ranks, lambda ev: rank_kernel_op_table(ev, tb_compat=tb_compat))


# --- every rank at once -------------------------------------------------------------------
# A tiny rank's table alone cost ~25 polars queries (~0.1-0.2 ms of fixed cost each); over a
# batch of ranks (`rank_work.batch_tables`) the same tables come from one query set over every
# rank's events with a `rank` column (`per_rank.ranks_events`), each rank's rows to the bit as
# its table alone: the sums in each rank's row order (an eager group-by), and the microsecond
# columns divided as polars divides them on the rank's table alone (`divided_as_alone`: a
# one-row table exactly, a longer one as times the inverse).


def _ranks_kernels(
    ranks: Mapping[int, pl.DataFrame], *, tb_compat: bool, columns: list[str]
) -> pl.DataFrame:
    """`_kernels` of every rank, one after another with a leading `rank`."""
    events = ranks_events(ranks)
    if not events.width:
        return pl.DataFrame()
    tells = pl.DataFrame(
        {
            "rank": sorted(ranks),
            "names_tell": [told for _, told in sorted(tensor_cores.ranks_tell(ranks).items())],
        },
        schema={"rank": pl.Int64, "names_tell": pl.Boolean},
    )
    picked = [c for c in columns if c != "names_tell"]
    kernel = tb_roles.gpu_work("Kernel", tb_compat=tb_compat)
    kernels = events.lazy().filter(kernel).select("rank", *picked).collect()
    return kernels.join(tells, on="rank", how="left", maintain_order="left")


def _ranks_launchers(ranks: Mapping[int, pl.DataFrame], *, tb_compat: bool) -> pl.DataFrame:
    """`_launchers` of every rank (rank, correlation, operator): each rank's op tree (kept
    per rank: the operator views share it), the runtime calls of every rank at once."""
    op_tree.prime_trees(ranks, tb_compat=tb_compat)  # a batch's trees made at once
    named = []
    for rank, ev in sorted(ranks.items()):
        nodes, links = op_tree.build(ev, tb_compat=tb_compat)
        names = nodes["name"].gather(links["pos"]).alias("name")
        named.append((rank, pl.DataFrame([links["correlation"], names])))
    runtimes = (
        ranks_events(ranks)
        .lazy()
        .filter(tb_roles.runtime_rows(tb_compat=tb_compat) & pl.col("correlation").is_not_null())
        .select("rank", "correlation", "external_id")
        .collect()
    )
    linked = runtimes.join(
        tagged(named),
        on=["rank", "correlation"],
        how="left",
        maintain_order="left",
    )
    outside = pl.col("external_id").fill_null(0) == 0 if tb_compat else pl.col("name").is_null()
    operator = pl.when(outside).then(pl.lit(ROOT)).otherwise("name")
    return linked.select("rank", "correlation", operator.alias("operator")).unique(
        ["rank", "correlation"], keep="first", maintain_order=True
    )


def _ranks_keyed(ranks: Mapping[int, pl.DataFrame], *, tb_compat: bool) -> pl.DataFrame:
    """`_keyed` of every rank, with a leading `rank`."""
    columns = ["name", "correlation", "grid", "block", "registers", "shared_memory"]
    kernels = _ranks_kernels(ranks, tb_compat=tb_compat, columns=[*columns, *_STATS_INPUT])
    launchers = _ranks_launchers(ranks, tb_compat=tb_compat)
    with_op = kernels.join(
        launchers.with_columns(pl.lit(True).alias("__launched")),
        on=["rank", "correlation"],
        how="left",
        maintain_order="left",
    )
    # no runtime call (a null correlation joins none): CallTreeRoot; a runtime call whose
    # op is unknown: not in the tree
    unattached = ~pl.col("__launched").fill_null(False)
    main_threads = None
    if tb_compat:
        main_threads = (
            ranks_events(ranks)
            .lazy()
            .filter(tb_roles.step_rows(tb_compat=True))
            .group_by("rank")
            .agg(pl.col("tid").n_unique().alias("__threads"))
            .collect()
        )
        with_op = with_op.join(main_threads, on="rank", how="left", maintain_order="left")
        unattached = unattached & (pl.col("__threads").fill_null(0) > 0)
    operator = pl.when(unattached).then(pl.lit(ROOT)).otherwise("operator")
    if not tb_compat:
        operator = operator.fill_null(ROOT)
    with_op = with_op.with_columns(operator.alias("operator"), unattached.alias("__stray"))
    with_op = with_op.filter(pl.col("operator").is_not_null())
    if main_threads is not None and (main_threads["__threads"] > 1).any():
        # the plugin hangs them under every thread that has a ProfilerStep: each rank's
        # strays again, (threads - 1) times after its rows, as its table alone has them
        stray = with_op.filter("__stray")
        copies = [
            stray.filter(pl.col("__threads") > k + 1)
            for k in range(int(main_threads["__threads"].max()) - 1)  # type: ignore[arg-type]
        ]
        with_op = pl.concat([with_op, *copies]).sort("rank", maintain_order=True)
    return with_op.select(
        "rank",
        "name",
        "operator",
        *_dim_parts("grid"),
        *_dim_parts("block"),
        pl.col("registers").fill_null(0),
        pl.col("shared_memory").fill_null(0),
        *_STATS_INPUT,
    )


_RAW = {"total (us)": "__total", "mean (us)": "__mean", "max (us)": "__max", "min (us)": "__min"}


def _ranks_stats(
    kernels: pl.DataFrame, keys: list[str], *, shown: tuple[pl.Expr, ...] = (), by: list[str]
) -> pl.DataFrame:
    """`_stats` per rank and group of `keys`: the same aggregations, the microseconds
    divided after as each rank's table alone divides them."""
    dur = pl.col("dur")
    total = dur.sum()

    alone = pl.len().over("rank") == 1
    per_us = [
        divided_as_alone(pl.col(raw), _NS_PER_US, alone).alias(name) for name, raw in _RAW.items()
    ]
    table = (
        kernels.group_by(["rank", *keys])
        .agg(
            pl.len().alias("calls"),
            total.cast(pl.Float64).alias("__total"),
            dur.mean().cast(pl.Float64).alias("__mean"),
            dur.max().cast(pl.Float64).alias("__max"),
            dur.min().cast(pl.Float64).alias("__min"),
            *_weighted_means(),
            pl.col("names_tell").all().alias("names_tell"),
        )
        .with_columns(*per_us)
        .with_columns(
            *shown,
            *_tc_columns(kernels),
        )
    )
    order = ["calls", *_RAW, "mean_blocks_per_sm", "mean_est_achieved_occupancy_pct"]
    kept = [k for k in keys if k in by]
    after = [c for c in _SHOWN_AFTER if c in table.columns and c not in kept]
    return (
        table.select("rank", *kept, *order, *after)
        .sort(["rank", "total (us)", *by], descending=[False, True, *([False] * len(by))])
        .with_columns(pl.col("rank").set_sorted())  # as `each_rank` flags it
    )


#: the columns `_stats` adds after its aggregations, in its order
_SHOWN_AFTER = ("grid", "block", "registers", "shared_memory", "tc_used", "tc_used_plugin_list")


def _ranks_table(
    ranks: Mapping[int, pl.DataFrame], *, tb_compat: bool, by_operator: bool
) -> pl.DataFrame:
    """`kernel_table` / `kernel_op_table` of several ranks, made over them at once."""
    if by_operator:
        keyed = _ranks_keyed(ranks, tb_compat=tb_compat)
        eligible, shown = _op_columns(tb_compat=tb_compat)
        table = _ranks_stats(keyed, _GROUP_KEYS, shown=shown, by=OP_KEYS)
        return table.select("rank", *OP_KEYS, pl.exclude("rank", *OP_KEYS)).with_columns(
            eligible.alias("op_tc_eligible")
        )
    kernels = _ranks_kernels(ranks, tb_compat=tb_compat, columns=["name", *_STATS_INPUT])
    return _ranks_stats(kernels, ["name"], by=["name"])
