"""What the TensorBoard profiler plugin (torch-tb-profiler 0.4.3) sees in a rank's events: the
role of each event in its step-time breakdown, its collectives and its runtime -> GPU links.

The plugin classifies events by `cat` (lower-cased) and keeps, of the user annotations, only
`ProfilerStep#N` and the nccl:/gloo: collectives. Roles, in the priority the breakdown gives
them: Kernel > Memcpy > Memset > Communication > Runtime > DataLoader > CPU Exec.

With `tb_compat=True` the plugin's rules are reproduced exactly. The default mode fixes where
the plugin is wrong for traces newer than 2021 (README, "deliberate differences"):
- DEVIATION: `cuda_runtime` / `cuda_driver` are runtime events (the plugin maps only `Runtime`,
  so a PyTorch >= 1.10 trace has Runtime 0, no device-adjusted steps and no kernel -> op link);
- DEVIATION: a kernel named like an NCCL kernel (`nccl...Kernel`, HTA's rule) is communication
  even when no `nccl:*` op launched it (newer PyTorch records `record_param_comms`);
- DEVIATION: `enumerate(DataLoader)#...` recorded as a user annotation (PyTorch >= 1.10) counts
  as DataLoader (the plugin drops those annotations);
- DEVIATION: a `ProfilerStep#N` on a GPU stream (`gpu_user_annotation`) is not a second step.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
import polars as pl

from hta_tui.analysis import interval_arrays
from hta_tui.analysis.hta_view import kernel_type
from hta_tui.analysis.rank_column import tagged, untagged

#: Breakdown roles by priority; "Other" is what no role covers.
ROLES: tuple[str, ...] = (
    "Kernel",
    "Memcpy",
    "Memset",
    "Communication",
    "Runtime",
    "DataLoader",
    "CPU Exec",
)
CATEGORIES: tuple[str, ...] = (*ROLES, "Other")

#: The collectives the plugin recognises (`trace.NcclOpNameSet`, `GlooOpNameSet`).
COMM_OPS: tuple[str, ...] = tuple(
    f"{lib}:{op}"
    for lib in ("nccl", "gloo")
    for op in ("broadcast", "reduce", "all_reduce", "all_gather", "reduce_scatter")
)


def cat_in(names: list[str]) -> pl.Expr:
    """`cat` is one of `names`, in the casings traces use (lower, Capitalized, UPPER): the
    plugin lower-cases `cat`; lower-casing a million strings per test costs 30 ms."""
    spelled = {v for n in names for v in (n, n.capitalize(), n.upper())}
    return pl.col("cat").is_in(sorted(spelled))


# name tests are null (not false) for a null name: filled after the test, as filling the name
# column itself copies every string
_NAME = pl.col("name")
STEP_NAME = _NAME.str.starts_with("ProfilerStep#").fill_null(False)
DATALOADER = (
    (_NAME.str.starts_with("enumerate(DataLoader)#") & _NAME.str.ends_with(".__next__"))
    | _NAME.str.starts_with("enumerate(DataPipe)#")
).fill_null(False)
_IS_COMM_NAME = _NAME.is_in(COMM_OPS).fill_null(False)


def _operator() -> pl.Expr:
    return cat_in(["cpu_op", "operator"]) & ~STEP_NAME


def _python() -> pl.Expr:
    return cat_in(["python"])


def _annotation() -> pl.Expr:
    return cat_in(["user_annotation", "gpu_user_annotation"])


def gpu_work(role: str, *, tb_compat: bool) -> pl.Expr:
    """Kernel / Memcpy / Memset rows."""
    if tb_compat:
        cats = {"Kernel": ["kernel"], "Memcpy": ["memcpy", "gpu_memcpy"]}
        return cat_in(cats.get(role, ["memset", "gpu_memset"]))
    return pl.col("kind") == role.lower()


def device_rows(*, tb_compat: bool) -> pl.Expr:
    """Every row the plugin makes a device node of (kernels, memcpy, memset)."""
    return pl.any_horizontal(gpu_work(r, tb_compat=tb_compat) for r in ROLES[:3])


def runtime_rows(*, tb_compat: bool) -> pl.Expr:
    if tb_compat:
        return cat_in(["runtime"])
    return pl.col("kind").is_in(["runtime", "driver"])


def step_rows(*, tb_compat: bool) -> pl.Expr:
    """`ProfilerStep#N` events that make a step."""
    cats = ["cpu_op", "operator", "user_annotation"]
    if tb_compat:
        cats.append("gpu_user_annotation")
    return cat_in(cats) & STEP_NAME


def host_span_rows(*, steps: bool = True) -> pl.Expr:
    """Events whose extent makes the single step "0" of a trace without ProfilerStep;
    `steps=False`: the caller knows no row is a step row (`step_rows`)."""
    spans = cat_in(["cpu_op", "operator", "python"])
    return spans | step_rows(tb_compat=False) if steps else spans


def comm_op_rows() -> pl.Expr:
    """Collective ops on the host (operators, python events and kept annotations)."""
    return (_operator() | _python() | _annotation()) & _IS_COMM_NAME


def role_of(events: pl.DataFrame, *, tb_compat: bool) -> pl.DataFrame:
    """`role` (index into ROLES) of every event that has one, with `start`/`end` in ns.

    One lazy query over the six columns it reads (filtering the wide frame copied every
    column); each `cat` test is evaluated once, as a column the role rules then combine."""
    lf = role_flags(events, tb_compat=tb_compat)
    flags = lf.filter(pl.col("__comm") | pl.col("__kernel")).collect()
    comm_kernel = comm_kernels(flags, comm_ids(flags), tb_compat=tb_compat)
    return (
        lf.select(
            role_rule(comm_kernel, tb_compat=tb_compat).alias("role"),
            pl.col("ts").alias("start"),
            (pl.col("ts") + pl.col("dur")).alias("end"),
        )
        .drop_nulls()
        .collect()
    )


def _with_role_flags(lf: pl.LazyFrame, *, tb_compat: bool) -> pl.LazyFrame:
    """`__op`, `__py`, `__ann`, `__kernel` and `__comm` (a collective op on the host) of
    each row: one rank's and a batch's alike."""
    return lf.with_columns(
        _operator().alias("__op"),
        _python().alias("__py"),
        _annotation().alias("__ann"),
        gpu_work("Kernel", tb_compat=tb_compat).alias("__kernel"),
    ).with_columns(
        ((pl.col("__op") | pl.col("__py") | pl.col("__ann")) & _IS_COMM_NAME).alias("__comm")
    )


def role_flags(events: pl.DataFrame, *, tb_compat: bool) -> pl.LazyFrame:
    """The six columns `role_of` reads, with each `cat` test once as a column (`__op`,
    `__py`, `__ann`, `__kernel`, `__comm`: a collective op on the host)."""
    return (
        events.lazy()
        .select("kind", "cat", "name", "external_id", "ts", "dur")
        .pipe(_with_role_flags, tb_compat=tb_compat)
        .collect()
        .lazy()
    )


def comm_ids(flags: pl.DataFrame) -> pl.Series:
    """The external ids of the collective ops (`role_flags`): a kernel launched by one of
    them is communication."""
    return flags.filter("__comm")["external_id"].drop_nulls().unique()


def comm_kernels(flags: pl.DataFrame, ids: pl.Series, *, tb_compat: bool) -> pl.Expr:
    """Which kernels are communication (`role_rule`'s `comm_kernel`): launched by a
    collective op (`ids`, `comm_ids`) or, by HTA's rule (not `tb_compat`), named as one
    (tested on the distinct kernel names of `flags` only)."""
    comm_kernel = pl.col("external_id").is_in(ids.implode())
    if not tb_compat:
        names = flags.filter("__kernel").select(pl.col("name").unique())
        nccl = names.filter(kernel_type() == "COMMUNICATION")["name"]
        comm_kernel = comm_kernel | pl.col("name").is_in(nccl.implode())
    return comm_kernel


def role_rule(comm_kernel: pl.Expr, *, tb_compat: bool) -> pl.Expr:
    """Each row's role (Int8, null: none) over `role_flags`' columns; `comm_kernel`: which
    kernels are communication."""
    dataloader_kinds = pl.col("__op")
    if not tb_compat:
        dataloader_kinds = dataloader_kinds | pl.col("__ann")
    role = (
        pl.when(pl.col("__kernel") & comm_kernel.fill_null(False))
        .then(3)
        .when("__kernel")
        .then(0)
        .when(gpu_work("Memcpy", tb_compat=tb_compat))
        .then(1)
        .when(gpu_work("Memset", tb_compat=tb_compat))
        .then(2)
        .when(runtime_rows(tb_compat=tb_compat))
        .then(4)
        .when(dataloader_kinds & DATALOADER)
        .then(5)
        .when("__comm")
        .then(3)
        .when(pl.col("__op") | pl.col("__py"))
        .then(6)
    )
    return role.cast(pl.Int8)


def device_links(events: pl.DataFrame, *, tb_compat: bool, by: Sequence[str] = ()) -> pl.DataFrame:
    """One row per runtime call that launched GPU work: its extent and its device work's
    (`rt_start`, `rt_end`, `dev_start`, `dev_end`, `dev_ops`), plus the unlinked device work as
    rows with a null runtime (the plugin's "device nodes not launched inside any step").
    `by`: keys before the correlation (`rank`: a batch of ranks' events at once)."""
    if not by and not tb_compat:  # (the plugin's rules test `cat`'s text: no faster)
        made = _links_sorted(events, tb_compat=tb_compat)
        if made is not None:
            return made
    keys = [*by, "correlation"]
    lf = events.lazy()
    # the earliest runtime call of each correlation (arg_min: no sort of the runtime rows)
    runtimes = (
        lf.filter(runtime_rows(tb_compat=tb_compat) & pl.col("correlation").is_not_null())
        .group_by(keys)
        .agg(
            pl.col("ts").min().alias("rt_start"),
            (pl.col("ts") + pl.col("dur")).get(pl.col("ts").arg_min()).alias("rt_end"),
        )
    )
    # device work grouped on its own integer key first: a group-by on (correlation, runtime
    # extent) after the join cost twice as much
    device = (
        lf.filter(device_rows(tb_compat=tb_compat))
        .select(*keys, pl.col("ts").alias("start"), (pl.col("ts") + pl.col("dur")))
        .group_by(keys)
        .agg(
            pl.col("start").min().alias("dev_start"),
            pl.col("ts").max().alias("dev_end"),
            pl.len().alias("dev_ops"),
        )
    )
    return (
        device.join(runtimes, on=keys, how="left")
        .select(*keys, "rt_start", "rt_end", "dev_start", "dev_end", "dev_ops")
        .collect()
    )


_LINKS = {
    "correlation": pl.Int64(),
    "rt_start": pl.Int64(),
    "rt_end": pl.Int64(),
    "dev_start": pl.Int64(),
    "dev_end": pl.Int64(),
    "dev_ops": pl.UInt32(),
}


def _links_sorted(events: pl.DataFrame, *, tb_compat: bool) -> pl.DataFrame | None:
    """`device_links` of one rank by sorts of the correlations (numpy's stable sorts: they
    come nearly in order) and a binary search, where two group-bys and a join hashed them
    (~6 ms a 100 MB rank): the rows in correlation order, the unlinked device work (a null
    correlation) last (the group-by's order is none: its readers sort or sum). None (the
    query's way) for columns of other types or null times."""
    if any(events.schema.get(c) != pl.Int64 for c in ("ts", "dur", "correlation")):
        return None
    lf = events.lazy()
    runtimes = (
        lf.filter(runtime_rows(tb_compat=tb_compat) & pl.col("correlation").is_not_null())
        .select("correlation", "ts", "dur")
        .collect()
    )
    device = lf.filter(device_rows(tb_compat=tb_compat)).select("correlation", "ts", "dur")
    device = device.collect()
    if device.is_empty():
        return pl.DataFrame(schema=_LINKS)
    if any(t[c].null_count() for t in (runtimes, device) for c in ("ts", "dur")):
        return None
    # the runtime calls: each correlation's earliest, the first of equal starts
    corr, ts = runtimes["correlation"].to_numpy(), runtimes["ts"].to_numpy()
    order = np.lexsort((ts, corr))
    corr = corr[order]
    first = interval_arrays.run_bounds(corr)[0]
    rt_keys, rt_start = corr[first], ts[order][first]
    rt_end = rt_start + runtimes["dur"].to_numpy()[order][first]
    # the device work of each correlation (a null one apart: the unlinked work)
    linked = device["correlation"].is_not_null().to_numpy()
    corr = device["correlation"].fill_null(0).to_numpy()[linked]
    start = device["ts"].to_numpy()[linked]
    end = start + device["dur"].to_numpy()[linked]
    order = np.argsort(corr, kind="stable")
    corr, start, end = corr[order], start[order], end[order]
    first = interval_arrays.run_bounds(corr)[0]
    keys = corr[first]
    dev = [np.minimum.reduceat(start, first), np.maximum.reduceat(end, first)]
    ops = np.diff(np.r_[first, corr.size]) if corr.size else first
    at = np.minimum(np.searchsorted(rt_keys, keys), max(rt_keys.size - 1, 0))
    found = rt_keys[at] == keys if rt_keys.size else np.zeros(keys.size, dtype=bool)
    table = pl.DataFrame(
        {
            "correlation": keys,
            "rt_start": np.where(found, rt_start[at] if rt_keys.size else 0, 0),
            "rt_end": np.where(found, rt_end[at] if rt_keys.size else 0, 0),
            "dev_start": dev[0] if keys.size else keys,
            "dev_end": dev[1] if keys.size else keys,
            "dev_ops": ops,
        },
        schema=_LINKS,
    ).with_columns(pl.when(pl.Series(found)).then(pl.col("rt_start", "rt_end")))
    if linked.all():
        return table
    unlinked = device.filter(pl.col("correlation").is_null()).select(
        pl.lit(None, pl.Int64).alias("correlation"),
        pl.lit(None, pl.Int64).alias("rt_start"),
        pl.lit(None, pl.Int64).alias("rt_end"),
        pl.col("ts").min().alias("dev_start"),
        (pl.col("ts") + pl.col("dur")).max().alias("dev_end"),
        pl.len().cast(pl.UInt32).alias("dev_ops"),
    )
    return pl.concat([table, unlinked])


def device_ends(events: pl.DataFrame, *, tb_compat: bool) -> pl.LazyFrame:
    """`correlation` and `end` of every device op (`device_links` keeps only their max)."""
    return (
        events.lazy()
        .filter(device_rows(tb_compat=tb_compat))
        .select("correlation", (pl.col("ts") + pl.col("dur")).alias("end"))
    )


def known_rows() -> pl.Expr:
    """Events the plugin makes an object of (its global time range is theirs)."""
    plain = ["trace", "cpu_op", "operator", "runtime", "kernel", "memcpy", "gpu_memcpy"]
    plain += ["memset", "gpu_memset", "python", "python_function"]
    kept = _annotation() & (STEP_NAME | _IS_COMM_NAME)
    return cat_in(plain) | kept


#: what `role_of` reads of a rank's events
_ROLE_READ = ("kind", "cat", "name", "external_id", "ts", "dur")


def roles_at_once(ranks: Mapping[int, pl.DataFrame], *, tb_compat: bool) -> dict[int, pl.DataFrame]:
    """`role_of` of every rank, made over the ranks at once (ranks of one schema together:
    a concatenation would cast a column); rank -> its table as `role_of` makes it. A rank
    alone in its schema, or in a group that fails, is left out (its own `role_of`)."""
    groups: dict[tuple[object, ...], list[tuple[int, pl.DataFrame]]] = {}
    for rank, events in sorted(ranks.items()):
        if set(_ROLE_READ) <= set(events.columns):
            picked = events[list(_ROLE_READ)]  # (a pick: no query)
            groups.setdefault(tuple(picked.dtypes), []).append((rank, picked))
    out: dict[int, pl.DataFrame] = {}
    for members in groups.values():
        if len(members) < 2:
            continue
        try:
            out |= _roles_of(members, tb_compat=tb_compat)
        except Exception:  # (each rank makes its own, and says what is wrong with it)
            continue
    return out


def _roles_of(
    frames: list[tuple[int, pl.DataFrame]], *, tb_compat: bool
) -> dict[int, pl.DataFrame]:
    """`role_of` of each rank with `rank` in its keys: a kernel is communication by its
    rank's collective ops' external ids, or by its name (a name's type is the same on
    every rank, and a kernel's name is among its own rank's kernels)."""
    lf = tagged(frames).lazy().pipe(_with_role_flags, tb_compat=tb_compat).collect().lazy()
    flags = lf.filter(pl.col("__comm") | pl.col("__kernel")).collect()
    ids = (
        flags.filter("__comm")
        .select("rank", "external_id", pl.lit(True).alias("__by_id"))
        .drop_nulls()
        .unique(["rank", "external_id"])
    )
    comm_kernel = pl.col("__by_id").fill_null(False)
    if not tb_compat:
        names = flags.filter("__kernel").select(pl.col("name").unique())
        nccl = names.filter(kernel_type() == "COMMUNICATION")["name"]
        comm_kernel = comm_kernel | pl.col("name").is_in(nccl.implode())
    roles = (
        lf.join(ids.lazy(), on=["rank", "external_id"], how="left", maintain_order="left")
        .select(
            "rank",
            role_rule(comm_kernel, tb_compat=tb_compat).alias("role"),
            pl.col("ts").alias("start"),
            (pl.col("ts") + pl.col("dur")).alias("end"),
        )
        .drop_nulls()
        .collect()
    )
    return untagged(roles, [rank for rank, _ in frames])
