"""A small job of many short device ops on overlapping streams, in any accelerator's dialect.

The main generator (`files`, `rank`, ...) simulates a CUDA training loop at benchmark sizes;
this one writes the few-hundred-event traces that parity tests need HTA 0.5's own answers
for: nanosecond timestamps (written with three decimals, as Kineto does), sub-microsecond
memsets, kernels that overlap across streams, and the category and name spellings of CUDA,
ROCm and MTIA (`shapes`). Times are integer ns throughout and written as exact decimals, so
a reader can tell what precision it keeps. Output is a pure function of the arguments.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson


@dataclass(frozen=True)
class Dialect:
    """How one accelerator's profiler spells its events."""

    runtime_cat: str = "cuda_runtime"
    kernel_cat: str = "kernel"
    memcpy_cat: str = "gpu_memcpy"
    memset_cat: str = "gpu_memset"
    launch: str = "cudaLaunchKernel"
    memcpy_launch: str = "cudaMemcpyAsync"
    memset_launch: str = "cudaMemsetAsync"
    kernels: tuple[str, ...] = (
        "void gemm_kernel<float>(float const*, float*)",
        "void elementwise_kernel<128, 4>(int, float*)",
        "void reduce_kernel<512, 1>(float*)",
        "triton_poi_fused_add_mul_0",
    )
    comm_kernel: str = "ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevComm*, unsigned long)"
    memcpy_name: str = "Memcpy HtoD (Pinned -> Device)"
    memset_name: str = "Memset (Device)"
    #: args.stream written on runtime calls (ROCm: "0x0"); None writes none.
    runtime_stream: str | None = None
    #: gpu_user_annotation ProfilerStep#N spans on the device, beside the CPU-side steps.
    gpu_steps: bool = False
    #: The device ops first in the file (a kernel as event 0, HTA's index_correlation edge).
    device_first: bool = False
    extra_head: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class JobShape:
    """The size and timing of the job (ns)."""

    ranks: int = 2
    steps: int = 3
    ops_per_step: int = 24
    base_ns: int = 1_700_000_000_000_000_123
    streams: tuple[int, ...] = (7, 13)
    comm_stream: int = 28
    seed: int = 0


def job_events(dialect: Dialect, shape: JobShape, rank: int) -> list[dict[str, Any]]:
    """One rank's complete events, times as integer ns in `ts_ns` / `dur_ns`."""
    rnd = random.Random(shape.seed * 1000 + rank)
    cpu, dev, main = 1000 + rank, rank, 1
    cpu_events: list[dict[str, Any]] = []
    dev_events: list[dict[str, Any]] = []
    free = dict.fromkeys((*shape.streams, shape.comm_stream), 0)
    t = shape.base_ns + rnd.randrange(1_000, 9_000)
    corr = 1000 * (rank + 1)
    for step in range(1, shape.steps + 1):
        step_start = t
        first_dev, last_dev = None, 0
        t += rnd.randrange(2_000, 6_000)
        for i in range(shape.ops_per_step):
            op_start = t
            kind = _pick(rnd, i)
            t += rnd.randrange(300, 1_500)
            corr += 1
            launch = {
                "kernel": dialect.launch,
                "comm": dialect.launch,
                "memset": dialect.memset_launch,
                "memcpy": dialect.memcpy_launch,
            }[kind]
            launch_dur = rnd.randrange(1_500, 7_000)
            args: dict[str, Any] = {"correlation": corr, "cbid": 211}
            if dialect.runtime_stream is not None:
                args["stream"] = dialect.runtime_stream
            cpu_events.append(_x(dialect.runtime_cat, launch, cpu, main, t, launch_dur, args))
            stream = shape.comm_stream if kind == "comm" else rnd.choice(shape.streams)
            start = max(t + rnd.randrange(2_000, 9_000), free[stream] + rnd.randrange(0, 800))
            dur, name, cat, dargs = _device_op(dialect, kind, rnd)
            dargs |= {"device": dev, "stream": stream, "correlation": corr, "External id": corr}
            dev_events.append(_x(cat, name, dev, stream, start, dur, dargs))
            free[stream] = start + dur
            first_dev = start if first_dev is None else min(first_dev, start)
            last_dev = max(last_dev, start + dur)
            t += launch_dur + rnd.randrange(200, 1_200)
            cpu_events.append(_x("cpu_op", f"aten::op_{kind}", cpu, main, op_start, t - op_start))
            t += rnd.randrange(100, 2_000)
        if step == shape.steps // 2 + 1:  # a host stall: the GPU runs dry ("host_wait")
            t += rnd.randrange(40_000, 80_000)
        step_name = f"ProfilerStep#{step}"
        cpu_events.append(_x("user_annotation", step_name, cpu, main, step_start, t - step_start))
        if dialect.gpu_steps and first_dev is not None:
            span = last_dev - first_dev
            dev_events.append(
                _x("gpu_user_annotation", step_name, dev, shape.streams[0], first_dev, span)
            )
    cpu_events.sort(key=lambda e: (e["ts_ns"], -e["dur_ns"]))
    dev_events.sort(key=lambda e: e["ts_ns"])
    return dev_events + cpu_events if dialect.device_first else cpu_events + dev_events


def _pick(rnd: random.Random, i: int) -> str:
    if i % 8 == 7:
        return "comm"
    return rnd.choices(("kernel", "memset", "memcpy"), weights=(6, 3, 1))[0]


def _device_op(dialect: Dialect, kind: str, rnd: random.Random) -> tuple[int, str, str, dict]:
    """(dur ns, name, category, args) of one device op; memsets are sub-microsecond."""
    if kind == "memset":
        return rnd.randrange(200, 1_600), dialect.memset_name, dialect.memset_cat, {}
    if kind == "memcpy":
        size = rnd.choice((4096, 65536, 1 << 20))
        dur = rnd.randrange(1_000, 12_000)
        bw = size / dur  # bytes per ns = GB/s
        args = {"bytes": size, "memory bandwidth (GB/s)": round(bw, 6)}
        return dur, dialect.memcpy_name, dialect.memcpy_cat, args
    if kind == "comm":
        return rnd.randrange(8_000, 40_000), dialect.comm_kernel, dialect.kernel_cat, {}
    return rnd.randrange(400, 25_000), rnd.choice(dialect.kernels), dialect.kernel_cat, {}


def _x(
    cat: str, name: str, pid: int, tid: int, ts: int, dur: int, args: dict | None = None
) -> dict[str, Any]:
    ev: dict[str, Any] = {"ph": "X", "cat": cat, "name": name, "pid": pid, "tid": tid}
    ev |= {"ts_ns": ts, "dur_ns": dur}
    if args:
        ev["args"] = args
    return ev


def _us(ns: int) -> bytes:
    """Integer ns as Kineto writes microseconds: three exact decimals."""
    return b"%d.%03d" % divmod(ns, 1000)


def trace_bytes(dialect: Dialect, shape: JobShape, rank: int) -> bytes:
    """One rank's trace file: a header, then the events with exact decimal timestamps."""
    head = {
        "schemaVersion": 1,
        "distributedInfo": {"backend": "nccl", "rank": rank, "world_size": shape.ranks},
        **dialect.extra_head,
    }
    parts = []
    for ev in job_events(dialect, shape, rank):
        ts, dur = ev.pop("ts_ns"), ev.pop("dur_ns")
        body = orjson.dumps(ev)
        parts.append(b'{"ts":' + _us(ts) + b',"dur":' + _us(dur) + b"," + body[1:])
    # Indented like Kineto's header: HTA finds the rank with the regex `"rank":\s+(\d+)`.
    head_text = orjson.dumps(head, option=orjson.OPT_INDENT_2).rstrip()[:-1]
    return head_text + b',\n  "traceEvents":[' + b",\n".join(parts) + b"]}\n"


def write_job(root: Path, dialect: Dialect, shape: JobShape) -> list[Path]:
    """Every rank's file under `root` (rank-N.pt.trace.json)."""
    root.mkdir(parents=True, exist_ok=True)
    paths = []
    for rank in range(shape.ranks):
        path = root / f"rank-{rank}.pt.trace.json"
        path.write_bytes(trace_bytes(dialect, shape, rank))
        paths.append(path)
    return paths
