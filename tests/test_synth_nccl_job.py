"""The distributed analyses find what the NCCL job generator was told to write."""

from __future__ import annotations

import polars as pl
import pytest

from hta_tui.analysis import collectives, comm_overview, comm_stats
from hta_tui.synth.nccl_job import NELEMS, write_nccl_job
from hta_tui.trace.cache import Cache
from hta_tui.trace.model import open_set

RANKS, STEPS, LATE, LATE_US, TRANSFER_US = 4, 3, 2, 500, 200


@pytest.fixture(scope="module")
def job(tmp_path_factory: pytest.TempPathFactory) -> dict[int, pl.DataFrame]:
    out = tmp_path_factory.mktemp("nccl_job")
    write_nccl_job(out, ranks=RANKS, steps=STEPS, late_rank=LATE, late_us=LATE_US,
                   transfer_us=TRANSFER_US, extra_rank=1)  # fmt: skip
    return open_set(out, Cache(enabled=False)).frames()


def test_late_rank_and_the_wait_it_causes(job: dict[int, pl.DataFrame]) -> None:
    top = comm_stats.collective_stragglers(job).row(0, named=True)
    assert top["rank"] == LATE
    assert top["times_last"] == STEPS  # every all_reduce of group 0
    assert top["cost_us"] == pytest.approx(STEPS * (RANKS - 1) * LATE_US)
    calls = collectives.calls(job).filter(pl.col("pg") == "0", pl.col("ranks_in_instance") > 1)
    waits = calls.filter(pl.col("rank") != LATE)["wait"].unique().to_list()
    assert waits == [LATE_US * 1000] and calls["transfer"].unique().to_list() == [
        TRANSFER_US * 1000
    ]


def test_groups_and_unequal_counts(job: dict[int, pl.DataFrame]) -> None:
    inst = comm_stats.collective_instances(job)
    by_group = dict(inst.group_by("pg").agg(pl.col("ranks").sort()).iter_rows())
    assert by_group["0"] == [1] + [RANKS] * STEPS  # rank 1's extra all_reduce stands alone
    assert by_group["1"] == [RANKS // 2] * STEPS  # the even ranks' group
    assert inst.filter(pl.col("pg") == "1")["cost_us"].to_list() == [0.0] * STEPS


def test_bytes_and_bandwidth(job: dict[int, pl.DataFrame]) -> None:
    stats = comm_stats.comm_ops_stats(job).filter(pl.col("rank") == 0)
    rows = {r["kind"]: r for r in stats.iter_rows(named=True)}
    algbw = 2 * NELEMS / (TRANSFER_US * 1e-6) / 1e9  # bf16 all_reduce / fp8 all_gather of 2 ranks
    ar, ag = rows["all_reduce"], rows["all_gather"]
    assert (ar["calls"], ar["total_bytes"]) == (STEPS, STEPS * 2 * NELEMS)
    assert (ag["calls"], ag["total_bytes"]) == (STEPS, STEPS * NELEMS * 2)
    assert ar["algbw_GBps"] == pytest.approx(algbw)
    assert ar["busbw_GBps"] == pytest.approx(algbw * 2 * (RANKS - 1) / RANKS)
    assert ag["busbw_GBps"] == pytest.approx(algbw * 1 / 2)


def test_comm_comp_per_rank(job: dict[int, pl.DataFrame]) -> None:
    """Per step: the compute kernel, then the rank's collective kernels (waits included)."""
    table = comm_overview.comm_comp_per_rank(job).filter(pl.col("step") == "0")
    rows = {r["rank"]: r for r in table.iter_rows(named=True)}
    assert rows[LATE]["computation"] == pytest.approx(2000 + LATE_US)
    assert rows[LATE]["communication"] == pytest.approx(2 * TRANSFER_US)  # arrives last: no wait
    assert rows[0]["computation"] == pytest.approx(2000)
    assert rows[0]["communication"] == pytest.approx(LATE_US + 2 * TRANSFER_US)
    assert rows[1]["communication"] == pytest.approx(LATE_US + TRANSFER_US)  # odd: no group 1
    assert all(r["overlapping"] == 0 for r in rows.values())
    waits = comm_overview.wait_transfer_per_step(job).filter(pl.col("step") == "0")
    by_rank = {r["rank"]: (r["transfer"], r["synchronizing"]) for r in waits.iter_rows(named=True)}
    assert by_rank[LATE] == (pytest.approx(2 * TRANSFER_US), 0)
    assert by_rank[0] == (pytest.approx(2 * TRANSFER_US), pytest.approx(LATE_US))
