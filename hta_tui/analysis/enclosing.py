"""Which nested interval of a thread encloses a point in time: sorts and as-of joins, no walk.

Nodes are [start, end) intervals per thread (`key`) that nest, as a thread's operators do.
Opening and closing ends and the probes are sorted together by time; at one time, ends close
first, then intervals open (longer first), then zero-length ones close, then probes. The
running count of open intervals just after an opening is its level + 1; at a probe it is the
number of intervals enclosing it, and the innermost is the last one opened at level count - 1
on that thread before the probe (an as-of join). Intervals that overlap without nesting make
the count wrong only where they overlap; a candidate that has already ended is dropped.
"""

from __future__ import annotations

import polars as pl

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
    return _innermost(nodes, probes, _ends(nodes, probes))


def innermost_and_levels(
    nodes: pl.DataFrame, probes: pl.DataFrame
) -> tuple[pl.DataFrame, pl.DataFrame]:
    """`innermost(nodes, probes)` and `levels(nodes)` from one sort of the nodes' ends and
    the probes (a probe leaves the count of open nodes as it is, so the nodes' levels come
    out the same)."""
    if probes.is_empty() or nodes.is_empty():
        return innermost(nodes, probes), levels(nodes)
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
    values allow it (integer keys spanning < 2^17, times spanning < 2^45 ns: 9.7 h, no
    nulls: the plain keys sort a null first within its key)."""
    plain = [pl.col(c) for c in ("key", "time", "kind", "k", "id")]
    if not (nodes.schema["key"].is_integer() and probes.schema["key"].is_integer()):
        return plain
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
        return plain
    if b["k1"] - b["k0"] >= 1 << 17 or b["hi"] - b["lo"] >= 1 << 45:
        return plain
    # key * 2^45 + time fits in 62 bits; |k| <= hi - lo < 2^45, so kind * 2^47 + k + 2^46
    # orders by kind, then k
    key_time = (pl.col("key").cast(pl.Int64) - b["k0"]) * (1 << 45) + (pl.col("time") - b["lo"])
    kind_k = pl.col("kind").cast(pl.Int64) * (1 << 47) + pl.col("k") + (1 << 46)
    return [key_time, kind_k, pl.col("id")]


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
    graph = _ends(
        nodes, nodes.head(0).select("key", pl.col("node").alias("row"), pl.col("start").alias("ts"))
    )
    return _levels_of(nodes, graph)


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
