"""`enclosing.innermost_and_levels` (the memory context's Python frames: the innermost frame
of each allocation and the frames' nesting from one sort) answers what `innermost` and
`levels` answer apart, on nested, zero-length and overlapping frames of two threads."""

from __future__ import annotations

import numpy as np
import polars as pl
import pytest
from polars.testing import assert_frame_equal

from hta_tui.analysis import enclosing
from hta_tui.analysis.enclosing import innermost, innermost_and_levels, levels


def _frames(seed: int) -> tuple[pl.DataFrame, pl.DataFrame]:
    rng = np.random.default_rng(seed)
    rows = []
    node = 0
    for key in (1, 2):
        t = 0
        for _ in range(40):  # a top frame with children, some zero-length, some overlapping
            top_end = t + 100
            rows.append((key, node, t, top_end))
            node += 1
            for c in range(int(rng.integers(0, 4))):
                start = t + 10 + 25 * c
                length = int(rng.choice([0, 5, 20, 40]))  # 40 overlaps the next child
                rows.append((key, node, start, start + length))
                node += 1
            t = top_end + int(rng.integers(0, 3))
    nodes = pl.DataFrame(rows, schema=["key", "node", "start", "end"], orient="row")
    probes = pl.DataFrame(
        {
            "key": rng.choice([1, 2], 500),
            "row": np.arange(500),
            "ts": rng.integers(-5, int(nodes["end"].max()) + 5, 500),
        }
    )
    return nodes, probes


def test_one_sort_gives_both_answers() -> None:
    for seed in range(3):
        nodes, probes = _frames(seed)
        found, nesting = innermost_and_levels(nodes, probes)
        assert found.sort("row").equals(innermost(nodes, probes).sort("row"))
        assert nesting.sort("node").equals(levels(nodes).sort("node"))
        assert found["node"].null_count() < found.height  # most probes are inside a frame


def test_packed_sort_keys_order_as_the_plain_ones(monkeypatch: pytest.MonkeyPatch) -> None:
    """The ends are sorted on keys packed into three integers (thread and time, kind and
    duration, id): ties of time, kind and duration (zero-length, equal and overlapping
    frames, probes at their times) come out as the five plain keys order them."""
    for seed in range(3):
        nodes, probes = _frames(seed)
        probes = pl.concat(  # probes exactly at frames' starts and ends as well
            [
                probes,
                nodes.select(
                    "key",
                    (pl.int_range(pl.len()) + 1000).cast(probes.schema["row"]).alias("row"),
                    pl.col("end").alias("ts"),
                ),
            ]
        )
        assert len(enclosing._order(nodes, probes)) == 3  # packed on these
        packed = innermost_and_levels(nodes, probes)
        with monkeypatch.context() as m:
            m.setattr(
                enclosing,
                "_order",
                lambda *_: [pl.col(c) for c in ("key", "time", "kind", "k", "id")],
            )
            m.setattr(enclosing, "_swept", lambda *_: None)  # the polars sweep, plain keys
            plain = innermost_and_levels(nodes, probes)
        assert packed[0].equals(plain[0])
        assert packed[1].equals(plain[1])


def _hostile(seed: int) -> tuple[pl.DataFrame, pl.DataFrame]:
    """Random ranges on three threads, ids shuffled: equal starts, zero and negative lengths,
    overlaps, probes on other threads, before, after and exactly at starts and ends."""
    rng = np.random.default_rng(seed)
    n, p, span = 150, 120, [12, 60, 1000][seed % 3]
    start = rng.integers(0, span, n)
    dur = rng.choice([0, 1, 2, 5, 10, 100, -3], n) if seed % 2 else rng.integers(0, span, n)
    nodes = pl.DataFrame(
        {"key": rng.choice([3, 7, 8], n), "node": rng.permutation(3 * n)[:n], "start": start}
    ).with_columns(end=pl.col("start") + dur, node=pl.col("node").cast(pl.UInt32))
    ts = rng.integers(-2, span + 12, p)
    ts[:40] = (start + dur)[:40]
    ts[40:60] = start[40:60]
    probes = pl.DataFrame(
        {"key": rng.choice([3, 5, 7, 8], p), "row": rng.permutation(2 * p)[:p], "ts": ts}
    ).with_columns(pl.col("row").cast(pl.UInt32))
    return nodes, probes


def test_numpy_sweep_answers_as_the_sort_of_every_end(monkeypatch: pytest.MonkeyPatch) -> None:
    """Where the keys pack, the nesting is counted on numpy (binary searches in the sorted
    ends and openings), with no frame of every end sorted (`_ends`): the same rows, in the
    same order and types, as that sort and its as-of joins give, on hostile ranges."""
    expected = []
    for seed in range(12):
        nodes, probes = _hostile(seed)
        graph = enclosing._ends(nodes, probes)
        expected.append(
            (
                enclosing._innermost(nodes, probes, graph),
                enclosing._levels_of(nodes, graph),
                enclosing._levels_of(nodes, enclosing._ends(nodes, probes.head(0))),
            )
        )

    def no_sort(*_: object) -> pl.DataFrame:
        raise AssertionError("every end sorted in a frame")

    monkeypatch.setattr(enclosing, "_ends", no_sort)
    for seed, (found, nesting, alone) in enumerate(expected):
        nodes, probes = _hostile(seed)
        both = innermost_and_levels(nodes, probes)
        assert_frame_equal(both[0], found)
        assert_frame_equal(both[1], nesting)
        assert_frame_equal(innermost(nodes, probes), found)
        assert_frame_equal(levels(nodes), alone)
        assert found["node"].null_count() < found.height


def test_innermost_chain_climbs_as_the_levels_parents() -> None:
    """Each probe's innermost node and its two nearest ancestors, found for the probes'
    nodes alone: the nodes a climb of `levels`' parents from `innermost` reaches."""
    for seed in range(6):
        nodes, probes = _hostile(seed)
        graph = enclosing._ends(nodes, probes)
        found = enclosing._innermost(nodes, probes, graph)
        parent = dict(enclosing._levels_of(nodes, graph).select("node", "parent").iter_rows())
        expected = []
        for row, node in found.select("row", "node").iter_rows():
            climbed = [node]
            for _ in range(2):
                climbed.append(None if climbed[-1] is None else parent[climbed[-1]])
            expected.append((row, *climbed))
        chain = enclosing.innermost_chain(nodes, probes, 3)
        assert chain is not None
        assert chain.rows() == expected
        assert chain["node_2"].null_count() < chain.height  # some probes three deep
