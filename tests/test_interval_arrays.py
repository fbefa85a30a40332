"""interval_arrays against counting covered unit steps one by one on small random intervals."""

import numpy as np
import pytest

from hta_tui.analysis import interval_arrays


def _points(starts, ends) -> set[int]:
    return {t for s, e in zip(starts, ends, strict=True) for t in range(s, e)}


@pytest.mark.parametrize("seed", range(20))
def test_union_and_covered_match_a_count_of_unit_steps(seed: int) -> None:
    rng = np.random.default_rng(seed)
    n = int(rng.integers(0, 40))
    starts = rng.integers(0, 200, n).astype(np.int64)
    ends = starts + rng.integers(0, 30, n)
    a = rng.integers(-10, 230, 6)
    lo, hi = np.minimum(a[:3], a[3:]), np.maximum(a[:3], a[3:])
    u = interval_arrays.union(starts, ends)
    assert np.all(u[0][1:] > u[1][:-1])  # disjoint, not touching, sorted
    assert _points(*u) == _points(starts, ends)
    got = interval_arrays.covered(u, lo, hi)
    points = _points(starts, ends)
    want = [len({t for t in points if a <= t < b}) for a, b in zip(lo, hi, strict=True)]
    assert got.tolist() == want


def test_add_merges_two_unions_touching_ones_into_one() -> None:
    a = interval_arrays.union(np.array([0, 10]), np.array([5, 12]))
    b = interval_arrays.union(np.array([5, 20]), np.array([10, 21]))
    s, e = interval_arrays.add(a, b)
    assert (s.tolist(), e.tolist()) == ([0, 20], [12, 21])


def test_a_group_keeps_its_own_end_when_it_ends_before_it_starts() -> None:
    """HTA's rounding makes [10, 8): a group of its own after [0, 9), ending at 8, not 9."""
    s, e = interval_arrays.union(np.array([0, 10]), np.array([9, 8]))
    assert (s.tolist(), e.tolist()) == ([0, 10], [9, 8])


@pytest.mark.parametrize("seed", range(10))
def test_unions_by_gives_each_groups_own_union(seed: int) -> None:
    """`unions_by` (a batch's ranks at once) is each group's `union` to the bit: groups of
    none, one and many rows, far apart in time, with intervals that end before they start
    (HTA's rounding) and a group whose running end would pass the next group's starts."""
    rng = np.random.default_rng(seed)
    groups, starts, ends = [], [], []
    for g in sorted(rng.choice(50, int(rng.integers(1, 8)), replace=False).tolist()):
        n = int(rng.integers(0, 12))
        s = np.sort(rng.integers(0, 100, n)) + int(rng.integers(0, 3)) * 10**15
        groups.append(np.full(n, g))
        starts.append(s)
        ends.append(s + rng.integers(-3, 40, n))
    group, start, end = (np.concatenate(a).astype(np.int64) for a in (groups, starts, ends))
    found = interval_arrays.unions_by(group, start, end)
    assert found is not None
    want = [
        (g, s, e)
        for g in dict.fromkeys(group.tolist())
        for s, e in zip(
            *interval_arrays.union(start[group == g], end[group == g], ordered=True), strict=True
        )
    ]
    assert list(zip(*(a.tolist() for a in found), strict=True)) == want
    far = np.array([0, 2**62])  # (two groups a span apart would overflow: each alone)
    assert interval_arrays.unions_by(np.array([0, 1]), far, far + 1) is None


@pytest.mark.parametrize("seed", range(10))
def test_sweep_gives_each_unit_step_the_set_of_unions_covering_it(seed: int) -> None:
    rng = np.random.default_rng(seed)
    unions, points = [], []
    for _ in range(3):
        starts = rng.integers(0, 100, 8)
        ends = starts + rng.integers(0, 20, 8)
        unions.append(interval_arrays.union(starts, ends))
        points.append(_points(starts, ends))
    want: dict[int, int] = {}
    for t in range(130):
        mask = sum(1 << i for i, p in enumerate(points) if t in p)
        if mask:
            want[mask] = want.get(mask, 0) + 1
    mask, length = interval_arrays.sweep(unions)
    got: dict[int, int] = {}
    for m, n in zip(mask.tolist(), length.tolist(), strict=True):
        got[m] = got.get(m, 0) + n
    assert got == want


@pytest.mark.parametrize("seed", range(20))
def test_spread_matches_a_count_of_unit_steps_per_bucket(seed: int) -> None:
    """Each interval's unit steps inside each bucket (the last one runs to `last`), counted
    one by one; intervals outside the buckets, empty ones and long ones included."""
    rng = np.random.default_rng(seed)
    n = int(rng.integers(0, 40))
    starts = rng.integers(-20, 220, n).astype(np.int64)
    ends = starts + rng.integers(0, 60, n)
    first, size, count = 10, int(rng.integers(1, 30)), int(rng.integers(1, 8))
    last = first + size * count + int(rng.integers(0, size))
    rows, bucket, inside = interval_arrays.spread(starts, ends, first, size, count, last)
    got = {(int(r), int(b)): int(v) for r, b, v in zip(rows, bucket, inside, strict=True)}
    assert len(got) == rows.size  # a pair at most once
    for i, (s, e) in enumerate(zip(starts, ends, strict=True)):
        for b in range(count):
            lo = first + b * size
            hi = last if b == count - 1 else lo + size
            want = len(range(max(s, lo), min(e, hi)))
            assert got.get((i, b), 0) == want, (i, b)


@pytest.mark.parametrize("seed", range(10))
def test_clocks_laid_out_give_each_its_own_union_and_coverage(seed: int) -> None:
    """Intervals and windows of several clocks (ranks: origins decades apart, one negative)
    laid one after another (`laid_out`): one `union` and `covered` over all of them give
    each window what its own clock's alone gives."""
    rng = np.random.default_rng(seed)
    origins = [0, -(10**17), 1_700_000_000 * 10**9, 5]
    keys, starts, ends, w_keys, lo, hi = [], [], [], [], [], []
    for clock, origin in enumerate(origins):
        n = int(rng.integers(0, 12))
        s = origin + rng.integers(0, 200, n)
        starts.append(s)
        ends.append(s + rng.integers(-2, 30, n))  # (one may end before it starts)
        keys.append(np.full(n, clock))
        a = origin + rng.integers(-10, 230, 6)
        lo.append(np.minimum(a[:3], a[3:]))
        hi.append(np.maximum(a[:3], a[3:]))
        w_keys.append(np.full(3, clock))
    order = [np.argsort(s, kind="stable") for s in starts]
    starts = [s[o] for s, o in zip(starts, order, strict=True)]
    ends = [e[o] for e, o in zip(ends, order, strict=True)]
    k, w = np.concatenate(keys), np.concatenate(w_keys)
    laid = interval_arrays.laid_out(
        [k, k, w, w], [np.concatenate(x) for x in (starts, ends, lo, hi)]
    )
    assert laid is not None
    got = interval_arrays.covered(interval_arrays.union(laid[0], laid[1]), laid[2], laid[3])
    want = np.concatenate(
        [
            interval_arrays.covered(interval_arrays.union(s, e), a, b)
            for s, e, a, b in zip(starts, ends, lo, hi, strict=True)
        ]
    )
    assert got.tolist() == want.tolist()
    far = [np.array([0, 3 * 2**60]), np.array([0, 3 * 2**60])]  # two clocks of 0.75 x 2^62 ns
    assert interval_arrays.laid_out([np.array([0, 0]), np.array([1, 1])], far) is None
    assert interval_arrays.laid_out([np.array([0, 0])], far[:1]) is not None


def test_add_with_an_empty_union_is_the_other_as_the_long_way_makes_it() -> None:
    """(the step breakdown's roles with no row: skipped, not merged again)"""
    u = interval_arrays.union(np.array([0, 10, 10]), np.array([9, 8, 12]))
    empty = (u[0][:0], u[1][:0])
    long_way = interval_arrays.union(
        np.concatenate([empty[0], u[0]]), np.concatenate([empty[1], u[1]])
    )
    for got in (interval_arrays.add(u, empty), interval_arrays.add(empty, u)):
        assert got[0].tolist() == long_way[0].tolist() and got[1].tolist() == long_way[1].tolist()
