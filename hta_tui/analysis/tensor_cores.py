"""Which kernels run on tensor cores, by name: the TensorBoard plugin's 2021 list and today's.

The plugin (`profiler/tensor_core.py`, from NVIDIA PyProf) knows Volta/Ampere cuDNN and cuBLAS
names only. The modern list adds what Hopper/Blackwell-era PyTorch launches: CUTLASS and
cuBLAS(Lt) kernels named `sm90_*` / `sm100_*` or `*tensorop*`, `nvjet` (cuBLASLt on Hopper),
`wgmma` / `gmma` (warpgroup MMA), `imma` / `hmma` / FP8 (`e4m3`, `e5m2`) names, flash attention
and fused-MHA kernels, and Triton template matmuls (`triton_tem_*mm*`, the kernels whose body is
a `tl.dot`), and AMD's matrix cores (MFMA): Tensile / hipBLASLt GEMMs naming their matrix
instruction (`Cijk_*_MI16x16x1*`), MIOpen's xdlops convolutions (`igemm_*_gtcx*`,
`*xdlops*`), Composable Kernel's `*_xdl_*` / `*_wmma_*` kernels, never MIOpen's `SubTensorOp*`
elementwise kernels (which `tensorop` would match). Both are reported: the plugin's for
figures comparable with TensorBoard, the modern one for the truth on current GPUs.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping

import polars as pl

from hta_tui.analysis.hta_view import job_cached
from hta_tui.analysis.per_rank import made_at_once
from hta_tui.analysis.rank_column import tagged

#: `TC_Allowlist` of torch-tb-profiler 0.4.3: substrings, case-sensitive.
PLUGIN_KERNELS: tuple[str, ...] = (
    "h884", "s884", "h1688", "s1688", "hmma", "i8816", "16816", "dgrad_1x1_stride_2x2",
    "first_layer_wgrad_kernel", "conv1x1", "conv2d_c1_k1", "direct_group", "xmma_implicit_gemm",
    "xmma_sparse_conv", "xmma_warp_specialized_implicit_gemm", "xmma_gemm", "xmma_sparse_gemm",
    "c1688",
)  # fmt: skip

#: Added by the modern list (matched case-insensitively, besides PLUGIN_KERNELS).
MODERN_KERNELS: tuple[str, ...] = (
    "sm90_", "sm100_", "sm120_", "tensorop", "nvjet", "wgmma", "gmma", "imma", "hmma", "bmma",
    "xmma", "e4m3", "e5m2", "fp8", "flash_fwd", "flash_bwd", "fmha", "triton_tem_fused_mm",
    "triton_tem_fused_bmm", "triton_tem_fused_addmm", "cutlass_80", "cutlass3x", "s16816",
    "h16816", "i16832", "bf16816", "f16816",
)  # fmt: skip

#: `TC_OP_Allowlist`: operators eligible for tensor cores (exact names).
PLUGIN_OPS: tuple[str, ...] = (
    "aten::_convolution", "aten::conv1d", "aten::conv2d", "aten::conv3d", "aten::conv_tbc",
    "aten::conv_transpose1d", "aten::conv_transpose2d", "aten::conv_transpose3d",
    "aten::convolution", "aten::cudnn_convolution", "aten::cudnn_convolution_transpose",
    "aten::prelu", "aten::addmm", "aten::addmv", "aten::addr", "aten::matmul", "aten::mm",
    "aten::mv", "aten::linear", "aten::addbmm", "aten::baddbmm", "aten::bmm",
    "aten::chain_matmul", "aten::linalg_multi_dot", "aten::_thnn_fused_lstm_cell",
    "aten::_thnn_fused_gru_cell", "aten::lstm_cell", "aten::gru_cell", "aten::rnn_tanh_cell",
    "aten::rnn_relu_cell", "CudnnConvolutionBackward", "BmmBackward0",
    "aten::cudnn_convolution_transpose_backward", "CudnnConvolutionTransposeBackward",
    "MmBackward", "aten::cudnn_convolution_backward_weight", "aten::addmm_", "AddmvBackward",
    "MvBackward", "aten::cudnn_convolution_transpose_backward_weight",
    "aten::cudnn_convolution_transpose_backward_input", "AddmmBackward",
    "aten::cudnn_convolution_backward_input", "AddbmmBackward", "aten::cudnn_convolution_backward",
)  # fmt: skip

#: Operators added by the modern list: attention and scaled / grouped matmuls.
MODERN_OPS: tuple[str, ...] = (
    "aten::_scaled_mm", "aten::_scaled_dot_product_flash_attention",
    "aten::_scaled_dot_product_efficient_attention", "aten::_scaled_dot_product_cudnn_attention",
    "aten::scaled_dot_product_attention", "aten::_flash_attention_forward",
    "aten::_efficient_attention_forward", "aten::_grouped_mm", "aten::_int_mm", "MmBackward0",
    "AddmmBackward0", "BmmBackward0", "ConvolutionBackward0",
)  # fmt: skip


#: AMD matrix-core (MFMA / WMMA) kernels, by the patterns their libraries name them with
#: (regexes on the lower-cased name): Tensile's `_MI<m>x<n>x<k>` matrix instruction, MIOpen's
#: implicit GEMMs of the `gtcx` (xdlops) generators, Composable Kernel's xdl / wmma pipelines.
AMD_MATRIX_KERNELS: tuple[str, ...] = (
    r"^cijk_.*_mi\d+x\d+x\d+", r"^igemm_.*_gtcx", r"xdlops", r"_xdl_", r"_wmma_", r"mfma",
)  # fmt: skip

#: Not matrix-core kernels although a pattern matches: MIOpen's elementwise tensor ops.
NOT_MATRIX_KERNELS = r"^subtensorop"


def uses_tc(name: pl.Expr, *, modern: bool) -> pl.Expr:
    """A kernel name uses tensor cores (plugin list, or modern list when `modern`)."""
    n = name.fill_null("")
    plugin = pl.any_horizontal(n.str.contains(p, literal=True) for p in PLUGIN_KERNELS)
    if not modern:
        return plugin
    low = n.str.to_lowercase()
    modern_hit = pl.any_horizontal(low.str.contains(p, literal=True) for p in MODERN_KERNELS)
    amd_hit = pl.any_horizontal(low.str.contains(p) for p in AMD_MATRIX_KERNELS)
    return (plugin | modern_hit | amd_hit) & ~low.str.contains(NOT_MATRIX_KERNELS)


#: name -> (modern, plugin) `uses_tc` flags of the kernel names seen by this process: a
#: rank's few hundred distinct names cost ~8 ms of string tests each time (dozens of patterns,
#: regexes compiled per query); the ranks a worker reads share most of their kernel names
_FLAGS: dict[str, tuple[bool, bool]] = {}
_FLAGS_MAX = 200_000
_flags_lock = threading.Lock()


def tc_names(names: pl.Series) -> tuple[pl.Series, pl.Series]:
    """The distinct `names` (a null one as "") whose `uses_tc` is true, by the modern and by
    the plugin's list: `name.fill_null("").is_in(...)` is `uses_tc(name)`. Each name is
    tested once per process (`uses_tc` itself, on the names not met before)."""
    keys = names.fill_null("").unique().to_list()
    with _flags_lock:
        got = {k: f for k in keys if (f := _FLAGS.get(k)) is not None}
    new = [k for k in keys if k not in got]
    if new:
        tested = pl.DataFrame({"name": new}, schema={"name": pl.String}).select(
            uses_tc(pl.col("name"), modern=True).alias("m"),
            uses_tc(pl.col("name"), modern=False).alias("p"),
        )
        pairs = zip(tested["m"].to_list(), tested["p"].to_list(), strict=True)
        found = dict(zip(new, pairs, strict=True))
        got.update(found)
        with _flags_lock:
            if len(_FLAGS) + len(found) > _FLAGS_MAX:
                _FLAGS.clear()
            _FLAGS.update(found)
    flags = [(k, *got[k]) for k in keys]
    modern = pl.Series("name", [k for k, m, _ in flags if m], dtype=pl.String)
    plugin = pl.Series("name", [k for k, _, p in flags if p], dtype=pl.String)
    return modern, plugin


def tc_flags(names: pl.Series) -> tuple[pl.Expr, pl.Expr]:
    """`uses_tc(name)` of each row by the modern and by the plugin's list, as expressions
    over the rows whose distinct names are `names` (`tc_names`: each name tested once)."""
    name = pl.col("name").fill_null("")
    modern, plugin = tc_names(names)
    return name.is_in(modern.implode()), name.is_in(plugin.implode())


#: Launch-name prefixes of the runtimes whose kernel names the lists above can read.
_READABLE_LAUNCHES = ("cu", "hip")


def names_tell(events: pl.DataFrame) -> bool:
    """Whether this rank's kernel names can say tensor-core use: its kernels are CUDA's or
    ROCm's (launched by a `cu*` / `hip*` call, or of the `kernel` category with no launch in
    the trace). Other accelerators' kernels (MTIA, XPU, ...) name no matrix unit we know, so
    their share is unknown (n/a), not 0%."""
    facts = job_cached({0: events}, "kernel_names_tell", lambda: _launch_facts(events))
    row = facts.row(0, named=True)
    if row["launches"]:
        return bool(row["readable"])
    return not row["other_kernels"]


def ranks_tell(ranks: Mapping[int, pl.DataFrame]) -> dict[int, bool]:
    """`names_tell` of each rank; inside a batch of small ranks (`per_rank.made_at_once`)
    its facts made for every rank at once (two queries, not two a rank)."""
    made_at_once(ranks, "kernel_names_tell", ("kind", "name", "cat"), _facts_at_once)
    return {r: names_tell(ev) for r, ev in ranks.items()}


def _facts_at_once(frames: list[tuple[int, pl.DataFrame]]) -> dict[int, pl.DataFrame]:
    """`_launch_facts` of each rank of a batch (frames of one schema), rank -> its table."""
    every = tagged(frames).lazy()
    launch = pl.col("name").fill_null("").str.to_lowercase()
    readable = pl.any_horizontal(launch.str.starts_with(p) for p in _READABLE_LAUNCHES)
    calls = (
        every.filter(pl.col("kind").is_in(["runtime", "driver"]))
        .group_by("rank")
        .agg(readable.any().alias("readable"))
    )
    other = pl.col("cat").fill_null("").str.to_lowercase() != "kernel"
    kernels = every.filter(pl.col("kind") == "kernel").group_by("rank").agg(other.any())
    found_calls, found_other = pl.collect_all([calls, kernels])
    said = dict(found_calls.rows())
    others = dict(found_other.rows())
    return {
        rank: pl.DataFrame(
            {
                "launches": [rank in said],
                "readable": [bool(said.get(rank, False))],
                "other_kernels": [bool(others.get(rank, False))],
            }
        )
        for rank, _ in frames
    }


def _launch_facts(events: pl.DataFrame) -> pl.DataFrame:
    """launches (any), readable (a cu*/hip* one), other_kernels (kernels of another
    category than `kernel`): on the few distinct launch names and kernel categories."""
    launch_names = (
        events.lazy()
        .filter(pl.col("kind").is_in(["runtime", "driver"]))
        .select(pl.col("name").fill_null("").unique().str.to_lowercase())
        .collect()["name"]
    )
    cats = (
        events.lazy()
        .filter(pl.col("kind") == "kernel")
        .select(pl.col("cat").fill_null("").unique().str.to_lowercase())
        .collect()["cat"]
    )
    # the few distinct names tested in Python: as polars expressions, 3 queries a rank
    readable = any(n.startswith(_READABLE_LAUNCHES) for n in launch_names.to_list())
    return pl.DataFrame(
        {
            "launches": [launch_names.len() > 0],
            "readable": [bool(readable)],
            "other_kernels": [bool((cats != "kernel").any())],
        }
    )


def tc_eligible_op(name: pl.Expr, *, modern: bool) -> pl.Expr:
    ops = PLUGIN_OPS + MODERN_OPS if modern else PLUGIN_OPS
    return name.is_in(ops).fill_null(False)
