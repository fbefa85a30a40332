"""How catalog.run schedules the analyses: on two threads, those on HTA's views after the one
that builds them, the others beside it, longest first; the tables still in catalog order and
the same as one at a time; polars' engine as the caller had it after."""

from __future__ import annotations

import os
import threading
from pathlib import Path

import polars as pl
import pytest
from polars.testing import assert_frame_equal

from hta_tui.analysis import catalog, hta_view, scheduling
from hta_tui.trace.cache import Cache
from hta_tui.trace.model import open_set
from tests.test_app_support import synth_job


@pytest.fixture(scope="module")
def job_dir(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    return synth_job(tmp_path_factory, seed=5)


@pytest.fixture(scope="module")
def job(job_dir: tuple[Path, Path]):
    return open_set(job_dir[0], Cache(job_dir[1]))


def tables_of(job, threads: int) -> dict[str, pl.DataFrame]:
    return catalog.run(job.frames(), threads=threads, frames=job.frames)


def test_threads_and_order_change_nothing(job) -> None:
    one = tables_of(job, threads=1)
    two = tables_of(job, threads=2)
    assert list(two) == list(one)
    for name, table in one.items():
        assert_frame_equal(two[name], table, check_exact=True)


def test_tables_in_catalog_order_though_longest_run_first(job) -> None:
    default = [a for a in catalog.ANALYSES if a.default]
    tables = tables_of(job, threads=2)
    owners = [catalog.TABLE_OWNER.get(t, t) for t in tables]
    assert list(dict.fromkeys(owners)) == [a.name for a in default]


def test_engine_restored(job) -> None:
    before = os.environ.get("POLARS_ENGINE_AFFINITY")
    tables_of(job, threads=2)
    assert os.environ.get("POLARS_ENGINE_AFFINITY") == before


def test_analyses_said_to_need_no_views_build_none(job_dir, monkeypatch) -> None:
    # Those run beside the view builder: were one to build HTA's views itself, it would
    # build them again. Fresh frames: no view of them is cached yet.
    job = open_set(job_dir[0], Cache(job_dir[1]))
    ranks = job.frames()

    def refuse(*args, **kwargs):
        raise AssertionError("built an HTA view")

    monkeypatch.setattr(hta_view, "build_rank_view", refuse)
    no_views = [a for a in catalog.ANALYSES if not a.views]
    assert {"syncs", "comm_comp_per_rank", "step_time_breakdown"} <= {a.name for a in no_views}
    for a in no_views:
        a.run(ranks, catalog.Options(), **{f: job.frames(f) for f in a.frames})
    with pytest.raises(AssertionError, match="built an HTA view"):
        catalog.BY_NAME["temporal_breakdown"].run(ranks, catalog.Options())


class _Task:
    def __init__(self, name: str, cost: float, views: bool) -> None:
        self.name, self.cost, self.views = name, cost, views


def test_schedule_builder_first_view_free_beside_it_then_longest() -> None:
    started: list[str] = []
    builder_done = threading.Event()

    def call(t: _Task) -> str:
        started.append(t.name)
        if t.name == "builder":
            # the other thread must take every view-free task while this one runs
            assert builder_done.wait(5)
        elif not t.views:
            if all(x in started for x in ("free_long", "free_short")):
                builder_done.set()
        else:
            assert builder_done.is_set()
        return t.name

    tasks = [
        _Task("builder", 0.4, True),
        _Task("views_long", 0.9, True),
        _Task("free_short", 0.1, False),
        _Task("views_short", 0.2, True),
        _Task("free_long", 0.5, False),
    ]
    done = scheduling.run_all(tasks, call, threads=2)
    assert done == {t.name: t.name for t in tasks}
    assert started[:3] in (
        ["builder", "free_long", "free_short"],
        ["free_long", "builder", "free_short"],
    )
    assert started[3:] == ["views_long", "views_short"]


def test_schedule_error_raised_after_every_task_ran() -> None:
    ran: list[str] = []

    def call(t: _Task) -> None:
        ran.append(t.name)
        if t.name == "bad":
            raise ValueError("bad input")

    tasks = [_Task("bad", 1, True), _Task("b", 1, True), _Task("c", 1, False)]
    with pytest.raises(ValueError, match="bad input"):
        scheduling.run_all(tasks, call, threads=2)
    assert sorted(ran) == ["b", "bad", "c"]
