"""Which nested interval of a thread encloses a point in time: sorts and as-of joins, no walk.

Nodes are [start, end) intervals per thread (`key`) that nest, as a thread's operators do.
Opening and closing ends and the probes are sorted together by time; at one time, ends close
first, then intervals open (longer first), then zero-length ones close, then probes. The
running count of open intervals just after an opening is its level + 1; at a probe it is the
number of intervals enclosing it, and the innermost is the last one opened at level count - 1
on that thread before the probe (an as-of join). Intervals that overlap without nesting make
the count wrong only where they overlap; a candidate that has already ended is dropped.

Where thread and time pack into one integer and ids are distinct (always, for a trace's
events), the same sweep is counted on numpy (`_Sweep`): binary searches in the sorted ends
and openings instead of a sorted frame of every end and probe and its joins (3x less CPU
for the memory tables' two nestings a rank). Elsewhere the frame (`_ends`).
"""

from __future__ import annotations

import numpy as np
import polars as pl

from hta_tui.analysis.nesting import sort_packed

_OPEN, _CLOSE, _ZERO_CLOSE, _PROBE = 1, 0, 2, 3


def node_columns() -> list[pl.Expr]:
    """An events frame's columns as the nodes `innermost` and `levels` read: node (its idx),
    key (its thread), start and end."""
    return [
        pl.col("idx").alias("node"),
        pl.col("tid").alias("key"),
        pl.col("ts").alias("start"),
        (pl.col("ts") + pl.col("dur")).alias("end"),
    ]


def innermost(nodes: pl.DataFrame, probes: pl.DataFrame) -> pl.DataFrame:
    """For each probe, the innermost node enclosing it.

    nodes: key, node (an id), start, end. probes: key, row (an id), ts.
    Returns probes' row, node (null when no node encloses it) and depth (0 = top level).
    """
    out_schema = {"row": probes.schema["row"], "node": nodes.schema["node"], "depth": pl.Int64()}
    if probes.is_empty():
        return pl.DataFrame(schema=out_schema)
    fast = _swept(nodes, probes)
    if fast is not None:
        return fast.innermost()
    return _innermost(nodes, probes, _ends(nodes, probes))


def innermost_and_levels(
    nodes: pl.DataFrame, probes: pl.DataFrame
) -> tuple[pl.DataFrame, pl.DataFrame]:
    """`innermost(nodes, probes)` and `levels(nodes)` from one sort of the nodes' ends and
    the probes (a probe leaves the count of open nodes as it is, so the nodes' levels come
    out the same)."""
    if probes.is_empty() or nodes.is_empty():
        return innermost(nodes, probes), levels(nodes)
    fast = _swept(nodes, probes)
    if fast is not None:
        return fast.innermost(), fast.levels()
    graph = _ends(nodes, probes)
    return _innermost(nodes, probes, graph), _levels_of(nodes, graph)


def _innermost(nodes: pl.DataFrame, probes: pl.DataFrame, graph: pl.DataFrame) -> pl.DataFrame:
    out_schema = {"row": probes.schema["row"], "node": nodes.schema["node"], "depth": pl.Int64()}
    opened = graph.filter(pl.col("kind") == _OPEN).select(
        "key", "pos", (pl.col("size") - 1).alias("level"), pl.col("id").alias("node")
    )
    found = (
        graph.filter(pl.col("kind") == _PROBE)
        .select("key", "pos", pl.col("id").alias("row"), (pl.col("size") - 1).alias("level"))
        .sort("pos")
        .join_asof(
            opened.sort("pos"),
            on="pos",
            by=["key", "level"],
            strategy="backward",
            check_sortedness=False,
        )
    )
    ends = nodes.select("node", pl.col("end").alias("__end"))
    probe_ts = probes.select("row", pl.col("ts").alias("__ts"))
    return (
        found.join(ends, on="node", how="left")
        .join(probe_ts, on="row", how="left")
        .with_columns(
            pl.when(pl.col("__end") > pl.col("__ts")).then(pl.col("node")).alias("node"),
            pl.col("level").cast(pl.Int64).alias("depth"),
        )
        .select(pl.col("row").cast(out_schema["row"]), "node", "depth")
    )


def _ends(nodes: pl.DataFrame, probes: pl.DataFrame) -> pl.DataFrame:
    """Every end and probe in order, with the running count of open nodes (`size`).
    Columns: pos, key, id, kind, size (what the as-of joins read)."""
    node = pl.col("node").cast(pl.Int64).alias("id")
    zero = pl.col("end") <= pl.col("start")
    dur = pl.col("end") - pl.col("start")
    base = nodes.lazy()
    opens = base.select(
        "key",
        node,
        pl.col("start").alias("time"),
        pl.lit(_OPEN, pl.Int8).alias("kind"),
        (-dur).alias("k"),
        pl.lit(1, pl.Int32).alias("delta"),
    )
    closes = base.select(
        "key",
        node,
        pl.max_horizontal("start", "end").alias("time"),
        pl.when(zero).then(_ZERO_CLOSE).otherwise(_CLOSE).cast(pl.Int8).alias("kind"),
        dur.alias("k"),
        pl.lit(-1, pl.Int32).alias("delta"),
    )
    points = probes.lazy().select(
        "key",
        pl.col("row").cast(pl.Int64).alias("id"),
        pl.col("ts").alias("time"),
        pl.lit(_PROBE, pl.Int8).alias("kind"),
        pl.lit(0, pl.Int64).alias("k"),
        pl.lit(0, pl.Int32).alias("delta"),
    )
    ends = pl.concat([opens, closes, points]).collect()
    # One argsort on packed keys, then only the columns read after it are gathered: sorting
    # the whole frame on five keys cost twice as much (the memory tables sort three times).
    order = ends.select(pl.arg_sort_by(_order(nodes, probes))).to_series()
    # Each thread's count returns to 0 at its end, so one cumulative sum serves every thread.
    return (
        ends.select("key", "id", "kind", "delta")[order]
        .with_row_index("pos")
        .select("pos", "key", "id", "kind", pl.col("delta").cum_sum().alias("size"))
    )


def _order(nodes: pl.DataFrame, probes: pl.DataFrame) -> list[pl.Expr]:
    """Sort keys equivalent to (key, time, kind, k, id), packed into three integers where the
    values allow it (`_packing`; the plain keys sort a null first within its key)."""
    packing = _packing(nodes, probes)
    if packing is None:
        return [pl.col(c) for c in ("key", "time", "kind", "k", "id")]
    k0, lo = packing
    # key * 2^45 + time fits in 62 bits; |k| <= hi - lo < 2^45, so kind * 2^47 + k + 2^46
    # orders by kind, then k
    key_time = (pl.col("key").cast(pl.Int64) - k0) * (1 << 45) + (pl.col("time") - lo)
    kind_k = pl.col("kind").cast(pl.Int64) * (1 << 47) + pl.col("k") + (1 << 46)
    return [key_time, kind_k, pl.col("id")]


def _packing(nodes: pl.DataFrame, probes: pl.DataFrame) -> tuple[int, int] | None:
    """(smallest key, earliest time) when keys and times pack into one integer: integer keys
    spanning < 2^17, times spanning < 2^45 ns (9.7 h), no nulls; None otherwise."""
    if not (nodes.schema["key"].is_integer() and probes.schema["key"].is_integer()):
        return None
    stats = [
        pl.col("key").min().cast(pl.Int64).alias("k0"),
        pl.col("key").max().cast(pl.Int64).alias("k1"),
    ]
    nulls = lambda *cols: pl.sum_horizontal(pl.col(c).null_count() for c in cols)  # noqa: E731
    b = (
        pl.concat(
            [
                nodes.select(
                    *stats,
                    nulls("key", "start", "end").cast(pl.Int64).alias("nulls"),
                    pl.min_horizontal(pl.col("start").min(), pl.col("end").min()).alias("lo"),
                    pl.max_horizontal(pl.col("start").max(), pl.col("end").max()).alias("hi"),
                ),
                probes.select(
                    *stats,
                    nulls("key", "ts").cast(pl.Int64).alias("nulls"),
                    pl.col("ts").min().alias("lo"),
                    pl.col("ts").max().alias("hi"),
                ),
            ],
            how="vertical_relaxed",
        )
        .select(
            pl.col("k0").min(),
            pl.col("k1").max(),
            pl.col("nulls").sum(),
            pl.col("lo").min(),
            pl.col("hi").max(),
        )
        .row(0, named=True)
    )
    if b["lo"] is None or b["k0"] is None or b["nulls"]:
        return None
    if b["k1"] - b["k0"] >= 1 << 17 or b["hi"] - b["lo"] >= 1 << 45:
        return None
    return b["k0"], b["lo"]


def levels(nodes: pl.DataFrame) -> pl.DataFrame:
    """Each node's depth (0 = top level) and parent node (null at the top).

    nodes: key, node, start, end."""
    if nodes.is_empty():
        return pl.DataFrame(
            schema={
                "node": nodes.schema["node"],
                "depth": pl.Int64(),
                "parent": nodes.schema["node"],
            }
        )
    no_probes = nodes.head(0).select(
        "key", pl.col("node").alias("row"), pl.col("start").alias("ts")
    )
    fast = _swept(nodes, no_probes)
    if fast is not None:
        return fast.levels()
    return _levels_of(nodes, _ends(nodes, no_probes))


def _levels_of(nodes: pl.DataFrame, graph: pl.DataFrame) -> pl.DataFrame:
    opened = graph.filter(pl.col("kind") == _OPEN).select(
        "key", "pos", (pl.col("size") - 1).cast(pl.Int64).alias("depth"), pl.col("id").alias("node")
    )
    parents = opened.select(
        "key",
        "pos",
        (pl.col("depth") + 1).alias("depth"),
        pl.col("node").alias("parent"),
    ).sort("pos")
    return (
        opened.sort("pos")
        .join_asof(
            parents,
            on="pos",
            by=["key", "depth"],
            strategy="backward",
            allow_exact_matches=False,
            check_sortedness=False,
        )
        .select(
            pl.col("node").cast(nodes.schema["node"]),
            "depth",
            pl.col("parent").cast(nodes.schema["node"]),
        )
    )


class _Sweep:
    """The sweep of `_ends` as counts on numpy arrays, where the packed sort keys apply and
    ids are distinct: no frame of every end and probe, no sort of it, no joins. The same
    order (`_order`), so the same answers: an opening's count of open nodes is the openings
    up to it less the ends before it (binary searches in the sorted ends: a node of zero
    length ends after the openings at its time, any other before them); a probe's likewise;
    the as-of joins are binary searches among the openings of one level, in sweep order."""

    def __init__(self, nodes: pl.DataFrame, probes: pl.DataFrame, packing: tuple[int, int]):
        self.nodes, self.probes, self.packing = nodes, probes, packing
        key = nodes["key"].to_numpy()
        start, end = nodes["start"].to_numpy(), nodes["end"].to_numpy()
        node = nodes["node"].cast(pl.Int64).to_numpy()
        # openings in sweep order: thread and time, longer first, then id
        at = self._packed(key, start)
        order = sort_packed(at, start - end, node)
        self.open_at = at[order]
        ends = self._packed(key, np.maximum(start, end))
        zero = end <= start
        self.ends = np.sort(ends[~zero])  # end before openings at their time
        self.zero_ends = np.sort(ends[zero])  # end after them (before probes)
        n = order.size
        closed = np.searchsorted(self.ends, self.open_at, "right") + np.searchsorted(
            self.zero_ends, self.open_at, "left"
        )
        self.level = np.arange(n, dtype=np.int64) - closed  # open count after it, less 1
        # openings by level, then sweep order: one level's are a run, searched in
        self.by_level = _by_level(self.level)
        self.level_key = self.level[self.by_level] * (n + 1) + self.by_level
        self.open_end = end[order]
        self.open_node = node[order]

    def _packed(self, key: np.ndarray, t: np.ndarray) -> np.ndarray:
        """`_order`'s thread-and-time key: the thread in the bits from 45 up."""
        key0, lo = self.packing
        return (key.astype(np.int64) - key0) * (1 << 45) + (t - lo)

    def _last_at(self, level: np.ndarray, before: np.ndarray, at: np.ndarray) -> np.ndarray:
        """Per query, the last opening (its sweep index, -1: none) before sweep index
        `before` at `level`, on the thread of the packed time `at`. Queries are searched in
        (level, before) order: ordered binary searches are several times faster."""
        n = self.open_at.size
        asked = _by_level(level)
        i = np.empty(level.size, dtype=np.int64)
        i[asked] = np.searchsorted(self.level_key, level[asked] * (n + 1) + before[asked]) - 1
        cand = self.by_level[np.maximum(i, 0)]
        ok = (i >= 0) & (self.level[cand] == level)
        # an earlier thread's opening at that level: none on this thread (keys in high bits)
        ok &= (self.open_at[cand] >> 45) == (at >> 45)
        return np.where(ok, cand, -1)

    def levels(self) -> pl.DataFrame:
        """`levels` of the nodes, rows in sweep order."""
        n = self.open_at.size
        up = self._last_at(self.level - 1, np.arange(n, dtype=np.int64), self.open_at)
        dtype = self.nodes.schema["node"]
        parent = pl.Series(np.where(up >= 0, self.open_node[np.maximum(up, 0)], 0))
        return pl.DataFrame(
            {
                "node": pl.Series(self.open_node).cast(dtype),
                "depth": pl.Series(self.level, dtype=pl.Int64),
                "parent": parent.set(pl.Series(up < 0), None).cast(dtype),  # type: ignore[arg-type]
            }
        )

    def _probed(self) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """The probes in sweep order: row, level (count of open nodes, less 1), the opening
        found at that level (sweep index, -1: none) and whether it is still open."""
        row = self.probes["row"].cast(pl.Int64).to_numpy()
        ts = self.probes["ts"].to_numpy()
        at = self._packed(self.probes["key"].to_numpy(), ts)
        order = sort_packed(at, row)
        row, ts, at = row[order], ts[order], at[order]
        opened = np.searchsorted(self.open_at, at, "right")
        closed = np.searchsorted(self.ends, at, "right") + np.searchsorted(
            self.zero_ends, at, "right"
        )
        level = opened - closed - 1
        found = self._last_at(level, opened, at)
        inside = (found >= 0) & (self.open_end[np.maximum(found, 0)] > ts)
        return row, level, found, inside

    def _node_ids(self, index: np.ndarray, present: np.ndarray) -> pl.Series:
        """The node id of each sweep index, null where not `present`."""
        node = pl.Series(np.where(present, self.open_node[np.maximum(index, 0)], 0))
        return node.set(pl.Series(~present), None)  # type: ignore[arg-type]

    def innermost(self) -> pl.DataFrame:
        """`innermost` of the probes, rows in sweep order."""
        row, level, found, inside = self._probed()
        return pl.DataFrame(
            {
                "row": pl.Series(row).cast(self.probes.schema["row"]),
                "node": self._node_ids(found, inside).alias("node"),
                "depth": pl.Series(level, dtype=pl.Int64),
            }
        )

    def chain(self, depth: int) -> pl.DataFrame:
        """`innermost_chain`: each probe's innermost node and its parents (`levels`'), rows
        in sweep order; parents found for these nodes only, not for every node."""
        row, _, at, inside = self._probed()
        at = np.where(inside, at, -1)
        out = {"row": pl.Series(row).cast(self.probes.schema["row"])}
        for i in range(depth):
            out[f"node_{i}"] = self._node_ids(at, at >= 0).cast(pl.Int64)
            has = at >= 0
            up = np.full(at.size, -1, dtype=np.int64)
            up[has] = self._last_at(self.level[at[has]] - 1, at[has], self.open_at[at[has]])
            at = up
        return pl.DataFrame(out)


def innermost_chain(nodes: pl.DataFrame, probes: pl.DataFrame, depth: int) -> pl.DataFrame | None:
    """For each probe (`innermost`'s arguments): `row`, and `node_0` .. `node_{depth-1}`: the
    innermost node enclosing it (null when none) and its parent, grandparent, ... as `levels`
    gives them (Int64, null past the top). None where the numpy sweep does not apply: then
    `innermost_and_levels` and a climb of its parents."""
    if probes.is_empty():
        return None
    sweep = _swept(nodes, probes)
    return None if sweep is None else sweep.chain(depth)


def _by_level(level: np.ndarray) -> np.ndarray:
    """Indices by level (>= -1), then index: a radix sort where levels fit 16 bits."""
    if level.size and 0 <= level.max() + 1 < 1 << 16:
        return np.argsort((level + 1).astype(np.uint16), kind="stable")
    return np.argsort(level, kind="stable")


def _swept(nodes: pl.DataFrame, probes: pl.DataFrame) -> _Sweep | None:
    """The numpy sweep where it gives `_ends`' answers: integer ids and keys, no nulls, keys
    and times within the packed sort keys' bounds (`_packing`), distinct node ids and probe
    rows (the joins of `_innermost` by id then match one row each); None elsewhere."""
    if nodes.is_empty() or not (
        nodes.schema["node"].is_integer() and probes.schema["row"].is_integer()
    ):
        return None
    packing = _packing(nodes, probes)
    if packing is None:
        return None
    if any(s.null_count() or s.n_unique() != s.len() for s in (nodes["node"], probes["row"])):
        return None
    return _Sweep(nodes, probes, packing)
