"""Every collective call of every rank, matched across ranks, with each rank's wait and
transfer time.

A call is where the collective's time is spent: on a rank with NCCL kernels, each NCCL kernel
(`ncclKernel_*` / `ncclDevKernel_*`); on a rank without (gloo, CPU jobs), each backend op
(`gloo:all_reduce`, `nccl:broadcast`, ...). Its size, dtype and process group come from the
collective args (`Collective name`, in/out msg nelems, `dtype`, `Process Group Name`, `Seq`)
on the kernel itself or on the record_param_comms op of the same External id; without them,
from the backend op's `Input Dims` x `Input type`, as the TensorBoard plugin does.

Calls are matched across ranks by process group and sequence number: `Seq` when the trace
writes it, else the call's position among its rank's calls of that group. A rank that lacks
a call (unequal counts) is simply absent from that instance. Within an instance the last
rank to arrive (`arrival`) is the one the others wait for (`last_rank`; `late_by` how long
after each rank it arrived, what the straggler ranking adds up). The split of a call's
own latency (its start to its end) is measured inside the call: its wait is from its start
until the last rank's call started (everyone inside the collective), its transfer the rest, so
wait + transfer = latency and each is at most it. A CPU (gloo) call may start after the rank
issued it; counting the wait from the issue made it longer than the call (a broadcast of 50 us
waited 68 us), and the time a call spent inside gloo waiting for a later peer passed for
transfer (an all_reduce of 969 us showed 401 + 930 us, and bandwidth came out low).
"""

from __future__ import annotations

from collections.abc import Mapping

import polars as pl

from hta_tui.analysis.comm_kinds import COLLECTIVE_OP, NCCL_KERNEL, dtype_bytes, kind_of
from hta_tui.analysis.hta_view import job_cached
from hta_tui.analysis.per_rank import batching, ranks_events, tagged
from hta_tui.trace.schema import COMM_COLUMNS

CALL_COLUMNS: dict[str, pl.DataType] = {
    "rank": pl.Int64(),
    "pg": pl.String(),  # process group name ("0" when the trace does not say)
    "seq": pl.Int64(),
    "kind": pl.String(),  # all_reduce, all_gather, ..., send_recv
    "name": pl.String(),  # the event's own name
    "step": pl.Int64(),  # ProfilerStep#N the call was issued in; null outside steps
    "ts": pl.Int64(),  # ns, as in the file
    "end": pl.Int64(),
    "arrival": pl.Int64(),  # when the rank was ready for the call (see `_issued`)
    "bytes": pl.Int64(),  # message size; null when the trace does not say
    "dtype": pl.String(),
    "group_size": pl.Int64(),
    "on_gpu": pl.Boolean(),
}

MATCHED_COLUMNS: dict[str, pl.DataType] = {
    **CALL_COLUMNS,
    "ranks_in_instance": pl.Int64(),
    "last_rank": pl.Int64(),  # the rank that arrived last at this instance
    "wait": pl.Int64(),  # ns of this rank's call before the last rank's call started
    "transfer": pl.Int64(),  # ns of the call after everyone's call started (latency - wait)
    "late_by": pl.Int64(),  # ns from this rank's arrival to the last rank's (whom to blame)
}

_STEP_RE = r"^ProfilerStep\s*#\s*(\d+)"
_DEFAULT_PG = "0"


def _steps(ev: pl.DataFrame) -> pl.DataFrame:
    """Each rank's ProfilerStep#N intervals: rank, step, step_ts, step_end (ns), in order."""
    return (
        ev.lazy()
        .filter(pl.col("kind").is_in(["annotation", "cpu_op"]))
        .filter(pl.col("name").str.starts_with("ProfilerStep"))
        .select(
            "rank",
            pl.col("name").str.extract(_STEP_RE, 1).cast(pl.Int64).alias("step"),
            pl.col("ts").alias("step_ts"),
            (pl.col("ts") + pl.col("dur")).alias("step_end"),
        )
        .drop_nulls("step")
        .sort("rank", "step_ts", maintain_order=True)
        .collect()
    )


def _with_step(calls: pl.DataFrame, steps: pl.DataFrame, at: str) -> pl.DataFrame:
    """`step`: the ProfilerStep interval of its rank holding each call's `at` time (null
    outside)."""
    if steps.is_empty():
        return calls.with_columns(pl.lit(None, pl.Int64).alias("step"))
    joined = calls.sort("rank", at, maintain_order=True).join_asof(
        steps,
        left_on=at,
        right_on="step_ts",
        by="rank",
        strategy="backward",
        check_sortedness=False,
    )
    inside = pl.col(at) < pl.col("step_end")
    return joined.with_columns(pl.when(inside).then(pl.col("step")).alias("step")).drop(
        "step_ts", "step_end"
    )


def rank_calls(rank: int, ev: pl.DataFrame) -> pl.DataFrame:
    """One rank's collective calls (`CALL_COLUMNS`), in time order, before matching."""
    return ranks_calls({rank: ev})


def ranks_calls(ranks: Mapping[int, pl.DataFrame]) -> pl.DataFrame:
    """Every rank's collective calls before matching (`CALL_COLUMNS`), rank by rank in time
    order: the concatenation of each rank's alone, made over every rank at once (a few
    queries per job, not per rank: a rank of a dozen events cost ~20 of them alone), once
    per job (the distributed tables, the critical path's calls and the matching share it)."""
    return job_cached(ranks, "rank_calls", lambda: _ranks_calls(ranks))


def _ranks_calls(ranks: Mapping[int, pl.DataFrame]) -> pl.DataFrame:
    # a batch's tagged events are made once for every analysis (`ranks_events`); a job's
    # large ranks' only for the calls (not kept: a column a row)
    ev = ranks_events(ranks) if batching() else tagged(sorted(ranks.items()))
    if ev.is_empty():
        return pl.DataFrame(schema=CALL_COLUMNS)
    args = (
        ev.lazy()
        .filter(pl.col("coll_name").is_not_null() & pl.col("external_id").is_not_null())
        .sort(pl.col("kind") != "cpu_op", maintain_order=True)  # the record_param_comms op first
        .group_by("rank", "external_id")
        .agg(
            pl.col("ts").first().alias("cpu_ts"),
            *(pl.col(c).drop_nulls().first() for c in COMM_COLUMNS if c != "pg_ranks"),
        )
    )
    kernels = _nccl_kernels(ev)
    on_gpu = kernels["rank"].unique()  # the ranks with NCCL kernels: their calls are those
    ops = ev.lazy().filter(
        ~pl.col("rank").is_in(on_gpu.implode())
        & pl.col("kind").is_in(["annotation", "cpu_op", "other"])
        & pl.col("name").str.contains(COLLECTIVE_OP)
    )
    base = pl.concat(
        [
            kernels.lazy().with_columns(pl.lit(None, pl.Int64).alias("op_bytes")),
            op_bytes(ops).select("rank", "idx", "name", "ts", "dur", "external_id", "op_bytes"),
        ],
        how="vertical_relaxed",
    )
    calls = (
        base.join(args, on=["rank", "external_id"], how="left")
        .with_columns(
            pl.col("pg_name").fill_null(_DEFAULT_PG).alias("pg"),
            kind_of(pl.col("coll_name").fill_null(pl.col("name"))).alias("kind"),
            pl.coalesce(
                pl.max_horizontal("in_nelems", "out_nelems") * dtype_bytes(pl.col("dtype")),
                pl.col("op_bytes"),
            ).alias("bytes"),
            (pl.col("ts") + pl.col("dur")).alias("end"),
            pl.col("rank").is_in(on_gpu.implode()).alias("on_gpu"),
        )
        .sort("rank", "ts", "idx")  # calls starting together numbered in file order
        .with_columns(
            pl.coalesce(
                pl.col("comm_seq"), pl.int_range(pl.len(), dtype=pl.Int64).over("rank", "pg")
            ).alias("seq"),
        )
        .collect()
    )
    calls = _issued(calls, ev)
    calls = _with_step(calls, _steps(ev), "issued")
    return calls.select(
        pl.col("rank").cast(pl.Int64),
        "pg",
        "seq",
        "kind",
        "name",
        "step",
        "ts",
        "end",
        "arrival",
        "bytes",
        "dtype",
        "group_size",
        "on_gpu",
    ).sort("rank", "ts", maintain_order=True)


def _nccl_kernels(ev: pl.DataFrame) -> pl.DataFrame:
    """rank, idx, name, ts, dur, external_id of the ranks' NCCL kernels (the pattern tried
    on the distinct kernel names only)."""
    kernels = (
        ev.lazy()
        .filter(pl.col("kind") == "kernel")
        .select("rank", "idx", "name", "ts", "dur", "external_id")
        .collect()
    )
    names = kernels.select(pl.col("name").unique()).filter(pl.col("name").str.contains(NCCL_KERNEL))
    return kernels.filter(pl.col("name").is_in(names["name"].implode()))


def _issued(calls: pl.DataFrame, ev: pl.DataFrame) -> pl.DataFrame:
    """`issued`: when the CPU asked for the call (its record_param_comms op, else the nearest
    `c10d::` op of its rank before it), which places it in a step; and `arrival`: when the
    rank was ready for it. A GPU call arrives when its kernel starts (the stream reached it);
    a CPU call (gloo) when it was issued: the backend may start it later, when a worker
    thread frees up, which is not the rank's lateness."""
    c10d = (
        ev.lazy()
        .filter(pl.col("name").str.starts_with("c10d::"))
        .select("rank", pl.col("ts").alias("c10d_ts"))
        .sort("rank", "c10d_ts", maintain_order=True)
        .collect()
    )
    calls = calls.sort("rank", "ts", maintain_order=True).join_asof(
        c10d,
        left_on="ts",
        right_on="c10d_ts",
        by="rank",
        strategy="backward",
        check_sortedness=False,
    )
    issued = pl.coalesce(
        pl.when(pl.col("cpu_ts") <= pl.col("ts")).then(pl.col("cpu_ts")),
        pl.col("c10d_ts"),
        pl.col("ts"),
    )
    arrival = pl.when("on_gpu").then(pl.col("ts")).otherwise(pl.col("issued"))
    return calls.with_columns(issued.alias("issued")).with_columns(arrival.alias("arrival"))


_DIMS_TEXT = r"^\[\s*(\[[\d,\s]*\]\s*,?\s*)*\]$"
_TYPES_TEXT = r'^\[\s*("[^"]*"\s*,?\s*)*\]$'


def op_bytes(ops: pl.LazyFrame, table: Mapping[str, int] | None = None) -> pl.LazyFrame:
    """`ops` with `op_bytes`: Σ over inputs of prod(dims) x bytes per element, from a backend
    op's `Input Dims` and `Input type` JSON texts (`[[19618307]]`, `["float"]`), the plugin's
    size of a call. `table` maps type names to sizes exactly (the plugin's); by default every
    PyTorch dtype is known. Null when the texts are absent or malformed."""
    size = (
        dtype_bytes(pl.col("t"))
        if table is None
        else pl.col("t").replace_strict(dict(table), default=0, return_dtype=pl.Int64)
    )
    ok = pl.col("input_dims").str.contains(_DIMS_TEXT) & pl.col("input_type").str.contains(
        _TYPES_TEXT
    )
    per_op = (
        ops.with_row_index("__i")
        .select(
            "__i",
            pl.when(ok)
            .then(pl.col("input_dims"))
            .str.json_decode(pl.List(pl.List(pl.Int64)))
            .alias("d"),
            pl.when(ok).then(pl.col("input_type")).str.json_decode(pl.List(pl.String)).alias("t"),
        )
        .filter(pl.col("d").list.len() == pl.col("t").list.len())
        .explode("d", "t")
        .group_by("__i")
        .agg(
            (pl.col("d").list.eval(pl.element().product()).list.first() * size.fill_null(0))
            .sum()
            .alias("op_bytes")
        )
    )
    return ops.with_row_index("__i").join(per_op, on="__i", how="left").drop("__i")


def calls(ranks: Mapping[int, pl.DataFrame]) -> pl.DataFrame:
    """Every rank's collective calls, matched across ranks (`MATCHED_COLUMNS`)."""
    return job_cached(ranks, "collective_calls", lambda: _matched(ranks))


def _matched(ranks: Mapping[int, pl.DataFrame]) -> pl.DataFrame:
    if not ranks:
        return pl.DataFrame(schema=MATCHED_COLUMNS)
    return matched(ranks_calls(ranks))


def matched(every: pl.DataFrame) -> pl.DataFrame:
    """`calls` from every rank's `rank_calls` (in rank order): the cross-rank part, on
    the calls alone (what a rank sends: one row per collective call)."""
    every = every.cast(CALL_COLUMNS)  # type: ignore[arg-type]
    instance = ["pg", "seq"]
    latency = pl.col("end") - pl.col("ts")
    # everyone is inside the collective once the last call started; clipped to the call
    wait = (pl.col("ts").max().over(instance) - pl.col("ts")).clip(0, latency)
    return (
        every.with_columns(
            pl.len().over(instance).cast(pl.Int64).alias("ranks_in_instance"),
            pl.col("rank").sort_by("arrival").last().over(instance).alias("last_rank"),
            wait.alias("wait"),
            (pl.col("arrival").max().over(instance) - pl.col("arrival")).alias("late_by"),
        )
        .with_columns((latency - pl.col("wait")).alias("transfer"))
        .select(list(MATCHED_COLUMNS))
        .sort("pg", "seq", "rank")
    )
