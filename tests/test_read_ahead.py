"""The ranks' frames read ahead of the first view (issue 27): read once, while the overview
is shown, the very frames the views then get; giving way to a view that computes; never on
a set whose frames the views would not hold."""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any

import pytest

from hta_tui.analysis import hta_view, op_tree, registry, tb_steps
from hta_tui.app.foreground import Foreground, Superseded
from hta_tui.app.read_ahead import ReadAhead, read_ahead
from hta_tui.app.screens.kernels import KernelsScreen
from hta_tui.app.screens.operators import OperatorsScreen
from hta_tui.app.screens.syncs import SyncsScreen
from hta_tui.app.screens.timeline import TimelineScreen
from hta_tui.synth import write_trace_dir
from hta_tui.trace import model
from hta_tui.trace.cache import Cache, never_had
from hta_tui.trace.model import TraceSet, open_set
from hta_tui.trace.schema import FRAME_SCHEMAS
from tests.test_app_support import make_screen_app, settle, wait_patiently, wait_view


class Worker:
    """What the foreground's checkpoint asks of a worker."""

    is_cancelled = False


def counting_reads(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The frames read from the cache entries (RankData.frame's reads), by name."""
    reads: list[str] = []
    real = model.read_frame

    def counted(entry: Path, name: str, columns: Any = None) -> Any:
        reads.append(name)
        return real(entry, name, columns)

    monkeypatch.setattr(model, "read_frame", counted)
    return reads


def counting_builds(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """HTA's views of a rank built (`hta_view.build_rank_view`), one entry each."""
    builds: list[int] = []
    real = hta_view.build_rank_view

    def counted(*args: Any, **kw: Any) -> Any:
        builds.append(1)
        return real(*args, **kw)

    monkeypatch.setattr(hta_view, "build_rank_view", counted)
    return builds


@pytest.fixture(scope="module")
def three_ranks(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    root = tmp_path_factory.mktemp("ahead")
    write_trace_dir(root / "t", ranks=3, steps=2, seed=5)
    open_set(root / "t", Cache(root / "c"))  # the cache entries written once
    return root / "t", root / "c"


def test_read_ahead_reads_each_rank_once_and_the_views_get_those_frames(
    three_ranks: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    ts = open_set(three_ranks[0], Cache(three_ranks[1]))
    reads = counting_reads(monkeypatch)
    passed: list[int] = []
    assert ts.read_ahead(lambda: passed.append(1)) == 3
    # each rank's frames once, events first; a frame its entry has no file for (empty:
    # `cache.never_had`) is not read at all
    loaded = ts.loaded()
    every = [n for d in loaded.values() for n in FRAME_SCHEMAS if not never_had(d.meta, n)]
    assert len(every) > 3 and every.count("events") == 3
    assert sorted(reads) == sorted(every) and reads[0] == "events" and len(passed) == 3
    held = {rank: data.held() for rank, data in ts.loaded().items()}
    frames = ts.snapshot().frames()  # what a view's worker gets
    for name in FRAME_SCHEMAS:
        ts.snapshot().frames(name)
    assert len(reads) == len(every)  # nothing read again
    assert sorted(frames) == [0, 1, 2]
    assert all(frames[rank] is held[rank] for rank in frames)  # the same frames
    assert ts.read_ahead() == 0 and len(reads) == len(every)


def test_the_views_of_each_rank_are_made_ahead_too(
    three_ranks: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    """HTA's view of each rank, which most views start from, is made with the frames, and
    so are each rank's steps (the Step time, GPU metrics and Syncs views') and its operator
    tree (most of the Operators view's first visit): a view of every rank asking for them
    then builds none; kernel detail's runs (asking for `ts`, a core column) neither."""
    ts = open_set(three_ranks[0], Cache(three_ranks[1]))
    builds = counting_builds(monkeypatch)
    trees: list[int] = []
    real_tree = op_tree._build
    monkeypatch.setattr(op_tree, "_build", lambda *a, **kw: trees.append(1) or real_tree(*a, **kw))
    steps: list[int] = []
    real_steps = tb_steps._profiler_steps
    monkeypatch.setattr(
        tb_steps, "_profiler_steps", lambda *a, **kw: steps.append(1) or real_steps(*a, **kw)
    )
    assert read_ahead(ts)
    assert len(builds) == 3 and len(trees) == 3 and len(steps) == 3
    views = hta_view.hta_view(ts.snapshot().frames(), columns=["pid", "tid"])
    assert len(builds) == 3 and sorted(views) == [0, 1, 2]
    frames = ts.snapshot().frames()
    runs = hta_view.hta_view(frames, columns=["ts"])
    assert len(builds) == 3
    steps_of = hta_view.profiler_step_names(frames)
    for rank, view in runs.items():
        assert view.equals(hta_view.build_rank_view(frames[rank], steps_of, columns=["ts"]))
    registry.tables(frames, OperatorsScreen.ANALYSES)
    registry.tables(frames, SyncsScreen.ANALYSES, frames=ts.snapshot().frames)
    assert len(trees) == 3 and len(steps) == 3


def test_a_view_never_waits_for_a_piece_made_ahead(
    three_ranks: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The read-ahead's operator tree is made outside the lock a view's build holds: a view
    asking for the same rank's tree meanwhile makes its own at once instead of waiting for
    the read-ahead (a thread of lower priority: on a loaded machine, seconds); the tree kept
    is the first one made, and the read-ahead's, landing later, does not replace it."""
    ts = open_set(three_ranks[0], Cache(three_ranks[1]))
    events = ts.frames()[0]
    inside, release = threading.Event(), threading.Event()
    real = op_tree._build

    def slow_ahead(*args: Any, **kw: Any) -> Any:
        if threading.current_thread().name == "ahead":
            inside.set()
            assert release.wait(30)
        return real(*args, **kw)

    monkeypatch.setattr(op_tree, "_build", slow_ahead)
    ahead = threading.Thread(target=op_tree.build_ahead, args=(events,), name="ahead")
    ahead.start()
    assert inside.wait(30)  # the read-ahead is in the middle of the tree
    made = op_tree.build(events)  # a view's: not held up by it
    assert not release.is_set() and ahead.is_alive()
    release.set()
    ahead.join(30)
    assert op_tree.build(events) is made  # the view's tree, kept


def test_read_ahead_holds_nothing_the_views_would_read_narrow_or_not_at_all(
    three_ranks: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    ts = open_set(three_ranks[0], Cache(three_ranks[1]))
    builds = counting_builds(monkeypatch)
    total = sum(d.meta["n_events"] for d in ts.loaded().values())
    monkeypatch.setattr(model, "READ_AHEAD_EVENTS", total - 1)
    assert ts.read_ahead() == 0 and not read_ahead(ts)
    monkeypatch.setattr(model, "READ_AHEAD_EVENTS", total)
    monkeypatch.setattr(model, "READ_AHEAD_RANKS", 2)
    assert ts.read_ahead() == 0 and not read_ahead(ts)
    assert all(d.held() is None for d in ts.loaded().values()) and not builds


def test_read_ahead_waits_while_the_shown_view_computes(three_ranks: tuple[Path, Path]) -> None:
    """At its checkpoint, before each rank, the read-ahead waits while a view is shown and
    computing, and reads on once it has its numbers; a cancelled one stops there."""
    ts = open_set(three_ranks[0], Cache(three_ranks[1]))
    fg, view, worker = Foreground(), object(), Worker()
    fg.show(view)
    ahead = ReadAhead()
    out: list[Any] = []
    thread = threading.Thread(target=lambda: out.append(ts.read_ahead(fg.give_way(ahead, worker))))
    with fg.running(view):
        thread.start()
        deadline = time.monotonic() + 30
        while not fg.is_holding(ahead):
            assert time.monotonic() < deadline, "the read-ahead did not wait"
            time.sleep(0.005)
        assert all(d.held() is None for d in ts.loaded().values())  # nothing read meanwhile
    thread.join(30)
    assert out == [3] and all(d.held() is not None for d in ts.loaded().values())
    cancelled = Worker()
    cancelled.is_cancelled = True
    fresh = open_set(three_ranks[0], Cache(three_ranks[1]))
    with pytest.raises(Superseded):
        fresh.read_ahead(fg.give_way(ReadAhead(), cancelled))
    assert all(d.held() is None for d in fresh.loaded().values())


async def test_the_app_reads_the_frames_once_the_overview_is_drawn(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Once the open is done and the overview drawn, the app reads every rank's frames; the
    views visited then read none (the views of each rank made with them: the test above)."""
    write_trace_dir(tmp_path / "t", ranks=2, steps=2, seed=6)
    drawn: list[bool] = []
    real = TraceSet.read_ahead

    def recording(self: TraceSet, between: Any = lambda: None) -> int:
        drawn.append(app._overview_shown == self.generation)  # this set's overview drawn
        return real(self, between)

    monkeypatch.setattr(TraceSet, "read_ahead", recording)
    app = make_screen_app(tmp_path / "t", tmp_path)
    async with app.run_test(size=(100, 30)) as pilot:
        await settle(pilot)
        await wait_patiently(
            pilot,
            lambda: drawn and all(w.is_finished for w in app.workers if w.group == "read_ahead"),
            what="the read-ahead",
        )
        assert drawn == [True]  # once, after the overview's numbers
        assert all(d.held() is not None for d in app.trace_set.loaded().values())
        reads = counting_reads(monkeypatch)
        await pilot.press("K")
        kernels = await wait_view(pilot, KernelsScreen, timeout=60)
        await pilot.press("T")  # every frame of every rank
        await wait_view(pilot, TimelineScreen, timeout=60)
        assert kernels.result is not None and reads == []
