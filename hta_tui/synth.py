"""Synthetic multi-rank Kineto traces: the app's `--demo`, the tests and the benchmarks.

The generator simulates a small data-parallel training loop (DDP, one GPU per rank) instead of
emitting random events, so every HTA analysis has something true to find:

* CPU side: `ProfilerStep#N` on the main thread, record_function ranges, properly nested aten
  ops, `cudaLaunchKernel`/`cudaMemcpyAsync`/... runtime calls; backward runs on a separate
  autograd thread, as it does in PyTorch.
* GPU side: a compute stream (7), a copy stream (20) and an NCCL stream (28). Kernels start
  no earlier than their launch's end plus a launch delay, never overlap on their stream and
  honour cross-stream waits (`cudaStreamWaitEvent`), so gradient all-reduces overlap backward
  compute, the optimizer waits for the last all-reduce ("other" idle time), the data loader
  and CPU hiccups starve the GPU ("host wait") and queued kernels leave short gaps ("kernel
  wait").
* One straggler rank whose GPU work takes ~30% longer.

Speed matters (benchmarks write 8 ranks x 100 MB): all times are integer nanoseconds, the
static parts of events (kernel names, launch geometry, input shapes) are built once per model
and events are produced in chunks that are serialised by orjson and streamed to gzip, so
memory stays at a few chunks whatever the file size. Output is a pure function of the
arguments (no global random state, gzip header without name or mtime).
"""

from __future__ import annotations

import argparse
import gzip
import math
import random
import sys
import time
from collections import deque
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, BinaryIO

import orjson

__all__ = [
    "COMPUTE_STREAM",
    "COPY_STREAM",
    "NCCL_STREAM",
    "make_trace",
    "plan_size",
    "trace_file_name",
    "write_trace",
    "write_trace_dir",
]

COMPUTE_STREAM = 7
COPY_STREAM = 20
NCCL_STREAM = 28

#: Straggler slowdown of GPU work on `slow_rank`.
SLOW_FACTOR = 1.3
#: Events per chunk handed to orjson / gzip (bounds memory for any file size).
_CHUNK_EVENTS = 20_000
#: Pending launches a stream holds before cudaLaunchKernel blocks (CUDA's push buffer).
_QUEUE_DEPTH = 1024
#: Largest model (blocks per step) before `target_mb` sizing adds steps instead.
_MAX_BLOCKS = 1500
_FIRST_STEP = 2  # profiler schedule wait=1, warmup=1: the first recorded step is #2
_BASE_TIME_NS = 1_719_853_884_000_000_000  # baseTimeNanoseconds (wall clock, whole seconds)
_NUM_SMS = 108
_CTX = 1

_US = 1000  # ns per microsecond


def _cpu_pid(seed: int, rank: int) -> int:
    """The rank's (fake) OS process id; also part of the file name."""
    return 2_100_000 + (seed * 7_919 + rank * 613 + 4_099) % 1_800_000


def _us(ns: int) -> float:
    """Integer ns -> Kineto's fractional microseconds (3 decimals, as PyTorch >= 2.2)."""
    return ns / 1000


# ---------------------------------------------------------------------------------------------
# static model description (shared by all ranks of one seed)


@dataclass(frozen=True)
class _Kernel:
    """A kernel's static launch geometry; only the duration varies per launch."""

    name: str
    ns: int  # base duration
    grid: tuple[int, int, int]
    block: tuple[int, int, int]
    regs: int
    smem: int
    bps: float  # blocks per SM
    wps: float  # warps per SM
    occ: int  # est. achieved occupancy %
    launcher: str = "cudaLaunchKernel"
    cbid: int = 211


def _kernel(
    name: str,
    ns: float,
    grid: tuple[int, int, int],
    block: tuple[int, int, int],
    regs: int,
    smem: int,
    *,
    launcher: str = "cudaLaunchKernel",
    cbid: int = 211,
) -> _Kernel:
    blocks = grid[0] * grid[1] * grid[2]
    threads = block[0] * block[1] * block[2]
    bps = round(blocks / _NUM_SMS, 6)
    wps = round(bps * threads / 32, 6)
    occ = min(100, int(wps / 64 * 100)) if blocks >= _NUM_SMS else 0
    return _Kernel(name, max(900, int(ns)), grid, block, regs, smem, bps, wps, occ, launcher, cbid)


_GELU = (
    "at::native::GeluCUDAKernelImpl(at::TensorIteratorBase&, at::native::GeluType)::"
    "{lambda()#2}::operator()() const::{lambda()#2}::operator()() const::"
)
_REDUCE_SUM = (
    "at::native::ReduceOp<float, at::native::func_wrapper_t<float, at::native::sum_functor"
    "<float, float, float>::operator()(at::TensorIterator&)::{lambda(float, float)#1}>, "
    "unsigned int, float, 4>"
)
_MTA = (
    "at::native::(anonymous namespace)::TensorListMetadata<2>, at::native::(anonymous "
    "namespace)::BinaryOpListAlphaFunctor<float, 2, 2, 0>, std::plus<float>, float"
)
_ANON = "at::native::(anonymous namespace)::"

_GEMM_NAMES = (
    (
        "void cutlass::Kernel<cutlass_80_tensorop_s1688gemm_64x64_16x6_nn_align4>"
        "(cutlass_80_tensorop_s1688gemm_64x64_16x6_nn_align4::Params)",
        (64, 64),
        214,
        73728,
        "cudaLaunchKernelExC",
        430,
    ),
    ("ampere_sgemm_128x64_tn", (128, 64), 122, 32768, "cudaLaunchKernel", 211),
    ("ampere_sgemm_128x64_nn", (128, 64), 122, 32768, "cudaLaunchKernel", 211),
    (
        "sm80_xmma_gemm_f32f32_f32f32_f32_tn_n_tilesize128x128x8_stage3_warpsize2x2x1_ffma_"
        "aligna4_alignc4_execute_kernel__5x_cublas",
        (128, 128),
        190,
        49152,
        "cudaLaunchKernel",
        211,
    ),
    (
        "void cutlass::Kernel<cutlass_80_tensorop_s1688gemm_128x128_32x3_nt_align4>"
        "(cutlass_80_tensorop_s1688gemm_128x128_32x3_nt_align4::Params)",
        (128, 128),
        230,
        98304,
        "cudaLaunchKernelExC",
        430,
    ),
)


def _gemm(variant: int, m: int, n: int, k: int, tflops: float) -> _Kernel:
    name, (tm, tn), regs, smem, launcher, cbid = _GEMM_NAMES[variant % len(_GEMM_NAMES)]
    grid = (max(1, math.ceil(n / tn)), max(1, math.ceil(m / tm)), 1)
    ns = 2 * m * n * k / (tflops * 1e3) + 3 * _US
    return _kernel(name, ns, grid, (128, 1, 1), regs, smem, launcher=launcher, cbid=cbid)


def _elementwise(name: str, numel: int, bytes_per_elem: int, *, vec: bool = True) -> _Kernel:
    threads = 128
    per_block = threads * (4 if vec else 1)
    grid = (max(1, min(numel // per_block, 65535 * 4)), 1, 1)
    ns = numel * bytes_per_elem / 1300 + 1.4 * _US  # ~1.3 TB/s effective + launch floor
    return _kernel(name, ns, grid, (threads, 1, 1), 16 if vec else 20, 0)


def _vec(functor: str, arrays: int) -> str:
    return (
        f"void at::native::vectorized_elementwise_kernel<4, {functor}, "
        f"at::detail::Array<char*, {arrays}> >(int, {functor}, at::detail::Array<char*, {arrays}>)"
    )


@dataclass(frozen=True)
class _Comm:
    """A collective: the NCCL kernel plus the args PyTorch attaches to it."""

    kernel: _Kernel
    name: str  # nccl:all_reduce ...
    args: dict[str, Any]


@dataclass
class _Model:
    """Shapes, kernels and bucket layout of the simulated network."""

    blocks: int
    hidden: int
    ffn: int
    tokens: int
    classes: int
    world_size: int
    k: dict[str, _Kernel] = field(default_factory=dict)
    dims: dict[str, tuple[Any, Any]] = field(default_factory=dict)
    buckets: list[tuple[int, _Comm, int]] = field(default_factory=list)  # (after block, comm, B)
    broadcast: _Comm | None = None
    loss_allreduce: _Comm | None = None
    n_opt: int = 1
    opt_params: int = 0


#: NCCL kernels' block, registers per thread and shared memory, as CUPTI reports them
_NCCL_BLOCK, _NCCL_REGS, _NCCL_SMEM = (544, 1, 1), 96, 87568


def _comm(
    world_size: int,
    collective: str,
    kernel_name: str,
    nelems: int,
    elem_bytes: int,
    dtype: str,
    busbw_gbps: float,
    channels: int,
) -> _Comm:
    n = max(1, world_size)
    nbytes = nelems * elem_bytes
    factor = 2 * (n - 1) / n if collective == "allreduce" else (n - 1) / n
    ns = factor * nbytes / busbw_gbps + 18 * _US
    k = _kernel(kernel_name, ns, (channels, 1, 1), _NCCL_BLOCK, _NCCL_REGS, _NCCL_SMEM)
    ranks = "[" + ", ".join(str(r) for r in range(n)) + "]"
    args = {
        "Collective name": collective,
        "In msg nelems": nelems,
        "Out msg nelems": nelems,
        "Group size": n,
        "dtype": dtype,
        "In split size": "[]",
        "Out split size": "[]",
        "Process Group Name": "0",
        "Process Group Description": "default_pg",
        "Process Group Ranks": ranks,
    }
    op = "nccl:all_reduce" if collective == "allreduce" else f"nccl:{collective}"
    return _Comm(k, op, args)


def _nccl_name(collective: str, legacy: bool) -> str:
    """NCCL >= 2.19 names kernels `ncclDevKernel_<Op>_<RedOp>_<type>_<algo>_<proto>`."""
    sig = "(ncclDevComm*, unsigned long, ncclWork*)"
    if collective == "allreduce":
        if legacy:
            return f"ncclKernel_AllReduce_RING_LL_Sum_float{sig}"
        return f"ncclDevKernel_AllReduce_Sum_f32_RING_LL{sig}"
    if legacy:
        return f"ncclKernel_Broadcast_RING_LL_Sum_int8_t{sig}"
    return f"ncclDevKernel_Broadcast_RING_LL{sig}"


def _blocks_for(kernels_per_step: int) -> int:
    """Blocks whose step launches closest to `kernels_per_step` kernels."""
    best, best_err = 1, None
    for b in range(1, max(2, kernels_per_step // 15 + 3)):
        err = abs(_kernels_in_step(b) - kernels_per_step)
        if best_err is None or err < best_err:
            best, best_err = b, err
    return best


def _kernels_in_step(blocks: int) -> int:
    """Kernels (incl. NCCL) one step launches; memcpy/memset are not counted."""
    fixed_fwd = 1 + 1 + 2  # broadcast, head gemm, softmax + nll
    fixed_bwd = 1 + 2 + 3  # ones_like fill, nll/softmax backward, head AddmmBackward0
    return fixed_fwd + fixed_bwd + 15 * blocks + _n_buckets(blocks) + _n_opt(blocks) + 1


def _n_buckets(blocks: int) -> int:
    return math.ceil(blocks / 2)


def _n_opt(blocks: int) -> int:
    return 1 + blocks // 8


def _build_model(seed: int, blocks: int, world_size: int, nccl_style: str) -> _Model:
    """Everything that must be identical on every rank (shapes, names, collectives)."""
    rng = random.Random(seed * 2_654_435_761 + 12345)
    hidden = rng.choice((768, 1024, 1280))
    ffn = 4 * hidden
    tokens = rng.choice((2048, 4096))
    classes = 1000
    m = _Model(blocks, hidden, ffn, tokens, classes, world_size)
    g = rng.randrange(len(_GEMM_NAMES))
    T, H, F, C = tokens, hidden, ffn, classes  # matrix dims
    k = m.k
    k["fc1"] = _gemm(g, T, F, H, 95)
    k["fc2"] = _gemm(g + 1, T, H, F, 90)
    k["fc1_dx"] = _gemm(g + 2, T, H, F, 85)
    k["fc1_dw"] = _gemm(g + 3, F, H, T, 80)
    k["fc2_dx"] = _gemm(g + 4, T, F, H, 85)
    k["fc2_dw"] = _gemm(g, H, F, T, 80)
    k["head"] = _gemm(g + 1, T, C, H, 60)
    k["head_dx"] = _gemm(g + 2, T, H, C, 60)
    k["head_dw"] = _gemm(g + 3, C, H, T, 55)
    k["ln"] = _kernel(
        f"void {_ANON}vectorized_layer_norm_kernel<float, float>(int, float, float const*, "
        "float const*, float const*, float*, float*, float*)",
        T * H * 8 / 1300 + 2 * _US,
        (T, 1, 1),
        (256, 1, 1),
        28,
        0,
    )
    k["ln_dx"] = _kernel(
        f"void {_ANON}layer_norm_grad_input_kernel_vectorized<float, float>(float const*, "
        "float const*, float const*, float const*, float const*, float*, int)",
        T * H * 12 / 1300 + 2 * _US,
        (T, 1, 1),
        (256, 1, 1),
        40,
        1024,
    )
    k["ln_dw"] = _kernel(
        f"void {_ANON}GammaBetaBackwardCUDAKernel_32x32<float, float>(long, long, float const*,"
        " float const*, float const*, float const*, float*, float*)",
        T * H * 8 / 1100 + 3 * _US,
        (max(1, H // 32), 1, 1),
        (32, 32, 1),
        64,
        8448,
    )
    gelu_f = _GELU + "{lambda(float)#1}"
    k["gelu"] = _elementwise(_vec(gelu_f, 2), T * F, 8)
    gelu_b = _GELU.replace("GeluCUDAKernelImpl", "GeluBackwardCUDAKernelImpl")
    gelu_b += "{lambda(float, float)#1}"
    k["gelu_bwd"] = _elementwise(_vec(gelu_b, 3), T * F, 12)
    k["add"] = _elementwise(_vec("at::native::CUDAFunctor_add<float>", 3), T * H, 12)
    k["acc"] = _elementwise(_vec("at::native::CUDAFunctor_add<float>", 3), H, 12)
    k["fill"] = _elementwise(_vec("at::native::FillFunctor<float>", 1), 1, 4)
    k["sum"] = _kernel(
        f"void at::native::reduce_kernel<512, 1, {_REDUCE_SUM} >({_REDUCE_SUM})",
        T * F * 4 / 1100 + 4 * _US,
        (max(1, F // 32), 4, 1),
        (32, 16, 1),
        32,
        16,
    )
    k["softmax"] = _kernel(
        f"void {_ANON}cunn_SoftMaxForward<4, float, float, float, {_ANON}"
        "LogSoftMaxForwardEpilogue>(float*, float const*, int)",
        T * C * 8 / 1200 + 3 * _US,
        (T, 1, 1),
        (512, 1, 1),
        37,
        0,
    )
    k["softmax_bwd"] = _kernel(
        f"void {_ANON}cunn_SoftMaxBackward<4, float, float, float, {_ANON}"
        "LogSoftMaxBackwardEpilogue>(float*, float const*, float const*, long)",
        T * C * 12 / 1200 + 3 * _US,
        (T, 1, 1),
        (512, 1, 1),
        32,
        0,
    )
    k["nll"] = _kernel(
        f"void {_ANON}nll_loss_forward_reduce_cuda_kernel_2d<float, float, long>(float*, float*,"
        " float const*, long const*, float const*, bool, long, long, long, long)",
        3.2 * _US,
        (1, 1, 1),
        (32, 1, 1),
        30,
        256,
    )
    k["nll_bwd"] = _kernel(
        f"void {_ANON}nll_loss_backward_reduce_cuda_kernel_2d<float, long>(float*, float const*,"
        " long const*, float const*, float const*, bool, int, int, long, long)",
        2.6 * _US,
        (1, 1, 1),
        (32, 1, 1),
        24,
        0,
    )
    block_params = 2 * H * F + F + 3 * H + 2 * H
    m.opt_params = blocks * block_params + C * H + C
    n_opt = _n_opt(blocks)
    m.n_opt = n_opt
    k["opt"] = _kernel(
        f"void {_ANON}multi_tensor_apply_kernel<{_MTA}>({_MTA})",
        m.opt_params / n_opt * 12 / 1300 + 5 * _US,
        (320, 1, 1),
        (512, 1, 1),
        30,
        0,
    )
    legacy_ar = nccl_style == "legacy"
    legacy_small = nccl_style in ("legacy", "mixed")
    busbw = 95 + 40 * rng.random()
    # DDP buckets: two blocks each, the last one also carries the head (~25 MB+ buckets)
    nb = _n_buckets(blocks)
    for i in range(nb):
        after = min(blocks, 2 * (i + 1))  # bucket i is ready after this many bwd blocks
        n_blocks = min(2, blocks - 2 * i)
        nelems = n_blocks * block_params + (C * H + C if i == 0 else 0)
        name = _nccl_name("allreduce", legacy_ar)
        comm = _comm(world_size, "allreduce", name, nelems, 4, "Float", busbw, 16)
        m.buckets.append((after, comm, nelems * 4))
    m.broadcast = _comm(
        world_size,
        "broadcast",
        _nccl_name("broadcast", legacy_small),
        2 * H * max(1, blocks),
        4,
        "Float",
        busbw,
        8,
    )
    m.loss_allreduce = _comm(
        world_size,
        "allreduce",
        _nccl_name("allreduce", legacy_small),
        1,
        4,
        "Float",
        busbw,
        2,
    )
    # Input Dims / Input type of the ops (shared, immutable)
    m.dims = {
        "linear1": (((T, H), (F, H), (F,)), ("float", "float", "float")),
        "linear2": (((T, F), (H, F), (H,)), ("float", "float", "float")),
        "linearh": (((T, H), (C, H), (C,)), ("float", "float", "float")),
        "t1": (((F, H),), ("float",)),
        "t2": (((H, F),), ("float",)),
        "th": (((C, H),), ("float",)),
        "transpose1": (((F, H), (), ()), ("float", "Scalar", "Scalar")),
        "transpose2": (((H, F), (), ()), ("float", "Scalar", "Scalar")),
        "transposeh": (((C, H), (), ()), ("float", "Scalar", "Scalar")),
        "as_strided1": (((F, H), (2,), (2,), ()), ("float", "", "", "")),
        "as_strided2": (((H, F), (2,), (2,), ()), ("float", "", "", "")),
        "as_stridedh": (((C, H), (2,), (2,), ()), ("float", "", "", "")),
        "addmm1": (((F,), (T, H), (H, F), (), ()), ("float", "float", "float", "Scalar", "Scalar")),
        "addmm2": (((H,), (T, F), (F, H), (), ()), ("float", "float", "float", "Scalar", "Scalar")),
        "addmmh": (((C,), (T, H), (H, C), (), ()), ("float", "float", "float", "Scalar", "Scalar")),
        "layer_norm": (
            ((T, H), (1,), (H,), (H,), (), ()),
            ("float", "", "float", "float", "Scalar", "Scalar"),
        ),
        "native_layer_norm": (((T, H), (1,), (H,), (H,), ()), ("float", "", "float", "float", "")),
        "gelu": (((T, F), ()), ("float", "")),
        "add": (((T, H), (T, H), ()), ("float", "float", "Scalar")),
        "log_softmax": (((T, C), (), ()), ("float", "Scalar", "")),
        "nll": (((T, C), (T,), (), (), ()), ("float", "long int", "", "Scalar", "Scalar")),
        "mm_dx1": (((T, F), (F, H)), ("float", "float")),
        "mm_dw1": (((F, T), (T, H)), ("float", "float")),
        "mm_dx2": (((T, H), (H, F)), ("float", "float")),
        "mm_dw2": (((H, T), (T, F)), ("float", "float")),
        "mm_dxh": (((T, C), (C, H)), ("float", "float")),
        "mm_dwh": (((C, T), (T, H)), ("float", "float")),
        "sum1": (((T, F), (1,), (), ()), ("float", "", "Scalar", "")),
        "sum2": (((T, H), (1,), (), ()), ("float", "", "Scalar", "")),
        "sumh": (((T, C), (1,), (), ()), ("float", "", "Scalar", "")),
        "gelu_backward": (((T, F), (T, F), ()), ("float", "float", "")),
        "ln_backward": (
            ((T, H), (T, H), (1,), (T, 1), (T, 1), (H,), (H,), ()),
            ("float", "float", "", "float", "float", "float", "float", ""),
        ),
        "acc": (((H,), (H,), ()), ("float", "float", "Scalar")),
        "to": (((T, H), (), (), (), (), (), (), ()), ("float", "", "", "", "", "", "", "")),
        "copy_": (((T, H), (T, H), ()), ("float", "float", "Scalar")),
        "labels": (((T,), (), (), (), (), (), (), ()), ("long int", "", "", "", "", "", "", "")),
        "copy_l": (((T,), (T,), ()), ("long int", "long int", "Scalar")),
        "zeros": (((), (), (), (), ()), ("", "Scalar", "", "", "")),
        "fill_": (((T, C), ()), ("float", "Scalar")),
        "ones_like": (((), (), (), (), (), ()), ("float", "", "", "", "", "")),
        "bucket_copy": (((0,), (0,), ()), ("float", "float", "Scalar")),
        "foreach": (((), (), ()), ("TensorList", "TensorList", "Scalar")),
        "item": (((),), ("float",)),
    }
    return m


# ---------------------------------------------------------------------------------------------
# one rank's simulation


class _Rank:
    """Simulates one rank's profiler window and produces its traceEvents in chunks."""

    def __init__(
        self,
        model: _Model,
        rank: int,
        *,
        world_size: int,
        seed: int,
        slow: bool,
        slow_factor: float = SLOW_FACTOR,
    ) -> None:
        self.m = model
        self.rank = rank
        self.world_size = world_size
        self.rng = random.Random(seed * 1_000_003 + rank * 7919 + 17)
        rng = self.rng
        self.device = rank % 8
        self.pid = _cpu_pid(seed, rank)
        self.tid_main = self.pid
        self.tid_bwd = self.pid + 9_000 + rank * 3 + 1
        self.gpu_scale = (slow_factor if slow else 1.0) * (1 + 0.04 * (rng.random() - 0.5))
        self.cpu_scale = 1 + 0.06 * (rng.random() - 0.5)
        # timestamps: steady-clock microseconds as Kineto writes them (days of uptime)
        base = 1_212_075_000_000_000 + (seed % 97) * 3_600_000_000_000
        self.t0 = base + rng.randrange(200_000, 900_000)
        self.t = self.t0 + 2_000 * _US + rng.randrange(0, 400 * _US)
        self.corr = 19_800 + rng.randrange(0, 200)
        self.ext = 0
        self.ev_idx = 0
        self.seq = 1_000 + rng.randrange(0, 50)
        self.flow_id = 0
        self.py_id = 0
        self.event_id = 0
        self.free = {COMPUTE_STREAM: 0, COPY_STREAM: 0, NCCL_STREAM: 0}
        self.wait = {COMPUTE_STREAM: 0, COPY_STREAM: 0, NCCL_STREAM: 0}
        self.ann_first: int | None = None
        self.queue: dict[int, deque[int]] = {
            s: deque(maxlen=_QUEUE_DEPTH) for s in (COMPUTE_STREAM, COPY_STREAM, NCCL_STREAM)
        }
        self.out: list[dict[str, Any]] = []
        self.end = self.t

    # -- small helpers ---------------------------------------------------------------------

    def _gap(self, lo_us: float, hi_us: float) -> int:
        """A CPU-side pause in ns (scaled by this rank's CPU speed)."""
        return int((lo_us + (hi_us - lo_us) * self.rng.random()) * self.cpu_scale * _US)

    def _next_ext(self) -> int:
        self.ext += 1
        return self.ext

    def _next_corr(self) -> int:
        # Kineto skips ids of blocklisted runtime calls, so correlations are sparse
        self.corr += 1 if self.rng.random() < 0.8 else 2 + int(self.rng.random() * 3)
        return self.corr

    def _op(
        self,
        name: str,
        tid: int,
        ts: int,
        end: int,
        ext: int,
        dims: tuple[Any, Any] | None = None,
        seq: int | None = None,
        cat: str = "cpu_op",
    ) -> None:
        self.ev_idx += 1
        if seq is not None:
            if dims is not None:
                args: dict[str, Any] = {
                    "External id": ext,
                    "Record function id": ext,
                    "Sequence number": seq,
                    "Fwd thread id": 0,
                    "Input type": dims[1],
                    "Input Dims": dims[0],
                    "Ev Idx": self.ev_idx,
                }
            else:
                args = {
                    "External id": ext,
                    "Record function id": ext,
                    "Sequence number": seq,
                    "Fwd thread id": 1,
                    "Ev Idx": self.ev_idx,
                }
        elif dims is not None:
            args = {
                "External id": ext,
                "Record function id": ext,
                "Input type": dims[1],
                "Input Dims": dims[0],
                "Ev Idx": self.ev_idx,
            }
        else:
            args = {"External id": ext, "Record function id": ext, "Ev Idx": self.ev_idx}
        self.out.append(
            {
                "ph": "X",
                "cat": cat,
                "name": name,
                "pid": self.pid,
                "tid": tid,
                "ts": _us(ts),
                "dur": _us(end - ts),
                "args": args,
            }
        )

    def _runtime(self, name: str, cbid: int, tid: int, ts: int, dur: int, ext: int) -> int:
        """A CUDA runtime call; returns its correlation id."""
        corr = self._next_corr()
        self.out.append(
            {
                "ph": "X",
                "cat": "cuda_runtime",
                "name": name,
                "pid": self.pid,
                "tid": tid,
                "ts": _us(ts),
                "dur": _us(dur),
                "args": {"External id": ext, "cbid": cbid, "correlation": corr},
            }
        )
        return corr

    def _launch_dur(self) -> int:
        r = self.rng.random()
        if r < 0.01:
            return self._gap(15, 60)
        return self._gap(2.5, 7.5)

    def _gpu_start(self, stream: int, ready: int) -> int:
        """When work submitted at `ready` starts on `stream` (queue, waits, launch delay)."""
        rng = self.rng
        r = rng.random()
        if r < 0.015:
            delay = int((100 + 250 * rng.random()) * _US)  # launch-latency outlier
        else:
            delay = int((1.5 + 5 * rng.random()) * _US)
        queued = self.free[stream] + int((0.8 + 2.5 * rng.random()) * _US)
        start = ready + delay
        if queued > start:
            start = queued
        if self.wait[stream] > start:
            start = self.wait[stream] + int((1 + 2 * rng.random()) * _US)
        self.queue[stream].append(start)
        return start

    def _blocked(self, stream: int, ts: int) -> int:
        """How long a launch at `ts` blocks because `stream`'s launch queue is full."""
        q = self.queue[stream]
        if len(q) == _QUEUE_DEPTH and q[0] > ts:
            return q[0] - ts + int(self.rng.random() * 2 * _US)
        return 0

    def _launch(
        self,
        tid: int,
        ts: int,
        ext: int,
        k: _Kernel,
        stream: int = COMPUTE_STREAM,
        extra: dict[str, Any] | None = None,
    ) -> int:
        """cudaLaunchKernel + its kernel + the ac2g flow; returns the CPU time after the call."""
        rdur = self._launch_dur() + self._blocked(stream, ts)
        corr = self._next_corr()
        pid, dev = self.pid, self.device
        out = self.out
        out.append(
            {
                "ph": "X",
                "cat": "cuda_runtime",
                "name": k.launcher,
                "pid": pid,
                "tid": tid,
                "ts": _us(ts),
                "dur": _us(rdur),
                "args": {"External id": ext, "cbid": k.cbid, "correlation": corr},
            }
        )
        start = self._gpu_start(stream, ts + rdur)
        dur = int(k.ns * self.gpu_scale * (0.93 + 0.14 * self.rng.random()))
        self.free[stream] = start + dur
        if stream == COMPUTE_STREAM and self.ann_first is None:
            self.ann_first = start
        args = {
            "External id": ext,
            "queued": 0,
            "device": dev,
            "context": _CTX,
            "stream": stream,
            "correlation": corr,
            "registers per thread": k.regs,
            "shared memory": k.smem,
            "blocks per SM": k.bps,
            "warps per SM": k.wps,
            "grid": k.grid,
            "block": k.block,
            "est. achieved occupancy %": k.occ,
        }
        if extra:
            args.update(extra)
        out.append(
            {
                "ph": "X",
                "cat": "kernel",
                "name": k.name,
                "pid": dev,
                "tid": stream,
                "ts": _us(start),
                "dur": _us(dur),
                "args": args,
            }
        )
        out.append(
            {
                "ph": "s",
                "id": corr,
                "pid": pid,
                "tid": tid,
                "ts": _us(ts),
                "cat": "ac2g",
                "name": "ac2g",
            }
        )
        out.append(
            {
                "ph": "f",
                "id": corr,
                "pid": dev,
                "tid": stream,
                "ts": _us(start),
                "cat": "ac2g",
                "name": "ac2g",
                "bp": "e",
            }
        )
        return ts + rdur

    def _copy(
        self,
        tid: int,
        ts: int,
        ext: int,
        kind: str,
        nbytes: int,
        gbps: float,
        stream: int,
        *,
        sync: bool = False,
    ) -> int:
        """cudaMemcpyAsync/cudaMemsetAsync + the GPU copy; returns CPU time after the call."""
        is_set = kind == "Memset (Device)"
        rt, cbid = ("cudaMemsetAsync", 51) if is_set else ("cudaMemcpyAsync", 41)
        call = self._gap(3, 9) + self._blocked(stream, ts)
        start = self._gpu_start(stream, ts + (call if not sync else self._gap(2, 4)))
        dur = max(1_000, int((nbytes / gbps + 1_200) * (0.95 + 0.1 * self.rng.random())))
        if stream == COMPUTE_STREAM:  # the straggler's own GPU is slow, not PCIe
            dur = int(dur * self.gpu_scale)
        self.free[stream] = start + dur
        if stream == COMPUTE_STREAM and self.ann_first is None:
            self.ann_first = start
        if sync:  # pageable copies block the CPU until done
            call = max(call, start + dur - ts + self._gap(2, 5))
        corr = self._runtime(rt, cbid, tid, ts, call, ext)
        dev = self.device
        self.out.append(
            {
                "ph": "X",
                "cat": "gpu_memset" if is_set else "gpu_memcpy",
                "name": kind,
                "pid": dev,
                "tid": stream,
                "ts": _us(start),
                "dur": _us(dur),
                "args": {
                    "External id": ext,
                    "device": dev,
                    "context": _CTX,
                    "stream": stream,
                    "correlation": corr,
                    "bytes": nbytes,
                    "memory bandwidth (GB/s)": nbytes / dur,
                },
            }
        )
        self.out.append(
            {
                "ph": "s",
                "id": corr,
                "pid": self.pid,
                "tid": tid,
                "ts": _us(ts),
                "cat": "ac2g",
                "name": "ac2g",
            }
        )
        self.out.append(
            {
                "ph": "f",
                "id": corr,
                "pid": dev,
                "tid": stream,
                "ts": _us(start),
                "cat": "ac2g",
                "name": "ac2g",
                "bp": "e",
            }
        )
        return ts + call

    def _record_and_wait(self, tid: int, t: int, ext: int, src: int, dst: int) -> int:
        """cudaEventRecord on `src` then cudaStreamWaitEvent on `dst` (a cross-stream edge)."""
        d1 = self._gap(1.5, 4)
        rec_corr = self._runtime("cudaEventRecord", 135, tid, t, d1, ext)
        t += d1 + self._gap(0.5, 2)
        d2 = self._gap(1.2, 3.5)
        wait_corr = self._runtime("cudaStreamWaitEvent", 147, tid, t, d2, ext)
        self.event_id += 1
        if self.free[src] > self.wait[dst]:
            self.wait[dst] = self.free[src]
        self.out.append(
            {
                "ph": "X",
                "cat": "cuda_sync",
                "name": "Stream Wait Event",
                "pid": self.device,
                "tid": dst,
                "ts": _us(t + 600),
                "dur": _us(self._gap(1.5, 4)),
                "args": {
                    "External id": ext,
                    "cuda_sync_kind": "Stream Wait Event",
                    "wait_on_stream": src,
                    "wait_on_cuda_event_record_corr_id": rec_corr,
                    "wait_on_cuda_event_id": self.event_id,
                    "stream": dst,
                    "correlation": wait_corr,
                    "device": self.device,
                    "context": _CTX,
                },
            }
        )
        return t + d2

    def _stall(self, t: int, p: float) -> int:
        """Occasional CPU hiccup (GC, GIL, page fault): the GPU drains and waits for the host."""
        if self.rng.random() < p:
            return t + self._gap(300, 2_500)
        return t

    def _flows_fwdbwd(self, fwd_ts: int, bwd_ts: int) -> None:
        self.flow_id += 1
        fid = self.flow_id
        self.out.append(
            {
                "ph": "s",
                "id": fid,
                "pid": self.pid,
                "tid": self.tid_main,
                "ts": _us(fwd_ts),
                "cat": "fwdbwd",
                "name": "fwdbwd",
            }
        )
        self.out.append(
            {
                "ph": "f",
                "id": fid,
                "pid": self.pid,
                "tid": self.tid_bwd,
                "ts": _us(bwd_ts),
                "cat": "fwdbwd",
                "name": "fwdbwd",
                "bp": "e",
            }
        )

    # -- composite ops -----------------------------------------------------------------------

    def _simple(
        self,
        tid: int,
        t: int,
        names: tuple[str, ...],
        dims: tuple[tuple[Any, Any] | None, ...],
        k: _Kernel,
        seq: int | None = None,
    ) -> int:
        """Nested ops names[0] > names[1] > ... > one kernel launch; returns the end time."""
        starts = []
        exts = []
        for _ in names:
            starts.append(t)
            exts.append(self._next_ext())
            t += self._gap(1.5, 6)
        t = self._launch(tid, t, exts[-1], k)
        for i in range(len(names) - 1, -1, -1):
            t += self._gap(1, 4)
            self._op(names[i], tid, starts[i], t, exts[i], dims[i], seq if i == 0 else None)
        return t

    def _transpose(self, tid: int, t: int, tag: str) -> int:
        """aten::t > aten::transpose > aten::as_strided: CPU only, no kernel."""
        d = self.m.dims
        t0 = t
        e0, e1, e2 = self._next_ext(), self._next_ext(), self._next_ext()
        t1 = t0 + self._gap(1, 3)
        t2 = t1 + self._gap(1, 3)
        t3 = t2 + self._gap(1, 2.5)
        self._op("aten::as_strided", tid, t2, t3, e2, d["as_strided" + tag])
        t4 = t3 + self._gap(0.5, 2)
        self._op("aten::transpose", tid, t1, t4, e1, d["transpose" + tag])
        t5 = t4 + self._gap(0.5, 2)
        self._op("aten::t", tid, t0, t5, e0, d["t" + tag])
        return t5

    def _linear(self, tid: int, t: int, tag: str, k: _Kernel) -> tuple[int, int, int]:
        """aten::linear > (aten::t ..., aten::addmm > launch); returns (end, seq, addmm ts)."""
        d = self.m.dims
        self.seq += 1
        seq = self.seq
        t0 = t
        e0 = self._next_ext()
        t = self._transpose(tid, t + self._gap(2, 6), tag)
        t += self._gap(1, 4)
        t_mm = t
        e1 = self._next_ext()
        t = self._launch(tid, t + self._gap(4, 14), e1, k)
        t += self._gap(2, 6)
        self._op("aten::addmm", tid, t_mm, t, e1, d["addmm" + tag], seq)
        t += self._gap(1, 3)
        self._op("aten::linear", tid, t0, t, e0, d["linear" + tag], seq)
        return t, seq, t_mm

    def _fwd_block(self, t: int, b: int, fwd_log: list[tuple[int, int]]) -> int:
        """One block's forward on the main thread (LayerNorm > Linear > GELU > Linear > add)."""
        tid = self.tid_main
        m, k = self.m, self.m.k
        t = self._stall(t, 0.03)
        self.py_id += 1
        py_id = self.py_id
        t_py = t
        t += self._gap(3, 10)
        self.seq += 1
        s = self.seq
        fwd_log.append((s, t))
        t = self._simple(
            tid,
            t,
            ("aten::layer_norm", "aten::native_layer_norm"),
            (m.dims["layer_norm"], m.dims["native_layer_norm"]),
            k["ln"],
            s,
        )
        t, s, ts = self._linear(tid, t + self._gap(2, 8), "1", k["fc1"])
        fwd_log.append((s, ts))
        self.seq += 1
        s = self.seq
        t += self._gap(2, 8)
        fwd_log.append((s, t))
        t = self._simple(tid, t, ("aten::gelu",), (m.dims["gelu"],), k["gelu"], s)
        t, s, ts = self._linear(tid, t + self._gap(2, 8), "2", k["fc2"])
        fwd_log.append((s, ts))
        self.seq += 1
        s = self.seq
        t += self._gap(2, 8)
        fwd_log.append((s, t))
        t = self._simple(tid, t, ("aten::add",), (m.dims["add"],), k["add"], s)
        t += self._gap(3, 9)
        self.out.append(
            {
                "ph": "X",
                "cat": "python_function",
                "name": f"nn.Module: Block_{b}",
                "pid": self.pid,
                "tid": tid,
                "ts": _us(t_py),
                "dur": _us(t - t_py),
                "args": {"Python parent id": 1, "Python id": py_id, "Python thread": 0},
            }
        )
        return t

    def _bwd_node(self, t: int, fwd: tuple[int, int]) -> tuple[int, int, int, int]:
        """Opens an autograd node run; returns (inner start, outer ext, inner ext, seq).

        The fwdbwd flow links the forward op that created the node to its backward.
        """
        seq, fwd_ts = fwd
        self._flows_fwdbwd(fwd_ts, t)
        return t + self._gap(2, 6), self._next_ext(), self._next_ext(), seq

    def _bwd_close(
        self, t: int, node: str, t0: int, t_in: int, opened: tuple[int, int, int, int]
    ) -> int:
        """Closes the node: `Node` inside `autograd::engine::evaluate_function: Node`."""
        tid = self.tid_bwd
        _, e0, e1, seq = opened
        t += self._gap(1, 4)
        self._op(node, tid, t_in, t, e1, None, seq)
        t += self._gap(1, 4)
        self._op(f"autograd::engine::evaluate_function: {node}", tid, t0, t, e0, None, seq)
        return t

    def _bwd_addmm(self, t: int, fwd: tuple[int, int], tag: str) -> int:
        """AddmmBackward0: grad input and grad weight mm, bias grad sum."""
        tid = self.tid_bwd
        d, k = self.m.dims, self.m.k
        t0 = t
        opened = self._bwd_node(t, fwd)
        t_in = opened[0]
        t = t_in + self._gap(2, 5)
        t = self._transpose(tid, t, "h" if tag == "h" else tag)
        kx, kw = (
            (k["head_dx"], k["head_dw"]) if tag == "h" else (k[f"fc{tag}_dx"], k[f"fc{tag}_dw"])
        )
        t = self._simple(tid, t + self._gap(1, 4), ("aten::mm",), (d[f"mm_dx{tag}"],), kx)
        t = self._transpose(tid, t + self._gap(1, 3), "h" if tag == "h" else tag)
        t = self._simple(tid, t + self._gap(1, 4), ("aten::mm",), (d[f"mm_dw{tag}"],), kw)
        t = self._simple(tid, t + self._gap(2, 6), ("aten::sum",), (d[f"sum{tag}"],), k["sum"])
        return self._bwd_close(t, "AddmmBackward0", t0, t_in, opened)

    def _bwd_simple(
        self, t: int, fwd: tuple[int, int], node: str, op: str, dims: Any, kernels: list[_Kernel]
    ) -> int:
        tid = self.tid_bwd
        t0 = t
        opened = self._bwd_node(t, fwd)
        t_in = t = opened[0]
        if kernels:
            start = t + self._gap(2, 5)
            ext = self._next_ext()
            t = start + self._gap(2, 6)
            for kk in kernels:
                t = self._launch(tid, t, ext, kk) + self._gap(1, 4)
            t += self._gap(1, 3)
            self._op(op, tid, start, t, ext, dims)
        return self._bwd_close(t, node, t0, t_in, opened)

    def _accumulate_grad(self, t: int) -> int:
        tid = self.tid_bwd
        d, k = self.m.dims, self.m.k
        t0 = t
        e0, e1 = self._next_ext(), self._next_ext()
        t = self._simple(tid, t + self._gap(3, 8), ("aten::add_",), (d["acc"],), k["acc"])
        t += self._gap(1, 3)
        self._op("torch::autograd::AccumulateGrad", tid, t0 + 1_500, t, e1)
        t += self._gap(1, 3)
        self._op(
            "autograd::engine::evaluate_function: torch::autograd::AccumulateGrad",
            tid,
            t0,
            t,
            e0,
        )
        return t

    def _bwd_block(self, t: int, fwd: list[tuple[int, int]]) -> int:
        """One block's backward on the autograd thread, in reverse order of the forward."""
        m, k = self.m, self.m.k
        t = self._stall(t, 0.02)
        # fwd = [ln, fc1, gelu, fc2, add]
        t = self._bwd_simple(t, fwd[4], "AddBackward0", "", None, [])
        t = self._bwd_addmm(t + self._gap(2, 6), fwd[3], "2")
        t = self._accumulate_grad(t + self._gap(1, 4))
        t = self._bwd_simple(
            t + self._gap(2, 6),
            fwd[2],
            "GeluBackward0",
            "aten::gelu_backward",
            m.dims["gelu_backward"],
            [k["gelu_bwd"]],
        )
        t = self._bwd_addmm(t + self._gap(2, 6), fwd[1], "1")
        t = self._bwd_simple(
            t + self._gap(2, 6),
            fwd[0],
            "NativeLayerNormBackward0",
            "aten::native_layer_norm_backward",
            m.dims["ln_backward"],
            [k["ln_dx"], k["ln_dw"]],
        )
        return t

    def _collective(self, tid: int, t: int, comm: _Comm, src_stream: int = COMPUTE_STREAM) -> int:
        """record_param_comms > nccl:<op> > event record/wait + NCCL kernel on the comm stream."""
        t0 = t
        e0, e1 = self._next_ext(), self._next_ext()
        t += self._gap(4, 12)
        t1 = t
        t = self._record_and_wait(tid, t + self._gap(2, 5), e1, src_stream, NCCL_STREAM)
        t = self._launch(tid, t + self._gap(2, 6), e1, comm.kernel, NCCL_STREAM, comm.args)
        t += self._gap(3, 10)
        self.ev_idx += 1
        self.out.append(
            {
                "ph": "X",
                "cat": "user_annotation",
                "name": comm.name,
                "pid": self.pid,
                "tid": tid,
                "ts": _us(t1),
                "dur": _us(t - t1),
                "args": {"External id": e1, "Record function id": e1, "Ev Idx": self.ev_idx},
            }
        )
        t += self._gap(4, 15)
        self.ev_idx += 1
        self.out.append(
            {
                "ph": "X",
                "cat": "cpu_op",
                "name": "record_param_comms",
                "pid": self.pid,
                "tid": tid,
                "ts": _us(t0),
                "dur": _us(t - t0),
                "args": {
                    "External id": e0,
                    "Record function id": e0,
                    **comm.args,
                    "Global rank start": 0,
                    "Global rank stride": 1,
                    "Ev Idx": self.ev_idx,
                },
            }
        )
        return t

    def _annotation(self, name: str, tid: int, ts: int, end: int, ext: int) -> None:
        self._op(name, tid, ts, end, ext, cat="user_annotation")

    def _gpu_annotation(self, name: str, ext: int, start: int | None, end: int) -> None:
        if start is None or end <= start:
            return
        self.out.append(
            {
                "ph": "X",
                "cat": "gpu_user_annotation",
                "name": name,
                "pid": self.device,
                "tid": COMPUTE_STREAM,
                "ts": _us(start),
                "dur": _us(end - start),
                "args": {"External id": ext},
            }
        )

    # -- a training step -----------------------------------------------------------------------

    def step(self, number: int) -> Iterator[list[dict[str, Any]]]:
        """Simulates one step, yielding event chunks as they fill."""
        m, k, d = self.m, self.m.k, self.m.dims
        tm = self.tid_main
        t = self.t
        step_start = t
        step_ext = self._next_ext()
        t += self._gap(8, 25)

        # data loader: usually quick, sometimes a stall that starves the GPU
        e = self._next_ext()
        t_dl = t
        dl = self._gap(1_500, 5_000) if self.rng.random() < 0.2 else self._gap(150, 600)
        t += dl
        self._annotation(
            "enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__", tm, t_dl, t, e
        )
        t += self._gap(5, 20)

        # inputs: pinned HtoD on the copy stream, labels pageable HtoD on the compute stream
        t = self._to_device(t, "to", "copy_", m.tokens * m.hidden * 4, COPY_STREAM)
        t = self._record_and_wait(
            tm, t + self._gap(2, 5), self._next_ext(), COPY_STREAM, COMPUTE_STREAM
        )
        t = self._to_device(t + self._gap(3, 10), "labels", "copy_l", m.tokens * 8, COMPUTE_STREAM)

        # zero_grad (set_to_none: CPU only)
        e = self._next_ext()
        t0 = t + self._gap(5, 15)
        t = t0 + self._gap(20, 70)
        self._annotation("Optimizer.zero_grad#SGD.zero_grad", tm, t0, t, e)

        # forward
        self.ann_first = None
        e_fwd, e_ddp = self._next_ext(), self._next_ext()
        t_fwd = t + self._gap(5, 15)
        t_ddp = t_fwd + self._gap(10, 40)
        t = t_ddp + self._gap(20, 60)
        t = self._collective(tm, t, m.broadcast)  # DDP buffer broadcast
        fwd_logs: list[list[tuple[int, int]]] = []
        for b in range(m.blocks):
            log: list[tuple[int, int]] = []
            t = self._fwd_block(t + self._gap(2, 8), b, log)
            fwd_logs.append(log)
            if len(self.out) >= _CHUNK_EVENTS:
                yield self._take()
        t, s_head, ts_head = self._linear(tm, t + self._gap(3, 10), "h", k["head"])
        self.seq += 1
        s_loss = self.seq
        t_loss = t + self._gap(3, 10)
        e_loss = self._next_ext()
        t = self._simple(
            tm,
            t_loss + self._gap(3, 8),
            ("aten::log_softmax", "aten::_log_softmax"),
            (d["log_softmax"], d["log_softmax"]),
            k["softmax"],
            s_loss,
        )
        self.seq += 1
        s_nll = self.seq
        t = self._simple(
            tm,
            t + self._gap(2, 6),
            ("aten::nll_loss_nd", "aten::nll_loss_forward"),
            (d["nll"], d["nll"]),
            k["nll"],
            s_nll,
        )
        t += self._gap(2, 6)
        self._op("aten::cross_entropy_loss", tm, t_loss, t, e_loss, d["nll"])
        t += self._gap(5, 20)
        self._annotation("DistributedDataParallel.forward", tm, t_ddp, t, e_ddp)
        t += self._gap(3, 10)
        self._annotation("## forward ##", tm, t_fwd, t, e_fwd)
        self._gpu_annotation("## forward ##", e_fwd, self.ann_first, self.free[COMPUTE_STREAM])

        # backward: main thread seeds the graph, the autograd thread runs it
        self.ann_first = None
        e_bwd = self._next_ext()
        t_bwd = t + self._gap(5, 15)
        t = self._simple(
            tm,
            t_bwd + self._gap(5, 15),
            ("aten::ones_like", "aten::fill_"),
            (d["ones_like"], d["fill_"]),
            k["fill"],
        )
        ta = t + self._gap(15, 40)
        # loss backward (with the memset of the zeroed grad input)
        ta = self._bwd_simple(
            ta,
            (s_nll, t_loss),
            "NllLossBackward0",
            "aten::nll_loss_backward",
            d["nll"],
            [k["nll_bwd"]],
        )
        e_z = self._next_ext()
        tz = ta + self._gap(2, 5)
        ta = self._copy(
            self.tid_bwd,
            tz + self._gap(2, 6),
            e_z,
            "Memset (Device)",
            m.tokens * m.classes * 4,
            1400,
            COMPUTE_STREAM,
        )
        ta += self._gap(2, 5)
        self._op("aten::zero_", self.tid_bwd, tz, ta, e_z, d["zeros"])
        ta = self._bwd_simple(
            ta + self._gap(2, 6),
            (s_loss, t_loss),
            "LogSoftmaxBackward0",
            "aten::_log_softmax_backward_data",
            d["log_softmax"],
            [k["softmax_bwd"]],
        )
        ta = self._bwd_addmm(ta + self._gap(2, 6), (s_head, ts_head), "h")
        bucket_iter = iter(m.buckets)
        nxt = next(bucket_iter, None)
        for done, b in enumerate(range(m.blocks - 1, -1, -1), start=1):
            ta = self._bwd_block(ta + self._gap(2, 8), fwd_logs[b])
            while nxt is not None and done >= nxt[0]:
                ta = self._bucket_ready(ta, nxt)
                nxt = next(bucket_iter, None)
            if len(self.out) >= _CHUNK_EVENTS:
                yield self._take()
        while nxt is not None:
            ta = self._bucket_ready(ta, nxt)
            nxt = next(bucket_iter, None)
        # DDP finalize: the compute stream waits for the last all-reduce
        t = max(t, ta) + self._gap(10, 30)
        t = self._record_and_wait(tm, t, self._next_ext(), NCCL_STREAM, COMPUTE_STREAM)
        t += self._gap(5, 15)
        self._annotation("## backward ##", tm, t_bwd, t, e_bwd)
        self._gpu_annotation("## backward ##", e_bwd, self.ann_first, self.free[COMPUTE_STREAM])

        # optimizer: Python-heavy, the GPU often waits for the host
        self.ann_first = None
        e_opt, e_step = self._next_ext(), self._next_ext()
        t_opt = t + self._gap(5, 15)
        t_step = t_opt + self._gap(10, 30)
        t = t_step + self._gap(30, 90)
        for _ in range(m.n_opt):
            t = self._stall(t, 0.05)
            e = self._next_ext()
            t0 = t
            t = self._launch(tm, t + self._gap(8, 25), e, k["opt"]) + self._gap(3, 9)
            self._op("aten::_foreach_add_", tm, t0, t, e, d["foreach"])
            t += self._gap(40, 140)
        t += self._gap(10, 30)
        self._annotation("Optimizer.step#SGD.step", tm, t_step, t, e_step)
        t += self._gap(3, 10)
        self._annotation("## optimizer ##", tm, t_opt, t, e_opt)
        self._gpu_annotation("## optimizer ##", e_opt, self.ann_first, self.free[COMPUTE_STREAM])

        # logging: all-reduce the loss, wait for the step (Event Sync), read it (Stream Sync)
        t = self._collective(tm, t + self._gap(10, 30), m.loss_allreduce)
        t = self._record_and_wait(
            tm, t + self._gap(3, 8), self._next_ext(), NCCL_STREAM, COMPUTE_STREAM
        )
        t = self._event_sync(tm, t + self._gap(5, 15))
        t = self._item(tm, t + self._gap(5, 15))
        t += self._gap(10, 40)
        self._annotation(f"ProfilerStep#{number}", tm, step_start, t, step_ext)
        self.t = t + self._gap(5, 20)
        self.end = max(self.t, self.free[COMPUTE_STREAM], self.free[NCCL_STREAM])
        yield self._take()

    def _bucket_ready(self, ta: int, bucket: tuple[int, _Comm, int]) -> int:
        """A gradient bucket is full: copy it flat (DtoD) and all-reduce it on the NCCL stream."""
        _, comm, nbytes = bucket
        tid = self.tid_bwd
        e = self._next_ext()
        t0 = ta + self._gap(3, 10)
        t = self._copy(
            tid,
            t0 + self._gap(3, 8),
            e,
            "Memcpy DtoD (Device -> Device)",
            nbytes,
            900,
            COMPUTE_STREAM,
        )
        t += self._gap(2, 6)
        self._op("aten::copy_", tid, t0, t, e, self.m.dims["bucket_copy"])
        return self._collective(tid, t + self._gap(5, 20), comm)

    def _to_device(self, t: int, dims: str, copy_dims: str, nbytes: int, stream: int) -> int:
        """aten::to > aten::_to_copy > (aten::empty_strided, aten::copy_ > cudaMemcpyAsync)."""
        tm = self.tid_main
        d = self.m.dims
        pinned = stream == COPY_STREAM
        e0, e1, e2, e3 = (self._next_ext() for _ in range(4))
        t0 = t
        t1 = t0 + self._gap(2, 6)
        t2 = t1 + self._gap(2, 6)
        t3 = t2 + self._gap(3, 10)
        self._op("aten::empty_strided", tm, t2, t3, e2, d["zeros"])
        t4 = t3 + self._gap(1, 4)
        kind = "Memcpy HtoD (Pinned -> Device)" if pinned else "Memcpy HtoD (Pageable -> Device)"
        gbps = 22.0 if pinned else 6.5
        t = self._copy(tm, t4 + self._gap(3, 8), e3, kind, nbytes, gbps, stream, sync=not pinned)
        t += self._gap(2, 6)
        self._op("aten::copy_", tm, t4, t, e3, d[copy_dims])
        t += self._gap(1, 4)
        self._op("aten::_to_copy", tm, t1, t, e1, d[dims])
        t += self._gap(1, 3)
        self._op("aten::to", tm, t0, t, e0, d[dims])
        return t

    def _event_sync(self, tid: int, t: int) -> int:
        """cudaEventRecord + cudaEventSynchronize on the compute stream (step-time logging)."""
        ext = self._next_ext()
        d1 = self._gap(1.5, 4)
        rec = self._runtime("cudaEventRecord", 135, tid, t, d1, ext)
        t += d1 + self._gap(1, 3)
        done = max(self.free[COMPUTE_STREAM], self.wait[COMPUTE_STREAM])
        wait = max(self._gap(2, 6), done - t + self._gap(2, 6))
        corr = self._runtime("cudaEventSynchronize", 137, tid, t, wait, ext)
        self.event_id += 1
        self.out.append(
            {
                "ph": "X",
                "cat": "cuda_sync",
                "name": "Event Sync",
                "pid": self.device,
                "tid": -1,
                "ts": _us(t + 900),
                "dur": _us(wait - 1_500),
                "args": {
                    "External id": ext,
                    "cuda_sync_kind": "Event Sync",
                    "wait_on_stream": COMPUTE_STREAM,
                    "wait_on_cuda_event_record_corr_id": rec,
                    "wait_on_cuda_event_id": self.event_id,
                    "stream": 4294967295,
                    "correlation": corr,
                    "device": self.device,
                    "context": _CTX,
                },
            }
        )
        return t + wait

    def _item(self, tid: int, t: int) -> int:
        """loss.item(): DtoH of 4 bytes then cudaStreamSynchronize on the compute stream."""
        d = self.m.dims
        e0, e1 = self._next_ext(), self._next_ext()
        t0 = t
        t1 = t + self._gap(2, 5)
        t = self._copy(
            tid,
            t1 + self._gap(3, 8),
            e1,
            "Memcpy DtoH (Device -> Pageable)",
            4,
            0.002,
            COMPUTE_STREAM,
        )
        t += self._gap(1, 3)
        done = self.free[COMPUTE_STREAM]
        wait = max(self._gap(3, 8), done - t + self._gap(2, 5))
        corr = self._runtime("cudaStreamSynchronize", 131, tid, t, wait, e1)
        self.out.append(
            {
                "ph": "X",
                "cat": "cuda_sync",
                "name": "Stream Sync",
                "pid": self.device,
                "tid": COMPUTE_STREAM,
                "ts": _us(t + 1_200),
                "dur": _us(wait - 1_800),
                "args": {
                    "External id": e1,
                    "cuda_sync_kind": "Stream Sync",
                    "stream": COMPUTE_STREAM,
                    "correlation": corr,
                    "device": self.device,
                    "context": _CTX,
                },
            }
        )
        t += wait + self._gap(2, 5)
        self._op("aten::_local_scalar_dense", tid, t1, t, e1, d["item"])
        t += self._gap(1, 4)
        self._op("aten::item", tid, t0, t, e0, d["item"])
        return t

    def _take(self) -> list[dict[str, Any]]:
        out, self.out = self.out, []
        return out

    # -- whole trace -------------------------------------------------------------------------

    def events(self, steps: int) -> Iterator[list[dict[str, Any]]]:
        """All traceEvents in chunks: steps first, then spans, instants and metadata."""
        for i in range(steps):
            yield from self.step(_FIRST_STEP + i)
        yield self._tail()

    def _tail(self) -> list[dict[str, Any]]:
        start = self.t0
        end = self.end + self._gap(50, 300)
        ts = _us(start + 28_000)
        pid = self.pid
        out: list[dict[str, Any]] = []

        def meta(name: str, p: Any, tid: Any, key: str, value: Any, at: float = ts) -> None:
            out.append(
                {"name": name, "ph": "M", "ts": at, "pid": p, "tid": tid, "args": {key: value}}
            )

        meta("process_name", pid, 0, "name", "python3.10")
        meta("process_labels", pid, 0, "labels", "CPU")
        meta("process_sort_index", pid, 0, "sort_index", pid)
        for dev in range(8):
            meta("process_name", dev, 0, "name", "python3.10")
            meta("process_labels", dev, 0, "labels", f"GPU {dev}")
            meta("process_sort_index", dev, 0, "sort_index", 16_777_216 + dev)
        for s in (COMPUTE_STREAM, COPY_STREAM, NCCL_STREAM):
            meta("thread_name", self.device, s, "name", f"stream {s} ")
            meta("thread_sort_index", self.device, s, "sort_index", s)
        for tid, tname in ((self.tid_bwd, "pt_autograd_0"), (self.tid_main, "pt_main_thread")):
            meta("thread_name", pid, tid, "name", f"thread {tid} ({tname})")
            meta("thread_sort_index", pid, tid, "sort_index", tid)
        out.append(
            {
                "ph": "X",
                "cat": "Trace",
                "ts": _us(start),
                "dur": _us(end - start),
                "pid": "Spans",
                "tid": "PyTorch Profiler",
                "name": "PyTorch Profiler (0)",
                "args": {"Op count": 0},
            }
        )
        meta("process_sort_index", "Spans", 0, "sort_index", 536_870_912, _us(start))
        out.append(
            {
                "name": "Iteration Start: PyTorch Profiler",
                "ph": "i",
                "s": "g",
                "pid": "Traces",
                "tid": "Trace PyTorch Profiler",
                "ts": _us(start),
            }
        )
        out.append(
            {"name": "Record Window End", "ph": "i", "s": "g", "pid": "", "tid": "", "ts": _us(end)}
        )
        return out


# ---------------------------------------------------------------------------------------------
# file-level structure


def _device_properties() -> list[dict[str, Any]]:
    return [
        {
            "id": i,
            "name": "NVIDIA A100-SXM4-80GB",
            "totalGlobalMem": 85_031_714_816,
            "computeMajor": 8,
            "computeMinor": 0,
            "maxThreadsPerBlock": 1024,
            "maxThreadsPerMultiprocessor": 2048,
            "regsPerBlock": 65536,
            "warpSize": 32,
            "sharedMemPerBlock": 49152,
            "numSms": _NUM_SMS,
            "regsPerMultiprocessor": 65536,
            "sharedMemPerBlockOptin": 166912,
            "sharedMemPerMultiprocessor": 167936,
        }
        for i in range(8)
    ]


def _distributed_info(rank: int, world_size: int) -> dict[str, Any]:
    return {
        "backend": "nccl",
        "rank": rank,
        "world_size": world_size,
        "pg_count": 1,
        "pg_config": [
            {
                "pg_name": "0",
                "pg_desc": "default_pg",
                "backend_config": "cuda:nccl",
                "pg_size": world_size,
                "ranks": list(range(world_size)),
            }
        ],
        "nccl_version": "2.20.5",
    }


def trace_file_name(rank: int, *, seed: int = 0, gzip_files: bool = True) -> str:
    """`rank-{r}.<date>.<pid>.pt.trace.json[.gz]`, the tensorboard handler's naming."""
    month = ("Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec")
    lt = time.gmtime(_BASE_TIME_NS // 1_000_000_000 + (seed % 97) * 3600)
    stamp = (
        f"{month[lt.tm_mon - 1]}_{lt.tm_mday:02d}_{lt.tm_hour:02d}_{lt.tm_min:02d}_{lt.tm_sec:02d}"
    )
    pid = _cpu_pid(seed, rank)
    return f"rank-{rank}.{stamp}.{pid}.pt.trace.json" + (".gz" if gzip_files else "")


def _head(rank: int, world_size: int) -> dict[str, Any]:
    return {
        "schemaVersion": 1,
        "deviceProperties": _device_properties(),
        "cupti_version": 22,
        "cuda_runtime_version": 12010,
        "cuda_driver_version": 12040,
        "record_shapes": 1,
        "distributedInfo": _distributed_info(rank, world_size),
    }


def _tail_keys(rank: int, seed: int) -> dict[str, Any]:
    return {
        "traceName": trace_file_name(rank, seed=seed, gzip_files=False),
        "displayTimeUnit": "ms",
        "baseTimeNanoseconds": _BASE_TIME_NS + (seed % 97) * 3_600_000_000_000,
    }


def _setup(
    rank: int,
    world_size: int,
    steps: int,
    seed: int,
    slow: bool,
    kernels_per_step: int,
    blocks: int | None,
    nccl_style: str,
) -> tuple[_Rank, dict[str, Any], dict[str, Any]]:
    if world_size < 1 or not 0 <= rank < world_size:
        raise ValueError(f"rank {rank} outside world_size {world_size}")
    if steps < 1:
        raise ValueError("steps must be >= 1")
    if nccl_style not in ("mixed", "new", "legacy"):
        raise ValueError("nccl_style must be 'mixed', 'new' or 'legacy'")
    n_blocks = blocks if blocks is not None else _blocks_for(kernels_per_step)
    model = _build_model(seed, max(1, n_blocks), world_size, nccl_style)
    sim = _Rank(model, rank, world_size=world_size, seed=seed, slow=slow)
    return sim, _head(rank, world_size), _tail_keys(rank, seed)


def make_trace(
    rank: int,
    *,
    world_size: int,
    steps: int,
    seed: int,
    slow: bool = False,
    kernels_per_step: int = 60,
    blocks: int | None = None,
    nccl_style: str = "mixed",
) -> dict[str, Any]:
    """One rank's trace as a dict (for tests that tweak it before `write_trace`).

    `kernels_per_step` is approximate (the model has whole blocks of 15 kernels); `blocks`
    sets the model size directly. `nccl_style` "mixed" names the bucket all-reduces like NCCL
    >= 2.19 (`ncclDevKernel_...`) and the small broadcast/loss all-reduce like older NCCL
    (`ncclKernel_...`), so both dialects occur; "new" / "legacy" use one.
    """
    sim, head, tail = _setup(
        rank, world_size, steps, seed, slow, kernels_per_step, blocks, nccl_style
    )
    events: list[dict[str, Any]] = []
    for chunk in sim.events(steps):
        events.extend(chunk)
    return {**head, "traceEvents": events, **tail}


def write_trace(trace: dict[str, Any], path: str | Path) -> Path:
    """Writes a trace dict as JSON (gzip when the name ends with .gz); returns the path."""
    path = Path(path)
    data = orjson.dumps(trace)
    with _open_out(path) as f:
        f.write(data)
    return path


def _open_out(path: Path) -> BinaryIO:
    if path.name.endswith(".gz"):
        # no file name or mtime in the header: identical arguments give identical bytes
        raw = path.open("wb")
        return _GzipOwner(raw)
    return path.open("wb")


class _GzipOwner(gzip.GzipFile):
    """GzipFile that closes the file object it writes to (level 1: speed over size)."""

    def __init__(self, raw: BinaryIO) -> None:
        super().__init__(filename="", mode="wb", compresslevel=1, fileobj=raw, mtime=0)
        self._raw = raw

    def close(self) -> None:
        try:
            super().close()
        finally:
            self._raw.close()


def _stream_rank(
    path: Path,
    rank: int,
    world_size: int,
    steps: int,
    seed: int,
    slow: bool,
    blocks: int,
    nccl_style: str,
) -> tuple[Path, int]:
    """Streams one rank to `path` chunk by chunk; returns (path, uncompressed bytes)."""
    sim, head, tail = _setup(rank, world_size, steps, seed, slow, 0, blocks, nccl_style)
    size = 0
    with _open_out(path) as f:
        part = orjson.dumps(head)[:-1] + b',"traceEvents":['
        f.write(part)
        size += len(part)
        sep = b""
        for chunk in sim.events(steps):
            if not chunk:
                continue
            data = orjson.dumps(chunk)  # "[...]": keep the inside, join chunks with ","
            f.write(sep)
            f.write(memoryview(data)[1:-1])
            size += len(sep) + len(data) - 2
            sep = b","
            del data
        part = b"]," + orjson.dumps(tail)[1:]
        f.write(part)
        size += len(part)
    return path, size


def _measure(world_size: int, steps: int, seed: int, blocks: int, nccl_style: str) -> int:
    """Uncompressed size of rank 0 without writing anything."""
    sim, head, tail = _setup(0, world_size, steps, seed, False, 0, blocks, nccl_style)
    size = len(orjson.dumps(head)) + len(orjson.dumps(tail)) + 16
    for chunk in sim.events(steps):
        if chunk:
            size += len(orjson.dumps(chunk)) - 1
    return size


def plan_size(
    target_mb: float, *, world_size: int, steps: int, seed: int, nccl_style: str = "mixed"
) -> tuple[int, int]:
    """(steps, blocks) whose files are ~target_mb (10**6 bytes) of uncompressed JSON.

    Keeps the requested number of steps and grows the model (kernels per step); adds steps
    only when a step would exceed `_MAX_BLOCKS` blocks, drops them when even one block per
    step is too big. Sizes are linear in steps and in blocks, so four small measurements fit
    the line.
    """
    target = target_mb * 1_000_000
    b1, b2 = 2, 6
    s11 = _measure(world_size, 1, seed, b1, nccl_style)
    s12 = _measure(world_size, 2, seed, b1, nccl_style)
    s21 = _measure(world_size, 1, seed, b2, nccl_style)
    s22 = _measure(world_size, 2, seed, b2, nccl_style)
    fixed = 2 * s11 - s12
    per1, per2 = s12 - s11, s22 - s21
    per_block = max(1.0, (per2 - per1) / (b2 - b1))
    per_step0 = per1 - per_block * b1  # a step's cost without blocks
    avail = max(0.0, target - fixed)
    n_steps = max(1, steps)
    blocks = (avail / n_steps - per_step0) / per_block
    if blocks > _MAX_BLOCKS:
        n_steps = math.ceil(avail / (per_step0 + per_block * _MAX_BLOCKS))
        blocks = (avail / n_steps - per_step0) / per_block
    if blocks < 1:
        blocks = 1
        n_steps = max(1, round(avail / (per_step0 + per_block)))
    return n_steps, max(1, round(blocks))


def write_trace_dir(
    out_dir: str | Path,
    *,
    ranks: int = 4,
    steps: int = 4,
    target_mb: float | None = None,
    seed: int = 0,
    slow_rank: int | None = 1,
    gzip_files: bool = True,
    kernels_per_step: int = 60,
    nccl_style: str = "mixed",
    workers: int = 1,
) -> list[Path]:
    """Writes one trace per rank into `out_dir`; returns the paths in rank order.

    With `target_mb`, each file's uncompressed JSON is ~target_mb * 10**6 bytes (within a
    few percent): the step count is kept and the model grows (see `plan_size`), so
    `kernels_per_step` is then ignored. `workers` > 1 writes ranks in parallel processes
    (same bytes as sequential).
    """
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    if ranks < 1:
        raise ValueError("ranks must be >= 1")
    if target_mb is not None:
        steps, blocks = plan_size(
            target_mb, world_size=ranks, steps=steps, seed=seed, nccl_style=nccl_style
        )
    else:
        blocks = _blocks_for(kernels_per_step)
    jobs = [
        (
            out / trace_file_name(r, seed=seed, gzip_files=gzip_files),
            r,
            ranks,
            steps,
            seed,
            r == slow_rank,
            blocks,
            nccl_style,
        )
        for r in range(ranks)
    ]
    if workers > 1 and ranks > 1:
        from concurrent.futures import ProcessPoolExecutor

        with ProcessPoolExecutor(max_workers=min(workers, ranks)) as pool:
            futures = [pool.submit(_stream_rank, *job) for job in jobs]
            return [fut.result()[0] for fut in futures]
    return [_stream_rank(*job)[0] for job in jobs]


def _main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        prog="python -m hta_tui.synth", description="Write synthetic multi-rank Kineto traces."
    )
    p.add_argument("out_dir")
    p.add_argument("--ranks", type=int, default=4)
    p.add_argument("--steps", type=int, default=4)
    p.add_argument("--target-mb", type=float, default=None, help="uncompressed MB per rank file")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--slow-rank", type=int, default=1, help="straggler rank; -1 for none")
    p.add_argument("--kernels-per-step", type=int, default=60)
    p.add_argument("--no-gzip", action="store_true", help="write plain .json")
    p.add_argument("--nccl-style", choices=("mixed", "new", "legacy"), default="mixed")
    p.add_argument("--workers", type=int, default=1, help="ranks written in parallel")
    a = p.parse_args(argv)
    t0 = time.perf_counter()
    paths = write_trace_dir(
        a.out_dir,
        ranks=a.ranks,
        steps=a.steps,
        target_mb=a.target_mb,
        seed=a.seed,
        slow_rank=None if a.slow_rank < 0 else a.slow_rank,
        gzip_files=not a.no_gzip,
        kernels_per_step=a.kernels_per_step,
        nccl_style=a.nccl_style,
        workers=a.workers,
    )
    for path in paths:
        print(path)
    print(f"{len(paths)} files in {time.perf_counter() - t0:.1f} s", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(_main())
