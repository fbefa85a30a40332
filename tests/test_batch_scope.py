"""A report's batch of tiny ranks: what it still made rank by rank, made per batch (issue 26).

The batch's tables split back by rank, each rank's steps covered for the report's scope and
each rank's first event are made for the batch's ranks at once, each rank's to the bit what
it is alone; counted in polars queries (each one's fixed cost is a tiny rank's cost).
"""

from __future__ import annotations

import shutil
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import polars as pl
import pytest
from polars.lazyframe.frame import LazyFrame
from polars.testing import assert_frame_equal

from hta_tui.analysis import (
    comm_overview,
    coverage,
    idle,
    kernels,
    operators,
    registry,
    step_breakdown,
    step_time_stats,
    steps,
    temporal,
)
from hta_tui.analysis import hta_view as views
from hta_tui.analysis import launch as launches
from hta_tui.exec import rank_work
from hta_tui.session import open_session
from hta_tui.trace.cache import Cache
from hta_tui.trace.model import RankData
from tests.test_rankwise import _step_edge_job


@contextmanager
def counted_queries() -> Iterator[list[int]]:
    """Polars queries made inside (a LazyFrame's collect, and the eager methods' path)."""
    counted = [0]
    real = LazyFrame._collect_eager, LazyFrame.collect

    def count(i: int) -> Callable[..., pl.DataFrame]:
        def call(self: LazyFrame, *a: object, **k: object) -> pl.DataFrame:
            counted[0] += 1
            return real[i](self, *a, **k)  # type: ignore[operator]

        return call

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(LazyFrame, "_collect_eager", count(0))
        mp.setattr(LazyFrame, "collect", count(1))
        yield counted


def test_a_batch_is_split_by_rank_without_a_query() -> None:
    """`_apart` (every ALONE analysis's tables of a batch, ~4 queries a tiny rank on main by
    `partition_by`) cuts each rank's run of rows out: the same pieces, one chunk each as
    `partition_by` makes them, a rank with no row an empty table; rows of a rank apart still
    split as `partition_by` does."""

    def part(rank: int, n: int) -> pl.DataFrame:
        return pl.DataFrame({"rank": [rank] * n, "x": [0.1 * (i + rank) for i in range(n)]})

    batch = pl.concat([part(0, 2), part(2, 3), part(3, 1)])  # three chunks; rank 1: none
    apart = pl.concat([part(0, 2), part(2, 1), part(0, 1)])  # rank 0's rows in two runs
    tables = {"t": batch, "u": apart, "v": batch.clear(), "w": pl.DataFrame({"n": [1]})}
    with counted_queries() as queries:
        got = rank_work._apart({"t": batch}, [0, 1, 2, 3])
    assert queries[0] == 0  # on main: a partition_by
    got = rank_work._apart(tables, [0, 1, 2, 3])
    for name in ("t", "u", "v"):
        parts = tables[name].partition_by("rank", as_dict=True, maintain_order=True)
        for i, rank in enumerate([0, 1, 2, 3]):
            want = parts.get((rank,), tables[name].clear())
            assert_frame_equal(got[f"{i}\t{name}"], want, check_exact=True)
            assert got[f"{i}\t{name}"].n_chunks() == want.n_chunks()
    assert got["1\tt"].is_empty() and got["0\tw"].height == 1 and got["1\tw"].is_empty()


@pytest.fixture(scope="module")
def edge_ranks(tmp_path_factory: pytest.TempPathFactory) -> dict[int, Any]:
    """Six tiny ranks of uneven step shapes (`_step_edge_job`: no step, no host op,
    fractional timestamps, one step, the plugin's tail rules), loaded."""
    root = tmp_path_factory.mktemp("edge")
    _step_edge_job(root / "job")
    return open_session(root / "job", Cache(root / "cache")).trace_set.loaded()


def _fresh(loaded: dict[int, Any]) -> dict[int, pl.DataFrame]:
    """Every rank's events read afresh (nothing kept for them yet)."""
    return {r: RankData(d.entry, {}).events for r, d in sorted(loaded.items())}


@pytest.mark.parametrize("options", [registry.Options(), registry.Options(tb_compat=True)])
def test_a_batch_keeps_each_ranks_steps_as_each_rank_alone(
    edge_ranks: dict[int, Any],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    options: registry.Options,
) -> None:
    """Each rank's steps covered, kept by a batch for the report's scope (`_batch_steps`,
    after the batch's tables: ~15 queries a tiny rank on main, every kind of every rank
    alone), are made over the batch (the plugin's steps at once, HTA's and every step's
    scope once a rank, the step numbers once a job) and are to the bit each rank's alone
    (`_steps_blob`); kept in one file for the batch and handed back with its tables (no
    file per rank: a mkdir, a write and a rename each, 3.2 s of 10,000 tiny ranks)."""
    datas = {r: RankData(d.entry, {}) for r, d in sorted(edge_ranks.items())}
    names = ("profiler_steps", "syncs", rank_work.STEPS)
    jobs = tuple(rank_work.RankJob(r, str(tmp_path / f"e{r}"), {}, names, options) for r in datas)
    counted: list[int] = []
    real = rank_work._batch_steps

    def keep(*args: Any) -> bytes | None:
        with counted_queries() as queries:
            made = real(*args)
        counted.append(queries[0])
        return made

    monkeypatch.setattr(rank_work, "_batch_steps", keep)
    got = rank_work.batch_tables(jobs, datas)
    assert len(counted) == 1 and counted[0] <= 12 * len(jobs)  # main: 21 a rank here
    kept = rank_work.read_cached(rank_work.batch_steps_path(jobs))
    assert kept is not None and got[rank_work.STEPS] == kept
    assert not list(tmp_path.glob("e*/results/steps_covered-*"))  # no rank's own file
    alone = _fresh(edge_ranks)
    kinds = rank_work.unpack_batch_steps(kept, [job.rank for job in jobs])
    for job in jobs:
        one = rank_work._steps_blob(job.rank, alone[job.rank], options)
        assert kinds[job.rank] == rank_work.unpack_steps(one)
    assert kinds[4] == {} and kinds[0]["every"] == [1]  # no step; a single step
    assert kinds[2]["every"] == [1, 2, 3] and kinds[2]["hta"] == [1, 2]
    every = coverage.ranks_steps(_fresh(edge_ranks), options)
    for rank, events in alone.items():
        for kind in coverage.RANK_KINDS:
            one = coverage.steps_covered(kind, {rank: events}, options) or {}
            assert every[rank][kind] == one.get(str(rank), [])


def test_ranks_of_the_same_step_names_find_their_steps_at_once(
    edge_ranks: dict[int, Any],
) -> None:
    """Each rank's HTA steps alone (`ranks_profiler_steps`, what a batch keeps for the
    report's scope: three queries a rank alone on main) are found in one query set for
    ranks of the same step names, each to the list what `profiler_steps` gives it alone; a
    rank alone in its names (no step, one step) makes its own. The edge ranks twice over
    (fresh frames: nothing kept for them)."""
    from hta_tui.analysis.hta_view import hta_view

    ranks = _fresh(edge_ranks) | {r + 10: ev for r, ev in _fresh(edge_ranks).items()}
    alone = {r: steps.profiler_steps({r: ev}) for r, ev in _fresh(edge_ranks).items()}
    for rank, events in ranks.items():  # each rank's view made (a batch made them)
        hta_view({rank: events}, columns=())
    with counted_queries() as queries:
        got = steps.ranks_profiler_steps(ranks)
    assert got == alone | {r + 10: s for r, s in alone.items()}
    assert got[4] == [] and got[0] == [1] and got[2] == [1, 2]
    with counted_queries() as one_by_one:
        for r, ev in ranks.items():
            steps.profiler_steps({r: ev})
    assert queries[0] <= one_by_one[0] / 2


@pytest.mark.parametrize("compat", [False, True])
def test_each_ranks_origin_is_timed_once_a_batch(edge_ranks: dict[int, Any], compat: bool) -> None:
    """Each rank's first event (the steps' and the findings' parts of a batch: 3 queries a
    rank each on main, the rounding of a one-row table every rank) is found once a rank and
    timed for the batch at once, each rank's as alone; rank 5's fractional timestamps
    rounded in HTA's mode."""
    ranks = _fresh(edge_ranks)
    with counted_queries() as queries:
        got = steps.origins(ranks, hta_compat=compat)
        again = steps.origins(ranks, hta_compat=compat)
    assert got == again and queries[0] <= len(ranks) + 8  # main: 2-3 a rank, each call
    alone = _fresh(edge_ranks)
    assert got == {r: steps._origin({r: ev}, hta_compat=compat) for r, ev in alone.items()}
    assert (got[5] % 1000 == 0) is compat  # (rounded up to a whole us in HTA's mode)
    assert steps._origin(ranks, hta_compat=compat) == min(got.values())


def test_a_ranks_topology_reads_its_pids_in_one_query_each() -> None:
    """The topology's CPU pid (the most frequent of the CPU ops', the smallest of a tie,
    nulls left out) and GPUs (device, else pid, of the GPU rows) take one query each (on
    main 4 and 2: a Series' drop_nulls, mode and sort are queries too)."""
    from hta_tui.analysis import comm_topology

    ev = pl.DataFrame(
        {
            "kind": ["cpu_op"] * 7 + ["kernel", "memcpy", "kernel", "runtime"],
            "pid": [3, 3, 1, 1, None, None, None, 7, 8, None, 9],
            "device": [None] * 8 + [2, None, 5],
        },
        schema={"kind": pl.String, "pid": pl.Int64, "device": pl.Int64},
    )
    with counted_queries() as queries:
        pid, gpus = comm_topology._cpu_pid(ev), comm_topology._gpus(ev)
        none = comm_topology._cpu_pid(ev.filter(pl.col("kind") != "cpu_op"))
    assert (pid, gpus, none) == (1, [2, 7], None)
    assert queries[0] <= 3 + 1  # (+1: the filter above)


@pytest.mark.parametrize("compat", [False, True])
def test_a_batch_makes_the_counters_launches_and_facts_at_once_as_each_rank_alone(
    edge_ranks: dict[int, Any], monkeypatch: pytest.MonkeyPatch, compat: bool
) -> None:
    """Inside a batch (`views_at_once`), the memory bandwidth and queue-length series, the
    launches, the topology's pids and GPUs, the kernel-name facts and the first timestamps
    are made over the batch's ranks at once (no per-rank query or function), and every
    table is to the bit the one made rank by rank, on ranks of uneven shapes; the
    annotations and the syncs skip the ranks they would find nothing on."""
    from hta_tui.analysis import (
        annotations,
        comm_topology,
        hta_view,
        launch,
        memory,
        queue,
        syncs,
        tensor_cores,
    )

    tables = {
        "memory": lambda r: memory.memory_bw_series(r, hta_compat=compat),
        "memory_summary": lambda r: memory.memory_bw_summary(r, hta_compat=compat),
        "launch": lambda r: registry.with_rank(
            launch.cuda_kernel_launch_stats(r, hta_compat=compat)
        ),
        "queue": lambda r: queue.queue_length_series(r, hta_compat=compat),
        "queue_summary": lambda r: queue.queue_length_summary(r, hta_compat=compat),
        "blocked": lambda r: queue.time_blocked_on_full_queue(r, 2, hta_compat=compat),
        "cpu_annotations": lambda r: annotations.user_annotation_breakdown(r, hta_compat=compat),
    }
    alone = {name: make(_fresh(edge_ranks)) for name, make in tables.items()}
    ranks = _fresh(edge_ranks)
    alone_facts = {r: tensor_cores._launch_facts(ev) for r, ev in ranks.items()}
    alone_tops = {
        r: (comm_topology._cpu_pid(ev), comm_topology._gpus(ev)) for r, ev in ranks.items()
    }
    alone_origins = {r: steps._origin({r: ev}, hta_compat=compat) for r, ev in ranks.items()}
    per_rank = {"n": 0}
    for module, name in ((memory, "_rank_series"), (queue, "_rank_series"), (launch, "_finish")):
        real = getattr(module, name)

        def counted(*args: Any, _real: Any = real, _name: str = name, **kwargs: Any) -> Any:
            # (the launches' divisions stay a query a rank; a batch's series: rank None)
            per_rank["n"] += _name != "_finish" and args[0] is not None
            return _real(*args, **kwargs)

        monkeypatch.setattr(module, name, counted)
    with hta_view.views_at_once():
        together = {name: make(ranks) for name, make in tables.items()}
        pids, gpus = comm_topology._at_once(ranks)
        told = tensor_cores.ranks_tell(ranks)
        with counted_queries() as queries:
            origins = steps.origins(ranks, hta_compat=compat)
    assert per_rank["n"] == 0  # main: each rank's memory and queue series
    assert queries[0] <= 4  # main: a query a rank (6), then the rounding
    assert origins == alone_origins
    for name, table in together.items():
        assert_frame_equal(table, alone[name], check_exact=True)
    assert together["memory"].height > 0 and together["queue"]["rank"].n_unique() >= 3
    assert together["launch"]["rank"].n_unique() >= 3
    assert {r: (pids[r], gpus[r]) for r in ranks} == alone_tops
    for rank, ev in ranks.items():  # the facts each rank's `names_tell` reads, as alone
        kept = hta_view.job_cached({0: ev}, "kernel_names_tell", lambda: pl.DataFrame())
        assert_frame_equal(kept, alone_facts[rank], check_exact=True)
        assert told[rank] == tensor_cores.names_tell(ev)
    # every tiny rank's only annotations are its steps; its async copies are pinned: no query
    # of either finds anything on them, and neither makes one
    assert together["cpu_annotations"].is_empty()
    copies = pl.concat([ev.filter(pl.col("name") == "cudaMemcpyAsync") for ev in ranks.values()])
    assert copies.height > 0 and syncs.may_sync(ranks) == set()
    assert all(syncs.sync_calls(ev).is_empty() for ev in ranks.values())


def test_tagged_stacks_one_schema_and_relaxes_others(monkeypatch: pytest.MonkeyPatch) -> None:
    """`tagged` stacks frames of one schema with their rank column made once for them all
    (main: a column made a frame, ~20 us each, a batch's tables tagged ~40 times a rank):
    small frames (a batch's tiny ranks) as one chunk (a query on many tiny chunks costs
    theirs), others chunk for chunk with the rank cut in their chunks (aligned: a query on
    misaligned chunks rechunks the table); it falls back to the relaxed concatenation when
    a column's type or the columns differ."""
    from hta_tui.analysis import rank_column
    from hta_tui.analysis.rank_column import tagged

    a, b = pl.DataFrame({"x": [1, 2]}), pl.DataFrame({"x": [3]})
    same = tagged([(0, a), (1, b)])
    assert same.rows() == [(0, 1), (0, 2), (1, 3)] and same.n_chunks("all") == [1, 1]
    one = tagged([(5, a)])
    assert one.rows() == [(5, 1), (5, 2)] and a.columns == ["x"]  # (the callers' kept)
    monkeypatch.setattr(rank_column, "SMALL_FRAME_ROWS", 1)  # (frames of more rows)
    apart = tagged([(0, a), (1, b)])
    assert apart.rows() == same.rows() and apart.n_chunks("all") == [2, 2]
    floats = tagged([(0, a), (1, pl.DataFrame({"x": [1.5]}))])
    assert floats.schema["x"] == pl.Float64 and floats["x"].to_list() == [1.0, 2.0, 1.5]
    other = tagged([(0, a), (1, pl.DataFrame({"y": ["s"], "x": [4]}))])
    assert other.columns == ["rank", "x", "y"] and other["y"].to_list() == [None, None, "s"]


def test_tagged_views_pick_each_analysis_columns_of_one_stack() -> None:
    """`per_rank.tagged_views` of views of one schema picks each analysis's columns of the
    batch's views stacked once (`rank_column.stacked`, kept per batch), not of each view
    picked and typed again: the same table, chunk for chunk; views of two schemas make a
    table each, a view without the columns none."""
    from hta_tui.analysis import per_rank
    from hta_tui.analysis.rank_column import tagged

    a, b = pl.DataFrame({"x": [1, 2], "y": ["a", "b"]}), pl.DataFrame({"x": [3], "y": ["c"]})
    c, d = pl.DataFrame({"x": [1.5], "y": ["d"]}), pl.DataFrame({"y": ["e"]})
    one = per_rank.tagged_views({1: b, 0: a}, ("y",))
    assert [m for m, _ in one] == [[0, 1]] and one[0][1].rows() == [(0, "a"), (0, "b"), (1, "c")]
    picked = tagged([(0, a[["y"]]), (1, b[["y"]])])  # (main's: each view picked, tagged)
    assert_frame_equal(one[0][1], picked, check_exact=True)
    assert one[0][1].n_chunks("all") == picked.n_chunks("all")
    assert per_rank._stacked({1: b, 0: a}) is per_rank._stacked({1: b, 0: a})
    two = per_rank.tagged_views({0: a, 1: b, 2: c, 3: d}, ("y", "x"))
    assert [m for m, _ in two] == [[0, 1], [2]]
    assert two[1][1].rows() == [(2, "d", 1.5)] and per_rank._stacked({0: a, 2: c}) is None


@pytest.mark.parametrize("tb_compat", [False, True])
def test_a_batch_makes_whole_analyses_at_once_as_each_rank_alone(
    edge_ranks: dict[int, Any], monkeypatch: pytest.MonkeyPatch, tb_compat: bool
) -> None:
    """Inside a batch (`views_at_once`) the step-time breakdown and step selection (every
    rank's in one table: the ranks' times laid one after another for one pass of the
    interval arithmetic, the ns divided in numpy as polars divides each rank's own table, a
    one-row one exactly), the idle time (HTA's GPU events with their launches, one query
    over the batch's views), the computation / communication per step (each step's covered
    time in one pass), the operator tables (aggregated at once, `rank` in the keys, the
    divisions as each rank's) and the profiler steps' parts (HTA's steps, iteration rows,
    step metrics: gathered in numpy) are to the bit the tables made rank by rank, on ranks
    of one row and of several, and of none, on the analyses' polars engine."""
    tables = {
        "step_time": lambda r: step_breakdown.step_time_breakdown(r, tb_compat=tb_compat),
        "step_selection": lambda r: step_breakdown.step_selection(r, tb_compat=tb_compat),
        "gpu_launches": lambda r: views.gpu_launches(r, hta_compat=tb_compat),
        **{
            f"idle_{i}": lambda r, i=i: idle.idle_time_breakdown(  # type: ignore[misc]
                r, hta_compat=tb_compat, show_idle_interval_stats=True
            )[i]
            for i in (0, 1)
        },
        "iteration_rows": lambda r: steps.iteration_rows(r, hta_compat=tb_compat),
        "step_metrics": lambda r: steps.step_metrics(r, hta_compat=tb_compat),
        "profiler_steps": lambda r: pl.DataFrame({"step": steps.profiler_steps(r)}),
        "gpu_unions": lambda r: temporal.gpu_unions(r, hta_compat=tb_compat),
        "gpu_table": lambda r: kernels.gpu_table(r, hta_compat=tb_compat),
        "comm_comp_per_rank": comm_overview.comm_comp_per_rank,
        "launches": lambda r: registry.with_rank(
            launches.cuda_kernel_launch_stats(r, hta_compat=tb_compat)
        ),
        **{
            f"operators_{k}": lambda r, k=k: operators.operator_tables(r, tb_compat=tb_compat)[k]
            for k in ("name", "shape", "stack")
        },
    }

    def fresh() -> dict[int, pl.DataFrame]:  # and rank 6: rank 0 with one operator name
        ranks = _fresh(edge_ranks)
        one = (pl.col("kind") != "cpu_op") | (pl.col("name") == "aten::op_memset")
        return ranks | {6: ranks[0].filter(one)}

    engine = pl.Config(engine_affinity=registry.ENGINE)  # (the analyses' engine: `run`)
    with engine:  # rank by rank (no batch: `batching` is off)
        alone = {name: make(fresh()) for name, make in tables.items()}
    ranks = fresh()
    alone_tables = []
    real = step_breakdown.breakdown_table
    monkeypatch.setattr(
        step_breakdown, "breakdown_table", lambda *a: alone_tables.append(1) or real(*a)
    )
    aggregated = operators._aggregate
    monkeypatch.setattr(  # (a rank's own: no `by`)
        operators,
        "_aggregate",
        lambda *a, **k: alone_tables.extend([] if k else [a]) or aggregated(*a, **k),
    )
    passes = {"_parts_within": 0, "_with_launch_start": 0, "covered_within": 0}
    for module, name in (
        (step_breakdown, "_parts_within"), (views, "_with_launch_start"),
        (comm_overview.intervals, "covered_within"),
    ):  # fmt: skip
        real_pass = getattr(module, name)

        def counted(*a: Any, _real: Any = real_pass, _name: str = name, **k: Any) -> Any:
            passes[_name] += 1
            return _real(*a, **k)

        monkeypatch.setattr(module, name, counted)
    split: list[int] = []  # the GPU table and unions rank by rank (main: each rank's rows)
    frames, rows = kernels._gpu_frames_at_once, temporal.gpu_rows_at_once
    monkeypatch.setattr(kernels, "_gpu_frames_at_once", lambda v: split.append(1) or frames(v))
    monkeypatch.setattr(temporal, "gpu_rows_at_once", lambda v: split.append(2) or rows(v))
    with views.views_at_once(), engine:
        together = {name: make(ranks) for name, make in tables.items()}
    # main: each rank's breakdown (four queries) and aggregates (two or three); the stacks'
    # empty table once a call
    assert len(alone_tables) == 3 and not split
    assert together["gpu_table"]["rank"].flags == alone["gpu_table"]["rank"].flags
    # one pass over the batch: main, one a rank (6 with used steps, 7 with a view, 3 x 5
    # with steps and intervals: computation, communication and their union)
    assert passes == {"_parts_within": 1, "_with_launch_start": 1, "covered_within": 3}
    # (made at once: their floats one chunk, not one a rank: a batch's tables cross to the
    # report as Arrow, read back one chunk, and the per-rank statistics made from them in the
    # batch are the same to the bit on either, below)
    at_once = {"step_time", "step_selection"}
    for name, table in together.items():
        assert_frame_equal(table, alone[name], check_exact=True)
        # floats chunk for chunk (a sum over the report's concatenation adds the same chunks)
        floats = [c for c, t in table.schema.items() if t.is_float()]
        if (name == "launches" and tb_compat) or name in at_once:
            continue  # (HTA's launches in a batch: two chunks a rank, on main too)
        assert [table[c].n_chunks() for c in floats] == [alone[name][c].n_chunks() for c in floats]
    assert together["gpu_launches"]["rank"].flags == alone["gpu_launches"]["rank"].flags
    for stats in (
        step_time_stats.step_time_stats, step_time_stats.step_time_average,
        step_time_stats.outlier_steps,
    ):  # fmt: skip
        with engine:
            made, want = stats(together["step_time"]), stats(alone["step_time"])
        assert_frame_equal(made, want, check_exact=True)
    # a rank of one row (divided exactly alone), and of several (comm/comp: and its mean)
    fewest = {"step_time": 1, "step_selection": 1, "operators_name": 1, "comm_comp_per_rank": 2}
    for name, least in fewest.items():
        rows = together[name].group_by("rank").len()["len"]
        assert rows.min() == least and rows.max() > least


def test_a_batch_whose_clocks_cannot_be_laid_out_makes_each_rank_alone(
    edge_ranks: dict[int, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A batch whose ranks' times laid one after another could overflow (a broken file's
    clock decades off: `interval_arrays.MAX_LAYOUT`) makes the step-time breakdown and the
    covered time of each step rank by rank: the same tables."""
    from hta_tui.analysis import interval_arrays

    tables = {
        "step_time": step_breakdown.step_time_breakdown,
        "comm_comp_per_rank": comm_overview.comm_comp_per_rank,
    }
    engine = pl.Config(engine_affinity=registry.ENGINE)
    with engine:
        alone = {name: make(_fresh(edge_ranks)) for name, make in tables.items()}
    monkeypatch.setattr(interval_arrays, "MAX_LAYOUT", 0)
    passes: list[int] = []
    real = step_breakdown._parts_within
    monkeypatch.setattr(step_breakdown, "_parts_within", lambda *a: passes.append(1) or real(*a))
    with views.views_at_once(), engine:
        together = {name: make(_fresh(edge_ranks)) for name, make in tables.items()}
    assert len(passes) == 5  # each rank with used steps alone
    for name, table in together.items():
        assert_frame_equal(table, alone[name], check_exact=True)


def test_a_batch_picks_its_views_once_a_columns_asked(edge_ranks: dict[int, Any]) -> None:
    """Inside a batch HTA's views of the shared columns are picked once a batch and columns
    asked (~15 analyses ask: a pick a rank each time cost ~25 us, ~0.3 ms a tiny rank):
    the same frames each time (what is kept for a view serves every asker), the same
    tables as picked rank by rank; another mode or columns are picks of their own."""
    ranks = _fresh(edge_ranks)
    picked: list[int] = []
    real = views.rank_view

    def counted(*args: Any, **kwargs: Any) -> Any:
        picked.append(1)
        return real(*args, **kwargs)

    with pytest.MonkeyPatch.context() as mp, views.views_at_once():
        mp.setattr(views, "rank_view", counted)
        first = views.hta_view(ranks, columns=("pid", "tid"))
        again = views.hta_view(ranks, columns=("pid", "tid"))
        assert len(picked) == len(ranks)  # main: twice as many
        assert all(again[r] is first[r] for r in ranks) and again is not first
        other = views.hta_view(ranks, columns=())
        compat = views.hta_view(ranks, hta_compat=True, columns=("pid", "tid"))
    assert len(picked) == 3 * len(ranks)
    assert other[0].columns != first[0].columns and compat[5] is not first[5]
    steps = views.profiler_step_names(ranks)
    for rank, view in first.items():
        alone = real(ranks[rank], steps, columns=("pid", "tid"))
        assert_frame_equal(view, alone, check_exact=True)


def test_with_rank_inserts_the_rank_as_a_literals_select_made_it() -> None:
    """`registry.with_rank` (HTA's dict answers with a leading rank: a query a rank and
    table on main) inserts the column: the same table chunk for chunk, flagged sorted as a
    literal's column (a later group-by on `rank` takes the same path); empty frames left out."""
    two = pl.concat(
        [pl.DataFrame({"a": [1, 2], "b": ["x", "y"]}), pl.DataFrame({"a": [3], "b": ["z"]})]
    )
    per_rank = {3: two.head(1), 1: two, 2: two.clear()}
    with counted_queries() as queries:
        got = registry.with_rank(per_rank)
    want = pl.concat(
        [
            df.select(pl.lit(r, pl.Int64).alias("rank"), pl.all())
            for r, df in ((1, two), (3, two.head(1)))
        ],
        how="diagonal_relaxed",
    )
    assert queries[0] == 1  # (the relaxed concatenation's; main: one more a rank)
    assert_frame_equal(got, want, check_exact=True)
    assert [got[c].n_chunks() for c in got.columns] == [want[c].n_chunks() for c in want.columns]
    assert got["rank"].flags == want["rank"].flags


def test_parts_cut_a_batch_by_rank_as_partition_by_without_a_query() -> None:
    """`rank_column.parts` (a batch's tables split back by rank: `partition_by` was about
    a query a part) cuts each rank's run of rows out: the same parts, one chunk each, with
    the key or without; ranks apart, or a null rank, fall back to `partition_by`."""
    from hta_tui.analysis.rank_column import parts

    table = pl.concat(
        [
            pl.DataFrame({"rank": [r] * n, "x": [0.5 * i for i in range(n)]})
            for r, n in ((0, 2), (3, 1), (1, 3))
        ]
    )
    apart = pl.concat([table, table.head(1)])
    nulls = table.with_columns(pl.when(pl.col("x") > 0.6).then(pl.col("rank")).alias("rank"))
    with counted_queries() as queries:
        got = parts(table)
    assert queries[0] == 0 and list(got) == [(0,), (3,), (1,)]
    for t in (table, apart, nulls):
        for keep in (False, True):
            want = t.partition_by("rank", as_dict=True, include_key=keep, maintain_order=True)
            found = parts(t, keep=keep)
            assert list(found) == list(want)
            for key, part in want.items():
                assert_frame_equal(found[key], part, check_exact=True)
                assert found[key].n_chunks() == 1
    assert table.columns == ["rank", "x"]  # (its own column kept)


def test_a_batchs_events_are_read_at_once_as_each_alone(
    edge_ranks: dict[int, Any], tmp_path: Path
) -> None:
    """A batch's tiny ranks' events (one file each) are read in one query
    (`read_events_at_once`; ~0.35 ms of fixed cost a rank alone), each rank's frame to the
    bit what it reads alone; a damaged file is left to its rank (read alone, which says
    why), and counts that are not the files' rows leave every rank to read its own."""
    from hta_tui.trace.model import read_events_at_once

    entries = {}
    for rank, data in sorted(edge_ranks.items()):
        entries[rank] = shutil.copytree(data.entry, tmp_path / f"e{rank}")

    def datas(meta: Callable[[int], dict]) -> list[RankData]:
        return [RankData(entry, meta(rank)) for rank, entry in entries.items()]

    alone = _fresh(edge_ranks)
    batch = datas(lambda rank: edge_ranks[rank].meta)
    with counted_queries() as queries:
        read_events_at_once(batch)
    assert queries[0] == 1
    for rank, data in zip(entries, batch, strict=True):
        held = data.held("events")
        assert held is not None and held.schema == alone[rank].schema
        assert_frame_equal(held, alone[rank])
    wrong = datas(lambda rank: {**edge_ranks[rank].meta, "n_events": rank})
    read_events_at_once(wrong)
    assert all(data.held("events") is None for data in wrong)
    path = entries[2] / "events.parquet"
    path.write_bytes(path.read_bytes()[:-1] + b"?")  # its checksum no longer matches
    damaged = datas(lambda rank: edge_ranks[rank].meta)
    read_events_at_once(damaged)
    assert [data.held("events") is None for data in damaged] == [r == 2 for r in entries]


def test_a_tiny_frame_is_read_as_it_is(edge_ranks: dict[int, Any]) -> None:
    """A frame of a few rows keeps its columns of no value as read (holding each as one
    null saves nothing there, and its query was 4.5 s of 10,000 tiny ranks' workers); one
    of NULLS_AS_ONE_ROWS rows or more holds them as one null, as before."""
    from hta_tui.trace import cache

    entry = edge_ranks[2].entry
    with counted_queries() as queries:
        events = cache.read_frame(entry, "events")
    assert queries[0] == 1  # the read; on main a second query held the null columns
    nulls = [c for c in events.columns if events[c].null_count() == events.height]
    assert nulls and events.height < cache.NULLS_AS_ONE_ROWS
    assert cache._nulls_as_one(events) is events
    rows = events.sample(cache.NULLS_AS_ONE_ROWS, with_replacement=True, seed=1)
    assert cache._nulls_as_one(rows).estimated_size() < rows.estimated_size()
