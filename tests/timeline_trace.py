"""A small hand-written trace for the timeline tests (no tests here): every expected value in
them is read off the events below.

Per rank (rank r starts r * 100 us later), times in us from the rank's start:
  main thread (tid 1): ProfilerStep#1 [0, 1000) > aten::linear [100, 400) (seq 5)
      > aten::addmm [110, 390) > cudaLaunchKernel [120, 130) (correlation 1);
      aten::relu [500, 600) (seq 6) > cudaLaunchKernel [510, 515) (correlation 2)
  backward thread (tid 2): AddmmBackward0 [1200, 1300) (seq 5; fwdbwd flow from aten::linear)
  stream 7: gemm kernel [150, 350) (corr 1), relu kernel [520, 560) (corr 2),
      memcpy [700, 720)
  stream 20: ncclKernel [300, 800)
"""

from __future__ import annotations

import gzip
from pathlib import Path
from typing import Any

import orjson

from hta_tui.synth.events import complete

T0 = 1_700_000_000_000_000  # us
RANK_OFFSET_US = 100

GEMM = "sm80_xmma_gemm_f32f32_tn"
RELU = "vectorized_elementwise_kernel_relu"
NCCL = "ncclDevKernel_AllReduce_Sum_f32_RING_LL"
MEMCPY = "Memcpy DtoH (Device -> Pinned)"


_x = complete


def timeline_trace(rank: int, world: int = 2) -> dict[str, Any]:
    t = T0 + rank * RANK_OFFSET_US
    cpu, gpu = 10 + rank, rank
    ev = [
        {"ph": "M", "name": "thread_name", "pid": cpu, "tid": 1, "args": {"name": "main"}},
        {"ph": "M", "name": "thread_name", "pid": cpu, "tid": 2, "args": {"name": "backward"}},
        _x("user_annotation", "ProfilerStep#1", cpu, 1, t, 1000),
        _x("cpu_op", "aten::linear", cpu, 1, t + 100, 300, **{"Sequence number": 5}),
        _x("cpu_op", "aten::addmm", cpu, 1, t + 110, 280),
        _x("cuda_runtime", "cudaLaunchKernel", cpu, 1, t + 120, 10, correlation=1),
        _x("cpu_op", "aten::relu", cpu, 1, t + 500, 100, **{"Sequence number": 6}),
        _x("cuda_runtime", "cudaLaunchKernel", cpu, 1, t + 510, 5, correlation=2),
        _x("cpu_op", "AddmmBackward0", cpu, 2, t + 1200, 100, **{"Sequence number": 5}),
        _x("kernel", GEMM, gpu, 7, t + 150, 200, device=gpu, stream=7, correlation=1),
        _x("kernel", RELU, gpu, 7, t + 520, 40, device=gpu, stream=7, correlation=2),
        _x("gpu_memcpy", MEMCPY, gpu, 7, t + 700, 20, device=gpu, stream=7),
        _x("kernel", NCCL, gpu, 20, t + 300, 500, device=gpu, stream=20),
        {
            "ph": "s",
            "cat": "fwdbwd",
            "name": "fwdbwd",
            "id": 5,
            "pid": cpu,
            "tid": 1,
            "ts": t + 100,
        },
        {
            "ph": "f",
            "cat": "fwdbwd",
            "name": "fwdbwd",
            "id": 5,
            "pid": cpu,
            "tid": 2,
            "ts": t + 1200,
            "bp": "e",
        },
    ]
    return {
        "schemaVersion": 1,
        "distributedInfo": {"backend": "nccl", "rank": rank, "world_size": world},
        "traceEvents": ev,
    }


def write_timeline_traces(folder: Path, ranks: int = 2) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    for r in range(ranks):
        data = orjson.dumps(timeline_trace(r, ranks))
        (folder / f"rank-{r}.trace.json.gz").write_bytes(gzip.compress(data, mtime=0))
    return folder
