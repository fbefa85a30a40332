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
