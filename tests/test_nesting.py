"""analysis/nesting.py against trees written by a generator that knows each range's depth,
parent and last descendant: nested ranges on several threads, children that share an edge or
the whole extent of their parent, zero-length ranges, siblings that touch."""

from __future__ import annotations

import numpy as np
import pytest

from hta_tui.analysis import nesting


def written_tree(seed: int, threads: int = 3) -> dict[str, np.ndarray]:
    """Ranges in pre-order (the order nesting expects), with what the generator made."""
    rng = np.random.default_rng(seed)
    rows: list[tuple[int, int, int, int, int]] = []  # thread, start, end, depth, parent

    def grow(thread: int, start: int, end: int, depth: int, parent: int) -> None:
        me = len(rows)
        rows.append((thread, start, end, depth, parent))
        if depth >= 4 or end - start < 2 or rng.random() < 0.3:
            return
        t = start
        for _ in range(int(rng.integers(1, 4))):
            if t >= end:
                break
            kind = rng.integers(0, 4)
            if kind == 0:  # zero length, at the running edge (the next sibling starts after)
                grow(thread, t, t, depth + 1, me)
                t += 1
            elif kind == 1 and t == start:  # the parent's whole extent
                grow(thread, start, end, depth + 1, me)
                return
            else:  # a random stretch; the next sibling may touch it
                stop = int(rng.integers(t + 1, end + 1))
                grow(thread, t, stop, depth + 1, me)
                t = stop + int(rng.integers(0, 2))

    for thread in range(threads):
        t = 0
        for _ in range(20):
            stop = t + int(rng.integers(0, 50))
            grow(thread, t, stop, 0, -1)
            t = stop + int(rng.integers(0 if stop > t else 1, 3))
    cols = np.array(rows, dtype=np.int64).T
    return dict(zip(["thread", "start", "end", "depth", "parent"], cols, strict=True))


@pytest.mark.parametrize("seed", range(8))
def test_depth_parent_and_subtree_as_written(seed: int) -> None:
    tree = written_tree(seed)
    thread, start, end = tree["thread"], tree["start"], tree["end"]
    # pre-order is (thread, start, longer first) with the generator's order among equals
    assert (np.lexsort((-end, start, thread)) == np.arange(start.size)).all()
    assert (nesting.depths(thread, start, end) == tree["depth"]).all()
    assert (nesting.parents(thread, tree["depth"]) == tree["parent"]).all()
    # last descendant: the last row whose chain of parents reaches this one
    expected = np.arange(start.size)
    for i in range(start.size - 1, -1, -1):
        p = tree["parent"][i]
        if p >= 0:
            expected[p] = max(expected[p], expected[i])
    got = nesting.last_descendants(thread, start, end)
    zero = end == start  # a zero-length range has no children, but the rule reads starts
    assert (got[~zero] == expected[~zero]).all()


def test_nothing() -> None:
    empty = np.zeros(0, dtype=np.int64)
    assert nesting.depths(empty, empty, empty).size == 0
    assert nesting.parents(empty, empty).size == 0
    assert nesting.last_descendants(empty, empty, empty).size == 0


def test_sort_packed_orders_as_a_lexsort() -> None:
    """The op tree's order (thread, start, longer first, host node before runtime call) from
    one packed key sorted stably and its ties alone lexsorted: np.lexsort's order, ties of
    every key kept in input order; None where the key cannot pack."""
    rng = np.random.default_rng(0)
    for threads in ([3, 9], [7], [5, 2**40]):  # small ids, one thread, ids far apart
        n = 3000
        tid = rng.choice(threads, n)
        start = rng.integers(0, 40, n) * 1000 + 10**15  # many equal starts
        end = start + rng.choice([0, 1000, 5000], n)
        is_rt = rng.random(n) < 0.3
        packed = nesting.packed_thread_time(tid, start)
        assert packed is not None
        got = nesting.sort_packed(packed, -end, is_rt)
        assert (got == np.lexsort((is_rt, -end, start, tid))).all()
    far = np.array([0, 2**46])
    assert nesting.packed_thread_time(np.array([1, 1]), far) is None  # 19 h apart
    assert nesting.packed_thread_time(np.arange(1 << 17) * 3, np.zeros(1 << 17)) is None
