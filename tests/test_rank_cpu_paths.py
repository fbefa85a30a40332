"""Issue 27, the full report's per-rank CPU: the module view's device times, the ATen ops'
and the kernel owners' faster paths give the tables of the paths they replace, on generated
edge cases (ranges that overlap without nesting, equal times, zero-length and null times,
null threads, unsorted rows), and take the fast path where the trace allows it."""

from __future__ import annotations

from collections.abc import Callable

import polars as pl
import pytest

from hta_tui.analysis import hta_view, module_view
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
