"""Every host-device synchronisation of a rank, what it waited for and which code caused it.

A sync is a host call that waits for the GPU: stream / device / event / context synchronise,
`cudaStreamWaitEvent` (a GPU-side wait: listed, but it does not block the host), a blocking
copy (`cudaMemcpy` and other non-async copies, and an async copy into pageable host memory,
which the driver makes synchronous), in the CUDA runtime, the driver API and HIP. The
`cuda_sync` events Kineto writes on the GPU side (Stream Sync, Event Sync, Stream Wait Event,
Context Sync) are joined to their host call by correlation; one without a host call is a row
of its own.

Per sync: how long the host was blocked (the call's duration), the GPU work in flight on the
stream it waited for (on every stream for a device sync, or when the stream is unknown), the
operator stack around it, and attribution: the nn.Module, user call site, Python stack and
annotations around it (`host_context`); inside a backward op, those of the forward op that
created it (`backward_origin`), with `phase` saying which, but the call site (and stack) its
own where its stack holds user code (a custom autograd Function's backward, a hook). A call
site is the innermost frame of user code, as PyTorch names it: `file.py(N): function`, N the
function's first line (the profiler records a frame's line at its entry, not the calling
line).
"""

from __future__ import annotations

from collections.abc import Mapping

import polars as pl

from hta_tui.analysis.backward_origin import BACKWARD_RE, backward_origins
from hta_tui.analysis.checkpoint import checkpoint
from hta_tui.analysis.host_context import CONTEXT_COLUMNS, context, enclosing, rows_at
from hta_tui.analysis.hta_view import us
from hta_tui.analysis.per_rank import ranks_events

#: Host calls that wait for the GPU, by name without version / per-thread suffixes.
#: -> the sync type.
SYNC_CALLS: dict[str, str] = {
    **{
        f"{api}{name}": kind
        for api in ("cuda", "hip")
        for name, kind in (
            ("StreamSynchronize", "stream_sync"),
            ("DeviceSynchronize", "device_sync"),
            ("ThreadSynchronize", "device_sync"),
            ("CtxSynchronize", "device_sync"),
            ("EventSynchronize", "event_sync"),
            ("StreamWaitEvent", "stream_wait_event"),
            ("Memcpy", "memcpy"),
            ("Memcpy2D", "memcpy"),
            ("Memcpy3D", "memcpy"),
            ("MemcpyDtoH", "memcpy"),
            ("MemcpyHtoD", "memcpy"),
            ("MemcpyDtoD", "memcpy"),
            ("MemcpyFromSymbol", "memcpy"),
            ("MemcpyToSymbol", "memcpy"),
            ("MemcpyWithStream", "memcpy"),
        )
    },
    "cuStreamSynchronize": "stream_sync",
    "cuCtxSynchronize": "device_sync",
    "cuEventSynchronize": "event_sync",
    "cuStreamWaitEvent": "stream_wait_event",
    "cuMemcpy": "memcpy",
    "cuMemcpyDtoH": "memcpy",
    "cuMemcpyHtoD": "memcpy",
    "cuMemcpyDtoD": "memcpy",
    "cuMemcpy2D": "memcpy",
    "cuMemcpy3D": "memcpy",
}
#: `cuda_sync_kind` / `cuda_sync` names -> the sync type.
GPU_SYNC_KINDS: dict[str, str] = {
    "Stream Sync": "stream_sync",
    "Event Sync": "event_sync",
    "Stream Wait Event": "stream_wait_event",
    "Context Sync": "device_sync",
}
#: Types that wait on one stream (the others wait on the whole device).
_STREAM_TYPES = ("stream_sync", "stream_wait_event", "memcpy", "pageable_copy")
_SUFFIX_RE = r"(_v\d+)?(_ptsz|_ptds|_spt)?$"
#: Words in every `SYNC_CALLS` name and async copy call (`_ASYNC_COPY_RE`): a call without
#: any is neither.
_SYNC_WORDS = ("Synchronize", "WaitEvent", "Memcpy")
_ASYNC_COPY_RE = r"^(cuda|hip|cu)Memcpy.*Async"
_PAGEABLE_DTOH_RE = r"(?i)DtoH.*Pageable"

SYNC_COLUMNS: dict[str, pl.DataType] = {
    "rank": pl.Int64(),
    "idx": pl.UInt32(),  # the host call's event (the cuda_sync's when it has no host call)
    "call": pl.String(),
    "correlation": pl.Int64(),  # links it to the trace (and to its cuda_sync event)
    # its `cuda_sync` event (null: none; Kineto writes them only with enable_cuda_sync_events)
    "sync_event": pl.UInt32(),
    "sync_type": pl.String(),
    "blocks_host": pl.Boolean(),
    "start (us)": pl.Float64(),  # as in the trace
    "blocked (us)": pl.Float64(),  # host call duration; 0 when it does not block the host
    "stream": pl.Int64(),
    "device": pl.Int64(),
    "gpu_ops_in_flight": pl.UInt32(),
    "waited_for": pl.String(),  # the in-flight GPU op that finished last
    "phase": pl.String(),  # forward / backward
    "operator": pl.String(),
    "op_stack": pl.String(),
    "backward_op": pl.String(),
    "forward_op": pl.String(),
    "module": pl.String(),
    "module_path": pl.String(),
    "call_site": pl.String(),
    "python_stack": pl.String(),
    "annotation": pl.String(),
    "step": pl.String(),
    "hook_module": pl.String(),
    "pid": pl.Int64(),
    "tid": pl.Int64(),
}


#: `sync_calls`' columns.
_CALL_SCHEMA: dict[str, pl.DataType] = {
    **{c: SYNC_COLUMNS[c] for c in ("idx", "call", "correlation", "sync_event", "sync_type")},
    **{c: SYNC_COLUMNS[c] for c in ("pid", "tid")},
    "ts": pl.Int64(),
    "dur": pl.Int64(),
    **{c: SYNC_COLUMNS[c] for c in ("stream", "device", "blocks_host")},
}


def sync_calls(events: pl.DataFrame) -> pl.DataFrame:
    """The rank's sync rows before attribution: idx, call, correlation, sync_event, sync_type,
    blocks_host, pid, tid, ts, dur, stream, device."""
    # The few kinds looked at, once: each query below would filter the whole rank again.
    lf = (
        events.lazy()
        .filter(pl.col("kind").is_in(("runtime", "driver", "memcpy", "sync")))
        .select(
            "idx",
            "name",
            "kind",
            "correlation",
            "sync_kind",
            "pid",
            "tid",
            "ts",
            "dur",
            "stream",
            "device",
        )
        .collect()
    )
    # Only host calls named as a sync or a copy can be one (`_SYNC_WORDS`): the queries
    # below see a few rows, not every kernel launch (several of them read the calls twice).
    launch = pl.col("kind").is_in(("runtime", "driver"))
    small = lf.filter(~launch | pl.col("name").str.contains_any(_SYNC_WORDS))
    lf = small.lazy()
    launches = lf.filter(launch)
    # The suffix regex on the few distinct call names, not on every call.
    names = launches.select(pl.col("name").unique()).collect().to_series()
    types = names.to_frame().with_columns(
        pl.col("name")
        .str.replace(_SUFFIX_RE, "")
        .replace_strict(SYNC_CALLS, default=None)
        .alias("sync_type")
    )
    async_names = names.filter(names.str.contains(_ASYNC_COPY_RE))
    # Only calls that can be syncs go further (an inner join drops every kernel launch).
    maybe = pl.col("sync_type").is_not_null() | pl.col("name").is_in(async_names.implode())
    types = types.filter(maybe)
    if types.is_empty() and not (small["kind"] == "sync").any():  # no sync call, no GPU sync
        return pl.DataFrame(schema=_CALL_SCHEMA)
    host = launches.join(types.lazy(), on="name").collect().lazy()
    copy_names = lf.filter(pl.col("kind") == "memcpy").select(pl.col("name").unique()).collect()
    pageable_names = copy_names.filter(pl.col("name").str.contains(_PAGEABLE_DTOH_RE))["name"]
    gpu_syncs = lf.filter(pl.col("kind") == "sync").select(
        pl.col("idx").alias("g_idx"),
        "correlation",
        pl.coalesce(pl.col("sync_kind"), pl.col("name")).alias("g_kind"),
        pl.col("stream").alias("g_stream"),
        pl.col("device").alias("g_device"),
        pl.col("ts").alias("g_ts"),
        pl.col("dur").alias("g_dur"),
    )
    # An async copy into pageable host memory blocks like a synchronous one.
    pageable = (
        lf.filter((pl.col("kind") == "memcpy") & pl.col("name").is_in(pageable_names.implode()))
        .select("correlation", pl.col("stream").alias("c_stream"), pl.col("device").alias("c_dev"))
        .unique("correlation")
    )
    async_copies = (
        host.filter(pl.col("sync_type").is_null() & pl.col("name").is_in(async_names.implode()))
        .join(pageable, on="correlation")
        .with_columns(pl.lit("pageable_copy").alias("sync_type"))
    )
    calls = pl.concat(
        [
            host.filter(pl.col("sync_type").is_not_null()).with_columns(
                pl.lit(None, pl.Int64).alias("c_stream"), pl.lit(None, pl.Int64).alias("c_dev")
            ),
            async_copies,
        ],
        how="diagonal_relaxed",
    ).join(gpu_syncs, on="correlation", how="left")
    calls = calls.unique("idx", keep="first").collect().lazy()
    host_rows = calls.select(
        "idx",
        pl.col("name").alias("call"),
        "correlation",
        pl.col("g_idx").alias("sync_event"),
        pl.coalesce(
            pl.col("g_kind").replace_strict(GPU_SYNC_KINDS, default=None), "sync_type"
        ).alias("sync_type"),
        "pid",
        "tid",
        "ts",
        "dur",
        pl.coalesce("g_stream", "c_stream").alias("stream"),
        pl.coalesce("g_device", "c_dev").alias("device"),
    )
    matched = calls.select(pl.col("g_idx").alias("idx")).drop_nulls()
    orphans = gpu_syncs.join(matched, left_on="g_idx", right_on="idx", how="anti").select(
        pl.col("g_idx").alias("idx"),
        pl.col("g_kind").alias("call"),
        "correlation",
        pl.col("g_idx").alias("sync_event"),
        pl.col("g_kind").replace_strict(GPU_SYNC_KINDS, default="other").alias("sync_type"),
        pl.lit(None, pl.Int64).alias("pid"),
        pl.lit(None, pl.Int64).alias("tid"),
        pl.col("g_ts").alias("ts"),
        pl.col("g_dur").alias("dur"),
        pl.col("g_stream").alias("stream"),
        pl.col("g_device").alias("device"),
    )
    rows = pl.concat([host_rows, orphans], how="vertical_relaxed").with_columns(
        # A stream wait is queued on the GPU; a GPU-side sync without host call blocked no one.
        (pl.col("sync_type") != "stream_wait_event")
        .and_(pl.col("pid").is_not_null())
        .alias("blocks_host")
    )
    return rows.sort("ts", "idx").collect()


def in_flight(events: pl.DataFrame, calls: pl.DataFrame) -> pl.DataFrame:
    """GPU work running while each sync blocked: idx, gpu_ops_in_flight, waited_for."""
    schema = {"idx": pl.UInt32(), "gpu_ops_in_flight": pl.UInt32(), "waited_for": pl.String()}
    if calls.is_empty():
        return pl.DataFrame(schema=schema)
    gpu = (
        events.lazy()
        .filter(pl.col("kind").is_in(("kernel", "memcpy", "memset")))
        .select(
            pl.col("name").alias("k_name"),
            pl.col("ts").alias("k_ts"),
            (pl.col("ts") + pl.col("dur")).alias("k_end"),
            pl.col("stream").alias("k_stream"),
            pl.col("device").alias("k_device"),
        )
    )
    q = calls.lazy().select(
        "idx",
        "ts",
        (pl.col("ts") + pl.col("dur")).alias("end"),
        "stream",
        "device",
        pl.col("sync_type").is_in(_STREAM_TYPES).alias("one_stream"),
    )
    same_stream = (
        ~pl.col("one_stream")
        | pl.col("stream").is_null()
        | (pl.col("stream") == pl.col("k_stream"))
    )
    same_device = pl.col("device").is_null() | (pl.col("device") == pl.col("k_device"))
    hits = (
        q.join_where(gpu, pl.col("k_ts") < pl.col("end"), pl.col("k_end") > pl.col("ts"))
        .filter(same_stream & same_device)
        .sort("k_end")
        .group_by("idx")
        .agg(
            pl.len().cast(pl.UInt32).alias("gpu_ops_in_flight"),
            pl.col("k_name").last().alias("waited_for"),
        )
    )
    return hits.collect().cast(schema)


def may_sync(ranks: Mapping[int, pl.DataFrame]) -> set[int]:
    """The ranks `sync_calls` can find a sync on (a superset), in one query over every
    rank's events: a GPU sync event, a runtime call named as a sync call, or an async copy
    call on a rank with a copy into pageable memory (which it syncs on)."""
    events = ranks_events(ranks)
    if events.is_empty():
        return set()
    runtime = pl.col("kind").is_in(("runtime", "driver"))
    # The patterns on the few distinct call names, not on every call of every rank (a
    # regex per call was a third of the Syncs view's first visit on 8 real ranks).
    names = events.lazy().filter(runtime).select(pl.col("name").unique()).collect()["name"]
    call = names.str.replace(_SUFFIX_RE, "").is_in(list(SYNC_CALLS))
    syncing = names.filter(call)
    copying = names.filter(names.str.contains(_ASYNC_COPY_RE))
    copies = events.lazy().filter(pl.col("kind") == "memcpy").select(pl.col("name").unique())
    copied = copies.collect()["name"]
    pageable = copied.filter(copied.str.contains(_PAGEABLE_DTOH_RE))
    # an async copy syncs only with a copy into pageable memory (`sync_calls`): a rank
    # whose copies are all pinned (every tiny rank of a synthetic job) has none
    found = (
        events.lazy()
        .group_by("rank")
        .agg(
            ((pl.col("kind") == "sync") | (runtime & pl.col("name").is_in(syncing.implode())))
            .any()
            .alias("syncs"),
            (runtime & pl.col("name").is_in(copying.implode())).any().alias("copies"),
            ((pl.col("kind") == "memcpy") & pl.col("name").is_in(pageable.implode()))
            .any()
            .alias("pageable"),
        )
        .filter(pl.col("syncs") | (pl.col("copies") & pl.col("pageable")))
        .select("rank")
    )
    return set(found.collect()["rank"].to_list())


def rank_syncs(events: pl.DataFrame, flows: pl.DataFrame | None = None) -> pl.DataFrame:
    """The syncs of one rank with attribution (SYNC_COLUMNS without rank)."""
    checkpoint()  # each rank is a piece a view left behind stops after
    calls = sync_calls(events)
    if calls.is_empty():  # nothing to attribute (most tiny ranks): none of the ~40 queries
        return pl.DataFrame(schema={c: t for c, t in SYNC_COLUMNS.items() if c != "rank"})
    flight = in_flight(events, calls)
    host = calls.filter(pl.col("pid").is_not_null())
    around = enclosing(events, host)
    own = context(events, host, around)
    # Backward: the innermost enclosing backward op with a known forward op lends its.
    in_bwd = around.filter(
        (pl.col("c_kind") == "cpu_op") & pl.col("c_name").str.contains(BACKWARD_RE)
    )["c_idx"].unique()
    origins = backward_origins(events, flows, only=in_bwd) if in_bwd.len() else None
    bwd = pl.DataFrame(schema={"q": pl.UInt32(), "bwd": pl.UInt32(), "fwd": pl.UInt32()})
    if origins is not None and not origins.is_empty():
        known = origins.filter(pl.col("fwd").is_not_null())
        bwd = (
            around.join(known.select(pl.col("bwd").alias("c_idx"), "fwd"), on="c_idx")
            .group_by("q", maintain_order=True)
            .agg(pl.col("c_idx").last().alias("bwd"), pl.col("fwd").last())
        )
    fwd_ctx = (
        context(events, rows_at(events, bwd["fwd"].unique(), ("pid", "tid", "ts", "dur")))
        if bwd.height
        else pl.DataFrame(schema=CONTEXT_COLUMNS)  # (no forward op: no query of the rank)
    )
    names = rows_at(events, pl.concat([bwd["bwd"], bwd["fwd"]]).unique(), ("name",))
    attributed = (
        own.join(bwd, on="q", how="left")
        .join(
            fwd_ctx.rename({c: f"f_{c}" for c in CONTEXT_COLUMNS}),
            left_on="fwd",
            right_on="f_q",
            how="left",
        )
        .join(names.rename({"idx": "bwd", "name": "backward_op"}), on="bwd", how="left")
        .join(names.rename({"idx": "fwd", "name": "forward_op"}), on="fwd", how="left")
    )
    if origins is not None:
        attributed = attributed.join(
            origins.select(pl.col("bwd"), "hook_module"), on="bwd", how="left"
        )
    else:
        attributed = attributed.with_columns(pl.lit(None, pl.String).alias("hook_module"))
    is_bwd = pl.col("fwd").is_not_null()
    # A backward sync's own stack may hold user code (a custom autograd Function's backward,
    # a hook): that deeper frame is where it happened; else the forward op's call site.
    own_site = pl.col("call_site").is_not_null()
    lend_site = is_bwd & ~own_site
    borrowed = ("module", "module_path", "annotation")
    attributed = attributed.select(
        pl.col("q").alias("idx"),
        pl.when(is_bwd).then(pl.lit("backward")).otherwise(pl.lit("forward")).alias("phase"),
        "operator",
        "op_stack",
        "backward_op",
        "forward_op",
        *(pl.when(is_bwd).then(pl.col(f"f_{c}")).otherwise(pl.col(c)).alias(c) for c in borrowed),
        *(
            pl.when(lend_site).then(pl.col(f"f_{c}")).otherwise(pl.col(c)).alias(c)
            for c in ("call_site", "python_stack")
        ),
        "step",
        "hook_module",
    )
    out = (
        calls.join(flight, on="idx", how="left")
        .join(attributed, on="idx", how="left")
        .with_columns(
            us(pl.col("ts")).alias("start (us)"),
            us(pl.when("blocks_host").then(pl.col("dur")).otherwise(0)).alias("blocked (us)"),
            pl.col("gpu_ops_in_flight").fill_null(0),
        )
    )
    return out.select([c for c in SYNC_COLUMNS if c != "rank"])


def syncs(
    ranks: Mapping[int, pl.DataFrame], flows: Mapping[int, pl.DataFrame] | None = None
) -> pl.DataFrame:
    """Every sync of every rank (SYNC_COLUMNS), in time order per rank. Over several ranks,
    only those that may have one (`may_sync`) are looked at: a tiny rank without costs ~10
    queries to find it has none."""
    maybe = may_sync(ranks) if len(ranks) > 1 else set(ranks)
    frames = [
        rank_syncs(events, (flows or {}).get(rank)).select(
            pl.lit(rank, pl.Int64).alias("rank"), pl.all()
        )
        for rank, events in sorted(ranks.items())
        if rank in maybe
    ]
    frames = [f for f in frames if not f.is_empty()]
    if not frames:
        return pl.DataFrame(schema=SYNC_COLUMNS)
    return pl.concat(frames).cast(SYNC_COLUMNS)
