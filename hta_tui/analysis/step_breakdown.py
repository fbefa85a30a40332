"""Where each step's wall time goes: the TensorBoard plugin's Overview breakdown.

Each instant of a step is given to the first role running then, in priority order Kernel >
Memcpy > Memset > Communication > Runtime > DataLoader > CPU Exec; what no role covers is
Other. So the parts add up to the step's (device-adjusted) duration, as in the plugin's
`OverallParser`. Instead of the plugin's per-role interval subtraction, role i gets what the
union of roles 0..i covers in the step beyond the union of roles 0..i-1 (numpy arrays: one
lexsort by role and start, then linear passes).
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Mapping

import numpy as np
import polars as pl

from hta_tui.analysis import interval_arrays, tb_roles, tb_steps
from hta_tui.analysis.hta_view import job_cached, us
from hta_tui.analysis.per_rank import batching, each_rank, in_rank_order

_US = " (us)"


def _columns() -> dict[str, pl.DataType]:
    cols: dict[str, pl.DataType] = {"rank": pl.Int64(), "step": pl.Int64()}
    cols["step_time (us)"] = pl.Float64()
    cols.update({c + _US: pl.Float64() for c in tb_roles.CATEGORIES})
    return cols


COLUMNS = _columns()


def _parts(roles: pl.DataFrame, steps: pl.DataFrame) -> np.ndarray:
    """ns of each category (columns, CATEGORIES order) in each step (rows).

    An instant goes to the first role running then, so role i gets what the union of roles
    0..i covers beyond the union of roles 0..i-1; Other is what none covers.
    """
    return _parts_within(roles, steps["start"].to_numpy(), steps["end"].to_numpy())


def _parts_within(roles: pl.DataFrame, lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
    """`_parts` of the steps from `lo` to `hi` (ns)."""
    start, end = roles["start"].to_numpy(), roles["end"].to_numpy()
    role = roles["role"].to_numpy()
    order = np.lexsort((start, role))  # by role, then start: each role a slice
    start, end = start[order], end[order]
    bounds = np.searchsorted(role[order], np.arange(len(tb_roles.ROLES) + 1))
    so_far = (start[:0], end[:0])
    covered = [np.zeros(lo.size, dtype=np.int64)]
    for a, b in itertools.pairwise(bounds):
        mine = interval_arrays.union(start[a:b], end[a:b], ordered=True)
        so_far = interval_arrays.add(so_far, mine)
        covered.append(interval_arrays.covered(so_far, lo, hi))
    covered.append(hi - lo)
    return np.diff(np.column_stack(covered), axis=1)


def rank_breakdown(
    events: pl.DataFrame, *, tb_compat: bool = False, roles: pl.DataFrame | None = None
) -> pl.DataFrame:
    """One row per used step of one rank (no `rank` column): step, step_time and each
    category, in us. `roles`: its `tb_roles.role_of`, when made already (a batch's)."""
    steps = tb_steps.profiler_steps(events, tb_compat=tb_compat)
    if roles is not None:  # (a batch's)
        made = _table_at_hand(steps, roles)
        if made is not None:
            return made
        return breakdown_table(steps.filter("used"), lambda: roles)
    steps = steps.filter("used")
    return breakdown_table(steps, lambda: tb_roles.role_of(events, tb_compat=tb_compat))


def breakdown_table(steps: pl.DataFrame, roles: Callable[[], pl.DataFrame]) -> pl.DataFrame:
    """`rank_breakdown` of the used steps and the events' roles (`tb_roles.role_of`, made
    only when a step is used; a role's intervals may come merged already: only their union
    counts)."""
    cols = [c for c in COLUMNS if c != "rank"]
    if steps.is_empty():
        return pl.DataFrame(schema={c: COLUMNS[c] for c in cols})
    parts = _parts(roles(), steps)
    names = [c + _US for c in tb_roles.CATEGORIES]
    table = steps.select("step", (pl.col("end") - pl.col("start")).alias("step_time (us)"))
    table = table.with_columns(pl.Series(n, parts[:, i]) for i, n in enumerate(names))
    return table.select("step", *(us(pl.col(c)) for c in table.columns[1:]))


def _at_hand(steps: pl.DataFrame) -> bool:
    """Are a batch's rank's steps of the shape `_table_at_hand` reads without a query (one
    chunk, integer times and steps, no nulls)?"""
    used = steps["used"]
    ends = steps["start"], steps["end"]
    if steps.n_chunks() != 1 or used.null_count() or any(e.null_count() for e in ends):
        return False
    step = steps["step"]
    return all(c.dtype == pl.Int64 for c in (*ends, step)) and not step.null_count()


def _table_at_hand(steps: pl.DataFrame, roles: pl.DataFrame) -> pl.DataFrame | None:
    """`breakdown_table` of a batch's rank (its steps, one chunk, and roles made at once)
    without a query (four a tiny rank): the used steps gathered by position, the ns divided
    in numpy as polars divides the rank's own table of one chunk: a one-row table exactly, a
    longer one by the reciprocal (`per_rank.divided_as_alone`). None (made as alone) for
    steps of another shape: nulls, several chunks, other types."""
    if not _at_hand(steps):
        return None
    ends = steps["start"], steps["end"]
    at = np.flatnonzero(steps["used"].to_numpy())
    if not at.size:  # (its empty table, as `breakdown_table` makes it)
        return pl.DataFrame(schema={c: t for c, t in COLUMNS.items() if c != "rank"})
    start, end = ends[0].to_numpy()[at], ends[1].to_numpy()[at]  # (by position: no query)
    ns = np.column_stack([end - start, _parts_within(roles, start, end)]).astype(np.float64)
    values = ns / 1000.0 if at.size == 1 else ns * (1.0 / 1000)
    names = ["step_time (us)", *(c + _US for c in tb_roles.CATEGORIES)]
    step = pl.Series("step", steps["step"].to_numpy()[at], dtype=pl.Int64)
    return pl.DataFrame([step, *(pl.Series(n, values[:, i]) for i, n in enumerate(names))])


def step_time_breakdown(
    ranks: Mapping[int, pl.DataFrame], *, tb_compat: bool = False
) -> pl.DataFrame:
    """Every rank's used steps, broken down (COLUMNS)."""
    tb_steps.prime_steps(ranks, tb_compat=tb_compat)  # a batch's steps made at once
    # and its roles: by frame (`each_rank` hands each rank's events alone)
    made = tb_roles.roles_at_once(ranks, tb_compat=tb_compat) if batching() else {}
    together, others = _breakdowns_at_once(ranks, made, tb_compat=tb_compat)
    roles = {id(ranks[rank]): table for rank, table in made.items()}
    alone = each_rank(
        {rank: ranks[rank] for rank in others},
        lambda ev: rank_breakdown(ev, tb_compat=tb_compat, roles=roles.get(id(ev))),
        COLUMNS,
    )
    return in_rank_order(together, alone)


def _breakdowns_at_once(
    ranks: Mapping[int, pl.DataFrame], roles: Mapping[int, pl.DataFrame], *, tb_compat: bool
) -> tuple[pl.DataFrame | None, list[int]]:
    """(`rank_breakdown` of the ranks whose roles a batch made, `roles`, as one table with a
    leading `rank`, the other ranks): their times laid one rank after another
    (`interval_arrays.laid_out`), so one `_parts_within` over the batch gives each rank's
    ns exactly (a tiny rank alone cost ~0.5 ms of numpy and table making), divided as the
    rank's own table divides them (`_table_at_hand`). None and every rank when no rank
    qualifies or the layout would overflow."""
    steps: list[tuple[int, np.ndarray, pl.DataFrame, pl.DataFrame]] = []
    others = []
    for rank in sorted(ranks):
        table = tb_steps.profiler_steps(ranks[rank], tb_compat=tb_compat) if rank in roles else None
        if table is None or not _at_hand(table):
            others.append(rank)
        else:
            steps.append((rank, np.flatnonzero(table["used"].to_numpy()), table, roles[rank]))
    steps = [s for s in steps if s[1].size]  # (a rank with no used step: no row)
    if not steps:
        return None, others
    sizes = [at.size for _, at, _, _ in steps]
    roles_of = pl.concat([role for *_, role in steps], how="vertical_relaxed")
    of_step = np.repeat([rank for rank, *_ in steps], sizes)
    of_role = np.repeat([rank for rank, *_ in steps], [role.height for *_, role in steps])
    lo, hi = (
        np.concatenate([t[c].to_numpy()[at] for _, at, t, _ in steps]) for c in ("start", "end")
    )
    start, end = roles_of["start"].to_numpy(), roles_of["end"].to_numpy()
    laid = interval_arrays.laid_out([of_step, of_step, of_role, of_role], [lo, hi, start, end])
    if laid is None:
        return None, sorted(ranks)
    roles = pl.DataFrame([roles_of["role"], pl.Series("start", laid[2]), pl.Series("end", laid[3])])
    ns = np.column_stack([hi - lo, _parts_within(roles, laid[0], laid[1])]).astype(np.float64)
    alone = np.repeat([size == 1 for size in sizes], sizes)[:, None]
    values = np.where(alone, ns / 1000.0, ns * (1.0 / 1000))
    names = ["step_time (us)", *(c + _US for c in tb_roles.CATEGORIES)]
    step = np.concatenate([t["step"].to_numpy()[at] for _, at, t, _ in steps])
    table = pl.DataFrame(
        [
            pl.Series("rank", of_step, dtype=pl.Int64).set_sorted(),
            pl.Series("step", step, dtype=pl.Int64),
            *(pl.Series(n, values[:, i]) for i, n in enumerate(names)),
        ]
    )
    return table, others


def step_selection(ranks: Mapping[int, pl.DataFrame], *, tb_compat: bool = False) -> pl.DataFrame:
    """Every rank's steps, used or not and why, times in us relative to the file."""
    tb_steps.prime_steps(ranks, tb_compat=tb_compat)
    together, others = (
        _selections_at_once(ranks, tb_compat=tb_compat) if batching() else (None, sorted(ranks))
    )

    def table(events: pl.DataFrame) -> pl.DataFrame:
        steps = tb_steps.profiler_steps(events, tb_compat=tb_compat)
        return steps.select(
            "step",
            us(pl.col("end") - pl.col("start")).alias("step_time (us)"),
            us(pl.col("start") - pl.col("host_start")).alias("start_moved (us)"),
            us(pl.col("end") - pl.col("host_end")).alias("end_moved (us)"),
            "gpu_ops",
            "used",
            "reason",
        )

    return in_rank_order(together, each_rank({rank: ranks[rank] for rank in others}, table))


def _selections_at_once(
    ranks: Mapping[int, pl.DataFrame], *, tb_compat: bool
) -> tuple[pl.DataFrame | None, list[int]]:
    """(`step_selection`'s table of a batch's ranks whose steps are of one chunk, integer
    times and no nulls, made at once without a query (one a tiny rank alone), the other
    ranks): the ns differences divided in numpy as polars divides each rank's own table (a
    one-row one exactly, a longer one by the reciprocal). A rank without steps is made
    alone (its empty table, whose columns a batch of such ranks answers with)."""
    picked, others = [], []
    for rank in sorted(ranks):
        steps = tb_steps.profiler_steps(ranks[rank], tb_compat=tb_compat)
        ns = [steps[c] for c in ("start", "end", "host_start", "host_end")]
        odd = any(c.dtype != pl.Int64 or c.null_count() for c in ns)
        if not steps.height or steps.n_chunks() != 1 or odd:
            others.append(rank)
        else:
            picked.append((rank, steps))
    if not picked:
        return None, others
    try:
        every = pl.concat([steps for _, steps in picked], how="vertical")
    except pl.exceptions.PolarsError:  # (steps of other types: each rank alone)
        return None, sorted(ranks)
    start, end, host_start, host_end = (
        every[c].to_numpy() for c in ("start", "end", "host_start", "host_end")
    )
    moved = np.column_stack([end - start, start - host_start, end - host_end]).astype(np.float64)
    heights = [steps.height for _, steps in picked]
    alone = np.repeat([h == 1 for h in heights], heights)[:, None]
    values = np.where(alone, moved / 1000.0, moved * (1.0 / 1000))
    names = ("step_time (us)", "start_moved (us)", "end_moved (us)")
    rank = np.repeat([r for r, _ in picked], heights)
    table = pl.DataFrame(
        [
            pl.Series("rank", rank, dtype=pl.Int64).set_sorted(),
            every["step"],
            *(pl.Series(n, values[:, i]) for i, n in enumerate(names)),
            every["gpu_ops"],
            every["used"],
            every["reason"],
        ]
    )
    return table, others


def used_steps(ranks: Mapping[int, pl.DataFrame], *, tb_compat: bool = False) -> pl.DataFrame:
    """rank, step, start, end (ns, as in the file): the steps the step-time view shows, each
    moved to the GPU work it launched. The one step definition the step-time view, the diff's
    step time and the sync verdict share."""
    tb_steps.prime_steps(ranks, tb_compat=tb_compat)
    return each_rank(
        ranks,
        lambda ev: job_cached({0: ev}, "used steps", lambda: _used(ev, tb_compat), tb_compat),
        {"rank": pl.Int64(), "step": pl.Int64(), "start": pl.Int64(), "end": pl.Int64()},
    )


def _used(events: pl.DataFrame, tb_compat: bool) -> pl.DataFrame:
    """One rank's used steps, kept per rank (`used_steps`): asked ~5 times a rank by a
    report's analyses and its scope, a query each time."""
    steps = tb_steps.profiler_steps(events, tb_compat=tb_compat)
    used = steps["used"]
    if used.null_count():  # (null is not used, as `filter` reads it)
        return steps.filter("used").select("step", "start", "end")
    # gathered by position, no query (a filter and a select were two a rank); integers only
    return steps[["step", "start", "end"]][np.flatnonzero(used.to_numpy())]
