"""How catalog.run schedules the analyses: longest first on two threads, the tables still in
catalog order and the same as one at a time; polars' engine as the caller had it after."""

from __future__ import annotations

import os

import polars as pl
import pytest
from polars.testing import assert_frame_equal

from hta_tui.analysis import catalog
from hta_tui.synth import write_trace_dir
from hta_tui.trace.cache import Cache
from hta_tui.trace.model import open_set


@pytest.fixture(scope="module")
def job(tmp_path_factory: pytest.TempPathFactory):
    d = tmp_path_factory.mktemp("synth")
    write_trace_dir(d, ranks=2, steps=3, seed=5)
    return open_set(d, Cache(tmp_path_factory.mktemp("cache")))


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
    by_cost = sorted(default[1:], key=lambda a: -a.cost)
    assert by_cost[0].name != default[1].name  # the order really changes
    tables = tables_of(job, threads=2)
    owners = [catalog.TABLE_OWNER.get(t, t) for t in tables]
    assert list(dict.fromkeys(owners)) == [a.name for a in default]


def test_engine_restored(job) -> None:
    before = os.environ.get("POLARS_ENGINE_AFFINITY")
    tables_of(job, threads=2)
    assert os.environ.get("POLARS_ENGINE_AFFINITY") == before
