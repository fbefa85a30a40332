"""Issue 27, the full report's per-rank CPU: the module view's device times, the ATen ops'
and the kernel owners' faster paths give the tables of the paths they replace, on generated
edge cases (ranges that overlap without nesting, equal times, zero-length and null times,
null threads, unsorted rows), and take the fast path where the trace allows it."""

from __future__ import annotations

import functools
from collections.abc import Callable

import numpy as np
import polars as pl
import pytest

from hta_tui.analysis import aten_ops, hta_view, kernel_owners, module_view, sequences
from hta_tui.trace.parse import parse_bytes
from tests.test_shared_nesting import _trace


def _events() -> pl.DataFrame:
    return parse_bytes(_trace()).frames["events"]


def _edit(events: pl.DataFrame, name: str, **values: object) -> pl.DataFrame:
    """`events` with the first row named `name` given `values`."""
    first = pl.int_range(pl.len()) == (pl.col("name") == name).arg_max()
    return events.with_columns(
        pl.when(first).then(pl.lit(v, dtype=events.schema[c])).otherwise(pl.col(c)).alias(c)
        for c, v in values.items()
    )


@functools.cache
def _cases() -> dict[str, pl.DataFrame]:
    ev = _events()
    relu = ev.filter(pl.col("name") == "aten::relu").row(0, named=True)
    first = ev.filter(pl.col("kind") == "runtime").row(0, named=True)  # before aten::t
    launch = ev.filter(pl.col("kind") == "runtime").row(1, named=True)  # inside aten::relu
    return {
        "plain": ev,
        # aten::relu runs past the end of ReLU_0's frame: ranges that overlap, not nested
        "overlap": _edit(ev, "aten::relu", dur=relu["dur"] + 10**6),
        # an op with the times of a launch: the one of smaller id holds the other
        "equal times, op first": _edit(ev, "aten::relu", ts=launch["ts"], dur=launch["dur"]),
        "equal times, launch first": _edit(ev, "aten::t", ts=first["ts"], dur=first["dur"]),
        "zero-length launch": _edit(ev, "cudaLaunchKernel", dur=0),
        "null time": _edit(ev, "aten::linear", ts=None),
        "null thread": _edit(ev, "cudaLaunchKernel", tid=None),
        "unsorted": ev.reverse(),
    }


def _old_and_new(
    monkeypatch: pytest.MonkeyPatch, fast: str, run: Callable[[], pl.DataFrame]
) -> tuple[pl.DataFrame, pl.DataFrame]:
    """`run()` as it is, then with `fast` (module_view's function) answering None (the
    slow path): fresh shared tables each time."""
    hta_view._views.clear()
    new = run()
    with monkeypatch.context() as m:
        m.setattr(module_view, fast, lambda *a, **k: None)
        hta_view._views.clear()
        old = run()
    return old, new


def _device(events: pl.DataFrame) -> pl.DataFrame:
    """`_device_time` of the module frames, without the rows of none (what the view reads)."""
    mods = events.filter(module_view._is_module())
    graph = module_view._shared_graph(events, mods)
    if graph is None:
        graph = module_view._own_graph(events, mods)
    out = module_view._device_time(events, graph, mods)
    return out.filter((pl.col("dev_total") != 0) | (pl.col("dev_self") != 0)).sort("idx")


@pytest.mark.parametrize("case", list(_cases()))
def test_module_device_time_by_one_nesting_equals_enclosing(
    monkeypatch: pytest.MonkeyPatch, case: str
) -> None:
    """The module view's device times from one nesting of the launch threads are those of
    `enclosing`'s pairs; the nesting is used where the ranges nest and last, not elsewhere."""
    events = _cases()[case]
    old, new = _old_and_new(monkeypatch, "_nested_device_time", lambda: _device(events))
    assert new.equals(old)
    assert old.height  # the launches' modules have device time
    table = _old_and_new(
        monkeypatch, "_nested_device_time", lambda: module_view.rank_module_view(events)
    )
    assert table[0].equals(table[1])
    mods = events.filter(module_view._is_module())
    launches = (
        events.filter(pl.col("kind") == "runtime")
        .select("idx", "pid", "tid", "ts", "dur")
        .with_columns(pl.lit(7, pl.Int64).alias("gpu_ns"))
    )
    graph = module_view._shared_graph(events, mods)
    if graph is None:
        graph = module_view._own_graph(events, mods)
    nested = module_view._nested_device_time(events, graph, mods, launches)
    fast = case in ("plain", "unsorted", "null thread", "equal times, op first")
    assert (nested is not None) == fast, case


def test_thread_order_is_the_four_key_sort() -> None:
    """`kernel_owners.thread_order` orders rows as `np.lexsort((last, -end, start, thread))`:
    many ties of thread and start (broken by longer first, then `last`, then row order),
    rows out of time order, a null time (NaN: the four passes), a span too long for one
    integer, no rows."""
    rng = np.random.default_rng(3)
    for n, times in ((2000, 40), (500, 10**9), (0, 1)):
        thread = rng.integers(0, 4, n)
        start = rng.integers(0, times, n)
        end = start + rng.integers(0, 5, n)
        last = rng.integers(0, 2, n).astype(bool)
        expected = np.lexsort((last, -end, start, thread))
        assert (kernel_owners.thread_order(thread, start, end, last) == expected).all()
        if n:
            far = start.copy()
            far[0] = 2**62  # the span passes one integer's range
            assert (
                kernel_owners.thread_order(thread, far, end, last)
                == np.lexsort((last, -end, far, thread))
            ).all()
            nan = start.astype(np.float64)
            nan[1] = np.nan
            assert (
                kernel_owners.thread_order(thread, nan, end, last)
                == np.lexsort((last, -end, nan, thread))
            ).all()


def _aten_rows(rng: np.random.Generator, ranks: int) -> tuple[pl.DataFrame, pl.DataFrame]:
    """Launches and ops as `aten_ops._innermost_ops` takes them: ops nested, overlapping
    and of equal starts, zero-length ones, launches mostly after a short op has ended inside
    a longer one (the last op to start holds them not); each rank laid apart in time."""
    ops, launches = [], []
    for rank in range(ranks):
        off = rank * 10**6
        n = 400
        start = rng.integers(0, 2000, n)
        start[7::7] = start[6:-1:7]  # equal starts
        dur = rng.integers(0, 300, n)
        dur[::11] = 0
        ops.append(
            pl.DataFrame(
                {
                    "rank": rank,
                    "op": np.arange(n, dtype=np.uint32)[rng.permutation(n)],
                    "op_code": rng.integers(0, 30, n).astype(np.uint32),
                    "o_start": start,
                    "o_dur": dur,
                    "o_lo": start + off,
                    "o_hi": start + dur + off,
                }
            )
        )
        m = 300
        lo = rng.integers(0, 2300, m)
        launches.append(
            pl.DataFrame(
                {
                    "rank": rank,
                    "launcher": np.arange(1000, 1000 + m, dtype=np.uint32),
                    "l_lo": lo + off,
                    "l_hi": lo + rng.integers(0, 6, m) + off,
                }
            )
        )
    cast = {"rank": pl.Int64, "o_start": pl.Int64, "o_dur": pl.Int64}
    return pl.concat(launches).cast({"rank": pl.Int64}), pl.concat(ops).cast(cast)


@pytest.mark.parametrize("same_thread", [True, False])
def test_innermost_ops_by_span_maxima_equal_the_inequality_join(
    monkeypatch: pytest.MonkeyPatch, same_thread: bool
) -> None:
    """The innermost op of each launch the last-started op does not hold, found by the table
    of span maxima (`_last_holding`), is the inequality join's, tie rules of both modes
    included; a null time keeps the join."""
    rng = np.random.default_rng(11)
    launches, ops = _aten_rows(rng, ranks=2)
    found: list[int] = []
    last_holding = aten_ops._last_holding

    def counted(ordered: pl.DataFrame, rest: pl.DataFrame) -> np.ndarray | None:
        at = last_holding(ordered, rest)
        found.append(-1 if at is None else at.size)
        return at

    with monkeypatch.context() as m:
        m.setattr(aten_ops, "_last_holding", counted)
        fast = aten_ops._innermost_ops(launches, ops, same_thread)
    with monkeypatch.context() as m:
        m.setattr(aten_ops, "_last_holding", lambda *a: None)
        slow = aten_ops._innermost_ops(launches, ops, same_thread)
    assert fast.equals(slow)
    # launches the last-started op does not hold: many, found by the span maxima
    assert found[0] > 50 and slow.height > 300
    ordered = ops.drop("rank").sort("o_lo")
    nulls = ordered.with_columns(pl.lit(None, pl.Int64).alias("o_hi"))
    assert aten_ops._last_holding(nulls, launches) is None


def test_kernel_links_one_row_per_correlation_or_many() -> None:
    """Each kernel's launcher is the last CPU-side row of its correlation (HTA's), whether
    each correlation has one CPU row (no group-by) or several (a runtime call and the driver
    call it makes); kernels in their order."""
    events = _events()
    view = hta_view.rank_view(events, set(), columns=("pid", "tid")).with_columns(
        pl.lit(0, pl.Int64).alias("rank")
    )
    runtime = view.filter(pl.col("kind") == "runtime")
    driver = runtime.with_columns(
        pl.lit("cuLaunchKernel").alias("name"), (pl.col("idx") + 1000).cast(pl.UInt32)
    )
    for v in (view, pl.concat([view, driver])):
        got = sequences.kernel_links(v, min_stream=0, carry=("name",), by=("rank",))
        cpu = v.filter(pl.col("kind").is_in(("runtime", "driver")))
        last = cpu.group_by("correlation").agg(pl.col("idx").max().alias("launcher"))
        kernels = v.filter(pl.col("kind") == "kernel").select("idx", "correlation", "name")
        expected = kernels.join(last, on="correlation", maintain_order="left")
        assert got["idx"].to_list() == expected["idx"].to_list()
        assert got["launcher"].to_list() == expected["launcher"].to_list()
        assert got.height == 6
    assert (got["launcher"] >= 1000).all()  # the driver calls, written last


def test_launches_keep_the_earliest_call_of_a_correlation() -> None:
    """Kernel owners' launches: the earliest CPU call of each correlation, by time, with or
    without a second call (a driver call after its runtime call) sharing it."""
    events = _events()
    calls = events.filter(pl.col("kind") == "runtime")
    late = calls.with_columns(
        pl.lit("driver").cast(events.schema["kind"]).alias("kind"),
        pl.col("ts") + 1,
        (pl.col("idx") + 1000).cast(pl.UInt32),
    )
    for ev in (events, pl.concat([events, late])):
        got = kernel_owners._launches(ev)
        assert got["idx"].to_list() == calls.sort("ts")["idx"].to_list()
