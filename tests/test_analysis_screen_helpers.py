"""The small analyses behind screens 2, 5 and 9: exposed communication, the longest idle gaps
and the per-step comparison of ranks, checked against brute force on synthetic traces."""

from __future__ import annotations

from pathlib import Path

import polars as pl
import pytest

from hta_tui.analysis import exposed_comm, gaps, idle, overlap, step_compare, steps
from hta_tui.analysis.kernels import gpu_table
from hta_tui.synth import write_trace_dir
from hta_tui.trace.parse import parse_file


@pytest.fixture(scope="module")
def frames(tmp_path_factory: pytest.TempPathFactory) -> dict[int, pl.DataFrame]:
    root = tmp_path_factory.mktemp("synth")
    write_trace_dir(root, ranks=4, steps=4, seed=0, slow_rank=1)
    files = sorted(p for p in Path(root).rglob("*") if p.is_file())
    return {i: parse_file(f).frames["events"] for i, f in enumerate(files)}


def _union(iv: list[tuple[int, int]]) -> list[tuple[int, int]]:
    out: list[list[int]] = []
    for s, e in sorted(iv):
        if out and s <= out[-1][1]:
            out[-1][1] = max(out[-1][1], e)
        else:
            out.append([s, e])
    return [(s, e) for s, e in out]


def _overlap_len(s: int, e: int, merged: list[tuple[int, int]]) -> int:
    return sum(max(0, min(e, b) - max(s, a)) for a, b in merged)


def test_exposed_per_rank_matches_overlap(frames) -> None:
    per_rank = exposed_comm.exposed_comm_per_rank(frames)
    pct = overlap.comm_comp_overlap(frames)
    joined = per_rank.join(pct, on="rank")
    assert joined.height == 4
    for r in joined.iter_rows(named=True):
        assert r["overlapped (us)"] + r["exposed (us)"] == pytest.approx(r["comm (us)"])
        assert round(100 * r["overlapped (us)"] / r["comm (us)"], 2) == pytest.approx(
            r["comp_comm_overlap_pctg"]
        )
        assert r["exposed_pctg"] == pytest.approx(100 * r["exposed (us)"] / r["comm (us)"])


def test_comm_kernels_exposed_brute_force(frames) -> None:
    got = exposed_comm.comm_kernels_exposed(frames)
    gpu = gpu_table(frames)
    want: dict[tuple[int, str], list[float]] = {}
    for rank in sorted(frames):
        g = gpu.filter(pl.col("rank") == rank)
        comp_rows = g.filter(pl.col("kernel_type") == "COMPUTATION").select("start", "end")
        comp = _union(list(comp_rows.iter_rows()))
        for name, s, e in (
            g.filter(pl.col("kernel_type") == "COMMUNICATION").select("name", "start", "end")
        ).iter_rows():
            acc = want.setdefault((rank, name), [0, 0.0, 0.0])
            acc[0] += 1
            acc[1] += (e - s) / 1000
            acc[2] += (e - s - _overlap_len(s, e, comp)) / 1000
    assert got.height == len(want)
    for r in got.iter_rows(named=True):
        count, time, exposed = want[(r["rank"], r["name"])]
        assert r["count"] == count
        assert r["time (us)"] == pytest.approx(time)
        assert r["exposed (us)"] == pytest.approx(exposed)
    assert got["exposed (us)"].to_list() == sorted(got["exposed (us)"].to_list(), reverse=True)


def test_exposed_empty() -> None:
    assert exposed_comm.comm_kernels_exposed({}).columns == list(exposed_comm.KERNEL_COLUMNS)
    assert exposed_comm.exposed_comm_per_rank({}).is_empty()


def test_longest_gaps(frames) -> None:
    got = gaps.longest_gaps(frames, consecutive_kernel_delay_us=10, n=25)
    assert got.height == 25
    all_gaps = idle.classified_gaps(frames, consecutive_kernel_delay_us=10).filter(
        pl.col("idle_interval").is_not_null()
    )
    top = sorted(all_gaps["idle_interval"].to_list(), reverse=True)[:25]
    assert got["gap (us)"].to_list() == pytest.approx([v / 1000 for v in top])
    first = got.row(0, named=True)
    # the kernel before the gap ends where the gap starts, on the same stream
    g = all_gaps.filter(
        (pl.col("rank") == first["rank"])
        & (pl.col("stream") == first["stream"])
        & (pl.col("name") == first["after"])
        & (pl.col("idle_interval") == round(first["gap (us)"] * 1000))
    )
    assert g.height >= 1
    assert gaps.longest_gaps({}).columns == list(gaps.COLUMNS)


def test_step_spread(frames) -> None:
    iters = steps.iterations(frames)
    spread = step_compare.step_spread(iters)
    assert spread["iter"].to_list() == sorted(iters["iter"].unique().to_list())
    for r in spread.iter_rows(named=True):
        durs = iters.filter(pl.col("iter") == r["iter"]).sort("rank")
        assert r["ranks"] == durs.height
        assert r["slowest (us)"] == durs["dur"].max()
        assert r["fastest (us)"] == durs["dur"].min()
        assert r["slowest_rank"] == durs.sort("dur", descending=True)["rank"][0]
    # synth's slow rank is the slowest in every step
    assert set(spread["slowest_rank"].to_list()) == {1}
    assert step_compare.step_spread(steps.iterations({})).is_empty()
    assert step_compare.step_durations(iters, 3)["rank"].to_list() == [0, 1, 2, 3]
