"""Kernel names and launch geometry as real PyTorch/cuBLAS/NCCL kernels carry them."""

from __future__ import annotations

import math
from dataclasses import dataclass

from hta_tui.synth.constants import (
    _NUM_SMS,
    _US,
)


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
