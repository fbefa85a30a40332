"""Small hand-made traces in every dialect the reader must accept.

Shapes follow real files: PyTorch 1.8-era traces (capitalised categories, string tids such as
"stream 7", lower-case "external id"), PyTorch 2.x (`kernel`, `cuda_runtime`, flows), ROCm
(`hip*` runtime calls, `computeProperties`, stream labels), Triton (`cuda_driver`
cuLaunchKernel), Cambricon MLU (`mlu_runtime` cnInvokeKernel), CPU-only and nanosecond
(fractional microsecond) timestamps.
"""

from __future__ import annotations

import gzip
from pathlib import Path
from typing import Any

import orjson


def write(trace: dict[str, Any] | bytes, path: Path) -> Path:
    data = trace if isinstance(trace, bytes) else orjson.dumps(trace)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(gzip.compress(data) if path.name.endswith(".gz") else data)
    return path


def current(rank: int = 0, *, t0: float = 1_700_000_000_000_000.0) -> dict[str, Any]:
    """PyTorch 2.x: one step, two kernels on stream 7, a memcpy, flows."""
    cpu = {"pid": 100, "tid": 100}
    ev: list[dict[str, Any]] = [
        {
            "ph": "X",
            "cat": "user_annotation",
            "name": "ProfilerStep#1",
            **cpu,
            "ts": t0,
            "dur": 100,
            "args": {"External id": 1},
        },
        {
            "ph": "X",
            "cat": "cpu_op",
            "name": "aten::mm",
            **cpu,
            "ts": t0 + 1,
            "dur": 20,
            "args": {
                "External id": 2,
                "Input Dims": [[4, 8], [8, 16]],
                "Input type": ["float", "float"],
            },
        },
        {
            "ph": "X",
            "cat": "cuda_runtime",
            "name": "cudaLaunchKernel",
            **cpu,
            "ts": t0 + 2,
            "dur": 5,
            "args": {"External id": 2, "cbid": 211, "correlation": 10},
        },
        {
            "ph": "X",
            "cat": "kernel",
            "name": "ampere_sgemm_128x64_tn",
            "pid": 0,
            "tid": 7,
            "ts": t0 + 10,
            "dur": 30,
            "args": {
                "External id": 2,
                "device": 0,
                "stream": 7,
                "correlation": 10,
                "grid": [4, 2, 1],
                "block": [128, 1, 1],
                "registers per thread": 64,
            },
        },
        {
            "ph": "X",
            "cat": "cuda_runtime",
            "name": "cudaMemcpyAsync",
            **cpu,
            "ts": t0 + 30,
            "dur": 4,
            "args": {"External id": 3, "correlation": 11},
        },
        {
            "ph": "X",
            "cat": "gpu_memcpy",
            "name": "Memcpy DtoH (Device -> Pinned)",
            "pid": 0,
            "tid": 7,
            "ts": t0 + 50,
            "dur": 10,
            "args": {
                "device": 0,
                "stream": 7,
                "correlation": 11,
                "bytes": 4096,
                "memory bandwidth (GB/s)": 0.4096,
            },
        },
        {"ph": "s", "id": 10, **cpu, "ts": t0 + 2, "cat": "ac2g", "name": "ac2g"},
        {
            "ph": "f",
            "id": 10,
            "pid": 0,
            "tid": 7,
            "ts": t0 + 10,
            "cat": "ac2g",
            "name": "ac2g",
            "bp": "e",
        },
        {"ph": "M", "name": "thread_name", **cpu, "ts": t0, "args": {"name": "python"}},
        {
            "ph": "X",
            "cat": "Trace",
            "name": "PyTorch Profiler (0)",
            "pid": "Spans",
            "tid": "PyTorch Profiler",
            "ts": t0 - 5,
            "dur": 200,
            "args": {"Op count": 0},
        },
        {
            "name": "Iteration Start: PyTorch Profiler",
            "ph": "i",
            "s": "g",
            "pid": "Traces",
            "tid": "Trace PyTorch Profiler",
            "ts": t0 - 5,
        },
    ]
    return {
        "schemaVersion": 1,
        "deviceProperties": [{"id": 0, "name": "NVIDIA A100-SXM4-80GB"}],
        "distributedInfo": {"backend": "nccl", "rank": rank, "world_size": 2},
        "traceEvents": ev,
    }


def legacy() -> dict[str, Any]:
    """PyTorch 1.8: Kernel/Runtime/Operator/Memcpy/Memset, "stream 7" tids, "external id"."""
    return {
        "schemaVersion": 1,
        "traceEvents": [
            {
                "ph": "X",
                "cat": "Operator",
                "name": "aten::add",
                "pid": 12,
                "tid": "12",
                "ts": 1000,
                "dur": 30,
                "args": {"external id": 5},
            },
            {
                "ph": "X",
                "cat": "Runtime",
                "name": "cudaLaunchKernel",
                "pid": 12,
                "tid": "12",
                "ts": 1005,
                "dur": 8,
                "args": {"correlation": 77, "external id": 5},
            },
            {
                "ph": "X",
                "cat": "Kernel",
                "name": "void add_kernel<float>()",
                "pid": 0,
                "tid": "stream 7",
                "ts": 1020,
                "dur": 12,
                "args": {
                    "queued": 0,
                    "device": 0,
                    "context": 1,
                    "stream": 7,
                    "correlation": 77,
                    "external id": 5,
                },
            },
            {
                "ph": "X",
                "cat": "Memcpy",
                "name": "Memcpy HtoD (Pageable -> Device)",
                "pid": 0,
                "tid": "stream 7",
                "ts": 1040,
                "dur": 3,
                "args": {"device": 0, "stream": 7, "correlation": 78, "bytes": 64},
            },
            {
                "ph": "X",
                "cat": "Memset",
                "name": "Memset (Device)",
                "pid": 0,
                "tid": "stream 9",
                "ts": 1050,
                "dur": 1,
                "args": {"correlation": 79},
            },
        ],
    }


def rocm() -> dict[str, Any]:
    """ROCm: hip runtime, computeProperties, a hex stream label, no bandwidth arg."""
    return {
        "schemaVersion": 1,
        "computeProperties": [{"id": 0, "name": "AMD Instinct MI250X"}],
        "distributedInfo": {"rank": 2},
        "traceEvents": [
            {
                "ph": "X",
                "cat": "cuda_runtime",
                "name": "hipLaunchKernel",
                "pid": 50,
                "tid": 50,
                "ts": 10.5,
                "dur": 4.25,
                "args": {"correlation": 3},
            },
            {
                "ph": "X",
                "cat": "kernel",
                "name": "Cijk_Ailk_Bljk_SB_MT64x64x16",
                "pid": 2,
                "tid": "stream 0x0",
                "ts": 20.125,
                "dur": 7.5,
                "args": {"device": 2, "stream": "0x0", "correlation": 3},
            },
            {
                "ph": "X",
                "cat": "cuda_runtime",
                "name": "hipMemcpyWithStream",
                "pid": 50,
                "tid": 50,
                "ts": 30,
                "dur": 2,
                "args": {"correlation": 4},
            },
            {
                "ph": "X",
                "cat": "gpu_memcpy",
                "name": "Memcpy HtoD",
                "pid": 2,
                "tid": "stream 0x1",
                "ts": 33,
                "dur": 4,
                "args": {"device": 2, "stream": "0x1", "correlation": 4, "bytes": 1_000_000},
            },
        ],
    }


def triton_driver() -> dict[str, Any]:
    """Triton: the launch is a cuda_driver cuLaunchKernel, no distributedInfo."""
    return {
        "traceEvents": [
            {
                "ph": "X",
                "cat": "cuda_driver",
                "name": "cuLaunchKernel",
                "pid": 1,
                "tid": 1,
                "ts": 100.0,
                "dur": 40.0,
                "args": {"correlation": 35},
            },
            {
                "ph": "X",
                "cat": "kernel",
                "name": "triton_poi_fused_add_0",
                "pid": 0,
                "tid": 7,
                "ts": 150.0,
                "dur": 2.0,
                "args": {"device": 0, "stream": 7, "correlation": 35, "grid": "grid(1,)"},
            },
        ]
    }


def mlu() -> dict[str, Any]:
    """A non-CUDA accelerator (Cambricon MLU): mlu_runtime launches, dimx/dimy/dimz args."""
    return {
        "schemaVersion": 1,
        "traceEvents": [
            {
                "ph": "X",
                "cat": "mlu_runtime",
                "name": "cnInvokeKernel",
                "pid": 7,
                "tid": 7,
                "ts": 8896795.623,
                "dur": 14.667,
                "args": {"External id": 0, "correlation": 4625},
            },
            {
                "ph": "X",
                "cat": "kernel",
                "name": "void MLUBlockKernel<float>()",
                "pid": 0,
                "tid": 1,
                "ts": 8896815.781,
                "dur": 23.6,
                "args": {
                    "device": 0,
                    "stream": 1,
                    "correlation": 4625,
                    "dimx": 1,
                    "dimy": 640,
                    "dimz": 1,
                },
            },
        ],
    }


def cpu_only(rank: int = 5) -> dict[str, Any]:
    return {
        "distributedInfo": {"backend": "gloo", "rank": rank},
        "traceEvents": [
            {
                "ph": "X",
                "cat": "cpu_op",
                "name": "aten::empty",
                "pid": 1,
                "tid": 1,
                "ts": 1.5,
                "dur": 2.25,
            },
            {
                "ph": "X",
                "cat": "user_annotation",
                "name": "gloo:all_reduce",
                "pid": 1,
                "tid": 2,
                "ts": 0.5,
                "dur": 100.0,
            },
        ],
    }


def nanoseconds() -> dict[str, Any]:
    """PyTorch >= 2.2 with baseTimeNanoseconds: fractional microseconds at ns precision."""
    return {
        "baseTimeNanoseconds": 1_727_743_122_000_000_000,
        "distributedInfo": {"rank": 0},
        "traceEvents": [
            {
                "ph": "X",
                "cat": "kernel",
                "name": "k",
                "pid": 0,
                "tid": 7,
                "ts": 4458676983543.183,
                "dur": 41.407,
                "args": {"stream": 7, "correlation": 1},
            },
            {
                "ph": "X",
                "cat": "kernel",
                "name": "k",
                "pid": 0,
                "tid": 7,
                "ts": 4458676983584.591,
                "dur": 0.001,
                "args": {"stream": 7, "correlation": 2},
            },
        ],
    }
