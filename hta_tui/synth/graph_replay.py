"""A small CUDA-graph replay trace: one `cudaGraphLaunch` per step that runs many kernels
under one correlation id, nested in an nn.Module, as inference servers and
`torch.compile(mode="reduce-overhead")` write them.

Each step: `ProfilerStep#N` > `nn.Module: Decoder_0` > (`CompiledFunction` when
`inside_op`) > `cudaGraphLaunch` whose graph runs `kernels` kernels back to back on the
compute stream (Triton, cuBLAS and NCCL-like names, each with its `graph node id`), then a
plain `aten::copy_` launching one short kernel. `inside_op=False` is the vLLM shape: the
replay is called from Python with no operator around it, so nearly all kernel time belongs
to no operator. `with_kernels=False` leaves the graph's kernels out (a trace profiled
without them); `overlap=True` lets each graph kernel start before the one before it ends
(kernels of one stream that overlap, which a timeline must not drop); `launch="hipGraphLaunch"`
writes ROCm's graph launch. `annotations=True` writes PyTorch's CUDA-graph kernel
annotations on the graph's kernels (`export_chrome_trace(..., cuda_graph_annotations=...)`):
kernels 4L..4L+3 of a graph run in layer L (modulo `ANNOTATED_LAYERS`), whose module FQN
`fqn_of` their args give in each of the ways PyTorch writes it (`annotation_of`).
"""

from __future__ import annotations

from typing import Any

from hta_tui.synth.constants import COMPUTE_STREAM
from hta_tui.synth.events import complete

PID = 5151
TID = 5151
DEVICE = 0
GRAPH_LAUNCH = "cudaGraphLaunch"
MODULE = "Decoder_0"
COMPILED_OP = "CompiledFunction"
#: the kernels of the graph, cycled: inductor's Triton kernels and a cuBLAS GEMM
GRAPH_KERNELS: tuple[str, ...] = (
    "triton_poi_fused_add_mul_0",
    "triton_red_fused_native_layer_norm_1",
    "sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64_warpgroupsize1x1x1",
    "triton_per_fused_softmax_2",
)
KERNEL_US = 50.0  # each graph kernel
COPY_KERNEL_US = 2.0  # the plain launch's kernel
LAUNCH_US = 30.0  # the graph launch call on the CPU
#: the module FQN a graph kernel's annotation names (`annotations=True`), by layer
ANNOTATED_LAYERS = 3


def fqn_of(i: int) -> str:
    """The module FQN graph kernel `i` is annotated with (`annotations=True`)."""
    return f"layers.{(i // 4) % ANNOTATED_LAYERS}.attention.wq"


def annotation_of(i: int) -> dict[str, Any]:
    """The args graph kernel `i` carries with `annotations=True`: a dict annotation with
    the module's FQN beside its own `name` (two of four), a bare string under `name`, or under
    the older exports' `annotation` (even layers) or `str` (odd layers)."""
    fqn = fqn_of(i)
    if i % 4 < 2:
        return {"name": "linear_fwd", "layer": str(i // 4), "module_fqn": fqn}
    if i % 4 == 2:
        return {"name": fqn}
    return {"annotation" if (i // 4) % 2 == 0 else "str": fqn}


_x = complete


def _kernel(name: str, ts: float, dur: float, corr: int, **args: Any) -> dict[str, Any]:
    return _x(
        "kernel", name, DEVICE, COMPUTE_STREAM, ts, dur,
        device=DEVICE, stream=COMPUTE_STREAM, correlation=corr,
        grid=[128, 1, 1], block=[256, 1, 1], **args,
    )  # fmt: skip


def _step(
    step: int, t0: float, corr: int, *, kernels: int, inside_op: bool, with_kernels: bool,
    overlap: bool, launch: str, annotations: bool = False,
) -> list[dict[str, Any]]:  # fmt: skip
    graph_us = kernels * KERNEL_US
    step_us = graph_us + 200.0
    py = 10 * step
    ev = [
        _x("user_annotation", f"ProfilerStep#{step}", PID, TID, t0, step_us),
        _x("python_function", "torch/nn/modules/module.py(1750): _call_impl", PID, TID,
           t0 + 1, step_us - 2, **{"Python id": py, "Python parent id": None}),
        _x("python_function", f"nn.Module: {MODULE}", PID, TID, t0 + 2, step_us - 4,
           **{"Python id": py + 1, "Python parent id": py, "Python module id": 0}),
        _x("python_function", "torch/cuda/graphs.py(88): replay", PID, TID, t0 + 4, 60.0,
           **{"Python id": py + 2, "Python parent id": py + 1}),
    ]  # fmt: skip
    if inside_op:
        ev.append(_x("cpu_op", COMPILED_OP, PID, TID, t0 + 5, 50.0))
    ev.append(_x("cuda_runtime", launch, PID, TID, t0 + 10, LAUNCH_US, correlation=corr))
    gpu = t0 + 50
    step_ = KERNEL_US * (0.6 if overlap else 1.0)
    if with_kernels:
        for i in range(kernels):
            name = GRAPH_KERNELS[i % len(GRAPH_KERNELS)]
            kernel = _kernel(name, gpu + i * step_, KERNEL_US, corr, **{"graph node id": i + 1})
            if annotations:  # (its keys include "name": not a keyword of `_kernel`)
                kernel["args"].update(annotation_of(i))
            ev.append(kernel)
    ev.append(_x("cpu_op", "aten::copy_", PID, TID, t0 + 80, 20.0))
    ev.append(_x("cuda_runtime", "cudaLaunchKernel", PID, TID, t0 + 85, 5.0, correlation=corr + 1))
    last = gpu + graph_us + 10
    ev.append(_kernel("copy_kernel", last, COPY_KERNEL_US, corr + 1))
    return ev


def make_graph_replay(
    *,
    steps: int = 2,
    kernels: int = 12,
    inside_op: bool = True,
    with_kernels: bool = True,
    overlap: bool = False,
    launch: str = GRAPH_LAUNCH,
    annotations: bool = False,
) -> dict[str, Any]:
    """The trace as a dict (write it with `files.write_trace`); see the module docstring."""
    events: list[dict[str, Any]] = [
        {"ph": "M", "name": "thread_name", "pid": PID, "tid": TID, "args": {"name": "python"}}
    ]
    t = 1_700_000_000_000.0
    for step in range(1, steps + 1):
        events += _step(
            step, t, 100 * step, kernels=kernels, inside_op=inside_op,
            with_kernels=with_kernels, overlap=overlap, launch=launch, annotations=annotations,
        )  # fmt: skip
        t += kernels * KERNEL_US + 400.0
    return {
        "schemaVersion": 1,
        "distributedInfo": {"backend": "nccl", "rank": 0, "world_size": 1},
        "traceEvents": events,
        "displayTimeUnit": "ms",
    }
