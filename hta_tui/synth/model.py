"""The simulated model: its blocks, kernels, shapes and collectives, built once per trace."""

from __future__ import annotations

import math
import random
from dataclasses import dataclass, field
from typing import Any

from hta_tui.synth.constants import (
    _US,
)
from hta_tui.synth.kernels import (
    _ANON,
    _GELU,
    _GEMM_NAMES,
    _MTA,
    _REDUCE_SUM,
    _elementwise,
    _gemm,
    _Kernel,
    _kernel,
    _vec,
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
