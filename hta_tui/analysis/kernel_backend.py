"""Which library a kernel comes from, by its name (and, for JIT code, its launch): cuBLAS,
cuDNN, CUTLASS, NCCL, Triton, FlashAttention, ATen, MIOpen, hipBLASLt, rocBLAS...

Vendors name their kernels by stable conventions: cuBLAS `ampere_sgemm_*`, `sm90_xmma_gemm_*`
and cuBLASLt's `nvjet_*`; cuDNN `*xmma_fprop*` / `implicit_convolve_*`; Tensile's `Cijk_*`
(hipBLASLt when it takes user arguments, else rocBLAS); MIOpen's `igemm_*`,
`batched_transpose_*`, `SubTensorOp*`; inductor's `triton_*`. A kernel no rule names but
launched through the driver API (`cuLaunchKernel*`) is JIT code (`Triton / JIT`: Triton's
in most PyTorch traces, a prebuilt cubin in some). The first rule that matches wins;
`other` is what none names.
"""

from __future__ import annotations

import polars as pl

#: (backend, regex on the kernel name), first match wins
RULES: tuple[tuple[str, str], ...] = (
    ("NCCL", r"^nccl|nccl\w*Kernel|^rccl"),
    ("Triton", r"^triton_"),
    ("FlashAttention", r"flash_fwd|flash_bwd|flash::|fmha|FlashAttn"),
    ("cuDNN", r"cudnn|xmma_(fprop|dgrad|wgrad)|implicit_convolve|winograd|^bn_(fw|bw)_"),
    (
        "cuBLAS",
        r"^(ampere|volta|turing|maxwell|sm\d+)_\w*gemm|xmma_gemm|^nvjet|cublas|gemv|"
        r"splitKreduce|gemmk1|gemmSN",
    ),
    ("hipBLASLt", r"^Cijk_\w*UserArgs|hipblaslt"),
    ("rocBLAS", r"^Cijk_|rocblas"),
    ("MIOpen", r"miopen|MIOpen|^igemm_(fwd|bwd|wrw)|^batched_transpose|^SubTensorOp|naive_conv"),
    ("Composable Kernel", r"ck::tensor_operation|^_ZN2ck"),
    ("CUTLASS", r"cutlass"),
    ("CUB", r"cub::"),
    ("vLLM", r"vllm::"),
    ("TensorRT-LLM", r"tensorrt_llm::"),
    ("FBGEMM", r"fbgemm"),
    ("ATen", r"at::native|at::cuda|c10::|^void multi_tensor_apply_kernel"),
)
DRIVER_JIT = "Triton / JIT"
OTHER = "other"


def backend(name: pl.Expr, launch: pl.Expr | None = None) -> pl.Expr:
    """The backend of each kernel `name` (RULES); with `launch` (the launch call's name), a
    driver launch (`cuLaunchKernel*`) that no rule names is `Triton / JIT`. Run it on the
    distinct names: a regex per rule."""
    expr = pl.when(name.str.contains(RULES[0][1]).fill_null(False)).then(pl.lit(RULES[0][0]))
    for label, pattern in RULES[1:]:
        expr = expr.when(name.str.contains(pattern).fill_null(False)).then(pl.lit(label))
    if launch is not None:
        driver = launch.str.starts_with("cuLaunchKernel").fill_null(False)
        expr = expr.when(driver).then(pl.lit(DRIVER_JIT))
    return expr.otherwise(pl.lit(OTHER))


#: a compiled region on the host: torch.compile's region annotation, the autograd function
#: of a compiled graph (forward and backward) and inductor's call of its compiled graph (not
#: the autograd engine's `evaluate_function: CompiledFunctionBackward`, whose gradient
#: accumulation is eager code)
COMPILED_RE = r"^(Torch-Compiled Region: |CompiledFunction(Backward)?$|## Call CompiledFxGraph)"
