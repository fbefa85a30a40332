"""Collectives matched across ranks: who the others wait for, and for how long."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import polars as pl
import pytest

from hta_tui import TraceAnalysis
from hta_tui.analysis import comm_stats
from hta_tui.trace.cache import Cache
from hta_tui.trace.model import open_set


def _issue_times(path: Path) -> list[float]:
    """When this rank asked for each all_reduce: its `c10d::allreduce_` ops (us), from the raw
    events; on gloo the backend's own op starts when a worker thread picks it up."""
    events = json.loads(gzip.decompress(path.read_bytes()))["traceEvents"]
    return sorted(e["ts"] for e in events if e.get("name") == "c10d::allreduce_")


@pytest.mark.shared
def test_gloo_ddp_names_rank_3_with_the_time(shared: Path) -> None:
    """pytorch_cpu_ddp_gloo_4: rank 3 does four times the work; the others wait for it."""
    folder = shared / "traces" / "pytorch_cpu_ddp_gloo_4"
    issued = {int(p.name[4]): _issue_times(p) for p in sorted(folder.glob("rank*.json.gz"))}
    # expected, from the raw events: per call k the last rank, and the others' waits for it
    cost: dict[int, float] = {}
    for k in range(len(issued[0])):
        at = {r: times[k] for r, times in issued.items()}
        last = max(at, key=at.__getitem__)
        cost[last] = cost.get(last, 0.0) + sum(at[last] - t for t in at.values())
    table = comm_stats.collective_stragglers(open_set(folder, Cache(enabled=False)).frames())
    top = table.row(0, named=True)
    assert top["rank"] == 3 == max(cost, key=cost.__getitem__)
    assert top["cost_us"] == pytest.approx(cost[3], rel=1e-6)
    assert top["times_last"] == 2 and top["instances"] == 6
    assert "rank 3 arrived last" in top["why"] and "all_reduce" in top["why"]
    assert table["rank"].to_list()[1:] == sorted(cost, key=cost.__getitem__, reverse=True)[1:]


@pytest.mark.shared
def test_gloo_ddp_sizes_and_calls(shared: Path) -> None:
    """Bytes are Input Dims x 4 (float) of each gloo:all_reduce, from the raw events."""
    folder = shared / "traces" / "pytorch_cpu_ddp_gloo_4"
    ta = TraceAnalysis(folder)
    stats = ta.get_comm_ops_stats()
    for path in sorted(folder.glob("rank*.json.gz")):
        events = json.loads(gzip.decompress(path.read_bytes()))["traceEvents"]
        ops = [e for e in events if e.get("name") == "gloo:all_reduce"]
        want = 0
        for e in ops:
            for dims in e["args"]["Input Dims"]:
                n = 1
                for d in dims:
                    n *= d
                want += 4 * n
        row = stats.filter(pl.col("rank") == int(path.name[4])).row(0, named=True)
        assert (row["kind"], row["calls"], row["total_bytes"]) == ("all_reduce", len(ops), want)
        assert row["algbw_GBps"] > 0 and row["busbw_GBps"] == pytest.approx(
            row["algbw_GBps"] * 2 * 3 / 4
        )
    calls = ta.get_collectives()
    assert calls.group_by("pg", "seq").len()["len"].to_list() == [4] * 6


def test_tb_compat_switches_to_the_plugins_view(tmp_path: Path) -> None:
    """`--set tb_compat=true`: the plugin's own numbers in the same report keys."""
    from hta_tui.analysis import catalog, comm_overview, comm_plugin
    from hta_tui.synth.nccl_job import write_nccl_job

    write_nccl_job(tmp_path, ranks=4)
    frames = open_set(tmp_path, Cache(enabled=False)).frames()
    ours = catalog.run(frames, ["comm_comp_per_rank"])
    theirs = catalog.run(frames, ["comm_comp_per_rank"], catalog.options_with({"tb_compat": "1"}))
    assert ours["comm_comp_per_rank"].equals(comm_overview.comm_comp_per_rank(frames))
    assert theirs["comm_comp_per_rank"].equals(comm_plugin.overlap(frames))
    assert theirs["comm_wait_transfer"].equals(comm_plugin.waittime(frames))
    # the plugin times the 5 us CPU-side `nccl:` ops; we time the NCCL kernels
    comm = pl.col("communication")
    assert ours["comm_comp_per_rank"].select(comm.max()).item() > 100
    assert theirs["comm_comp_per_rank"].select(comm.max()).item() < 20


@pytest.mark.parametrize(
    "dialect", ["current", "legacy", "rocm", "triton_driver", "mlu", "cpu_only", "nanoseconds"]
)
def test_every_dialect_gives_tables_not_errors(tmp_path: Path, dialect: str) -> None:
    from hta_tui.analysis import catalog
    from tests import dialects

    dialects.write(getattr(dialects, dialect)(), tmp_path / "t.json")
    frames = open_set(tmp_path, Cache(enabled=False)).frames()
    for tb_compat in (False, True):
        tables = catalog.run(frames, ["comm_comp_per_rank"], catalog.Options(tb_compat=tb_compat))
        assert set(tables) >= {"collectives", "comm_ops_stats", "collective_stragglers"}
