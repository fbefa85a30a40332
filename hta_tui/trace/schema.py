"""Column layout of the frames every reader produces and every analysis consumes.

One place names the columns so the parser, the cache and the analyses cannot drift apart.
Times are integer nanoseconds as written in the file (Kineto writes microseconds, with up to
three decimals); `TraceSet.origin_ns` aligns ranks. Nanoseconds keep fractional timestamps
exact, where HTA rounds them to whole microseconds.
"""

from __future__ import annotations

import polars as pl

#: Normalised event kinds. Legacy (`Kernel`, `Runtime`, ...) and current (`kernel`,
#: `cuda_runtime`, ...) categories map onto these, so analyses never look at `cat`.
KINDS: tuple[str, ...] = (
    "kernel",  # GPU kernel (CUDA, ROCm, Triton, other accelerators)
    "memcpy",  # GPU memcpy
    "memset",  # GPU memset
    "sync",  # cuda_sync spans on a stream (Stream Sync, Event Sync, ...)
    "gpu_annotation",  # gpu_user_annotation: ranges on a stream, not work
    "runtime",  # cuda_runtime / hip runtime calls on the CPU
    "driver",  # cuda_driver calls (cuLaunchKernel, ...)
    "cpu_op",  # aten and other operators
    "annotation",  # user_annotation, record_function, ProfilerStep#N
    "python",  # python_function
    "trace_span",  # the profiler's own "Trace" span
    "other",
)
KIND = pl.Enum(KINDS)

#: GPU-side kinds that occupy a stream.
GPU_WORK_KINDS: tuple[str, ...] = ("kernel", "memcpy", "memset")
#: Kinds that launch GPU work from the CPU.
LAUNCH_KINDS: tuple[str, ...] = ("runtime", "driver")

EVENTS_SCHEMA: dict[str, pl.DataType] = {
    "idx": pl.UInt32(),  # position in traceEvents, stable id within a file
    "ts": pl.Int64(),  # start, ns, as in the file
    "dur": pl.Int64(),  # ns
    "name": pl.String(),
    "cat": pl.String(),  # the category as written
    "kind": KIND,
    "pid": pl.Int64(),  # null when the file names it with a string
    "tid": pl.Int64(),  # null when not a number (legacy "stream 7" gives stream 7)
    "stream": pl.Int64(),  # GPU stream; null for CPU-side events
    "device": pl.Int64(),
    "correlation": pl.Int64(),  # links a kernel to its launch
    "external_id": pl.Int64(),  # links a launch to its cpu op
    "bytes": pl.Int64(),  # memcpy / memset size
    "bandwidth": pl.Float64(),  # GB/s as written; null when absent
    "grid": pl.Array(pl.Int64(), 3),  # kernels only, like registers .. occupancy
    "block": pl.Array(pl.Int64(), 3),
    "registers": pl.Int64(),
    "shared_memory": pl.Int64(),
    "occupancy": pl.Float64(),  # est. achieved occupancy %
    "sync_kind": pl.String(),  # cuda_sync_kind
    "wait_on_stream": pl.Int64(),  # Stream Wait Event: the stream waited for
    "input_dims": pl.String(),  # JSON text, for shape-aware matching; CPU-side rows only
    "input_type": pl.String(),
    "seq": pl.Int64(),  # autograd sequence number
    "blocks_per_sm": pl.Float64(),  # kernels: "blocks per SM" (TensorBoard plugin's SM efficiency)
    "call_stack": pl.String(),  # cpu ops: "Call stack" (with_stack, PyTorch < 2)
    # collective args (record_param_comms, NCCL kernels of newer PyTorch); null elsewhere
    "coll_name": pl.String(),  # "allreduce", "_allgather_base", ...
    "in_nelems": pl.Int64(),
    "out_nelems": pl.Int64(),
    "group_size": pl.Int64(),
    "dtype": pl.String(),  # "Float", "BFloat16", ...
    "pg_name": pl.String(),  # process group
    "pg_ranks": pl.String(),  # JSON text of the group's global ranks
    "comm_seq": pl.Int64(),  # the collective's sequence number in its group, when written
    "python_id": pl.Int64(),  # python_function frames: the frame's id ...
    "python_parent_id": pl.Int64(),  # ... its caller's, for stacks without time nesting
    "python_module_id": pl.Int64(),  # set on `nn.Module:` frames (with_modules)
    # kernels: the CUDA-graph kernel annotation (module FQN or name; `events.annotations`)
    "annotation": pl.String(),
}

#: The collective args' columns (see EVENTS_SCHEMA), in one list for the parser and analyses.
COMM_COLUMNS: tuple[str, ...] = (
    "coll_name",
    "in_nelems",
    "out_nelems",
    "group_size",
    "dtype",
    "pg_name",
    "pg_ranks",
    "comm_seq",
)

FLOWS_SCHEMA: dict[str, pl.DataType] = {
    "id": pl.Int64(),
    "ph": pl.String(),  # "s" start, "f" finish
    "cat": pl.String(),  # ac2g, fwdbwd, async_cpu_to_gpu
    "ts": pl.Int64(),
    "pid": pl.Int64(),
    "tid": pl.Int64(),
}

THREADS_SCHEMA: dict[str, pl.DataType] = {
    "pid": pl.Int64(),
    "tid": pl.Int64(),
    "key": pl.String(),  # process_name, thread_name, process_labels, ...
    "value": pl.String(),
}

#: One row per `[memory]` instant event (profile_memory=True), in file order.
MEMORY_SCHEMA: dict[str, pl.DataType] = {
    "ts": pl.Int64(),  # ns, as in the file
    "bytes": pl.Int64(),  # > 0 an allocation, < 0 a free
    "total_allocated": pl.Float64(),  # bytes after this event; null when absent
    "total_reserved": pl.Float64(),
    "addr": pl.Int64(),  # null in traces before PyTorch 1.10
    "device_type": pl.Int64(),  # 0 CPU, 1 CUDA; ROCm builds write other numbers
    "device_id": pl.Int64(),  # -1 on the CPU
    "pid": pl.Int64(),
    "tid": pl.Int64(),
}

FRAME_SCHEMAS: dict[str, dict[str, pl.DataType]] = {
    "events": EVENTS_SCHEMA,
    "flows": FLOWS_SCHEMA,
    "threads": THREADS_SCHEMA,
    "memory": MEMORY_SCHEMA,
}


def empty(frame: str) -> pl.DataFrame:
    """An empty frame of the named layout, so consumers never special-case missing data."""
    return pl.DataFrame(schema=FRAME_SCHEMAS[frame])
