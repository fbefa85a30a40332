"""Issue 27, point 2: analyses share their work. The memory tables of a report attribute each
rank's memory events to their operators once, build the plugin's operator tree once and find
the allocations' Python context once, even run two at a time (`registry.run`), with the same
tables as each made alone; and nothing is kept once the rank's frames are gone."""

from __future__ import annotations

import gc
import json
import sys
import threading
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager

import polars as pl
import pytest

from hta_tui.analysis import catalog, hta_view, memory_context, memory_records, memory_view
from hta_tui.analysis.checkpoint import hooked
from hta_tui.synth import MemoryOptions, make_trace
from hta_tui.trace.parse import parse_bytes

MEMORY_TABLES = [
    "memory_curve",
    "memory_events",
    "memory_stats",
    "memory_peak",
    "memory_leaks",
    "memory_step_peaks",
]
#: the per-rank work every memory table starts from, by its code (however it is imported)
COUNTED = {
    memory_records.effective_tree.__code__: "operator tree",
    memory_records._name_frees.__code__: "attribution",  # its last step
    memory_context.python_context.__code__: "context",
}


def _frames(ranks: int = 2) -> tuple[dict[int, pl.DataFrame], dict[int, pl.DataFrame]]:
    events, memory = {}, {}
    for r in range(ranks):
        trace = make_trace(r, world_size=ranks, steps=2, seed=r, memory=MemoryOptions())
        parsed = parse_bytes(json.dumps(trace).encode()).frames
        events[r], memory[r] = parsed["events"], parsed["memory"]
    return events, memory


@contextmanager
def _calls() -> Iterator[Counter[str]]:
    """How often each COUNTED function ran, on any thread."""
    seen: Counter[str] = Counter()

    def hook(frame, event, arg):  # type: ignore[no-untyped-def]
        if event == "call" and frame.f_code in COUNTED:
            seen[COUNTED[frame.f_code]] += 1

    sys.setprofile(hook)
    threading.setprofile(hook)
    try:
        yield seen
    finally:
        sys.setprofile(None)
        threading.setprofile(None)  # type: ignore[arg-type]


def test_memory_tables_share_one_attribution_per_rank() -> None:
    events, memory = _frames()
    with _calls() as seen:
        tables = catalog.run(events, MEMORY_TABLES, threads=2, frames=lambda name: memory)
    assert all(not tables[t].is_empty() for t in ("memory_curve", "memory_events", "memory_stats"))
    assert seen == {"operator tree": 2, "attribution": 2, "context": 2}
    # the same tables as each made alone, from frames nothing was kept for
    alone_events, alone_memory = _frames()
    for name, make in (
        ("memory_curve", memory_view.curve),
        ("memory_events", memory_view.event_table),
        ("memory_stats", memory_view.stats),
        ("memory_peak", memory_view.live_at_peak),
        ("memory_leaks", memory_view.leaks),
    ):
        alone = make({0: alone_events[0]}, {0: alone_memory[0]})
        ours = tables[name].filter(pl.col("rank") == 0).drop("rank")
        assert ours.equals(alone.drop("rank")), name


def test_what_is_shared_goes_with_the_frames() -> None:
    shared_names = {"operator_tree", "memory_records", "memory_context"}
    before = set(hta_view._views)  # other tests' frames may still be alive in this process
    events, memory = _frames(1)
    catalog.run(events, MEMORY_TABLES, threads=2, frames={"memory": memory}.__getitem__)
    made = {k for k in hta_view._views if k not in before and k[0] == "job"}
    assert shared_names <= {k[3] for k in made if isinstance(k[3], str)}
    del events, memory
    gc.collect()
    assert not made & set(hta_view._views)  # what these frames kept went with them
    assert not hta_view._building


def test_a_build_stopped_at_its_checkpoint_leaves_no_lock_behind() -> None:
    """A view's work stopped at the checkpoint before a shared table's build (its worker
    cancelled: `Superseded`) leaves no build lock behind for it (the app's read-ahead, stopped
    when a set is closed, left its steps' and trees')."""
    events = pl.DataFrame({"ts": [1, 2]})

    class Stopped(Exception):
        pass

    def stop() -> None:
        raise Stopped

    with hooked(stop), pytest.raises(Stopped):
        hta_view.job_cached({0: events}, "stopped-build", lambda: events)
    assert not [k for k in hta_view._building if k[3] == "stopped-build"]
    assert hta_view.job_cached({0: events}, "stopped-build", lambda: events) is events
