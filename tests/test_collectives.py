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


@pytest.mark.shared
def test_gloo_wait_and_transfer_split_the_latency(shared: Path) -> None:
    """Issue 24, point 7: each gloo call's wait and transfer add up to its latency (the raw
    event's dur) and each is at most it; the wait runs from the call's start until the last
    rank's call of that instance started (before: from before the op started, so a 50 us
    broadcast waited 68 us, and an all_reduce of 969 us showed 401 + 930 us)."""
    folder = shared / "traces" / "pytorch_cpu_ddp_gloo_4"
    raw: dict[tuple[int, float], float] = {}
    for path in sorted(folder.glob("rank*.json.gz")):
        events = json.loads(gzip.decompress(path.read_bytes()))["traceEvents"]
        for e in events:
            if e.get("ph") == "X" and str(e.get("name", "")).startswith("gloo:"):
                raw[(int(path.name[4]), round(float(e["ts"]), 3))] = float(e["dur"])
    calls = (
        TraceAnalysis(folder)
        .get_collectives()
        .with_columns(
            (pl.col("wait") / 1000).alias("wait_us"),
            (pl.col("transfer") / 1000).alias("transfer_us"),
        )
    )
    assert calls.height == len(raw) and set(calls["kind"]) == {"all_reduce"}
    for row in calls.iter_rows(named=True):
        dur = raw[(row["rank"], round(row["ts"] / 1000, 3))]
        assert row["end"] - row["ts"] == pytest.approx(dur * 1000, abs=1)
        assert row["wait_us"] + row["transfer_us"] == pytest.approx(dur, abs=1e-3)
        latency = row["end"] - row["ts"]
        assert 0 <= row["wait"] <= latency and 0 <= row["transfer"] <= latency
    for (_, _), inst in calls.group_by("pg", "seq"):
        latest = inst.filter(pl.col("ts") == pl.col("ts").max())
        assert latest["wait_us"].to_list() == [0.0] * latest.height
        for row in inst.iter_rows(named=True):
            expected = min(inst["ts"].max() - row["ts"], row["end"] - row["ts"]) / 1000
            assert row["wait_us"] == pytest.approx(expected, abs=1e-3)


def test_a_job_without_collectives_has_the_calls_columns_and_no_row(tmp_path: Path) -> None:
    """A one-GPU trace (no NCCL kernel, no backend op) answers without the matching queries:
    the same columns as a job with calls, so every table made of them still has its own."""
    from hta_tui.analysis import collectives
    from tests import dialects

    dialects.write(dialects.current(), tmp_path / "t.json")
    events = open_set(tmp_path, Cache(enabled=False)).frames()
    assert not any(
        ev.filter(pl.col("name").str.contains(r"^nccl|^gloo:")).height for ev in events.values()
    )
    calls = collectives.ranks_calls(events)
    assert calls.is_empty() and calls.schema == pl.Schema(collectives.CALL_COLUMNS)
    matched = collectives.calls(events)
    assert matched.is_empty() and matched.schema == pl.Schema(collectives.MATCHED_COLUMNS)
