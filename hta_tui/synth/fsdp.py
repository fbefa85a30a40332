"""A small FSDP training trace: per layer an all-gather before its forward and a
reduce-scatter after its backward, on NCCL streams beside the compute stream, each issued
inside its layer's nn.Module, with known overlap.

Each step (`ProfilerStep#N`) runs `layers` layers `Layer_0..`: forward, layer i's all-gather
(`ncclDevKernel_AllGather_RING_LL`, `AG_US`) runs while layer i-1 computes (`COMPUTE_US` of
GEMM on the compute stream), except layer 0's, which nothing hides; backward, layer i's
reduce-scatter (`RS_US`) runs while layer i-1's backward computes, except the last one's.
`separate_streams=False` puts both collectives on one stream (FSDP's reduce-scatter then
waits behind the next all-gather: the flag to raise); True gives them a stream each, as
FSDP2 does. Every collective carries PyTorch 2.x's `record_param_comms` args (process
group "1", `_allgather_base` / `_reduce_scatter_base`).
"""

from __future__ import annotations

from typing import Any

from hta_tui.synth.constants import COMPUTE_STREAM
from hta_tui.synth.events import complete

PID = 6161
TID = 6161
DEVICE = 0
AG_STREAM = 20
RS_STREAM_SEPARATE = 24
PG = "1"
AG_US = 100.0
RS_US = 120.0
COMPUTE_US = 300.0
NELEMS = 1 << 20


class _W:
    def __init__(self) -> None:
        self.events: list[dict[str, Any]] = []
        self.corr = 1000
        self.py = 0

    def x(self, cat: str, name: str, pid: int, tid: int, ts: float, dur: float, **args: Any):
        self.events.append(complete(cat, name, pid, tid, ts, dur, **args))

    def module(self, name: str, ts: float, dur: float) -> None:
        self.py += 2
        self.x("python_function", "torch/nn/modules/module.py(1750): _call_impl", PID, TID,
               ts, dur, **{"Python id": self.py, "Python parent id": None})  # fmt: skip
        self.x("python_function", f"nn.Module: {name}", PID, TID, ts + 0.1, dur - 0.2,
               **{"Python id": self.py + 1, "Python parent id": self.py,
                  "Python module id": 0})  # fmt: skip

    def kernel(self, name: str, op: str, ts: float, gpu_ts: float, dur: float, stream: int,
               **args: Any) -> None:  # fmt: skip
        self.corr += 1
        c = self.corr
        self.x("cpu_op", op, PID, TID, ts, 6.0, **{"External id": c})
        self.x("cuda_runtime", "cudaLaunchKernel", PID, TID, ts + 1, 4.0, correlation=c,
               **{"External id": c})  # fmt: skip
        self.x("kernel", name, DEVICE, stream, gpu_ts, dur, device=DEVICE, stream=stream,
               correlation=c, **{"External id": c}, **args)  # fmt: skip

    def collective(self, gather: bool, seq: int, ts: float, gpu_ts: float, stream: int) -> None:
        coll = {
            "Collective name": "_allgather_base" if gather else "_reduce_scatter_base",
            "In msg nelems": NELEMS,
            "Out msg nelems": NELEMS,
            "Group size": 2,
            "dtype": "BFloat16",
            "Process Group Name": PG,
            "Process Group Ranks": "[0, 1]",
            "Seq": seq,
        }
        name = "AllGather_RING_LL" if gather else "ReduceScatter_RING_LL_Sum_bf16"
        self.corr += 1
        c = self.corr
        self.x("cpu_op", "record_param_comms", PID, TID, ts, 6.0, **{"External id": c}, **coll)
        self.x("cuda_runtime", "cudaLaunchKernel", PID, TID, ts + 1, 4.0, correlation=c,
               **{"External id": c})  # fmt: skip
        self.x("kernel", f"ncclDevKernel_{name}(ncclDevKernelArgsStorage<4096ul>)", DEVICE,
               stream, gpu_ts, AG_US if gather else RS_US, device=DEVICE, stream=stream,
               correlation=c, **{"External id": c}, **coll)  # fmt: skip


def make_fsdp(*, steps: int = 2, layers: int = 3, separate_streams: bool = False) -> dict:
    """The trace as a dict (write it with `files.write_trace`); see the module docstring."""
    w = _W()
    rs_stream = RS_STREAM_SEPARATE if separate_streams else AG_STREAM
    t = 1_700_000_000_000.0
    seq = 0
    for step in range(1, steps + 1):
        step_us = 2 * layers * (COMPUTE_US + 200) + 400
        w.x("user_annotation", f"ProfilerStep#{step}", PID, TID, t, step_us)
        gpu = t + 50
        # forward: AG(i) during compute(i-1); AG(0) before any compute
        for i in range(layers):
            host = t + 10 + i * (COMPUTE_US + 200)
            w.module(f"Layer_{i}", host, 150.0)
            seq += 1
            ag_ts = gpu + i * COMPUTE_US if i else gpu
            w.collective(True, seq, host + 5, ag_ts, AG_STREAM)
            comp_ts = gpu + AG_US + i * COMPUTE_US
            w.kernel("ampere_sgemm_128x64_tn", "aten::mm", host + 20, comp_ts, COMPUTE_US,
                     COMPUTE_STREAM)  # fmt: skip
        # backward: RS(i) during backward compute of the layer after it in backward order
        bwd = gpu + AG_US + layers * COMPUTE_US + 50
        for j, i in enumerate(reversed(range(layers))):
            host = t + 10 + (layers + j) * (COMPUTE_US + 200)
            w.module(f"Layer_{i}", host, 150.0)
            comp_ts = bwd + j * COMPUTE_US
            w.kernel("ampere_sgemm_128x64_nn", "aten::mm", host + 5, comp_ts, COMPUTE_US,
                     COMPUTE_STREAM)  # fmt: skip
            seq += 1
            w.collective(False, seq, host + 20, comp_ts + COMPUTE_US, rs_stream)
        t += step_us + 100
    meta = [{"ph": "M", "name": "thread_name", "pid": PID, "tid": TID, "args": {"name": "main"}}]
    return {
        "schemaVersion": 1,
        "distributedInfo": {"backend": "nccl", "rank": 0, "world_size": 2},
        "traceEvents": meta + w.events,
        "displayTimeUnit": "ms",
    }
