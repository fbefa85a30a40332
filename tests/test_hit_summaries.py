"""The app opened on a cache `report` filled: the report's parse makes only the overview's
summary, the app's also each file's step breakdown. The app's load path makes the missing
breakdowns (`step_overview.precompute.for_hits`), a batch at once, in its load pool, and hands
them over with each file's result: the overview reads none back nor makes one on its side.
No Pilot: a session as the app opens it, on six tiny ranks."""

from __future__ import annotations

from concurrent.futures import ProcessPoolExecutor, ThreadPoolExecutor
from pathlib import Path
from typing import Any

import polars as pl
import pytest

from hta_tui.analysis import overview, step_breakdown, step_overview
from hta_tui.session import LiveSession, open_session
from hta_tui.synth.small_job import Dialect, JobShape, write_job
from hta_tui.trace import load as load_mod
from hta_tui.trace.cache import Cache
from hta_tui.trace.load import HitSummaries
from hta_tui.trace.model import TraceSet

RANKS = 6
KEY = step_overview._KEY


@pytest.fixture(scope="module")
def job(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("hits") / "traces"
    write_job(root, Dialect(), JobShape(ranks=RANKS, steps=3, ops_per_step=2))
    return root


@pytest.fixture(scope="module")
def report_filled(job: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A cache as `report` leaves it (its `after_parse`): every entry without a breakdown."""
    root = tmp_path_factory.mktemp("report-cache")
    session = open_session(job, Cache(root), after_parse=overview.precompute)
    entries = [d.entry for d in session.trace_set.loaded().values()]
    assert len(entries) == RANKS
    assert all(step_overview.lacks_breakdown(e) for e in entries)
    return root


@pytest.fixture
def cache(report_filled: Path, tmp_path: Path) -> Cache:
    """A copy of the report-filled cache (each test fills its own)."""
    import shutil

    shutil.copytree(report_filled, tmp_path / "cache")
    return Cache(tmp_path / "cache")


def held(ts: TraceSet) -> list[dict[str, pl.DataFrame]]:
    """Each loaded rank's memos as its load result handed them over (none read yet)."""
    return [d.memos() for d in ts.loaded().values()]


def assert_breakdowns_made(ts: TraceSet, *, handed: bool = True) -> None:
    """Every rank holds both summaries as its load handed them over (`handed`), kept in its
    entry too; the overview's breakdown is the analysis over the frames; every file was a
    cache hit (nothing parsed again)."""
    assert len(ts.loaded()) == RANKS
    assert all(e.cached for e in ts.entries.values())
    for memos in held(ts):
        assert handed == (KEY in memos and any(k.startswith("overview-") for k in memos))
    got = step_overview.step_table(ts)
    assert not any(step_overview.lacks_breakdown(d.entry) for d in ts.loaded().values())
    want = step_breakdown.step_time_breakdown(ts.frames())
    assert got.height == want.height >= RANKS
    assert got.sort("rank", "step").equals(want.sort("rank", "step"))


def test_the_apps_session_makes_the_breakdowns_in_its_load_pool(
    job: Path, cache: Cache, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Off the main thread (the app's session) the hits go to the pool in chunks, not a
    task per file, and come back with their summaries."""
    submits: list[int] = []

    class Counted(ProcessPoolExecutor):
        def submit(self, fn, /, *args, **kw):  # type: ignore[no-untyped-def]
            submits.append(len(args[0]))
            return super().submit(fn, *args, **kw)

    monkeypatch.setattr(load_mod, "ProcessPoolExecutor", Counted)
    with ThreadPoolExecutor(2) as executor:
        session = LiveSession(job, cache=cache, executor=executor, workers=2)
        session.scan()
        session.wait()
    assert sum(submits) == RANKS and len(submits) == 2  # a chunk a worker
    assert_breakdowns_made(session.trace_set)


def test_a_headless_session_makes_them_in_its_own_process(job: Path, cache: Cache) -> None:
    """`open_session` with the app's summaries, on the main thread: made here, a batch at
    once, with the same numbers."""
    assert_breakdowns_made(open_session(job, cache).trace_set)


def test_a_batch_that_fails_makes_each_rank_alone(
    job: Path, cache: Cache, monkeypatch: pytest.MonkeyPatch
) -> None:
    def broken(datas: Any) -> Any:
        raise ValueError("boom")

    monkeypatch.setattr(step_overview, "_breakdowns", broken)
    assert_breakdowns_made(open_session(job, cache).trace_set)


def test_summaries_that_cannot_be_made_leave_the_files_loaded(
    job: Path, cache: Cache, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The hits land without the summaries; the overview makes each when it asks, as it did
    before the load path made them."""

    def broken(hits: Any) -> Any:
        raise ValueError("boom")

    hits = HitSummaries(step_overview.lacks_breakdown, broken)
    monkeypatch.setattr(step_overview.precompute, "for_hits", hits)
    assert_breakdowns_made(open_session(job, cache).trace_set, handed=False)


def _time_runs_out(entry: Path) -> bool:
    """`missing`'s stat at the moment the summaries' time limit runs out: where the load
    path has set its alarm (and its handler), the alarm rings now, during the stat."""
    import signal
    import time

    if signal.getitimer(signal.ITIMER_REAL)[0] > 0:
        signal.setitimer(signal.ITIMER_REAL, 1e-3)
        time.sleep(5)  # (the alarm interrupts it)
    return step_overview.lacks_breakdown(entry)


@pytest.mark.parametrize("where", ["pool task", "here"])
def test_summaries_whose_time_runs_out_leave_the_files_loaded(
    where: str, job: Path, cache: Cache, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The summaries' time limit ringing while a hit is looked at (`HitSummaries.missing`)
    costs the summaries, as any failure of theirs: each hit still lands, loaded, in a pool
    task (`load._worker`, run here as a worker runs it) as in this process."""
    from hta_tui.trace.discover import discover
    from hta_tui.trace.limits import Limits

    hits = HitSummaries(_time_runs_out, step_overview.precompute.for_hits.made)
    monkeypatch.setattr(step_overview.precompute, "for_hits", hits)
    if where == "here":
        ts = open_session(job, cache).trace_set
        assert len(ts.loaded()) == RANKS and all(e.cached for e in ts.entries.values())
        return
    files = discover(job)
    limits = Limits(timeout_s=30.0)
    results = load_mod._worker(files, cache.root, True, step_overview.precompute, limits)
    assert [r.status for r in results] == ["loaded"] * RANKS
    assert all(r.cached and r.memos is None for r in results)
