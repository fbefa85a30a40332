"""Interval algebra on small hand-made frames, checked against a brute-force timeline."""

from __future__ import annotations

import random

import polars as pl
import pytest

from hta_tui.analysis import intervals


def frame(pairs: list[tuple[int | None, int | None]], **extra: list) -> pl.DataFrame:
    return pl.DataFrame(
        {
            "start": [p[0] for p in pairs],
            "end": [p[1] for p in pairs],
            **extra,
        },
        schema_overrides={"start": pl.Int64, "end": pl.Int64},
    )


def pairs_of(df: pl.DataFrame) -> list[tuple[int, int]]:
    return list(zip(df["start"].to_list(), df["end"].to_list(), strict=True))


def test_merge_nested_touching_and_disjoint() -> None:
    df = frame([(20, 30), (0, 10), (2, 5), (10, 12), (40, 41), (35, 36)])
    assert pairs_of(intervals.merge_intervals(df)) == [(0, 12), (20, 30), (35, 36), (40, 41)]


def test_merge_identical_and_zero_length() -> None:
    df = frame([(5, 9), (5, 9), (7, 7), (9, 9), (12, 12)])
    # a zero-length interval inside or touching another disappears into it; alone it stays
    assert pairs_of(intervals.merge_intervals(df)) == [(5, 9), (12, 12)]
    assert intervals.union_length(df) == 4


def test_merge_keeps_hta_negative_intervals() -> None:
    # HTA's rounding can make end < start; its merge keeps such a group with negative length
    df = frame([(10, 9), (0, 5)])
    assert pairs_of(intervals.merge_intervals(df)) == [(0, 5), (10, 9)]
    assert intervals.union_length(df) == 4


def test_empty_and_null_rows() -> None:
    empty = frame([])
    assert intervals.merge_intervals(empty).is_empty()
    assert intervals.union_length(empty) == 0
    assert intervals.span(empty) is None
    assert intervals.gaps(empty).is_empty()
    assert intervals.intersection_length(empty, frame([(0, 3)])) == 0
    with_nulls = frame([(None, 4), (1, None), (2, 6)])
    assert pairs_of(intervals.merge_intervals(with_nulls)) == [(2, 6)]


def test_by_groups_are_merged_independently() -> None:
    df = frame([(0, 10), (5, 15), (0, 10), (20, 30)], g=["a", "b", "a", "a"])
    merged = intervals.merge_intervals(df, by="g")
    assert merged.rows() == [("a", 0, 10), ("a", 20, 30), ("b", 5, 15)]
    covered = intervals.covered_length(df, by="g").sort("g")
    assert covered.rows() == [("a", 20), ("b", 10)]


def test_span_is_first_start_to_last_merged_end() -> None:
    assert intervals.span(frame([(30, 40), (5, 50), (60, 70)])) == (5, 70)


def test_gaps() -> None:
    df = frame([(0, 10), (10, 15), (20, 25), (22, 30), (31, 32)], s=[1, 1, 1, 1, 1])
    assert intervals.gaps(df).rows() == [(15, 20, 5), (30, 31, 1)]
    two = frame([(0, 1), (3, 4), (0, 2), (5, 6)], s=[1, 1, 2, 2])
    assert intervals.gaps(two, by="s").rows() == [(1, 1, 3, 2), (2, 2, 5, 3)]


@pytest.mark.parametrize(
    ("a", "b", "expected"),
    [
        ([(0, 10)], [(5, 15)], 5),  # partial
        ([(0, 10)], [(2, 4), (6, 8)], 4),  # nested
        ([(0, 10)], [(10, 20)], 0),  # touching
        ([(0, 5), (3, 9)], [(0, 9)], 9),  # overlapping inside a
        ([(0, 1)], [(2, 3)], 0),  # disjoint
    ],
)
def test_intersection_length(a, b, expected) -> None:
    assert intervals.intersection_length(frame(a), frame(b)) == expected
    assert intervals.intersection_length(frame(b), frame(a)) == expected


def test_coverage_by_label_splits_overlaps() -> None:
    df = frame([(0, 10), (5, 15), (5, 15), (20, 20)], k=["A", "B", "B", "A"])
    cov = intervals.coverage_by_label(df, "k", labels=["A", "B"])
    got = {tuple(r["labels"]): r["length"] for r in cov.iter_rows(named=True)}
    assert got == {("A",): 5, ("A", "B"): 5, ("B",): 5}


def test_coverage_by_label_no_zero_rows_at_shared_boundaries() -> None:
    # A ends exactly where B starts: never both at once, even for an instant
    df = frame([(0, 10), (10, 20)], k=["A", "B"])
    cov = intervals.coverage_by_label(df, "k", labels=["A", "B"])
    assert sorted(cov["labels"].to_list()) == [["A"], ["B"]]
    assert cov["length"].to_list() == [10, 10]


def test_coverage_by_label_ignores_unlisted_labels_and_handles_empty() -> None:
    df = frame([(0, 10), (0, 10)], k=["A", "C"])
    cov = intervals.coverage_by_label(df, "k", labels=["A", "B"])
    assert cov.rows() == [(1, ["A"], 10)]
    assert intervals.coverage_by_label(frame([], k=[]), "k", labels=[]).is_empty()


def _brute(pairs: list[tuple[int, int]]) -> set[int]:
    return {t for s, e in pairs for t in range(s, e)}


def test_against_brute_force_timeline() -> None:
    rng = random.Random(7)
    for _ in range(60):
        a = [(s, s + rng.randint(0, 12)) for s in (rng.randint(0, 80) for _ in range(12))]
        b = [(s, s + rng.randint(0, 12)) for s in (rng.randint(0, 80) for _ in range(9))]
        ta, tb = _brute(a), _brute(b)
        assert intervals.union_length(frame(a)) == len(ta)
        assert intervals.intersection_length(frame(a), frame(b)) == len(ta & tb)
        lo, hi = intervals.span(frame(a)) or (0, 0)
        assert sum(intervals.gaps(frame(a))["length"]) == (hi - lo) - len(ta)
        both = frame(a + b, k=["A"] * len(a) + ["B"] * len(b))
        cov = intervals.coverage_by_label(both, "k", labels=["A", "B"])
        got = {tuple(r["labels"]): r["length"] for r in cov.iter_rows(named=True)}
        want = {("A",): len(ta - tb), ("B",): len(tb - ta), ("A", "B"): len(ta & tb)}
        assert got == {k: v for k, v in want.items() if v}


def test_covered_within_windows_against_brute_force() -> None:
    # Windows that start and end inside, before, after and on interval edges, empty and
    # reversed ones, against counting covered time units one by one.
    rng = random.Random(11)
    for _ in range(60):
        a = [(s, s + rng.randint(0, 12)) for s in (rng.randint(0, 80) for _ in range(12))]
        covered = _brute(a)
        windows = [
            (lo, lo + rng.randint(-3, 40)) for lo in (rng.randint(-10, 95) for _ in range(8))
        ]
        got = intervals.covered_within(
            intervals.merge_intervals(frame(a)),
            pl.Series([w[0] for w in windows]),
            pl.Series([w[1] for w in windows]),
        ).to_list()
        assert got == [len({t for t in covered if lo <= t < hi}) for lo, hi in windows]


def test_covered_within_nothing() -> None:
    none = intervals.merge_intervals(frame([]))
    assert intervals.covered_within(none, pl.Series([0, 5]), pl.Series([10, 6])).to_list() == [0, 0]
