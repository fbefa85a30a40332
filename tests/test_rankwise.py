"""Rank by rank, on any back-end (issue 30; issue 27 point 3): analyses declared
`scope="rank"` give the same tables made rank by rank as over every rank at once; the
in-process, process-pool and Dask back-ends give the same report, number for number; per-rank
results are kept beside the frames and whole answers per job, so a second run makes nothing;
work that fails on a worker is made again and loses nothing.

The Dask tests use a LocalCluster of threads (processes=False): cheap, no process started.
The one that kills a worker process starts two real worker processes (in the normal suite).
"""

from __future__ import annotations

import dataclasses
import io
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from concurrent.futures import Future
from pathlib import Path
from typing import Any

import orjson
import polars as pl
import pytest
from polars.testing import assert_frame_equal

from hta_tui.analysis import registry
from hta_tui.exec import (
    INSTALL_HINT,
    Backend,
    BackendError,
    DaskBackend,
    PoolBackend,
    backends,
    rank_work,
    split,
)
from hta_tui.exec.rank_work import RESULTS_DIR
from hta_tui.report import run_report
from hta_tui.session import open_session
from hta_tui.synth.nccl_job import write_nccl_job
from hta_tui.synth.small_job import Dialect, JobShape, trace_bytes, write_job
from hta_tui.trace.cache import Cache

#: Analyses reduced across ranks: collective matching, steps and stragglers, the kernel
#: types' shares of every rank (each rank's top kernels as they are).
JOB_ONLY = ["comm_comp_per_rank", "profiler_steps", "gpu_kernel_breakdown"]


def report(path: Path, cache: Cache, backend: Backend, only: list[str] | None = None) -> dict:
    out = io.StringIO()
    assert run_report(path, as_json=True, out=out, cache=cache, backend=backend, only=only) == 0
    return orjson.loads(out.getvalue())


def forget_results(cache: Cache) -> None:
    """Keep the parsed frames, drop every analysis result kept (each back-end makes its own)."""
    for folder in [*cache.root.glob(f"*/*/{RESULTS_DIR}"), cache.root / split.JOBS_DIR]:
        shutil.rmtree(folder, ignore_errors=True)


@pytest.fixture(scope="module")
def cluster() -> Iterator[DaskBackend]:
    pytest.importorskip("distributed")
    with DaskBackend("local:2", processes=False) as backend:
        yield backend


@pytest.fixture(scope="module")
def pool() -> Iterator[PoolBackend]:
    """One worker process for the module's tests that compare a report made in it with the
    others (each started its own: the process and its imports were most of its run there).
    Small as the files are, the work goes to the process."""
    with PoolBackend(1) as backend:
        backend.remote_bytes = 0
        yield backend


#: Ranks of the generated NCCL job: a late one among many (64 cost the suite 10 s of CPU,
#: for the same asserts)
JOB_RANKS = 16


@pytest.fixture(scope="module")
def parsed_job(tmp_path_factory: pytest.TempPathFactory, cluster: DaskBackend) -> Path:
    """A generated NCCL job of tiny ranks (rank 2 late at every collective), parsed once on
    the Dask cluster (its cache copied by `nccl_job` for each test)."""
    root = tmp_path_factory.mktemp("nccl-job")
    write_nccl_job(root / "job", ranks=JOB_RANKS, steps=2)
    ts = open_session(root / "job", Cache(root / "cache"), backend=cluster).trace_set
    assert len(ts.loaded()) == JOB_RANKS
    return root


@pytest.fixture
def nccl_job(parsed_job: Path, tmp_path: Path) -> tuple[Path, Cache]:
    """The NCCL job and a cache of its frames only, this test's own."""
    shutil.copytree(parsed_job / "cache", tmp_path / "cache")
    cache = Cache(tmp_path / "cache")
    forget_results(cache)
    return parsed_job / "job", cache


@pytest.fixture(scope="module")
def parsed8(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("job8")
    write_job(root / "job", Dialect(), JobShape(ranks=8, steps=2, ops_per_step=4))
    assert len(open_session(root / "job", Cache(root / "cache")).trace_set.loaded()) == 8
    return root


@pytest.fixture
def job8(parsed8: Path, tmp_path: Path) -> tuple[Path, Cache]:
    """An 8-rank job and a cache of its frames only, this test's own."""
    shutil.copytree(parsed8 / "cache", tmp_path / "cache")
    cache = Cache(tmp_path / "cache")
    forget_results(cache)
    return parsed8 / "job", cache


@pytest.mark.shared
@pytest.mark.heavy
@pytest.mark.parametrize("case", ["pytorch_cpu_ddp_gloo_4", "trace_filter"])
def test_three_back_ends_one_report_on_shared(
    shared: Path, tmp_path: Path, cluster: DaskBackend, pool: PoolBackend, case: str
) -> None:
    """Every default analysis on real multi-rank traces (CPU-only gloo; GPU NCCL): the same
    report, number for number, in-process, in a worker process and on Dask."""
    cache = Cache(tmp_path)
    path = shared / "traces" / case
    on_dask = report(path, cache, cluster)
    forget_results(cache)
    here = report(path, cache, Backend())
    forget_results(cache)
    in_pool = report(path, cache, pool)
    assert here == on_dask == in_pool
    assert len(here["files"]) == 2 if case == "trace_filter" else 4


@pytest.mark.heavy
def test_memory_analyses_split_by_rank(tmp_path: Path) -> None:
    """The memory analyses (no shared multi-rank trace has memory events): made rank by rank
    on a generated 2-rank job with GPU memory events, the tables of every rank at once."""
    from hta_tui.synth import MemoryOptions, write_trace_dir

    write_trace_dir(tmp_path / "t", ranks=2, steps=2, kernels_per_step=10, memory=MemoryOptions())
    ts = open_session(tmp_path / "t", Cache(tmp_path / "c")).trace_set
    names = [a.name for a in registry.ANALYSES if a.frames == ("memory",)]
    assert len(names) >= 5 and all(registry.BY_NAME[n].scope == "rank" for n in names)
    options = registry.Options()
    at_once = registry.run(ts.frames(), names, options, frames=ts.frames)
    by_rank = split.run_split(ts, names, options, Backend())
    assert at_once["memory_events"].height > 0 and set(at_once["memory_events"]["rank"]) == {0, 1}
    for name, table in at_once.items():
        _same(by_rank[name], table, name)


def test_every_analysis_declares_how_it_splits() -> None:
    """Every analysis the report makes by default splits over ranks: rank-wise, or a rank
    part and a reduce part declared with it; only the app's own tables (made on demand, not
    by the report) and the findings (rules over the others' tables) are not reductions."""
    assert {a.scope for a in registry.ANALYSES} <= set(registry.SCOPES)
    reducing = {a.name for a in registry.ANALYSES if a.scope == "reduce"}
    assert {
        "gpu_kernel_breakdown",
        "frequent_cuda_kernel_sequences",
        "profiler_steps",
        "comm_comp_per_rank",
        "critical_path",
    } <= reducing
    for a in registry.ANALYSES:
        assert (a.scope == "reduce") == (a.reduce is not None), a.name
        if a.scope == "reduce":
            assert a.rank_part is not None, a.name
    whole = {a.name for a in registry.ANALYSES if a.default and a.scope == "job"}
    assert whole == {"findings"} and registry.BY_NAME["findings"].rank_part is not None


def _same(a: pl.DataFrame, b: pl.DataFrame, name: str) -> None:
    if a.is_empty() and b.is_empty():
        return
    assert_frame_equal(a, b, check_dtypes=False, rel_tol=1e-12, abs_tol=0), name


@pytest.mark.shared
@pytest.mark.heavy
def test_rank_by_rank_equals_every_rank_at_once(
    shared: Path, tmp_path: Path, cluster: DaskBackend, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every rank-wise and reducing analysis on a real 8-rank job (GPU kernels, NCCL,
    memcpy, syncs) made rank by rank on Dask's workers (each rank's tables, or its summary
    reduced here) gives the tables of the registry run over every rank at once; the
    reductions again with the options that change them: the plugin's distributed tables
    (its transfer is the shortest range over the ranks), HTA's rounding and kernel folding,
    one rank's kernel sequences, every step's critical path (the path across ranks too).
    (Rank by rank: these files are small enough to be batched otherwise.)"""
    monkeypatch.setattr(split, "BATCH_BYTES", 0)
    cache = Cache(tmp_path)
    ts = open_session(shared / "traces" / "param_dlrm_8rank", cache, backend=cluster).trace_set
    assert len(ts.loaded()) == 8
    split_ones = [a.name for a in registry.ANALYSES if a.scope in ("rank", "reduce")]
    reducing = [a.name for a in registry.ANALYSES if a.scope == "reduce"]
    variants = [
        (registry.Options(), [n for n in split_ones if registry.BY_NAME[n].default]),
        (
            registry.Options(
                tb_compat=True, hta_compat=True, num_kernels=3, rank=5, critical_path_steps="all"
            ),
            reducing,
        ),
    ]
    for options, names in variants:
        at_once = registry.run(
            ts.frames(), names, options, frames=ts.frames, meta=registry.trace_meta(ts)
        )
        stats = split.SplitRun()
        on_dask = split.run_split(ts, names, options, cluster, stats=stats)
        assert stats.rank_tasks == 8 and not stats.failed and not stats.here
        assert list(on_dask) == list(at_once)
        for name, table in at_once.items():
            _same(on_dask[name], table, name)
        assert sum(t.height for t in on_dask.values()) > 1000  # real tables, not empty ones
        across = on_dask["critical_path"].filter(pl.col("rank").is_null())
        assert across.height >= 1 and across["ranks_on_path"][0]  # the path across ranks
        assert on_dask["comm_wait_transfer"].height and on_dask["collectives"].height


def test_three_back_ends_one_report_on_many_ranks(
    nccl_job: tuple[Path, Cache],
    cluster: DaskBackend,
    pool: PoolBackend,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A job of many ranks parsed and analysed on Dask, in a worker process and in-process: one
    report, number for number; the report says which analyses the cluster did not make. A
    rank-wise table streamed rank part by rank part (as a row per launch is on a large job)
    is the same on each."""
    job, cache = nccl_job
    monkeypatch.setattr(split, "STREAM_BYTES", 0)  # every rank-wise table streamed
    only = [*JOB_ONLY, "idle_time_breakdown"]
    on_dask = report(job, cache, cluster, only)
    assert "not yet distributed" not in capsys.readouterr().err  # every one split by rank
    assert len(on_dask["files"]) == JOB_RANKS
    assert {r["status"] for r in on_dask["files"]} == {"loaded"}
    forget_results(cache)
    here = report(job, cache, Backend(), only)
    forget_results(cache)
    in_pool = report(job, cache, pool, only)
    assert here == on_dask == in_pool
    assert len({r["rank"] for r in here["idle_time_breakdown"]}) == JOB_RANKS
    assert len({r["rank"] for r in here["gpu_kernel_breakdown"]}) == JOB_RANKS
    assert len({r["rank"] for r in here["straggler_scores"]}) == JOB_RANKS
    # matched across the ranks: the late rank found
    assert [r["rank"] for r in on_dask["collective_stragglers"]] == [2]


def test_the_report_reads_no_frame_on_the_client(
    tmp_path: Path, pool: PoolBackend, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every analysis of the report on the process pool: the client reads no rank's frames
    (the ranks' tables and summaries come from the worker, the reductions and the findings'
    rules run on them), and the report is the one made in-process, number for number; the
    command's pool ends its workers after the round (they held a rank's freed memory through
    the reduction, the report's peak)."""
    from hta_tui.trace import model

    root = tmp_path / "job"
    write_job(root, Dialect(), JobShape(ranks=3, steps=2, ops_per_step=4))
    cache = Cache(tmp_path / "c")
    here = report(root, cache, Backend())
    forget_results(cache)
    read: list[tuple[int, str]] = []
    frame = model.RankData.frame
    client = os.getpid()

    def counted(self: model.RankData, name: str) -> pl.DataFrame:
        if os.getpid() == client:
            read.append((self.meta.get("rank"), name))
        return frame(self, name)

    monkeypatch.setattr(model.RankData, "frame", counted)
    in_pool = report(root, cache, pool)
    assert read == []
    assert in_pool == here
    assert pool.started  # (the app's: its workers stay for the next view's work)
    # the command's own pool: its workers end once the round is over (`PoolBackend.rest`)
    forget_results(cache)
    with PoolBackend(1, one_round=True) as once:
        once.remote_bytes = 0
        assert report(root, cache, once) == here
        assert not once.started and read == []
    assert {"findings", "critical_path", "collectives", "straggler_scores"} <= set(here)
    assert len(here["gpu_kernel_type_breakdown"]) and len(here["iterations"]) == 3


def test_the_json_report_holds_one_table_s_records_at_a_time(
    job8: tuple[Path, Cache], monkeypatch: pytest.MonkeyPatch
) -> None:
    """`report --json` writes each table, a long one a slice of rows at a time, as soon as
    its text is made (the whole document's records at once were 2.5 GB on the client at
    64 x 100 MB), and the text is the whole document's `orjson.dumps(..., OPT_INDENT_2)`,
    byte for byte."""
    from hta_tui import report_json

    job, cache = job8
    monkeypatch.setattr(report_json, "JSON_ROWS", 2)  # 8 ranks' rows: several slices
    out = _Writes()
    only = ["idle_time_breakdown", "kernel_duration_stats"]
    assert run_report(job, as_json=True, out=out, cache=cache, backend=Backend(), only=only) == 0
    doc = orjson.loads(out.getvalue())
    assert out.getvalue() == orjson.dumps(doc, option=orjson.OPT_INDENT_2).decode() + "\n"
    key = next(i for i, text in enumerate(out.seen) if '"idle_time_breakdown"' in text)
    rows = len(doc["idle_time_breakdown"])
    slices = out.seen[key + 1 : key + 1 + -(-rows // 2)]  # a write per slice of 2 rows
    row = "\n    {"  # (a record starts so, at its depth in the document)
    assert rows > 2 and all(text.count(row) <= 2 for text in slices)
    assert sum(text.count(row) for text in slices) == rows
    assert len(doc["kernel_duration_stats"]) and doc["scope"]


class _Writes(io.StringIO):
    """Each piece of text written."""

    def __init__(self) -> None:
        super().__init__()
        self.seen: list[str] = []

    def write(self, text: str) -> int:
        self.seen.append(text)
        return super().write(text)


def test_second_run_makes_nothing(
    job8: tuple[Path, Cache], cluster: DaskBackend, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Whole answers are read back per job (no frame read); without them each rank's kept
    tables are, and only a changed rank is made again (ranks one by one here, as large
    ranks are: small ones are batched, `test_small_ranks_run_in_batches`)."""
    monkeypatch.setattr(split, "BATCH_BYTES", 0)
    job, cache = job8
    ts = open_session(job, cache, backend=Backend()).trace_set
    opts, only = registry.Options(), ["idle_time_breakdown", "profiler_steps"]
    first = split.run_split(ts, only, opts, Backend(), cache_root=cache.root)
    again = split.SplitRun()
    ts = open_session(job, cache, backend=Backend()).trace_set  # a second report's
    second = split.run_split(ts, only, opts, Backend(), cache_root=cache.root, stats=again)
    assert again.job_hits == only and again.rank_tasks == 0 and not again.here
    assert all(not d._frames for d in ts.loaded().values())  # no frame read at all
    assert {k: v.to_dicts() for k, v in second.items()} == {
        k: v.to_dicts() for k, v in first.items()
    }
    shutil.rmtree(cache.root / split.JOBS_DIR)
    entry = ts.loaded()[5].entry
    shutil.rmtree(entry / RESULTS_DIR)  # rank 5 lost its kept tables
    ranks = split.SplitRun()
    third = split.run_split(ts, only, opts, Backend(), cache_root=cache.root, stats=ranks)
    assert ranks.rank_tasks == 1 and ranks.rank_hits == 7 * len(only)  # both split by rank
    assert third["idle_time_breakdown"].to_dicts() == first["idle_time_breakdown"].to_dicts()
    from hta_tui.api import TraceAnalysis  # the API over Dask: the same numbers

    ta = TraceAnalysis(job, cache=cache, dask=cluster)
    assert ta.table("idle_time_breakdown").to_dicts() == first["idle_time_breakdown"].to_dicts()
    # another option the analysis reads is another result
    other = split.SplitRun()
    changed = registry.Options(consecutive_kernel_delay_us=1)
    split.run_split(ts, only[:1], changed, Backend(), cache_root=cache.root, stats=other)
    assert other.rank_tasks == 8


def test_kept_findings_answer_only_the_options_they_were_made_with(
    job8: tuple[Path, Cache],
) -> None:
    """The findings read the other analyses' tables, made with every option: a kept answer
    made without `--hta-compat` (or with another delay) is not the answer with it. One was:
    its evidence kept the first run's step window (19.236 us, not HTA's 19.0)."""
    job, cache = job8
    ts = open_session(job, cache, backend=Backend()).trace_set
    made = {}
    for opts in (
        registry.Options(),
        registry.Options(hta_compat=True),
        registry.Options(consecutive_kernel_delay_us=1),
    ):
        stats = split.SplitRun()
        made[opts] = split.run_split(
            ts, ["findings"], opts, Backend(), cache_root=cache.root, stats=stats
        )
        assert "findings" not in stats.job_hits, opts
    again = split.SplitRun()
    kept = split.run_split(
        ts,
        ["findings"],
        registry.Options(hta_compat=True),
        Backend(),
        cache_root=cache.root,
        stats=again,
    )
    assert again.job_hits == ["findings"]
    assert (
        kept["finding_evidence"].to_dicts()
        == made[registry.Options(hta_compat=True)]["finding_evidence"].to_dicts()
    )


def test_scope_steps_found_rank_by_rank(job8: tuple[Path, Cache], cluster: DaskBackend) -> None:
    """The report's scope section, its steps found rank by rank on the workers (HTA's steps
    the union of the ranks', the plugin's each rank's own), says what it says when found
    over every rank's frames at once."""
    from hta_tui.analysis import coverage
    from hta_tui.report import table_scopes

    job, cache = job8
    ts = open_session(job, cache, backend=Backend()).trace_set
    names = ["idle_time_breakdown", "profiler_steps", "step_time_breakdown", "syncs", "kernel_view"]
    tables = {n: pl.DataFrame() for n in names}  # the steps depend on the names only
    options = registry.Options()
    spans = {r: {"span": "", "path": ts.selected(r).path.name} for r in ts.loaded()}
    at_once = coverage.table_scopes(
        list(registry.ANALYSES), tables, registry.TABLE_OWNER, ts.frames(), options, spans
    )
    assert {str(s) for t in at_once.values() for s in (t["steps"] or {})} == {
        str(r) for r in range(8)
    }
    assert table_scopes(ts, tables, options, cluster) == at_once


class DyingWorker(Backend):
    """A back-end whose worker dies under rank 3's work (after its own retry)."""

    def submit(self, fn: Any, *args: Any) -> Future[Any]:
        if args and getattr(args[0], "rank", None) == 3:
            fut: Future[Any] = Future()
            fut.set_exception(RuntimeError("worker tcp://10.0.0.7:4000 died"))
            return fut
        return super().submit(fn, *args)


_FLAKY: dict[int, int] = {}


def flaky_rank_tables(job: Any) -> Any:
    """Fails the first attempt at every rank, as a killed worker does."""
    _FLAKY[job.rank] = _FLAKY.get(job.rank, 0) + 1
    if _FLAKY[job.rank] == 1:
        raise OSError("worker killed")
    from hta_tui.exec.rank_work import rank_tables

    return rank_tables(job)


def test_failed_work_costs_only_its_retry(
    job8: tuple[Path, Cache], cluster: DaskBackend, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Dask retries a task whose worker died once; one that fails again is made here: the
    numbers are the same either way, and the rank's one-line reason is kept (ranks one by
    one, as large ranks are)."""
    monkeypatch.setattr(split, "BATCH_BYTES", 0)
    job, cache = job8
    ts = open_session(job, cache, backend=Backend()).trace_set
    only = ["idle_time_breakdown"]
    want = split.run_split(ts, only, registry.Options(), Backend())["idle_time_breakdown"]
    assert want.height
    forget_results(cache)
    monkeypatch.setattr(split, "rank_tables", flaky_rank_tables)
    _FLAKY.clear()
    retried = split.SplitRun()
    got = split.run_split(ts, only, registry.Options(), cluster, stats=retried)
    assert not retried.failed and set(_FLAKY.values()) == {2}  # each retried once
    assert got["idle_time_breakdown"].to_dicts() == want.to_dicts()
    monkeypatch.undo()
    monkeypatch.setattr(split, "BATCH_BYTES", 0)
    forget_results(cache)
    lost = split.SplitRun()
    got = split.run_split(ts, only, registry.Options(), DyingWorker(), stats=lost)
    assert lost.failed == {3: "RuntimeError: worker tcp://10.0.0.7:4000 died"}
    assert got["idle_time_breakdown"].to_dicts() == want.to_dicts()


def test_dask_missing_says_what_to_install(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Without distributed, `--dask` is one line naming the extra; the rest works."""
    from hta_tui import cli

    write_job(tmp_path / "t", Dialect(), JobShape(ranks=1, steps=1, ops_per_step=2))
    monkeypatch.setitem(sys.modules, "distributed", None)  # import fails as if not installed
    with pytest.raises(BackendError, match="pip install 'hta-tui\\[dask\\]'"):
        DaskBackend("local:1")
    rc = cli.main(["report", str(tmp_path / "t"), "--json", "--dask", "local:1"])
    err = capsys.readouterr().err
    assert rc == 2 and err.strip() == f"hta-tui: {INSTALL_HINT}"
    from hta_tui.app.app import run_app

    assert run_app(tmp_path / "t", cache=Cache(tmp_path / "c"), dask="tcp://h:8786") == 2
    assert capsys.readouterr().err.strip() == f"hta-tui: {INSTALL_HINT}"


def _held_rank_tables(marks: Path, held: int) -> Any:
    """`rank_tables` that says where it runs (a file per attempt: rank, attempt, the
    worker's pid) and, on its first attempt at rank `held`, waits there until its worker is
    killed: the kill lands while that task is known to be running. Made here so Dask pickles
    it by value (the workers cannot import the tests)."""

    def run(job: Any) -> Any:
        import os as _os
        import time as _time
        from pathlib import Path as _Path

        from hta_tui.exec.rank_work import rank_tables

        attempt = 1 + sum(1 for _ in _Path(marks).glob(f"{job.rank}-*.started"))
        mark = _Path(marks) / f"{job.rank}-{attempt}.started"
        mark.write_text(str(_os.getpid()))
        if job.rank == held and attempt == 1:
            deadline = _time.monotonic() + 60  # never reached: the test kills this process
            while _time.monotonic() < deadline:
                _time.sleep(0.01)
            raise RuntimeError("the held task was not killed")
        return rank_tables(job)

    return run


def _wait_for(path: Path, seconds: float) -> str:
    """The file's text once it exists (written by a worker), or AssertionError."""
    import time

    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if path.exists() and (text := path.read_text()):
            return text
        time.sleep(0.01)
    raise AssertionError(f"{path.name} never appeared")


def test_killed_worker_process_loses_nothing(
    job8: tuple[Path, Cache], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A LocalCluster of two worker processes, one killed (SIGKILL, as the OOM killer) while
    it runs a rank's work: the rank's work runs again on the other worker and every rank's
    tables arrive, the same as in-process; no worker process outlives the cluster (ranks
    one by one, as large ranks are)."""
    pytest.importorskip("distributed")
    monkeypatch.setattr(split, "BATCH_BYTES", 0)
    import contextlib
    import signal
    import threading

    import psutil

    job, cache = job8
    ts = open_session(job, cache, backend=Backend()).trace_set
    only = ["idle_time_breakdown", "profiler_steps"]
    want = split.run_split(ts, only, registry.Options(), Backend())
    forget_results(cache)
    marks = tmp_path / "marks"
    marks.mkdir()
    monkeypatch.setattr(split, "rank_tables", _held_rank_tables(marks, held=5))
    killed: list[int] = []

    def kill_when_held() -> None:
        pid = int(_wait_for(marks / "5-1.started", 60))
        os.kill(pid, signal.SIGKILL)
        killed.append(pid)

    before = {p.pid for p in psutil.Process().children(recursive=True)}

    def workers() -> list[psutil.Process]:
        """The processes the cluster started: not those here before it (a pool's
        forkserver) nor multiprocessing's resource tracker (it lives as long as this
        interpreter, whoever started it)."""
        out = []
        for p in psutil.Process().children(recursive=True):
            with contextlib.suppress(psutil.NoSuchProcess):  # one ending as we look
                if p.pid not in before and "resource_tracker" not in " ".join(p.cmdline()):
                    out.append(p)
        return out

    stats = split.SplitRun()
    with DaskBackend("local:2") as backend:
        started = workers()
        assert len(started) == 2
        killer = threading.Thread(target=kill_when_held, daemon=True)
        killer.start()
        got = split.run_split(ts, only, registry.Options(), backend, stats=stats)
        killer.join(60)
    assert killed and not stats.failed  # the kill landed; Dask ran the rank again
    again = int((marks / "5-2.started").read_text())
    assert again != killed[0]  # on another worker process
    for name, table in want.items():
        assert got[name].to_dicts() == table.to_dicts(), name
    _, alive = psutil.wait_procs([*started, *workers()], timeout=30)
    assert not alive, alive  # nothing leaked: not the killed one's replacement either


class CountingDask(DaskBackend):
    """A local cluster of threads that counts the tasks it is given."""

    def __init__(self) -> None:
        super().__init__("local:1", processes=False)
        self.tasks: list[str] = []

    def submit(self, fn: Any, *args: Any) -> Future[Any]:
        self.tasks.append(fn.__name__)
        return super().submit(fn, *args)


async def test_the_app_parses_on_the_cluster(tmp_path: Path, ui: Any) -> None:
    """`hta-tui PATH --dask ...`: the app's loads go through the back-end (every file parsed
    on the cluster's worker) and the overview lists them as ever."""
    pytest.importorskip("distributed")
    root = tmp_path / "job"
    write_job(root, Dialect(), JobShape(ranks=2, steps=1, ops_per_step=2))
    with CountingDask() as backend:
        app = ui.app(root, backend=backend)
        async with app.run_test(size=(100, 30)) as pilot:
            await ui.wait_until(pilot, lambda: len(app.trace_set.loaded()) == 2, what="2 ranks")
            await ui.settle(pilot)
        assert backend.tasks == ["_any_thread_worker"] * 2


def test_a_local_cluster_listens_on_this_machine_only(cluster: DaskBackend) -> None:
    """`--dask local` starts Dask's scheduler, workers and their HTTP servers: on loopback
    only (Dask binds its dashboard on every interface by default, even when told `None`)."""
    import psutil

    cluster.submit(int, "1").result()  # the cluster started
    listening = [
        c.laddr
        for c in psutil.Process().net_connections(kind="inet")
        if c.status == psutil.CONN_LISTEN
    ]
    assert listening, "the cluster's servers were not found"
    assert all(addr.ip == "127.0.0.1" for addr in listening), listening


#: The analyses that declare the events columns they read (Analysis.columns). The report
#: reduces them from each rank's summary now (scope="reduce"): their columns serve the runs
#: that make them in one process over every rank (`split._run_here`, as for a job-wide
#: analysis), checked here directly.
JOB_WIDE = [a.name for a in registry.ANALYSES if a.columns]


def _run_here(ts: Any, analyses: list[registry.Analysis], stats: split.SplitRun) -> Any:
    return split._run_here(ts, analyses, registry.Options(), split._ranks(ts), stats)


def _narrow_equals_whole(ts: Any, stats: split.SplitRun) -> dict[str, pl.DataFrame]:
    """The job-wide analyses through `run_split` (each rank's events read with the columns
    they declare), checked against the registry run over the whole frames."""
    narrow = _run_here(ts, registry.select(JOB_WIDE), stats)
    assert all(d.held("events") is None for d in ts.loaded().values())  # no whole frame read
    whole = registry.run(
        ts.frames(), JOB_WIDE, registry.Options(), frames=ts.frames, meta=registry.trace_meta(ts)
    )
    assert sorted(narrow) == sorted(whole)
    for name, table in whole.items():
        _same(narrow[name], table, name)
    return narrow


def test_job_wide_analyses_read_only_their_columns(job8: tuple[Path, Cache]) -> None:
    """The report's process reads each rank's events with only the columns the job-wide
    analyses declare (same tables); a column one needs but did not declare costs a second
    run on the whole frames, never its numbers."""
    job, cache = job8
    stats = split.SplitRun()
    made = _narrow_equals_whole(open_session(job, cache, backend=Backend()).trace_set, stats)
    assert not stats.wide and made["profiler_steps"].height >= 1
    too_few = [dataclasses.replace(a, columns=("idx",)) for a in registry.select(JOB_WIDE)]
    ts = open_session(job, cache, backend=Backend()).trace_set
    again = split.SplitRun()
    wide = _run_here(ts, too_few, again)
    assert again.wide and again.wide[0].startswith("ColumnNotFoundError")
    for name, table in made.items():
        _same(wide[name], table, name)


@pytest.mark.shared
@pytest.mark.parametrize("case", ["tracelens_b200_eager_nccl", "tracelens_mi300_ddp_resnet18"])
def test_job_wide_columns_suffice_on_shared(shared: Path, tmp_path: Path, case: str) -> None:
    """On real jobs (NCCL collectives with their metadata, ROCm kernels, ProfilerSteps) the
    declared columns are all the job-wide analyses read: no second run, the same tables."""
    cache = Cache(tmp_path)
    ts = open_session(shared / "traces" / case, cache, backend=Backend()).trace_set
    ts = open_session(shared / "traces" / case, cache, backend=Backend()).trace_set  # cached
    stats = split.SplitRun()
    made = _narrow_equals_whole(ts, stats)
    assert not stats.wide
    assert sum(t.height for t in made.values()) > 10


def test_small_ranks_run_in_batches(
    job8: tuple[Path, Cache], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Ranks of small files run their analyses together (a rank of a few dozen events cost
    ~0.25 s of fixed costs alone): the same tables as rank by rank, one task and one kept
    file per analysis for the batch (read back next time), and a batch whose work fails is
    made rank by rank here, each rank with its numbers and the batch's one-line reason."""
    job, cache = job8
    ts = open_session(job, cache, backend=Backend()).trace_set
    only = [
        "idle_time_breakdown", "kernel_view", "operator_stats", "syncs",
        "profiler_steps", "comm_comp_per_rank", "gpu_kernel_breakdown", "findings",
    ]  # fmt: skip
    opts = registry.Options()
    monkeypatch.setattr(split, "BATCH_BYTES", 0)
    alone = split.SplitRun()
    want = split.run_split(ts, only, opts, Backend(), stats=alone)
    assert alone.rank_tasks == 8 and alone.batches == 0
    monkeypatch.undo()
    forget_results(cache)
    batched = split.SplitRun()
    covered: split.Steps = {}
    got = split.run_split(
        ts, only, opts, Backend(), cache_root=cache.root, stats=batched, covered=covered
    )
    assert batched.rank_tasks == 1 and batched.batches == 1 and not batched.failed
    assert list(got) == list(want)
    for name, table in want.items():
        assert got[name].equals(table), name
    assert sum(t.height for t in got.values()) > 50
    # kept: one file per analysis for the batch, beside its first rank's frames
    kept = list(ts.loaded()[0].entry.glob(f"{RESULTS_DIR}/batch-*.arrow"))
    # (the findings: each rank's part; the tables their rules read, made with them; and
    # every rank's steps covered, handed back with the tables too)
    made = len(only) + len(batched.for_findings)
    assert len(kept) == made + 1 and sorted(covered) == list(range(8))
    shutil.rmtree(cache.root / split.JOBS_DIR)
    hits = split.SplitRun()
    again = split.run_split(ts, only, opts, Backend(), cache_root=cache.root, stats=hits)
    assert hits.rank_tasks == 0 and hits.rank_hits == 8 * made
    assert all(again[n].equals(t) for n, t in want.items())
    # a batch's work fails (a worker's memory, one rank's odd data): rank by rank here
    forget_results(cache)
    real = split.batch_tables

    def failing(jobs: tuple, data: Any = None) -> Any:
        raise MemoryError("the batch did not fit")

    monkeypatch.setattr(split, "batch_tables", failing)
    lost = split.SplitRun()
    none: split.Steps = {}
    got = split.run_split(ts, only, opts, Backend(), stats=lost, covered=none)
    assert lost.failed == {r: "MemoryError: the batch did not fit" for r in range(8)}
    assert all(got[n].equals(t) for n, t in want.items())
    assert real is not failing
    # ... and every rank still has its steps covered for the report's scope (made here)
    assert none == {} and split.rank_steps(ts, opts, Backend(), none) == covered


class _Counting(Backend):
    """A process pool's choice of where work runs (its `remote_bytes`, `rank_bytes`), the
    work itself made here, its tasks counted."""

    kind = "pool"
    remote_bytes = PoolBackend.remote_bytes
    rank_bytes = PoolBackend.rank_bytes

    def __init__(self) -> None:
        self.submitted = 0

    def submit(self, fn: Any, *args: Any) -> Future[Any]:
        self.submitted += 1
        return super().submit(fn, *args)


def test_the_pool_takes_many_small_files_not_a_few(
    job8: tuple[Path, Cache], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The workers take rank work worth a process start by the files' bytes and their count
    together (a folder of 1,000 tiny files is rank work, not bytes), counting only the ranks
    whose results are not kept; a job of a few small files stays in the caller."""
    pool = PoolBackend()
    assert pool.worth_workers(1, 20_000_000)  # bytes alone, as ever
    assert pool.worth_workers(100, 100 * 4_000)  # 100 tiny files
    assert not pool.worth_workers(8, 8 * 60_000)  # 8 small ranks (a real 8-rank job)
    assert not pool.worth_workers(2, 2 * 5_000_000)
    assert not pool.worth_workers(0, 0)  # nothing to make
    job, cache = job8
    ts = open_session(job, cache, backend=Backend()).trace_set
    opts = registry.Options()
    few = _Counting()
    want = split.run_split(ts, ["kernel_view"], opts, few, cache_root=cache.root)
    assert few.submitted == 0  # 8 small ranks: made in the caller
    forget_results(cache)
    monkeypatch.setattr(_Counting, "rank_bytes", _Counting.remote_bytes // 8)
    many, stats = _Counting(), split.SplitRun()
    got = split.run_split(ts, ["kernel_view"], opts, many, cache_root=cache.root, stats=stats)
    assert many.submitted == stats.batches == 1 and all(got[n].equals(t) for n, t in want.items())
    shutil.rmtree(cache.root / split.JOBS_DIR)  # every rank's results kept: no task
    split.run_split(ts, ["kernel_view"], opts, many, cache_root=cache.root)
    assert many.submitted == 1


def test_small_ranks_split_in_even_batches() -> None:
    """Consecutive small stored ranks go in batches of even sizes (two workers end
    together): of at most BATCH_RANKS up to BATCHES of them, then bigger ones (fewer parts
    for the client, less per rank in a worker); a big rank, or one whose frames only this
    process holds, alone; every rank once, in rank order."""

    def rank(i: int, size: int = 4_000, stored: bool = True) -> Any:
        return split._Rank(i, Path(f"/entry{i}"), {}, size, stored)

    def sizes(ranks: list) -> list[int]:
        units = split._units(ranks)
        assert [r.rank for unit in units for r in unit] == [r.rank for r in ranks]
        return [len(unit) for unit in units]

    assert split.BATCH_RANKS == 64
    assert sizes([rank(i) for i in range(200)]) == [50] * 4
    assert sizes([rank(i) for i in range(64)]) == [64]
    assert sizes([rank(i) for i in range(65)]) == [32, 33]
    assert sizes([rank(i) for i in range(1000)]) == [62, 63] * 8  # 16: a balance for two
    assert sizes([rank(i) for i in range(2000)]) == [125] * 16  # then bigger batches,
    assert sizes([rank(i) for i in range(10_000)]) == [250] * 40  # up to 256 ranks each
    mixed = [*map(rank, range(70)), rank(70, size=5_000_000), *map(rank, range(71, 74))]
    assert sizes([*mixed, rank(74, stored=False), rank(75)]) == [35, 35, 1, 3, 1, 1]


def test_a_long_table_is_read_one_rank_part_at_a_time(
    job8: tuple[Path, Cache], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A rank-wise table too long to hold (a row per kernel launch: 112 MB of Arrow at 64 x
    100 MB) is written rank part by rank part, JSON, text and CSV: the client holds one
    rank's part of it at a time, never the concatenation, and writes what the whole table
    writes, byte for byte."""
    import weakref

    from hta_tui import report_json
    from hta_tui.exec.parts import Part

    job, cache = job8
    monkeypatch.setattr(split, "BATCH_BYTES", 0)  # a part per rank (a batch is one part)
    only = ["cuda_kernel_launch_stats", "idle_time_breakdown", "kernel_duration_stats"]

    def outputs(tmp: Path, out: io.StringIO) -> tuple[str, str, dict[str, str]]:
        """The JSON (written to `out`), the text and the CSV files of the report."""
        text = io.StringIO()
        for doc, kw in ((out, {"as_json": True}), (text, {"rows": 3})):
            assert run_report(job, out=doc, cache=cache, backend=Backend(), only=only, **kw) == 0
        run_report(job, csv_dir=tmp, cache=cache, backend=Backend(), only=only)
        return out.getvalue(), text.getvalue(), {p.name: p.read_text() for p in tmp.iterdir()}

    whole = outputs(cache.root.parent / "csv-whole", io.StringIO())  # this small: frames
    assert orjson.loads(whole[0])["cuda_kernel_launch_stats"]
    forget_results(cache)
    held: list[tuple[str, weakref.ref]] = []  # every part's tables read
    tables = Part.tables

    def tracked(self: Part) -> dict[str, pl.DataFrame]:
        got = tables(self)
        held.extend((name, weakref.ref(df)) for name, df in got.items())
        return got

    class Watched(io.StringIO):
        """Notes, at each write, how many parts' tables are alive."""

        most = 0

        def write(self, text: str) -> int:
            Watched.most = max(Watched.most, sum(ref() is not None for _, ref in held))
            return super().write(text)

    monkeypatch.setattr(split, "STREAM_BYTES", 0)  # every rank-wise table streamed
    monkeypatch.setattr(report_json, "JSON_ROWS", 2)  # and sliced inside a rank's part
    monkeypatch.setattr(Part, "tables", tracked)
    streamed = outputs(cache.root.parent / "csv-streamed", Watched())
    assert streamed == whole
    read = [name for name, _ in held if name == "cuda_kernel_launch_stats"]
    assert len(read) >= 2 * 8  # each rank's part read, for its schema and for its rows
    assert Watched.most == 1  # one part at a time
    # small ranks in a batch: the batch's part (its ranks' rows in order) streamed the same
    monkeypatch.setattr(split, "BATCH_BYTES", backends.BATCH_BYTES)
    forget_results(cache)
    held.clear()
    assert outputs(cache.root.parent / "csv-batched", Watched()) == whole
    assert 2 <= len([n for n, _ in held if n == "cuda_kernel_launch_stats"]) < 2 * 8


def test_a_long_table_s_text_is_made_by_each_rank_s_task(
    job8: tuple[Path, Cache], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The JSON of a streamed table (a row per kernel launch: 60 MB of JSON on 8 x 100 MB):
    each rank's part of its text made by the rank's task (`rank_work.Texts`, on the worker),
    kept beside its results and joined by the client, which reads no part's rows for it
    then (a second report too); the same bytes as the client's own text of the frames, which
    it makes again for a text missing, damaged or made from other tables."""
    from hta_tui.exec.parts import Part

    job, cache = job8
    monkeypatch.setattr(split, "BATCH_BYTES", 0)  # a task per rank
    monkeypatch.setattr(split, "STREAM_BYTES", 0)  # every rank-wise table streamed
    monkeypatch.setattr(split, "HOLD_BYTES", 0)  # and held as its kept file (texts beside)
    name = "cuda_kernel_launch_stats"
    read: list[str] = []
    tables = Part.tables

    def counted(self: Part) -> dict[str, pl.DataFrame]:
        got = tables(self)
        read.extend(got)
        return got

    monkeypatch.setattr(Part, "tables", counted)

    def written() -> tuple[str, int]:
        """The report's JSON, and how many rank parts of the table were read for it."""
        read.clear()
        out = io.StringIO()
        only = [name, "kernel_duration_stats"]
        kw = {"cache": cache, "backend": Backend(), "only": only}
        assert run_report(job, out=out, as_json=True, **kw) == 0
        return out.getvalue(), read.count(name)

    made, reads = written()
    texts = sorted(cache.root.glob(f"*/*/{RESULTS_DIR}/{name}-*.{name}.*.text"))
    # (each part's schema read from the answer as it landed, `split._Landed`: no part read
    # again; a second report reads each once, for its schema)
    assert len(texts) == 8 and reads == 0
    kept = {t: t.read_bytes() for t in texts}
    assert written() == (made, 8)  # the second report: the texts kept
    for t in texts:
        t.unlink()
    from_frames, reads = written()  # (no text: each part read for its rows too)
    assert from_frames == made and reads == 16
    assert orjson.loads(made)[name]
    for t, blob in kept.items():
        t.write_bytes(blob)
    damaged = bytearray(kept[texts[3]])
    damaged[len(damaged) // 2] ^= 1
    texts[3].write_bytes(bytes(damaged))
    other = texts[5].read_bytes()  # a text of another rank's tables in rank 4's place
    texts[4].write_bytes(other)
    assert written() == (made, 8 + 2)


OPTIONS = registry.Options()


def test_a_text_that_fails_while_it_is_made_leaves_no_file(tmp_path: Path) -> None:
    """A kept file written as its pieces are made (a rank's text): one that fails on the way
    leaves nothing behind, not even its temporary file; the worker goes on without it."""

    def pieces() -> Iterator[bytes]:
        yield b"[1"
        raise ValueError("a piece that cannot be made")

    with pytest.raises(ValueError):
        rank_work._write_atomic(pieces(), tmp_path / "r" / "t.text")
    assert list((tmp_path / "r").iterdir()) == []

    def failing(name: str, frame: pl.DataFrame) -> Iterator[str]:
        yield "[1"
        raise ValueError("a piece that cannot be made")

    stats = registry.BY_NAME["kernel_duration_stats"]
    table = {"t": pl.DataFrame({"a": [1]})}
    rank_work._keep_texts(rank_work.Texts(failing, "v"), table, b"blob", tmp_path, stats, OPTIONS)
    assert list((tmp_path / RESULTS_DIR).iterdir()) == []


def test_a_rank_s_text_is_taken_only_where_its_rows_are_the_whole_table_s(
    tmp_path: Path,
) -> None:
    """`RankParts.pieces`: a part's kept text stands for its rows only where the whole table
    has the part's columns, in its order, of its types (the concatenation casts them: an
    integer column of one rank where another has floats is written as floats); elsewhere,
    and for a part held as bytes (no file beside), the part's rows cast to the whole's."""
    from hta_tui import report_json
    from hta_tui.exec.blobs import pack, pack_text
    from hta_tui.exec.parts import Part, streamed

    frames = [
        pl.DataFrame({"kernel": ["a", "b"], "us": [1.5, 2.0]}),
        pl.DataFrame({"kernel": ["c"], "us": [3]}),  # (Int64: the whole's Float64)
        pl.DataFrame({"kernel": ["d"], "us": [4.25]}),
        pl.DataFrame({"kernel": ["e"], "us": [5.5]}),
    ]
    parts = []
    for i, frame in enumerate(frames):
        blob = pack({"t": frame})
        if i == 3:  # small, held as bytes
            parts.append(Part(len(blob), blob=blob))
            continue
        path = tmp_path / f"t{i}.arrow"
        path.write_bytes(blob)
        text = report_json.part_text("t", frame)
        assert text is not None
        pieces = pack_text((piece.encode() for piece in text), blob)
        rank_work.text_path(path, "t", "v1").write_bytes(b"".join(pieces))
        parts.append(Part(len(blob), path=path, tail=blob[-4:]))
    table = streamed(["t"], parts)["t"]
    got = list(table.pieces("v1"))
    kinds = [type(piece).__name__ for piece in got]
    assert kinds == ["memoryview", "DataFrame", "memoryview", "DataFrame"]
    assert got[1]["us"].to_list() == [3.0]
    assert [type(p).__name__ for p in table.pieces("v2")] == ["DataFrame"] * 4  # other code
    whole = pl.concat(frames, how="diagonal_relaxed")
    joined = report_json.table_text(table.schema, got, 2)
    own = report_json.table_text(whole.schema, [whole], 2)
    assert joined is not None and own is not None
    text = "".join(p if isinstance(p, str) else bytes(p).decode() for p in joined)
    assert text == "".join(own)  # type: ignore[arg-type]
    assert orjson.loads(text)[2] == {"kernel": "c", "us": 3.0}


def test_findings_alone_read_no_frame(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """`--only findings`: the tables the rules read are made rank by rank as the others'
    (here, and on workers), not from every rank's frames on the client (8.2 GB at 64 x
    100 MB); the findings are those made over every rank's frames at once."""
    from hta_tui import report as report_module

    job, cache = tmp_path / "job", Cache(tmp_path / "c")
    write_job(job, Dialect(), JobShape(ranks=2, steps=2, ops_per_step=4))
    ts = open_session(job, cache, backend=Backend()).trace_set
    meta = registry.trace_meta(ts)
    at_once = registry.run(ts.frames(), ["findings"], frames=ts.frames, meta=meta)
    asked: list[int] = []
    getitem = registry.LazyEvents.__getitem__

    def counted(self: registry.LazyEvents, rank: int) -> pl.DataFrame:
        asked.append(rank)
        return getitem(self, rank)

    monkeypatch.setattr(registry.LazyEvents, "__getitem__", counted)
    alone = report(job, cache, Backend(), ["findings"])
    assert asked == []
    want = report_module.finding_records(at_once["findings"], at_once["finding_evidence"])
    assert [f["id"] for f in alone["findings"]] == [f["id"] for f in want]
    for got, row in zip(alone["findings"], want, strict=True):  # (sums: the last bit aside)
        assert got == {k: pytest.approx(v, rel=1e-12) for k, v in row.items()}, row["id"]
    (launch,) = [f for f in alone["findings"] if f["id"] == "launch.bound"]
    assert launch["severity"] != "abstain"  # its launches read, a row per rank


def test_a_batch_of_tiny_ranks_makes_shared_work_once(
    job8: tuple[Path, Cache], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A batch of small ranks costs a bounded number of calls of the per-rank work made over
    the batch at once, not one per rank (~500 polars queries a rank of a dozen events made
    10,000 tiny ranks unreportable): every rank's collective calls in one pass (they were
    made twice a rank), the kernel sequences of the one rank HTA's could be (the batch's
    smallest, not every rank's), no sync attribution on a rank without syncs. The tables
    stay those made rank by rank (`test_small_ranks_run_in_batches`)."""
    job, cache = job8
    ts = open_session(job, cache, backend=Backend()).trace_set
    calls: dict[str, int] = {}

    def spy(module: Any, name: str) -> None:
        real = getattr(module, name)

        def counted(*args: Any, **kwargs: Any) -> Any:
            calls[name] = calls.get(name, 0) + 1
            return real(*args, **kwargs)

        monkeypatch.setattr(module, name, counted)

    from hta_tui.analysis import aten_ops, collectives, kernel_owners, sequences, syncs

    spy(collectives, "_nccl_kernels")
    spy(sequences, "frequent_cuda_kernel_sequences")
    spy(syncs, "in_flight")
    spy(aten_ops, "kernel_links")
    spy(kernel_owners, "overlapping_on_stream")
    names = (
        "comm_comp_per_rank", "frequent_cuda_kernel_sequences", "syncs", "critical_path",
        "aten_op_kernels_and_delay", "kernel_attribution",
    )  # fmt: skip
    loaded = ts.loaded()
    jobs = tuple(
        rank_work.RankJob(r, str(d.entry), {}, names, registry.Options(), store=False)
        for r, d in sorted(loaded.items())
    )
    got = rank_work.batch_tables(jobs, dict(loaded))
    assert set(got) == set(names)
    assert calls.get("_nccl_kernels") == 1  # every rank's calls at once (24 on main)
    assert calls.get("frequent_cuda_kernel_sequences") == 1  # rank 0's only (8 on main)
    assert calls.get("in_flight", 0) == 0  # no rank here has a sync (8 on main)
    assert calls.get("kernel_links") == 1  # every rank's launches in ATen ops at once (8)
    aten = rank_work.unpack(got["aten_op_kernels_and_delay"])["aten_op_kernels_and_delay"]
    assert aten["rank"].n_unique() == 8  # each rank its own rows, from the one pass
    assert calls.get("overlapping_on_stream", 0) == 0  # every rank's at once (8 on main)
    owned = rank_work.unpack(got["kernel_attribution"])["kernel_attribution"]
    assert owned["rank"].to_list() == list(range(8)) and owned["kernels"].min() > 0
    sequences_part = rank_work.unpack(got["frequent_cuda_kernel_sequences"])
    assert set(sequences_part["frequent_cuda_kernel_sequences"]["rank"].to_list()) <= {0}


def test_the_kernel_sequences_are_made_once_a_job(
    job8: tuple[Path, Cache], monkeypatch: pytest.MonkeyPatch
) -> None:
    """HTA's kernel sequences are one rank's (`Analysis.one_rank`: the asked one, else the
    job's smallest): made by the one unit of work holding it, not for each batch's or each
    lone rank's smallest; the same tables as made over every rank at once, asked rank or
    not. Asked alone (`--only`), each unit still makes its own (its task keeps its ranks'
    steps covered too)."""
    from hta_tui.analysis import sequences

    job, cache = job8
    ts = open_session(job, cache, backend=Backend()).trace_set
    calls: list[int] = []
    real = sequences.frequent_cuda_kernel_sequences

    def counted(ranks: Any, *args: Any, **kwargs: Any) -> Any:
        calls.append(len(ranks))
        return real(ranks, *args, **kwargs)

    names = ["frequent_cuda_kernel_sequences", "kernel_view"]
    monkeypatch.setattr(split, "BATCH_RANKS", 3)  # batches of 3, 3 and 2 ranks
    for asked in (-1, 5, 9):
        opts = registry.Options(rank=asked)
        want = registry.run(ts.frames(), names, opts, frames=ts.frames)
        monkeypatch.setattr(sequences, "frequent_cuda_kernel_sequences", counted)
        for batch in (3, 1):  # batches, then each rank alone
            monkeypatch.setattr(split, "BATCH_BYTES", 10**9 if batch > 1 else 0)
            calls.clear()
            forget_results(cache)
            stats = split.SplitRun()
            got = split.run_split(ts, names, opts, Backend(), stats=stats)
            assert stats.rank_tasks == (3 if batch > 1 else 8), (asked, batch)
            assert calls == ([] if asked == 9 else [1])  # (rank 9: none holds it)
            for name, table in want.items():
                assert got[name].equals(table), (asked, batch, name)
        monkeypatch.setattr(sequences, "frequent_cuda_kernel_sequences", real)
    assert not want["frequent_cuda_kernel_sequences"].is_empty() or asked == 9
    monkeypatch.setattr(sequences, "frequent_cuda_kernel_sequences", counted)
    calls.clear()
    forget_results(cache)
    split.run_split(ts, names[:1], registry.Options(), Backend())
    assert len(calls) == 8  # asked alone: each rank alone its own (batch: its smallest)


def test_aten_ops_of_ranks_too_far_apart_go_one_rank_at_a_time(
    job8: tuple[Path, Cache], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The ATen ops of a batch are laid out one rank after another in time for one join; a
    layout that could pass Int64 (a broken file's clock decades off) makes them one rank at
    a time instead, with the same table."""
    from hta_tui.analysis import aten_ops

    job, cache = job8
    frames = open_session(job, cache, backend=Backend()).trace_set.frames()
    together = aten_ops.aten_op_kernels_and_delay(frames)
    monkeypatch.setattr(aten_ops, "_MAX_LAYOUT", 0)
    alone = aten_ops.aten_op_kernels_and_delay(frames)
    assert together.height > 8 and together["rank"].n_unique() == 8
    assert_frame_equal(alone, together)


def test_a_batch_makes_syncs_and_steps_at_once_as_each_rank_alone(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The syncs and the profiler steps of a batch of tiny ranks are made over the batch at
    once (one call sharing the batch's step tables and views, not one a rank: made alone
    they cost ~40 ms of CPU a tiny rank more), and each rank's tables are to the bit those
    of the rank made alone, on ranks of uneven shapes: two without syncs, two with host
    syncs (a rank's one verdict row and its several summary rows divide its step time as
    alone). (The ranks share their step names: HTA's view keeps the steps of the job's
    names, so ranks with other names see other views in a batch than alone.)"""
    from hta_tui.analysis import sync_summary
    from hta_tui.synth.files import write_trace
    from hta_tui.synth.sync_story import make_sync_story

    job = tmp_path / "job"
    write_job(job, Dialect(), JobShape(ranks=2, steps=2, ops_per_step=2))
    for rank, steps in ((2, 2), (3, 2)):
        story = make_sync_story(steps=steps, hook_markers=rank == 3)
        story["distributedInfo"]["rank"] = rank
        write_trace(story, job / f"rank-{rank}.json")
    ts = open_session(job, Cache(tmp_path / "cache"), backend=Backend()).trace_set
    loaded = ts.loaded()
    assert sorted(loaded) == [0, 1, 2, 3]
    calls = {"n": 0}
    real = sync_summary.sync_tables

    def counted(*args: Any, **kwargs: Any) -> Any:
        calls["n"] += 1
        return real(*args, **kwargs)

    monkeypatch.setattr(sync_summary, "sync_tables", counted)
    from hta_tui.analysis import syncs as syncs_module

    looked = []
    real_rank = syncs_module.rank_syncs
    monkeypatch.setattr(
        syncs_module,
        "rank_syncs",
        lambda events, *a, **k: looked.append(events) or real_rank(events, *a, **k),
    )
    names = ("syncs", "profiler_steps")
    for options in (registry.Options(), registry.Options(tb_compat=True, hta_compat=True)):
        jobs = tuple(
            rank_work.RankJob(r, str(d.entry), {}, names, options, store=False)
            for r, d in sorted(loaded.items())
        )
        calls["n"] = 0
        looked.clear()
        got = rank_work.batch_tables(jobs, dict(loaded))
        assert calls["n"] == 1  # every rank's syncs at once (4 on main)
        # only the ranks that may sync are looked at one by one (all 4 on main)
        assert [id(e) for e in looked] == [id(loaded[r].events) for r in (2, 3)]
        alone = [rank_work.rank_tables(j, loaded[j.rank]) for j in jobs]
        for name in names:
            pieces = rank_work.each_rank(rank_work.unpack(got[name]))
            assert len(pieces) == 4
            for mine, theirs in zip(pieces, alone, strict=True):
                theirs = rank_work.unpack(theirs[name])
                assert list(mine) == list(theirs)
                for table, df in theirs.items():
                    if table == "profiler_steps":  # the batch's distinct steps, at its first
                        continue
                    assert mine[table].height == df.height, (name, table)
                    assert_frame_equal(mine[table], df, check_exact=True)
        syncs = pl.concat([rank_work.unpack(a["syncs"])["syncs"] for a in alone])
        assert set(syncs["rank"]) == {2, 3} and syncs.height >= 8  # real syncs, two ranks
        summary = pl.concat([rank_work.unpack(a["syncs"])["sync_summary"] for a in alone])
        assert summary.filter(pl.col("rank") == 3).height > 1
        assert summary["step_pctg"].drop_nulls().len() == summary.height
        first = rank_work.each_rank(rank_work.unpack(got["profiler_steps"]))[0]
        steps = first["profiler_steps"]
        every = pl.concat([rank_work.unpack(a["profiler_steps"])["profiler_steps"] for a in alone])
        assert steps["step"].to_list() == sorted(set(every["step"].to_list()))


def test_a_batch_makes_the_gpu_metrics_and_series_at_once_as_each_rank_alone(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The GPU metrics, the utilization series and the four-metric series of a batch of tiny
    ranks are made over the batch at once (no per-rank function called: ~25 queries a rank
    on main, about half of them per device) and every rank's rows are to the bit those of
    the rank made alone, on ranks of uneven shapes: one whose kernels run on two devices
    (its span-divided figures divided as times the inverse, as polars does on a rank with
    several devices), two with blocks per SM and occupancy, one with neither."""
    from hta_tui.analysis import gpu_metric_series, gpu_metrics

    job = tmp_path / "job"
    for i, path in enumerate(write_job(job, Dialect(), JobShape(ranks=4, steps=3, ops_per_step=8))):
        trace = orjson.loads(path.read_bytes())
        kernels = [e for e in trace["traceEvents"] if e.get("cat") == "kernel"]
        for k, event in enumerate(kernels):
            if i in (1, 2):
                event["args"] |= {"blocks per SM": 0.4 + k % 5, "est. achieved occupancy %": 7 * k}
            if i == 1 and k % 2:
                event["args"]["device"] = 5
        path.write_bytes(orjson.dumps(trace))
    loaded = open_session(job, Cache(tmp_path / "cache"), backend=Backend()).trace_set.loaded()
    assert sorted(loaded) == [0, 1, 2, 3]
    per_rank = {
        (gpu_metrics, "rank_gpu_metrics"),
        (gpu_metrics, "rank_utilization_series"),
        (gpu_metric_series, "rank_metric_series"),
    }
    calls = {"n": 0}
    for module, name in per_rank:
        real = getattr(module, name)

        def counted(*args: Any, _real: Any = real, **kwargs: Any) -> Any:
            calls["n"] += 1
            return _real(*args, **kwargs)

        monkeypatch.setattr(module, name, counted)
    names = ("gpu_metrics", "gpu_metric_series")
    jobs = tuple(
        rank_work.RankJob(r, str(d.entry), {}, names, registry.Options(), store=False)
        for r, d in sorted(loaded.items())
    )
    got = rank_work.batch_tables(jobs, dict(loaded))
    assert calls["n"] == 0  # 16 on main: each function on each rank (the series twice)
    alone = [rank_work.rank_tables(j, loaded[j.rank]) for j in jobs]
    for name in names:
        together = rank_work.unpack(got[name])
        assert list(together) == list(rank_work.unpack(alone[0][name]))
        for table, df in together.items():
            each = pl.concat([rank_work.unpack(a[name])[table] for a in alone], how="diagonal")
            assert_frame_equal(df, each, check_exact=True)
    metrics = rank_work.unpack(got["gpu_metrics"])["gpu_metrics"]
    assert metrics.filter(pl.col("rank") == 1)["device"].to_list() == [1, 5]
    assert metrics["est_sm_efficiency_pct"].drop_nulls().len() == 3  # ranks 1 (x2) and 2
    series = rank_work.unpack(got["gpu_metric_series"])["gpu_metric_series"]
    assert series["rank"].unique().to_list() == [0, 1, 2, 3] and series.height > 20
    assert series["occupancy_pct"].drop_nulls().len() > 0


@pytest.mark.parametrize("alone", [False, True])
def test_a_batch_keeps_each_ranks_steps_for_the_reports_scope(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, alone: bool
) -> None:
    """A batch of small ranks that makes tables makes every rank's steps covered too, while
    its step tables are at hand, keeps them in one file for the batch and hands them back
    with its tables: the report's scope (`rank_steps`, next) then makes none and reads no
    file (on main: every rank's again, alone, ~5x the CPU; then a file per rank written
    and read back), and a second report reads the batch's one file, no frame. A rank made
    alone (a big one) keeps its own file, as before. What they give is what each rank
    makes when nothing is kept."""
    write_job(tmp_path / "job", Dialect(), JobShape(ranks=3, steps=3, ops_per_step=2))
    cache = Cache(tmp_path / "cache")
    ts = open_session(tmp_path / "job", cache, backend=Backend()).trace_set
    stats = split.SplitRun()
    if alone:
        monkeypatch.setattr(split, "BATCH_BYTES", 0)
    covered: split.Steps = {}
    split.run_split(
        ts, ["kernel_view"], registry.Options(), Backend(), stats=stats, covered=covered
    )
    assert (stats.batches, stats.rank_tasks) == ((0, 3) if alone else (1, 1))
    own = list(cache.root.glob(f"*/*/{RESULTS_DIR}/{rank_work.STEPS}-*.arrow"))
    batch = list(cache.root.glob(f"*/*/{RESULTS_DIR}/batch-{rank_work.STEPS}-*.arrow"))
    assert (len(own), len(batch)) == ((3, 0) if alone else (0, 1))
    made: list[str] = []
    read: list[Path] = []
    for module, name in [(rank_work, "_steps_blob"), (split, "_steps_blob"),
                         (rank_work, "_batch_steps")]:  # fmt: skip
        real = getattr(module, name)

        def counted(*args: Any, real: Any = real, name: str = name) -> Any:
            made.append(name)
            return real(*args)

        monkeypatch.setattr(module, name, counted)
    reads = split.read_cached
    monkeypatch.setattr(split, "read_cached", lambda path: read.append(path) or reads(path))
    held = split.rank_steps(ts, registry.Options(), Backend(), covered)
    assert sorted(held) == [0, 1, 2] and held[0]["every"] == [1, 2, 3]
    assert (made, read) == ([], [])  # handed back: nothing made, nothing read
    again = open_session(tmp_path / "job", cache, backend=Backend()).trace_set  # a 2nd report
    kept = split.rank_steps(again, registry.Options(), Backend())
    assert kept == held and made == [] and len(read) == (3 if alone else 1)
    assert all(data.held("events") is None for data in again.loaded().values())  # no frame
    forget_results(cache)
    assert split.rank_steps(ts, registry.Options(), Backend()) == kept
    assert made == (["_steps_blob"] * 3 if alone else ["_batch_steps"])


def test_a_read_only_cache_hands_each_ranks_steps_back(tmp_path: Path) -> None:
    """A cache whose results cannot be kept (`RankJob.store` False) still gets every
    rank's steps covered with a batch's tables: the report's scope has them without a
    second task, and nothing is written."""
    write_job(tmp_path / "job", Dialect(), JobShape(ranks=3, steps=3, ops_per_step=2))
    ts = open_session(tmp_path / "job", Cache(tmp_path / "cache"), backend=Backend()).trace_set
    options = registry.Options()
    units = split._units(split._ranks(ts))
    assert [len(u) for u in units] == [3]
    jobs = split._jobs(units[0], ("kernel_view", rank_work.STEPS), options)
    got = rank_work.batch_tables(tuple(dataclasses.replace(j, store=False) for j in jobs))
    assert not list(tmp_path.glob(f"cache/*/*/*/{RESULTS_DIR}/*"))
    steps = rank_work.unpack_batch_steps(got[rank_work.STEPS], [0, 1, 2])
    assert steps == split.rank_steps(ts, options, Backend())


class _Warmed(Backend):
    """The in-process back-end, counting `warm` calls."""

    def __init__(self) -> None:
        self.warmed = 0

    def warm(self) -> None:
        self.warmed += 1


def test_workers_warmed_only_when_rank_work_lies_ahead(tmp_path: Path) -> None:
    """The report starts its workers before reading the summaries (`Backend.warm`) when a
    rank's steps covered are not kept for its options (its work will run), and not when a
    report with every result kept needs none (a warm report starts no process)."""
    from hta_tui.report import build_tables

    write_job(tmp_path / "job", Dialect(), JobShape(ranks=3, steps=2, ops_per_step=2))
    cache = Cache(tmp_path / "cache")
    ts = open_session(tmp_path / "job", cache, backend=Backend()).trace_set
    plain, compat = registry.Options(), registry.Options(tb_compat=True)
    backend = _Warmed()
    assert split.work_ahead(ts, plain, backend) and split.work_ahead(ts, compat, backend)
    build_tables(ts, names=["kernel_view"], options=plain, backend=backend, cache_root=cache.root)
    assert backend.warmed == 1
    # every rank's steps kept for these options: nothing ahead, nothing started
    assert not split.work_ahead(ts, plain, backend) and split.work_ahead(ts, compat, backend)
    build_tables(ts, names=["kernel_view"], options=plain, backend=backend, cache_root=cache.root)
    assert backend.warmed == 1
    big = PoolBackend()  # (files under its remote_bytes: the work stays in this process)
    assert not split.work_ahead(ts, compat, big)
    forget_results(cache)
    assert split.work_ahead(ts, plain, backend)


def test_the_files_table_and_scope_are_made_while_other_work_runs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With rank work ahead for the workers, the files' summaries are read and their table
    made on a thread meanwhile, and the scope is made on a thread while the tables are
    written; without (every result kept), the files table here: the same document."""
    import threading

    from hta_tui import report as report_module

    write_job(tmp_path / "job", Dialect(), JobShape(ranks=3, steps=2, ops_per_step=2))
    cache = Cache(tmp_path / "cache")
    where: list[str] = []
    for name in ("_files_table", "kept_scope_text"):
        real = getattr(report_module, name)

        def spied(*args: Any, real: Any = real, name: str = name) -> Any:
            where.append(f"{name} {threading.current_thread().name.split('_')[0]}")
            return real(*args)

        monkeypatch.setattr(report_module, name, spied)
    docs = []
    for _ in range(2):
        out = io.StringIO()
        assert (
            run_report(tmp_path / "job", as_json=True, out=out, cache=cache, backend=_Warmed()) == 0
        )
        docs.append(out.getvalue())
    assert where == [
        "_files_table files-table", "kept_scope_text scope",  # work ahead: meanwhile
        "_files_table MainThread", "kept_scope_text scope",  # every result kept
    ]  # fmt: skip
    assert docs[0] == docs[1] and orjson.loads(docs[0])["files"]


EARLY_SCRIPT = """
import sys
from hta_tui.exec import backends

def early(path, cache_root):
    print("polars" in sys.modules, "hta_tui.analysis.registry" in sys.modules, cache_root)
    raise SystemExit(0)

backends.start_early = early
from hta_tui.cli import main
main(["report", sys.argv[1], "--json", *sys.argv[2:]])
"""


def test_the_report_starts_its_workers_before_its_own_imports(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`report` starts the pool's forkserver (the workers' imports, on the other core) before
    it imports polars or an analysis itself (`backends.start_early`), when the files will
    likely need workers: they are worth them (count and bytes), and a file has no rank
    results kept (no entry at all: its parse needs them too; --no-cache: nothing is kept).
    Not for a folder this small, nor for one whose results are kept, nor for small files
    (run in batches: their steps are kept beside the batch's first rank only)."""
    from hta_tui.exec import backends

    job, cache = tmp_path / "job", Cache(tmp_path / "c")
    write_job(job, Dialect(), JobShape(ranks=3, steps=2, ops_per_step=2))
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path), "HTA_TUI_CACHE": "/nowhere"}
    for extra, root in (([], "/nowhere"), (["--no-cache"], "None")):
        out = subprocess.run(
            [sys.executable, "-c", EARLY_SCRIPT, str(job), *extra],
            capture_output=True,
            text=True,
            check=True,
            env=env,
        )
        assert out.stdout.split() == ["False", "False", root]
    started: list[tuple[str, ...]] = []
    monkeypatch.setattr(backends, "prepare_pool", lambda preload: started.append(preload))
    root = cache.root.parent
    assert not backends.start_early(job, root) and not started  # 3 tiny files: not worth it
    monkeypatch.setattr(PoolBackend, "remote_bytes", 1)
    # small files run in batches, whose kept steps the look cannot tell: not started
    assert not backends.start_early(job, root) and not started
    monkeypatch.setattr(backends, "BATCH_BYTES", 0)
    monkeypatch.setattr(split, "BATCH_BYTES", 0)  # (each rank alone, its steps in its entry)
    assert backends.start_early(job, root) and backends.start_early(job, None)  # no entry
    assert started == [backends.WORK_MODULES] * 2
    report(job, cache, Backend())  # every rank's results kept
    assert not backends.start_early(job, root)
    assert backends.start_early(job, None)
    forget_results(cache)
    assert backends.start_early(job / "rank-1.pt.trace.json", root)  # (a file alone)
    assert len(started) == 4


def test_a_workers_first_rank_imports_nothing(tmp_path: Path) -> None:
    """A pool worker forks from the forkserver, which imported `WORK_MODULES` (and made
    what `worker_start` makes): its first rank's work (every rank-wise analysis, the
    findings' part, the steps covered) imports no module of its own (on main each worker
    imported the findings, the steps' coverage and numpy's masked arrays on its first rank:
    ~80 ms of CPU a worker), and finds the results' key made."""
    write_job(tmp_path / "job", Dialect(), JobShape(ranks=1, steps=2, ops_per_step=2))
    ts = open_session(tmp_path / "job", Cache(tmp_path / "cache"), backend=Backend()).trace_set
    r = split._ranks(ts)[0]
    names = [
        a.name
        for a in registry.ANALYSES
        if (a.scope in ("rank", "reduce") and not a.inputs)
        or (a.name == split.FINDINGS and a.rank_part is not None)
    ]
    code = f"""
import importlib, sys
from hta_tui.exec.backends import WORK_MODULES
from hta_tui.trace.pool import PRELOAD
for m in [*PRELOAD, *WORK_MODULES]:
    importlib.import_module(m)
from hta_tui.analysis import registry
from hta_tui.exec import rank_work
before = set(sys.modules)
made = rank_work.code_version.cache_info().currsize
job = rank_work.RankJob(0, {str(r.entry)!r}, {r.meta!r}, (*{names!r}, rank_work.STEPS),
                        registry.Options(), store=False)
rank_work.rank_tables(job)
print(made, sorted(set(sys.modules) - before))
"""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, env=env
    )
    assert out.stdout.strip() == "1 []"


def _uneven_kernel_job(job: Path) -> None:
    """Four tiny ranks whose kernel views differ in shape: rank 0 one kernel (a one-row
    table, its total of an odd number of ns: polars divides it exactly alone, a longer
    column as times the inverse), rank 1 no kernel, rank 2 launch properties, blocks per SM
    and occupancy and a kernel with no runtime call, rank 3 a kernel with no runtime call
    and a GPU-side ProfilerStep (the plugin's two main threads: its strays counted twice).
    Rank 0 has one step, rank 1 none (one step "0" over its CPU ops, its computation
    theirs: it has no kernel), ranks 2 and 3 three steps each with NCCL kernels."""
    odd = next(n for n in range(1_000_000, 1_001_000) if n / 1000 != n * (1 / 1000))
    for i, path in enumerate(write_job(job, Dialect(), JobShape(ranks=4, steps=3, ops_per_step=8))):
        trace = orjson.loads(path.read_bytes())
        events = trace["traceEvents"]
        kernels = [e for e in events if e.get("cat") == "kernel"]
        if i == 0:  # and one step: its computation/communication table one row
            kernels[0]["dur"] = odd / 1000
            events[:] = [e for e in events if e.get("cat") != "kernel" or e is kernels[0]]
            events[:] = [e for e in events if e["name"] not in ("ProfilerStep#2", "ProfilerStep#3")]
        if i == 1:  # and no ProfilerStep: one step "0" over its CPU ops
            events[:] = [
                e
                for e in events
                if e.get("cat") != "kernel" and not e["name"].startswith("ProfilerStep#")
            ]
        if i == 2:
            for k, event in enumerate(kernels):
                event["args"] |= {
                    "blocks per SM": 0.4 + k % 5,
                    "est. achieved occupancy %": 7 * k,
                    "grid": [k % 3 + 1, 1, 1],
                    "block": [128, 1, 1],
                    "registers per thread": 32 + k % 2,
                    "shared memory": 1024 * (k % 2),
                }
        if i in (2, 3):  # a kernel whose runtime call is gone: outside any operator
            lost = kernels[1]["args"]["correlation"]
            events[:] = [
                e
                for e in events
                if not (e.get("cat") == "cuda_runtime" and e["args"]["correlation"] == lost)
            ]
        if i == 3:
            step = next(e for e in events if e["name"].startswith("ProfilerStep#"))
            gpu = {**step, "cat": "gpu_user_annotation", "pid": 0, "tid": 7}
            events.append(gpu | {"args": {"device": 0, "stream": 7}})
        path.write_bytes(orjson.dumps(trace))


def test_a_batch_makes_the_kernel_views_at_once_as_each_rank_alone(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The plugin's kernel views (by kernel, by kernel and operator), the computation /
    communication per rank and step, the critical path's launch queues and HTA's shared
    views (every HTA analysis's start) of a batch of tiny ranks are made over the batch at
    once (no per-rank table: ~25, ~36, ~17 and ~16 queries a rank on main) and every rank's
    rows are to the bit those of the rank made alone, in both modes (HTA's rounding too),
    on ranks of uneven shapes (`_uneven_kernel_job`)."""
    from hta_tui.analysis import comm_overview, comm_plugin, hta_view, kernel_view
    from hta_tui.analysis.critical_path import graph as cp_graph

    _uneven_kernel_job(tmp_path / "job")
    loaded = open_session(tmp_path / "job", Cache(tmp_path / "cache")).trace_set.loaded()
    assert sorted(loaded) == [0, 1, 2, 3]
    calls = {"n": 0}
    for name in ("rank_kernel_table", "rank_kernel_op_table"):
        real = getattr(kernel_view, name)

        def counted(*args: Any, _real: Any = real, **kwargs: Any) -> Any:
            calls["n"] += 1
            return _real(*args, **kwargs)

        monkeypatch.setattr(kernel_view, name, counted)
    real_steps = comm_plugin.steps_of

    def steps_of(*args: Any, **kwargs: Any) -> Any:
        calls["n"] += 1
        return real_steps(*args, **kwargs)

    monkeypatch.setattr(comm_overview, "steps_of", steps_of)
    real_queue = cp_graph.queue_at

    def queue_at(*args: Any, **kwargs: Any) -> Any:
        calls["n"] += 1
        return real_queue(*args, **kwargs)

    monkeypatch.setattr(cp_graph, "queue_at", queue_at)
    real_view = hta_view.build_rank_view

    def build_rank_view(*args: Any, **kwargs: Any) -> Any:
        calls["n"] += 1
        return real_view(*args, **kwargs)

    monkeypatch.setattr(hta_view, "build_rank_view", build_rank_view)
    names = ("kernel_view", "kernel_view_by_op", "comm_comp_per_rank", "critical_path")
    # (the path across ranks' graph tables: their row order differs between two runs)
    unordered = {"path_graph_edges", "path_graph_calls"}
    for options in (registry.Options(), registry.Options(tb_compat=True, hta_compat=True)):
        jobs = tuple(
            rank_work.RankJob(r, str(d.entry), {}, names, options, store=False)
            for r, d in sorted(loaded.items())
        )
        calls["n"] = 0
        got = rank_work.batch_tables(jobs, dict(loaded))
        assert calls["n"] == 0  # on main: each table on each rank (16)
        alone = [rank_work.rank_tables(j, loaded[j.rank]) for j in jobs]
        for name in names:
            together = rank_work.unpack(got[name])
            for table, df in together.items():
                if table in unordered:
                    continue
                each = [rank_work.unpack(a[name])[table] for a in alone]
                assert_frame_equal(df, pl.concat(each, how="diagonal"), check_exact=True)
        if not options.tb_compat:  # (the plugin's own table, its rules: rank by rank)
            per_step = rank_work.unpack(got["comm_comp_per_rank"])["comm_comp_per_rank"]
            steps = per_step.group_by("rank", maintain_order=True).agg("step")
            assert steps.rows() == [
                (0, ["1", "all"]),
                (1, ["0", "all"]),
                (2, ["1", "2", "3", "all"]),
                (3, ["1", "2", "3", "all"]),
            ]
            assert per_step.filter(pl.col("rank") == 1)["computation"][0] > 0  # its CPU ops
            assert per_step.filter(pl.col("rank") == 2)["communication"].max() > 0  # NCCL
            edges = rank_work.unpack(got["critical_path"])["critical_path_edges"]
            launched = edges.filter(pl.col("type").str.contains("launch"))  # (queues read)
            assert set(launched["rank"]) >= {0, 2, 3}
    # HTA's shared views of fresh frames (none kept yet): built over the ranks at once
    frames = {r: d.events.clone() for r, d in loaded.items()}
    steps = hta_view.profiler_step_names(frames)
    for compat in (False, True):
        calls["n"] = 0
        with hta_view.views_at_once():  # (as in a batch's task)
            views = hta_view.hta_view(frames, hta_compat=compat, columns=("pid", "tid"))
        assert calls["n"] == 0  # 4 on main
        for rank, view in views.items():
            alone = real_view(frames[rank], steps, hta_compat=compat, columns=("pid", "tid"))
            assert_frame_equal(view, alone, check_exact=True)
        assert views[2]["kernel_type"].drop_nulls().len() > 0 and views[1].is_empty()
        by_op = rank_work.unpack(got["kernel_view_by_op"])["kernel_view_by_op"]
        assert set(by_op["rank"]) == {0, 2, 3}  # rank 1 has no kernel
        one = by_op.filter(pl.col("rank") == 0)
        assert one.height == 1 and one["total (us)"].item() * 1000 != one["total (us)"].item()
        odd = round(one["total (us)"].item() * 1000)
        assert one["total (us)"].item() == odd / 1000  # divided exactly, as alone
        assert by_op.filter(pl.col("rank") == 2)["grid"].n_unique() > 1
        roots = by_op.filter(pl.col("operator") == "CallTreeRoot")
        assert set(roots["rank"]) >= {2, 3}
        kernels = by_op.filter(pl.col("rank") == 2)["calls"].sum()  # as many as rank 3's
        counted = by_op.filter(pl.col("rank") == 3)["calls"].sum()
        # the plugin's two main threads on rank 3: its strays (in its mode every kernel:
        # it links no `cuda_runtime` call) counted twice
        assert counted == kernels * (2 if options.tb_compat else 1)


def test_each_rank_inserts_a_rank_column_that_aggregates_as_a_literals(tmp_path: Path) -> None:
    """`each_rank` inserts its rank column (no query per rank and table) and flags it sorted,
    as a literal's column is: a group-by on `rank` over the concatenation then takes the same
    path, so the step-time std (a float aggregation) is the same to the bit as with the
    rank selected in as a literal (unflagged, 6 of these 8 ranks' differed in the last bit,
    as three shared cases' did)."""
    from hta_tui.analysis import per_rank, step_breakdown, step_time_stats

    write_job(tmp_path / "job", Dialect(), JobShape(ranks=8, steps=3, ops_per_step=4))
    ranks = open_session(tmp_path / "job", Cache(tmp_path / "cache")).trace_set.frames()
    table = step_breakdown.rank_breakdown
    inserted = per_rank.each_rank(ranks, table)
    selected = pl.concat(
        [table(ev).select(pl.lit(r, pl.Int64).alias("rank"), pl.all()) for r, ev in ranks.items()]
    )
    assert inserted.height == 24 and inserted["rank"].n_unique() == 8  # three steps a rank
    assert_frame_equal(inserted, selected, check_exact=True)
    assert_frame_equal(
        step_time_stats.step_time_stats(inserted),
        step_time_stats.step_time_stats(selected),
        check_exact=True,
    )


def _step_edge_job(job: Path) -> None:
    """Six tiny ranks whose profiler steps differ in shape (`_uneven_kernel_job`'s four,
    and two more): rank 4 no host op at all (no step), rank 5 fractional timestamps and its
    last step launching no GPU work; rank 2's last step launches under 80 % of the step
    before's GPU ops (the plugin's incomplete-capture rule), rank 3 a launch outside any
    step before its first step's GPU work (the plugin's `prev_step_end_time`)."""
    _uneven_kernel_job(job)
    shape = JobShape(ranks=6, steps=3, ops_per_step=8)
    for i in (4, 5):
        path = job / f"rank-{i}.pt.trace.json"
        path.write_bytes(trace_bytes(Dialect(), shape, i))
    for i in (2, 3, 4, 5):
        path = job / f"rank-{i}.pt.trace.json"
        trace = orjson.loads(path.read_bytes())
        events = trace["traceEvents"]
        step3 = next(e for e in events if e["name"] == "ProfilerStep#3")
        late = step3["ts"]
        if i == 2:  # half of the last step's kernels gone
            kernels = [e for e in events if e.get("cat") == "kernel" and e["ts"] >= late]
            gone = {id(k) for k in kernels[: len(kernels) // 2 + 1]}
            events[:] = [e for e in events if id(e) not in gone]
        if i == 3:  # an early launch outside every step, its kernel ending 2 us into
            # the first step, before the step's own GPU work
            first = min(e["ts"] for e in events if e["name"].startswith("ProfilerStep#"))
            kernel = next(e for e in events if e.get("cat") == "kernel")
            call = next(
                e
                for e in events
                if e.get("cat") == "cuda_runtime"
                and e["args"].get("correlation") == kernel["args"]["correlation"]
            )
            events.append(call | {"ts": first - 50, "dur": 5, "args": {"correlation": 999_999}})
            events.append(
                kernel
                | {"ts": first - 40, "dur": 42, "args": kernel["args"] | {"correlation": 999_999}}
            )
        if i == 4:  # GPU work and its runtime calls only
            events[:] = [e for e in events if e.get("cat") in ("kernel", "cuda_runtime")]
        if i == 5:  # fractional timestamps; the last step launches nothing
            events[:] = [
                e for e in events if not (e.get("cat") == "cuda_runtime" and e["ts"] >= late)
            ]
            for e in events:
                if "ts" in e:
                    e["ts"] = e["ts"] + 0.375
        path.write_bytes(orjson.dumps(trace))


def test_a_batch_makes_the_profiler_steps_and_op_trees_at_once_as_each_rank_alone(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A batch's profiler steps (the plugin's: the step-time breakdown, its step table, the
    GPU metrics start from them) and operator trees (the operators, the kernels by
    operator), the operators' calls over the trees and the step-time breakdown's roles are
    made over its ranks at once (~25, ~19, ~34 and ~11 queries a tiny rank alone on main),
    and every rank's tables are to the bit those of the rank alone, in both modes (the
    plugin's mode keeps its trees rank by rank), on ranks of uneven shapes and schemas
    (`_step_edge_job`: no step, no host op, fractional timestamps, both of the plugin's tail
    rules, a launch before the steps, a kernel with no runtime call)."""
    from hta_tui.analysis import hta_view, op_tree, operators, tb_roles, tb_steps

    _step_edge_job(tmp_path / "job")
    loaded = open_session(tmp_path / "job", Cache(tmp_path / "cache")).trace_set.loaded()
    assert sorted(loaded) == list(range(6))
    built = {"_profiler_steps": 0, "_build": 0, "_calls": 0, "role_of": 0}
    spied = (
        (tb_steps, "_profiler_steps"), (op_tree, "_build"), (operators, "_calls"),
        (tb_roles, "role_of"),
    )  # fmt: skip
    for module, name in spied:
        real = getattr(module, name)

        def counted(*args: Any, _real: Any = real, _name: str = name, **kwargs: Any) -> Any:
            built[_name] += 1
            return _real(*args, **kwargs)

        monkeypatch.setattr(module, name, counted)
    names = ("step_time_breakdown", "gpu_metrics", "operator_stats", "kernel_view_by_op")
    for options in (registry.Options(), registry.Options(tb_compat=True, hta_compat=True)):
        jobs = tuple(
            rank_work.RankJob(r, str(d.entry), {}, names, options, store=False)
            for r, d in sorted(loaded.items())
        )
        built.update(_profiler_steps=0, _build=0, _calls=0, role_of=0)
        got = rank_work.batch_tables(jobs, dict(loaded))
        assert built["_profiler_steps"] == 0  # on main: each rank's (6)
        assert built["_build"] == (6 if options.tb_compat else 0)  # main: 6 (one a rank)
        assert built["_calls"] == 1  # rank 4's alone (its tree empty); main: 6
        assert built["role_of"] == 0  # main: 5 (each rank with a step)
        alone = [rank_work.rank_tables(j) for j in jobs]  # (its frames read afresh)
        assert built["_profiler_steps"] == 6  # (alone: each its own)
        for name in names:
            for table, df in rank_work.unpack(got[name]).items():
                each = [rank_work.unpack(a[name])[table] for a in alone]
                assert_frame_equal(df, pl.concat(each, how="diagonal"), check_exact=True)
        ops = rank_work.unpack(got["operator_stats"])["operator_stats"]
        assert set(ops["rank"]) == {0, 1, 2, 3, 5}  # rank 4 has no operator
        chosen = rank_work.unpack(got["step_time_breakdown"])["step_selection"]
        said = dict(chosen.group_by("rank", maintain_order=True).agg("reason").rows())
        assert 4 not in said and said[1] == [None]  # no step; one step "0"
        if options.tb_compat:  # (the plugin's own names: no `cuda_runtime` call links)
            continue
        assert said[2][:2] == [None, None] and "80%" in said[2][2]  # incomplete capture
        assert said[5][:2] == [None, None] and "no GPU work" in said[5][2]
        assert chosen.filter(pl.col("rank") == 5)["gpu_ops"].to_list()[2] == 0
        early = chosen.filter(pl.col("rank") == 3)["start_moved (us)"][0]
        assert 1.9 < early < 2.1  # to the end of the launch before every step
    # HTA's ProfilerStep rows of a batch's views (asked ~6 times a rank by the steps'
    # tables): made over the views at once, each rank's as its own alone
    from hta_tui.analysis import steps as hta_steps
    from hta_tui.trace.model import RankData

    found = {"n": 0}
    real_find = hta_steps._find_step_rows

    def find(*args: Any, **kwargs: Any) -> Any:
        found["n"] += 1
        return real_find(*args, **kwargs)

    monkeypatch.setattr(hta_steps, "_find_step_rows", find)
    for compat in (False, True):
        fresh = [{r: RankData(d.entry, {}).events for r, d in loaded.items()} for _ in "ab"]
        found["n"] = 0
        with hta_view.views_at_once():
            together = hta_steps.iteration_rows(fresh[0], hta_compat=compat)
            metrics = hta_steps.step_metrics(fresh[0], hta_compat=compat)
        assert 1 <= found["n"] <= 2  # once a schema of the views (6 rank by rank)
        assert_frame_equal(together, hta_steps.iteration_rows(fresh[1], hta_compat=compat))
        assert_frame_equal(metrics, hta_steps.step_metrics(fresh[1], hta_compat=compat))
        assert set(together["rank"]) == {2, 3, 5}  # (1, 4: no step; 0: its one, HTA's last)


def test_answers_are_read_as_they_land_and_not_again(
    job8: tuple[Path, Cache], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each unit's answer is read as it lands, while the other units still work: after the
    last one, the client only concatenates (no part read again), and the tables are those
    of parts read at the end. `meanwhile` (the report's files table) starts once every
    unit's work is ready to go out to the workers, before the first goes (which waits for
    the pool's forkserver); once when nothing goes out; after the work made in this process
    (the in-process back-end)."""
    from hta_tui.exec import parts as parts_module

    job, cache = job8
    ts = open_session(job, cache, backend=Backend()).trace_set
    only = ["idle_time_breakdown", "kernel_view", "syncs", "profiler_steps", "findings"]
    opts = registry.Options()
    monkeypatch.setattr(split, "BATCH_BYTES", 0)  # a unit per rank: eight answers land
    read_late: list[int] = []
    unpack = parts_module.unpack

    def late(blob: bytes) -> dict[str, pl.DataFrame]:
        read_late.append(len(blob))
        return unpack(blob)

    monkeypatch.setattr(parts_module, "unpack", late)
    monkeypatch.setattr(_Counting, "rank_bytes", _Counting.remote_bytes)  # (its work)
    backend = _Counting()
    started: list[int] = []
    stats = split.SplitRun()
    got = split.run_split(
        ts, only, opts, backend, stats=stats, meanwhile=lambda: started.append(backend.submitted)
    )
    assert stats.rank_tasks == 8 and read_late == []
    assert started == [0]  # once, with every unit's work ready, before the first goes
    # the same tables as parts read after the last answer (each rank's, kept beside it)
    again = split.SplitRun()
    kept = split.run_split(ts, only, opts, Backend(), stats=again)
    assert again.rank_tasks == 0 and len(read_late) == again.rank_hits > 8
    for name, table in kept.items():
        assert got[name].equals(table), name
    split.run_split(ts, only, opts, _Counting(), cache_root=cache.root, meanwhile=started.clear)
    assert started == []  # (called, once, with no work out: it cleared the list)
    inline = Backend()
    done: list[int] = []
    forget_results(cache)
    split.run_split(
        ts, only, opts, inline, stats=(here := split.SplitRun()), meanwhile=lambda: done.append(1)
    )
    assert here.rank_tasks == 8 and done == [1]


def test_a_streamed_analysis_holds_its_parts_read_up_to_its_budget(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Parts of an analysis that may be streamed are held read as they land until they add
    up to STREAM_BYTES; the next keep only their tables' heights and columns (read again
    when written): streamed from either, the same table as from parts read at the end."""
    from hta_tui.exec import blobs
    from hta_tui.exec.parts import Part, streamed

    frames = [pl.DataFrame({"rank": [r] * r, "us": [0.5 * i for i in range(r)]}) for r in range(4)]
    packed = [blobs.pack({"t": df, "u": df.head(1)}) for df in frames]
    monkeypatch.setattr(split, "STREAM_BYTES", len(packed[0]) + len(packed[1]) + 1)
    landed = split._Landed({"a"})
    got = [landed.part("a", blob, None) for blob in packed]
    assert [p.held is not None for p in got] == [True, True, False, False]
    assert all(p.outline is not None for p in got[2:])
    other = split._Landed(set())  # an analysis that is never streamed: every part held
    assert all(other.part("b", blob, None).held is not None for blob in packed)
    late = [Part(len(blob), blob=blob) for blob in packed]
    for name, table in streamed(["t", "u"], late).items():
        held = streamed(["t", "u"], got)[name]
        assert (held.height, held.schema) == (table.height, table.schema)
        assert held.collect().equals(table.collect()), name
    assert got[0].tables()["t"].equals(frames[0])


def test_every_rank_part_s_text_kept_by_its_task_is_written_as_it_lies(
    job8: tuple[Path, Cache], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """A streamed table's rank parts whose text the rank's task kept in this run: each is
    written from its file (`blobs.TextFile`, by the kernel into a file's output), those held
    read as they landed (the first, under STREAM_BYTES) as the others, the client making
    none of their text; the same bytes as the text made from the frames (no text kept), in
    a file and in a text stream."""
    from hta_tui.exec import parts as parts_module
    from hta_tui.exec.blobs import TextFile

    job, cache = job8
    name = "cuda_kernel_launch_stats"
    monkeypatch.setattr(split, "BATCH_BYTES", 0)  # a task per rank
    monkeypatch.setattr(split, "HOLD_BYTES", 0)  # each part by its kept file
    kinds: list[str] = []
    pieces = parts_module.RankParts.pieces

    def seen(self: Any, version: str | None) -> Iterator[Any]:
        for piece in pieces(self, version):
            kinds.append(type(piece).__name__)
            yield piece

    monkeypatch.setattr(parts_module.RankParts, "pieces", seen)
    kw = {"cache": cache, "backend": Backend(), "only": [name], "as_json": True}
    assert run_report(job, out=io.StringIO(), **kw) == 0  # (for the parts' sizes)
    sizes = [p.stat().st_size for p in cache.root.glob(f"*/*/{RESULTS_DIR}/{name}-*.arrow")]
    assert len(sizes) == 8
    # the first ranks' parts held read as they land, the later ones not: streamed all
    monkeypatch.setattr(split, "STREAM_BYTES", sum(sizes) // 2)
    forget_results(cache)
    kinds.clear()
    with (tmp_path / "fresh.json").open("w") as fh:
        assert run_report(job, out=fh, **kw) == 0
    assert kinds == [TextFile.__name__] * 8
    kept = sorted(cache.root.glob(f"*/*/{RESULTS_DIR}/{name}-*.{name}.*.text"))
    assert len(kept) == 8
    for text in kept:  # the next report makes them from the frames, kept
        text.unlink()
    frames = io.StringIO()
    assert run_report(job, out=frames, **kw) == 0
    assert "DataFrame" in kinds[8:] and TextFile.__name__ not in kinds[8:]
    assert (tmp_path / "fresh.json").read_text() == frames.getvalue()
    assert orjson.loads(frames.getvalue())[name]


def test_a_kept_text_left_in_its_file_is_written_whole_to_any_output(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`blobs.TextFile`: the text between a kept file's head and its CRC, written after what
    the output holds already, to a file (by the kernel), a pipe, a file opened to append
    (where the kernel may refuse: read and written), an output that is no file, and where
    there is no sendfile for files (macOS: sockets only; Windows: none); a text whose file
    is not the one its worker said (another size, another head) is not taken."""
    import errno
    import threading

    from hta_tui.exec.blobs import fresh_text, pack, pack_text

    blob = pack({"t": pl.DataFrame({"a": [1, 2]})})
    text = "".join(f'{{"a": {i}, "name": "é{i}"}},' for i in range(50_000)).encode()
    path = tmp_path / "t.text"
    path.write_bytes(b"".join(pack_text([text[:1000], text[1000:]], blob)))
    size = path.stat().st_size
    kept = fresh_text(path, blob[-4:], size)
    assert kept is not None and kept.read() == text
    assert fresh_text(path, blob[-4:], size - 1) is None
    assert fresh_text(path, b"\0\0\0\0", size) is None
    assert fresh_text(tmp_path / "gone.text", blob[-4:], size) is None
    for mode in ("wb", "ab"):
        with (tmp_path / mode).open(mode) as out:
            out.write(b"before:")
            kept.send(out)
            out.write(b":after")
        assert (tmp_path / mode).read_bytes() == b"before:" + text + b":after"
    memory = io.BytesIO(b"")
    kept.send(memory)
    assert memory.getvalue() == text
    read, write = os.pipe()
    got: list[bytes] = []
    reader = threading.Thread(target=lambda: got.append(os.fdopen(read, "rb").read()))
    reader.start()
    with os.fdopen(write, "wb") as out:
        kept.send(out)
    reader.join()
    assert got == [text]

    def refused(*args: Any) -> int:
        raise OSError(errno.ENOTSOCK, "not a socket")

    for no_sendfile in (refused, None):
        if no_sendfile is None:
            monkeypatch.delattr(os, "sendfile")
        else:
            monkeypatch.setattr(os, "sendfile", no_sendfile)
        with (tmp_path / "elsewhere").open("wb") as out:
            out.write(b"before:")
            kept.send(out)
        assert (tmp_path / "elsewhere").read_bytes() == b"before:" + text


def test_the_largest_ranks_go_out_first(
    job8: tuple[Path, Cache], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Rank work goes out largest file first (ties in rank order), so a large rank is not
    the last left to a worker while the others idle; the tables are the same, in rank
    order, as made in rank order."""
    job, cache = job8
    ts = open_session(job, cache, backend=Backend()).trace_set
    monkeypatch.setattr(split, "BATCH_BYTES", 0)  # a unit per rank
    big = {3: 19_000_000, 6: 5_000_000}  # (as the sizes the work is ordered by say)
    ranks = split._ranks

    def sized(ts: Any) -> list[Any]:
        return [dataclasses.replace(r, size=big.get(r.rank, r.size)) for r in ranks(ts)]

    monkeypatch.setattr(split, "_ranks", sized)
    order: list[int] = []

    class Ordered(_Counting):
        def submit(self, fn: Any, *args: Any) -> Future[Any]:
            order.append(args[0].rank)
            return super().submit(fn, *args)

    only = ["kernel_view", "syncs"]
    got = split.run_split(ts, only, OPTIONS, Ordered())
    sizes = {r.rank: r.size for r in sized(ts)}
    assert order[:2] == [3, 6] and sorted(order) == list(range(8))
    assert order == sorted(range(8), key=lambda rank: -sizes[rank])
    made = split.run_split(ts, only, OPTIONS, Backend())
    for name, table in made.items():
        assert got[name].equals(table), name


def _text_of(name: str, frame: pl.DataFrame) -> list[str]:
    """A `Texts.make` for the test below (module level: `Texts` names its function)."""
    return [f"{name}:{frame.height}"]


def test_a_text_whose_write_failed_is_not_said_fresh(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`_keep_texts` says which texts this run wrote (the client then copies them unchecked,
    `blobs.fresh_text`): one whose write failed (a full or read-only cache) is left out, even
    where an earlier run's file of that name is there, so the client checks or remakes it."""
    from hta_tui.analysis import registry
    from hta_tui.exec.blobs import pack

    entry = tmp_path / "entry"
    analysis = registry.BY_NAME["cuda_kernel_launch_stats"]
    options = registry.Options()
    tables = {"t": pl.DataFrame({"a": [1, 2]})}
    blob = pack(tables)
    texts = rank_work.Texts(_text_of, "v1")
    written = rank_work._keep_texts(texts, tables, blob, entry, analysis, options)
    path = rank_work.text_path(rank_work.result_path(entry, analysis, options), "t", "v1")
    assert written == {"t": path.stat().st_size}

    def full(*args: Any) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(rank_work.os, "replace", full)
    assert rank_work._keep_texts(texts, tables, blob, entry, analysis, options) == {}
    assert path.exists()  # (the earlier run's, which the client must not take as this run's)
    assert rank_work._write_atomic(b"abc", tmp_path / "x") is None
    monkeypatch.undo()
    assert rank_work._write_atomic([b"ab", b"c"], tmp_path / "x") == 3
