"""The critical path (issue 29): HTA 0.6.1's answers on the shared traces (../shared/oracle-cp),
and what we add, on small traces whose answer is known by construction."""

from __future__ import annotations

import functools
import json
from pathlib import Path
from typing import Any

import orjson
import polars as pl
import pytest

from hta_tui.analysis import catalog
from hta_tui.analysis.critical_path import path as cp
from hta_tui.analysis.critical_path.path import path_of
from hta_tui.analysis.critical_path.tables import critical_path_tables
from hta_tui.api import TraceAnalysis
from hta_tui.synth.events import complete
from hta_tui.trace.parse import parse_file
from tests.conftest import SHARED
from tests.shared_sets import parsed

ORACLE = SHARED / "oracle-cp"


def _oracle_files() -> list[str]:
    if not ORACLE.is_dir():
        return []
    return sorted(str(p.relative_to(ORACLE)) for p in ORACLE.rglob("rank*.json"))


ORACLE_FILES = _oracle_files()
#: Oracle files where HTA answered; ours must agree in its compat mode, and in the default
#: mode too except where a documented deviation says why not.
ANSWERED = [f for f in ORACLE_FILES if json.loads((ORACLE / f).read_text()).get("success")]
#: DEVIATIONS of the default mode, each with its test; the compat mode agrees on them.
DEFAULT_MODE_DEVIATIONS = {
    # CUDA graphs: HTA leaves their kernels off the path
    # (test_graph_launch_kernels_join_the_path_where_hta_drops_them)
    "trace_diff/test/rank1.0.json": "graph launches",
    # ns timestamps: HTA rounds every event inward to whole us and drops those left with no
    # duration, so its path is 4% shorter (test_exact_timestamps_where_hta_rounds)
    "tracelens_h100_bert_memory/rank0.0.json": "rounding",
}


@functools.cache
def _rank_events(folder: Path) -> dict[int, pl.DataFrame]:
    out = {}
    for f in sorted(folder.iterdir()):
        if ".json" not in f.name:
            continue
        p = parsed(f)
        rank = p.meta.get("rank_in_file")
        out[int(rank) if rank is not None else 0] = p.frames["events"]
    return out


def _ours(file: str, *, hta_compat: bool) -> tuple[dict[str, Any], cp.RankPath]:
    want = json.loads((ORACLE / file).read_text())
    events = _rank_events(SHARED / "traces" / Path(file).parent)
    rank = want["rank"] if want["rank"] in events else min(events)
    ev = cp.prepared(events[rank], hta_compat=hta_compat)
    window = cp.windows(ev, want["annotation"], want["instance_id"])
    assert window is not None
    return want, cp.rank_path(ev, rank, window, hta_launches=hta_compat)


def _assert_agrees(want: dict[str, Any], got: cp.RankPath) -> None:
    length = got.length_ns / 1000
    assert length == pytest.approx(want["path_length_us"], rel=0.01)
    shares = {k: 100 * v / got.length_ns for k, v in cp.breakdown(got).items()}
    for bound in cp.BOUND_NAMES[:-1]:
        hta = (want["summary"] or {}).get(bound, 0.0)
        assert shares[bound] == pytest.approx(hta, abs=1.0), bound


@pytest.mark.shared
@pytest.mark.parametrize("file", [f for f in ANSWERED if f not in DEFAULT_MODE_DEVIATIONS])
def test_path_agrees_with_traceinsight(file: str) -> None:
    """Path length within 1% and each bound type's share within 1 point, default mode."""
    _assert_agrees(*_ours(file, hta_compat=False))


@pytest.mark.shared
@pytest.mark.parametrize("file", sorted(set(DEFAULT_MODE_DEVIATIONS) & set(ANSWERED)))
def test_compat_mode_agrees_where_the_default_deviates(file: str) -> None:
    _assert_agrees(*_ours(file, hta_compat=True))


@pytest.mark.shared
def test_graph_launch_kernels_join_the_path_where_hta_drops_them() -> None:
    """trace_diff/test runs most of its step as CUDA graphs: HTA's path stays on the CPU
    (cpu_bound 100%, 56.3 ms); ours follows the graph launches to their kernels."""
    want, got = _ours("trace_diff/test/rank1.0.json", hta_compat=False)
    assert want["summary"] == {"": 0.0, "cpu_bound": 100.0}
    edges = cp.edges_table(got)
    assert got.length_ns / 1000 > want["path_length_us"] * 1.2
    b = cp.breakdown(got)
    assert b["gpu_compute_bound"] > b["cpu_bound"]
    kernels = edges.filter(pl.col("stream").is_not_null())["event_idx"]
    events = _rank_events(SHARED / "traces" / "trace_diff" / "test")[1]
    launches = events.filter(pl.col("name") == "cudaGraphLaunch")["correlation"]
    on_path = events.filter(pl.col("idx").is_in(kernels.cast(pl.UInt32).implode()))
    assert on_path["correlation"].is_in(launches.implode()).any()


@pytest.mark.shared
def test_exact_timestamps_where_hta_rounds() -> None:
    """Exact ns: HTA rounds every event inward to whole us, and the sub-us ones, left with
    no duration, drop out of its graph (396 events of 671 remain)."""
    want, got = _ours("tracelens_h100_bert_memory/rank0.0.json", hta_compat=False)
    _, compat = _ours("tracelens_h100_bert_memory/rank0.0.json", hta_compat=True)
    assert compat.length_ns / 1000 == want["path_length_us"]
    assert want["path_length_us"] < got.length_ns / 1000 < want["path_length_us"] * 1.06
    assert compat.graph.nodes.height < got.graph.nodes.height


@pytest.mark.shared
def test_cpu_only_rank_has_a_path_where_hta_asserts() -> None:
    want = json.loads((ORACLE / "cpu_only" / "rank34.0.json").read_text())
    assert "Queue length" in want["error"]
    events = _rank_events(SHARED / "traces" / "cpu_only")
    tables = critical_path_tables(events)
    row = tables["critical_path"].row(0, named=True)
    assert row["error"] is None
    assert row["path_length_us"] > 0
    assert row["cpu_bound_pct"] == pytest.approx(100)


@pytest.mark.shared
def test_path_across_ranks_crosses_to_the_rank_doing_four_times_the_work() -> None:
    """pytorch_cpu_ddp_gloo_4: rank 3 does 4x the work; a step's path across ranks runs
    through rank 3 and on into another rank's all_reduce."""
    events = _rank_events(SHARED / "traces" / "pytorch_cpu_ddp_gloo_4")
    table = critical_path_tables(events)["critical_path"].filter(pl.col("rank").is_null())
    assert table.height >= 1
    crossing = table.filter(
        (pl.col("bound_by_rank") == 3) & pl.col("ranks_on_path").str.contains(",")
    )
    assert crossing.height >= 1, table


# --- generated traces, answers known by construction ------------------------------------


def _x(name: str, cat: str, ts: float, dur: float, tid: int = 1, **args: Any) -> dict[str, Any]:
    pid = 0 if cat in ("kernel", "cuda_sync", "gpu_memcpy") else 100
    return complete(cat, name, pid, tid, ts, dur, **args)


def _write(folder: Path, rank: int, events: list[dict[str, Any]]) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    doc = {"schemaVersion": 1, "distributedInfo": {"rank": rank}, "traceEvents": events}
    (folder / f"rank{rank}.json").write_bytes(orjson.dumps(doc))


T0 = 1_000_000.0


def _step(kernels: list[tuple[str, float, float]], launch: str = "cudaLaunchKernel") -> list:
    """One step: op A [10, 100] launches the kernels at [20, 30]; op B [100, 700] waits in
    cudaStreamSynchronize [110, 650] (its Stream Sync ends with the last kernel)."""
    ev = [
        _x("ProfilerStep#1", "user_annotation", T0, 1000),
        _x("aten::a", "cpu_op", T0 + 10, 90),
        _x(launch, "cuda_runtime", T0 + 20, 10, correlation=1),
        _x("aten::b", "cpu_op", T0 + 100, 600),
        _x("cudaStreamSynchronize", "cuda_runtime", T0 + 110, 540, correlation=2),
    ]
    for name, start, dur in kernels:
        ev.append(_x(name, "kernel", T0 + start, dur, tid=7, stream=7, correlation=1, device=0))
    last = max(s + d for _, s, d in kernels)
    ev.append(
        _x(
            "Stream Sync",
            "cuda_sync",
            T0 + 110,
            last - 110,
            tid=7,
            stream=7,
            correlation=2,
            device=0,
            cuda_sync_kind="Stream Sync",
        )
    )
    return ev


def _one(tmp_path: Path, events: list) -> TraceAnalysis:
    _write(tmp_path / "t", 0, events)
    return TraceAnalysis(tmp_path / "t", cache=False)


def test_path_through_launch_kernel_and_sync(tmp_path: Path) -> None:
    """a.start -10-> launch -30 (delay)-> kernel 500 -> sync -> cudaStreamSynchronize end
    -50-> b.end: 590 us; the CPU alone would be 150."""
    ta = _one(tmp_path, _step([("gemm", 50, 500)]))
    got, ok = ta.critical_path_analysis(0, "ProfilerStep", 0)
    assert ok and got is not None
    assert got.length_us == 590
    summary = dict(got.summary().select("bound_by", "duration_us").iter_rows())
    assert summary == {
        "cpu_bound": 60,
        "gpu_compute_bound": 500,
        "gpu_kernel_launch_overhead": 30,
    }


def test_what_if_gpu_compute_twice_as_fast(tmp_path: Path) -> None:
    ta = _one(tmp_path, _step([("gemm", 50, 500)]))
    got, _ = ta.critical_path_analysis(0)
    assert got is not None
    new, _ = cp.what_if(got.rank_path, {"gpu_compute_bound": 0.5})
    assert new == 340_000  # 10 + 30 + 250 + 50 us
    new, _ = cp.what_if(got.rank_path, {"gpu_kernel_launch_overhead": 0})
    assert new == 560_000
    # 10x faster GPU: the CPU's own 150 us become the path
    new, path = cp.what_if(got.rank_path, {"gpu_compute_bound": 0.01})
    assert new == 150_000
    assert set(cp.edges_table(path)["bound_by"].to_list()) <= {"cpu_bound", ""}
    kernel_idx = int(cp.edges_table(got.rank_path).filter(pl.col("stream") == 7)["event_idx"][0])
    assert cp.what_if(got.rank_path, events={kernel_idx: 0.5})[0] == 340_000
    sentence = got.what_if({"gpu_compute_bound": 0.5})
    assert "0.590 ms -> est. 0.340 ms" in sentence
    assert "keeping today's dependencies" in sentence


def test_graph_launch_connects_every_kernel(tmp_path: Path) -> None:
    """cudaGraphLaunch of two kernels (200 us each, 10 us apart): HTA leaves them off (the
    CPU's 150 us); we follow the launch: 10 + 30 + 200 + 10 + 200 + 50 = 500 us."""
    ta = _one(tmp_path, _step([("k1", 50, 200), ("k2", 260, 200)], launch="cudaGraphLaunch"))
    got, _ = ta.critical_path_analysis(0)
    assert got is not None and got.length_us == 500
    types = cp.edges_table(got.rank_path)["type"].to_list()
    assert "critical_path_kernel_kernel_delay" in types
    hta = TraceAnalysis(tmp_path / "t", cache=False, hta_compat=True)
    got, _ = hta.critical_path_analysis(0)
    assert got is not None and got.length_us == 150


def test_negative_edges_are_counted_not_hidden(tmp_path: Path) -> None:
    """A child op ending 5 us after its parent (clock skew): the edge back to the parent's
    end weighs -5 us; like HTA it counts 0, but the summary says so."""
    ev = [
        _x("ProfilerStep#1", "user_annotation", T0, 1000),
        _x("aten::parent", "cpu_op", T0 + 10, 90),
        _x("aten::child", "cpu_op", T0 + 20, 85),
    ]
    _write(tmp_path / "t", 0, ev)
    table = critical_path_tables(TraceAnalysis(tmp_path / "t", cache=False)._ranks())
    row = table["critical_path"].row(0, named=True)
    assert row["negative_edges"] == 1
    assert row["negative_us"] == 5
    assert row["path_length_us"] == 95  # 10 + 85, the -5 clamped to 0


def _gloo_rank(rank: int, compute_us: float) -> list:
    """A CPU rank: compute, then c10d::allreduce_ issues a gloo all_reduce on a worker
    thread that ends at 900 us on every rank (it waits for the last one)."""
    arrive = 10 + compute_us + 10
    return [
        _x("ProfilerStep#1", "user_annotation", T0, 1000),
        _x("aten::compute", "cpu_op", T0 + 10, compute_us),
        _x("c10d::allreduce_", "cpu_op", T0 + arrive, 5),
        _x("gloo:all_reduce", "user_annotation", T0 + arrive + 10, 900 - arrive - 10, tid=9),
    ]


def test_slow_rank_is_named_across_ranks(tmp_path: Path) -> None:
    """Rank 1 computes 800 us, rank 0 100 us: the step's path runs through rank 1's compute
    (800) and its all_reduce's transfer (900 - 830 = 70): 870 us, bound by rank 1."""
    _write(tmp_path / "j", 0, _gloo_rank(0, 100))
    _write(tmp_path / "j", 1, _gloo_rank(1, 800))
    ranks = TraceAnalysis(tmp_path / "j", cache=False)._ranks()
    table = critical_path_tables(ranks)["critical_path"]
    job = table.filter(pl.col("rank").is_null()).row(0, named=True)
    assert job["path_length_us"] == 870
    assert job["bound_by_rank"] == 1
    assert job["verdict"] == "bound by rank 1's cpu_bound"
    assert job["ranks_on_path"].split(", ")[0] == "1"
    # each rank alone sees only itself: rank 0's path is its own wait
    rank0 = table.filter(pl.col("rank") == 0).row(0, named=True)
    assert rank0["ranks_on_path"] is None


def test_report_key_and_only(tmp_path: Path) -> None:
    ta = _one(tmp_path, _step([("gemm", 50, 500)]))
    assert catalog.known("critical_path") and catalog.known("critical_path_edges")
    tables = catalog.run(ta._ranks(), ["critical_path"])
    assert set(tables) == {"critical_path", "critical_path_edges", "critical_path_what_if"}
    what_if = tables["critical_path_what_if"]
    best = what_if.row(0, named=True)  # the largest saving first
    assert best["scenario"] == "GPU compute were 2x faster"
    assert best["estimate_us"] == 340
    assert best["sentence"] == (
        "step time 0.590 ms -> est. 0.340 ms if GPU compute were 2x faster, "
        "keeping today's dependencies"
    )
    assert set(what_if["scenario"]) == {
        "GPU compute were 2x faster",
        "the CPU were 2x faster",
        "kernel launches cost nothing",
    }
    assert tables["critical_path"]["path_length_us"].to_list() == [590]
    assert tables["critical_path_edges"]["duration"].sum() == 590


def test_overlay_export_marks_the_path(tmp_path: Path) -> None:
    ta = _one(tmp_path, _step([("gemm", 50, 500)]))
    got, _ = ta.critical_path_analysis(0)
    assert got is not None
    out = ta.overlay_critical_path_analysis(0, got, tmp_path / "out")
    assert out is not None and out.parent == tmp_path / "out"
    doc = orjson.loads(out.read_bytes())
    critical = {
        e["name"]
        for e in doc["traceEvents"]
        if e["ph"] == "X" and e.get("args", {}).get("critical") == 1
    }
    assert critical == {"aten::a", "cudaLaunchKernel", "gemm", "cudaStreamSynchronize", "aten::b"}
    flows = [e for e in doc["traceEvents"] if e.get("cat") == "critical_path"]
    assert {f["args"]["type"] for f in flows} >= {"critical_path_kernel_launch_delay"}
    with pytest.raises(ValueError, match="inside the trace folder"):
        ta.overlay_critical_path_analysis(0, got, tmp_path / "t" / "sub")


def test_no_annotation_is_a_reason_not_a_crash(tmp_path: Path) -> None:
    ta = _one(tmp_path, [_x("aten::a", "cpu_op", T0, 10)])
    assert ta.critical_path_analysis(0) == (None, False)
    row = critical_path_tables(ta._ranks())["critical_path"].row(0, named=True)
    assert "no 'ProfilerStep'" in row["error"]


def test_a_job_without_steps_makes_no_launch_queues(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The launch queues are made (for every rank at once) only once a rank has a step to
    follow: a job without ProfilerStep makes none (the Critical path view of 8 x 100 MB
    ranks without steps spent 0.7 s of CPU on them), a job with steps makes them once."""
    from hta_tui.analysis.critical_path import graph

    made: list[str] = []
    for name in ("queue_at", "ranks_queue_at", "ranks_queues"):
        real = getattr(graph, name)

        def counted(*a: Any, _real: Any = real, _name: str = name, **k: Any) -> Any:
            made.append(_name)
            return _real(*a, **k)

        monkeypatch.setattr(graph, name, counted)
    for rank in (0, 1):
        _write(tmp_path / "none", rank, [e for e in _step([("gemm", 50, 500)])[1:]])
    rows = critical_path_tables(TraceAnalysis(tmp_path / "none", cache=False)._ranks())
    assert rows["critical_path"]["error"].str.contains("no 'ProfilerStep'").to_list() == [
        True,
        True,
    ]
    assert made == []
    for rank in (0, 1):
        _write(tmp_path / "steps", rank, _step([("gemm", 50, 500)]))
    rows = critical_path_tables(TraceAnalysis(tmp_path / "steps", cache=False)._ranks())
    assert rows["critical_path"].filter(pl.col("rank").is_not_null())["error"].null_count() == 2
    assert made == ["ranks_queues"]


def _second_step(events: list[dict]) -> list[dict]:
    """`events` again 2 us later as ProfilerStep#2, their correlations moved by 10."""
    later = [dict(e, ts=e["ts"] + 2000) for e in events]
    for e in later:
        if e["name"].startswith("ProfilerStep"):
            e["name"] = "ProfilerStep#2"
        if "correlation" in e["args"]:
            e["args"] = dict(e["args"], correlation=e["args"]["correlation"] + 10)
    return later


def test_steps_parameter(tmp_path: Path) -> None:
    """`--set critical_path_steps=...`: the first step by default (HTA's instance 0), every
    one, one, or a range of steps as one window."""
    ev = _step([("gemm", 50, 500)])
    second = _second_step(ev)
    ta = _one(tmp_path, ev + second)

    def lengths(steps: str) -> list[tuple[str, int, float]]:
        table = catalog.run(
            ta._ranks(), ["critical_path"], catalog.options_with({"critical_path_steps": steps})
        )
        return table["critical_path"].select("annotation", "instance_id", "path_length_us").rows()

    assert lengths("first") == [("ProfilerStep", 0, 590)]
    assert lengths("all") == [("ProfilerStep", 0, 590), ("ProfilerStep", 1, 590)]
    assert lengths("1") == [("ProfilerStep", 1, 590)]
    # both steps as one window: the thread runs one after the other, so do the paths
    assert lengths("0-1") == [("ProfilerStep 0-1", 0, 1180)]
    with pytest.raises(ValueError, match="first, all, N or N-M"):
        lengths("some")


def test_generated_gpu_job_names_its_slow_rank(tmp_path: Path) -> None:
    """The generator's straggler (rank 2: GPU work 30% longer) is what most steps of the job
    waited for, and for its GPU compute."""
    from hta_tui.synth import write_trace_dir

    files = write_trace_dir(tmp_path, ranks=4, steps=3, seed=1, kernels_per_step=30, slow_rank=2)
    frames = {r: parse_file(f).frames["events"] for r, f in enumerate(sorted(files))}
    table = critical_path_tables(frames)["critical_path"]
    job = table.filter(pl.col("rank").is_null())
    assert job.height == 3
    slow = job.filter(pl.col("bound_by_rank") == 2)
    assert slow.height >= 2, job
    assert set(slow["verdict"]) == {"bound by rank 2's gpu_compute_bound"}
    # the job's path is longer than any one rank's own path of that step
    per_rank = table.filter(pl.col("rank").is_not_null())
    for step, length in job.select("instance_id", "path_length_us").iter_rows():
        mine = per_rank.filter(pl.col("instance_id") == step)["path_length_us"]
        assert length >= mine.max()


def test_one_bad_rank_costs_only_its_row(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """An error inside one rank's graph becomes that row's one-line reason; the other rank
    still has its path."""
    _write(tmp_path / "t", 0, _step([("gemm", 50, 500)]))
    _write(tmp_path / "t", 1, _step([("gemm", 50, 500)]))
    ranks = TraceAnalysis(tmp_path / "t", cache=False)._ranks()
    real = path_of

    def flaky(rank: int, *a: Any, **k: Any) -> cp.RankPath:
        if rank == 1:
            raise ValueError("odd value\nsecond line")
        return real(rank, *a, **k)

    monkeypatch.setattr("hta_tui.analysis.critical_path.tables.path_of", flaky)
    rows = critical_path_tables(ranks)["critical_path"].sort("rank").rows(named=True)
    assert rows[0]["path_length_us"] == 590 and rows[0]["error"] is None
    assert rows[1]["error"] == "ValueError: odd value"


def test_a_batch_that_fails_is_made_rank_by_rank(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Graphs the batch cannot build (one rank's data) are built again rank by rank: the
    rank that fails alone gets the reason on its row, the other its path."""
    from hta_tui.analysis.critical_path import graph

    for rank in (0, 1):
        _write(tmp_path / "t", rank, _step([("gemm", 50, 500)]))
    ranks = TraceAnalysis(tmp_path / "t", cache=False)._ranks()
    real = graph.build_many

    def flaky(every: pl.DataFrame, windows: list, *a: Any, **k: Any) -> Any:
        if any(w.rank == 1 for w in windows):
            raise ValueError("odd value\nsecond line")
        return real(every, windows, *a, **k)

    monkeypatch.setattr(graph, "build_many", flaky)
    rows = critical_path_tables(ranks)["critical_path"].sort("rank").rows(named=True)
    assert rows[0]["path_length_us"] == 590 and rows[0]["error"] is None
    assert rows[1]["error"] == "ValueError: odd value"


def test_data_load_events_bound_by_data_loading(tmp_path: Path) -> None:
    """HTA's `data_load_events`: time inside a matching annotation is `data_loading`; the
    loader's 300 us precede the step's 590 on the same thread."""
    ev = [dict(e, ts=e["ts"] + 300) for e in _step([("gemm", 50, 500)])]
    ev[0] = _x("ProfilerStep#1", "user_annotation", T0, 1300)
    ev.append(
        _x(
            "enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__",
            "user_annotation",
            T0 + 5,
            300,
        )
    )
    ta = _one(tmp_path, ev)
    plain, _ = ta.critical_path_analysis(0)
    assert plain is not None and plain.length_us == 590  # an annotation is not a node
    got, _ = ta.critical_path_analysis(0, data_load_events=[r"enumerate\(DataLoader\)"])
    assert got is not None and got.length_us == 890
    summary = dict(got.summary().select("bound_by", "duration_us").iter_rows())
    assert summary["data_loading"] == 300


def _mixed_ranks(tmp_path: Path) -> dict[int, pl.DataFrame]:
    """Ranks of every kind a batch holds: two CPU ranks with a gloo collective (the only
    ones with collectives), a GPU rank, one without steps, one with two steps, one with
    a step and no kernels."""
    two = _step([("gemm", 50, 500)])
    later = _second_step(two)
    cpu_step = [_x("ProfilerStep#1", "user_annotation", T0, 1000), _x("aten::a", "cpu_op", T0, 90)]
    for rank, events in enumerate(
        [
            _gloo_rank(0, 100),
            _gloo_rank(1, 800),
            _step([("gemm", 50, 500), ("sgemm", 560, 30)]),
            _step([("gemm", 50, 500)])[1:],
            two + later,
            cpu_step,
        ]
    ):
        _write(tmp_path / "mixed", rank, events)
    return TraceAnalysis(tmp_path / "mixed", cache=False)._ranks()


def test_ranks_made_at_once_equal_each_rank_alone(tmp_path: Path) -> None:
    """The report's critical path of a batch (every rank's graphs built at once) equals
    each rank's made alone, table by table, to the row and dtype: with and without
    HTA's rounding, on ranks without steps, without kernels, with several steps, and
    collectives on some ranks only."""
    from hta_tui.analysis.critical_path.tables import critical_path_summary

    ranks = _mixed_ranks(tmp_path)
    for compat in (False, True):
        batch = critical_path_summary(ranks, hta_compat=compat)
        assert set(batch["critical_path"]["rank"]) == set(ranks)
        assert batch["critical_path"].filter(pl.col("rank") == 3)["error"].to_list() == [
            "no 'ProfilerStep' on this rank"
        ]
        assert batch["critical_path"].filter(pl.col("rank") == 4).height == 2
        for rank, events in ranks.items():
            alone = critical_path_summary({rank: events}, hta_compat=compat)
            for name, table in alone.items():
                if "rank" not in batch[name].columns:
                    assert table.is_empty(), name
                    continue
                mine = batch[name].filter(pl.col("rank") == rank)
                assert mine.equals(table.cast(mine.schema) if table.height else mine.clear())
                assert table.is_empty() or table.schema == mine.schema, name


def _locking_rank() -> list:
    """Two threads whose launches overlap (the runtime lock orders them), nested ops three
    deep, a kernel per launch, one op ending after its parent (a negative edge)."""
    return [
        _x("ProfilerStep#1", "user_annotation", T0, 1000),
        _x("aten::outer", "cpu_op", T0 + 10, 200),
        _x("aten::mid", "cpu_op", T0 + 12, 100),
        _x("cudaLaunchKernel", "cuda_runtime", T0 + 20, 10, correlation=1),
        _x("aten::side", "cpu_op", T0 + 15, 60, tid=2),
        _x("cudaLaunchKernel", "cuda_runtime", T0 + 22, 12, tid=2, correlation=3),
        _x("aten::late", "cpu_op", T0 + 150, 70),  # ends 10 us after aten::outer
        _x("k1", "kernel", T0 + 40, 80, tid=7, stream=7, correlation=1, device=0),
        _x("k2", "kernel", T0 + 125, 30, tid=7, stream=7, correlation=3, device=0),
    ]


def test_a_batch_s_graphs_are_made_at_once_as_each_rank_s_alone(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The edges of every graph of a batch are made in one numpy pass over the batch (a
    graph at a time cost ~0.3 ms of numpy calls a tiny step: 5 s at 10,000 files), and
    each graph is the one its rank makes alone, array for array (the edges' order too:
    the longest path's ties follow it), with and without HTA's rounding: on the mixed
    batch, a rank whose launches overlap on two threads, nested ops, a negative edge,
    syncs and a graph launch; and every path's what-ifs at once, each as its own."""
    import numpy as np

    from hta_tui.analysis.critical_path import graph
    from hta_tui.analysis.critical_path.tables import critical_path_result

    ranks = dict(_mixed_ranks(tmp_path))
    _write(tmp_path / "more", 6, _locking_rank())
    _write(tmp_path / "more", 7, _step([("k1", 50, 200), ("k2", 260, 200)], "cudaGraphLaunch"))
    ranks |= TraceAnalysis(tmp_path / "more", cache=False)._ranks()
    calls = [0]
    real = graph.call_stack_edges

    def counted(*a: Any, **k: Any) -> Any:
        calls[0] += 1
        return real(*a, **k)

    monkeypatch.setattr(graph, "call_stack_edges", counted)
    for compat in (False, True):
        calls[0] = 0
        _, batch = critical_path_result(ranks, hta_compat=compat)
        assert calls[0] == 1  # main: one a graph (8)
        assert len(batch) == 8 and batch[(6, 0)].graph.negative_edges == 1
        types = set(np.concatenate([rp.graph.type for rp in batch.values()]).tolist())
        assert types == set(range(5))  # every edge type, the lock's dependencies too
        with monkeypatch.context() as big:  # (big graphs: graph by graph, when asked)
            big.setattr(graph, "AT_ONCE_NODES", 0)
            calls[0] = 0
            _, apart = critical_path_result(ranks, hta_compat=compat)
            assert calls[0] == 8
        each = [critical_path_result({r: e}, hta_compat=compat)[1] for r, e in ranks.items()]
        for alone in (apart, *each):
            for key, rp in alone.items():
                mine = batch[key]
                assert mine.graph.nodes.equals(rp.graph.nodes)
                for name in ("src", "dst", "type", "weight", "row"):
                    a, b = getattr(mine.graph, name), getattr(rp.graph, name)
                    assert a.dtype == b.dtype and np.array_equal(a, b), (key, name)
                assert mine.graph.negative_ns == rp.graph.negative_ns
                assert np.array_equal(mine.path, rp.path) and mine.length_ns == rp.length_ns
                assert np.array_equal(mine.bound, rp.bound)
        # every path's what-ifs answered at once, each as `what_if` answers it alone
        answers = cp.what_ifs_of(list(batch.values()))
        for rp, said in zip(batch.values(), answers, strict=True):
            on_path = [(label, b, k) for label, b, k in cp.SCENARIOS if cp.breakdown(rp)[b] > 0]
            assert sorted(label for label, _, _ in said) == sorted(x[0] for x in on_path)
            for label, bound, k in on_path:
                assert dict((x[0], x[1]) for x in said)[label] == cp.what_if(rp, {bound: k})[0]
        assert sum(map(len, answers)) > 8


def test_row_lookup_of_a_batch_s_graphs_by_table_and_by_search() -> None:
    """Event idx -> its node's row in its graph, as a table while graphs x idx stay small
    and by binary search past that (a batch of ranks with large idx): the same rows, -1
    for an idx without a node, another graph's or out of range, a repeated idx its last."""
    import numpy as np

    from hta_tui.analysis.critical_path.rules import RowOf

    rng = np.random.default_rng(5)
    graph = np.repeat(np.arange(3), 40)
    idx = np.concatenate([rng.choice(top, 40, replace=False) for top in (50, 9_000_000, 70)])
    idx[5] = idx[4]  # (a repeated idx: the later row)
    rows = np.arange(idx.size)
    want = {(int(g), int(i)): int(r) for g, i, r in zip(graph, idx, rows, strict=True)}
    ask_g = np.concatenate([graph, rng.integers(0, 3, 200)])
    ask_i = np.concatenate([idx, rng.integers(-2, 9_000_002, 200)])
    expected = [want.get((int(g), int(i)), -1) for g, i in zip(ask_g, ask_i, strict=True)]
    table = RowOf(idx, rows, graph)
    assert not table.dense  # 3 graphs x 9,000,000 idx: searched
    assert table(ask_i, ask_g).tolist() == expected
    small = idx % 1000
    want = {(int(g), int(i)): int(r) for g, i, r in zip(graph, small, rows, strict=True)}
    dense = RowOf(small, rows, graph)
    assert dense.dense
    got = dense(ask_i % 1000, ask_g).tolist()
    assert got == [want.get((int(g), int(i) % 1000), -1) for g, i in zip(ask_g, ask_i, strict=True)]
    assert RowOf(small[:40], rows[:40])(np.array([small[0], -1, 5000])).tolist()[1:] == [-1, -1]


def test_a_batch_of_ranks_costs_queries_per_batch_not_per_rank(tmp_path: Path) -> None:
    """Every rank's and step's graph is built in one query set over the batch: six ranks
    make as many polars queries as two (main made ~48 a tiny rank; a rank's collective
    calls and each sync still cost their own)."""
    from polars.lazyframe.frame import LazyFrame

    from hta_tui.analysis.critical_path.tables import critical_path_summary
    from hta_tui.synth.small_job import Dialect, JobShape, write_job

    # the tiny ranks of issue 26's 1,000 files: two steps of two ops each
    files = write_job(tmp_path, Dialect(), JobShape(ranks=6, steps=2, ops_per_step=2))
    frames = {r: parse_file(f).frames["events"] for r, f in enumerate(files)}
    counted = [0]
    real_lazy, real_eager = LazyFrame.collect, LazyFrame._collect_eager

    def queries(n: int) -> int:
        counted[0] = 0
        tables = critical_path_summary({r: frames[r] for r in range(n)})
        assert tables["critical_path"]["error"].null_count() == n * 2
        return counted[0]

    def lazy(self: LazyFrame, *a: Any, **k: Any) -> pl.DataFrame:
        counted[0] += 1
        return real_lazy(self, *a, **k)

    def eager(self: LazyFrame, *a: Any, **k: Any) -> pl.DataFrame:
        counted[0] += 1
        return real_eager(self, *a, **k)

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(LazyFrame, "collect", lazy)
        mp.setattr(LazyFrame, "_collect_eager", eager)
        two, six = queries(2), queries(6)
    assert six == two


@pytest.mark.shared
def test_the_graphs_are_the_same_every_run(shared: Path) -> None:
    """A graph's GPU ops are numbered in their events' order: the order of a join's output
    varied from one call to the next (tb_plugin_gpu_metrics: ten calls, ten orders), and
    with it the node numbers of the path across ranks' graph tables."""
    from hta_tui.analysis.critical_path.tables import critical_path_summary

    ranks = _rank_events(shared / "traces" / "tb_plugin_gpu_metrics")
    ev = cp.prepared(ranks[0])
    window = cp.windows(ev, "ProfilerStep", 0)
    assert window is not None
    nodes = cp.rank_path(ev, 0, window).graph.nodes
    gpu = nodes.filter(pl.col("stream").is_not_null())["idx"]
    assert gpu.len() > 10 and gpu.is_sorted()
    first, second = critical_path_summary(ranks), critical_path_summary(ranks)
    for name in ("path_graph_edges", "path_graph_calls", "critical_path_edges"):
        assert first[name].equals(second[name]), name


def test_windows_clipped_on_few_columns_keep_every_column(tmp_path: Path) -> None:
    """Each graph's CPU events (`graph._clip`) are found on the columns that find them and
    their rows gathered after: the same frame, row for row and column for column, as the
    join of every column to the windows filtered after (main's, which copied every host
    event's columns: ~70 ms a 100 MB rank), with several windows on one rank, windows that
    overlap and a window with no event."""
    from hta_tui.analysis.critical_path import graph as g
    from hta_tui.analysis.critical_path.path import prepared
    from hta_tui.analysis.per_rank import ranks_events

    ranks = _mixed_ranks(tmp_path)
    every = prepared(ranks_events(ranks))
    t0, t1 = int(every["start"].min()), int(every["end"].max())
    mid = (t0 + t1) // 2
    windows = [
        g.Window(4, t0, t1),
        g.Window(4, t0, mid),
        g.Window(2, mid, t1, extra=True),
        g.Window(0, t0, t1),
        g.Window(5, t1 + 1, t1 + 2),
    ]
    cpu, _, nodes = g._clip(every, windows, None, graph_kernels=True)
    wins = pl.DataFrame(
        {
            g.G: range(len(windows)),
            "rank": [w.rank for w in windows],
            "_w0": [w.w0 for w in windows],
            "_w1": [w.w1 for w in windows],
            "_extra": [w.extra for w in windows],
        },
        schema_overrides={g.G: pl.Int64, "rank": pl.Int64, "_w0": pl.Int64, "_w1": pl.Int64},
    )
    host = every.with_row_index("_pos").filter(pl.col("stream").is_null() & (pl.col("dur") > 0))
    want = (
        host.join(wins, on="rank")
        .filter(pl.col("start").is_between(pl.col("_w0"), pl.col("_w1")))
        .sort(g.G, "_pos")
    )
    assert cpu.equals(want) and cpu.schema == want.schema
    assert set(cpu[g.G]) == {0, 1, 3} and not nodes.is_empty()  # (rank 2: none after mid)
