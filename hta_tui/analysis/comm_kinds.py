"""What a collective is called, how big its elements are and how NCCL counts its bandwidth.

One place for the vocabularies of the trace: the `nccl:` / `gloo:` op names, the `Collective
name` arg of record_param_comms, NCCL kernel names, and the dtype spellings of `dtype`
(c10 ScalarType names: "Float", "BFloat16", "Float8_e4m3fn") and of `Input type` (C++ names:
"float", "c10::BFloat16", "long int"). Every spelling maps to one kind and one byte size.
"""

from __future__ import annotations

import polars as pl

#: Ops that stand for one collective call on the CPU side: the backend's record_function.
COLLECTIVE_OP = r"^(nccl|gloo|mpi|ucc|xccl|hccl):"
#: NCCL's device kernels, old (`ncclKernel_AllReduce_RING_LL_Sum_float`) and new
#: (`ncclDevKernel_AllGather_RING_LL`), and RCCL's (same names).
NCCL_KERNEL = r"^nccl(Dev)?Kernel_"
#: The TensorBoard plugin's whole vocabulary (its `NcclOpNameSet` / `GlooOpNameSet`).
PLUGIN_OPS: tuple[str, ...] = tuple(
    f"{lib}:{op}"
    for lib in ("nccl", "gloo")
    for op in ("broadcast", "reduce", "all_reduce", "all_gather", "reduce_scatter")
)

#: Any spelling, lower-cased with `_` and the lib prefix removed -> one kind.
_KINDS: dict[str, str] = {
    "allreduce": "all_reduce",
    "allreducecoalesced": "all_reduce",
    "allgather": "all_gather",
    "allgatherbase": "all_gather",
    "allgatherintotensorcoalesced": "all_gather",
    "allgathercoalesced": "all_gather",
    "reducescatter": "reduce_scatter",
    "reducescatterbase": "reduce_scatter",
    "reducescattertensorcoalesced": "reduce_scatter",
    "alltoall": "all_to_all",
    "alltoallbase": "all_to_all",
    "alltoallv": "all_to_all",
    "broadcast": "broadcast",
    "reduce": "reduce",
    "gather": "gather",
    "scatter": "scatter",
    "send": "send",
    "recv": "recv",
    "recvanysource": "recv",
    "sendrecv": "send_recv",
    "barrier": "barrier",
    "coalesced": "coalesced",
    "startcoalescing": "coalesced",
    "endcoalescing": "coalesced",
}

#: Bus bandwidth = algorithm bandwidth x factor(n ranks) (NCCL's PERFORMANCE.md): the bytes
#: each rank's links carry for one byte of the operation; rooted and point-to-point
#: operations move each byte once (factor 1).
_RING_TWICE = ("all_reduce",)
_RING_ONCE = ("all_gather", "reduce_scatter", "all_to_all")

#: Bytes per element. c10 ScalarType names (record_param_comms `dtype`) and C++ type names
#: (`Input type`), lower-cased without "c10::". The plugin knows six of them and counts every
#: other type as 0 bytes; these are all of PyTorch's.
DTYPE_BYTES: dict[str, int] = {
    **dict.fromkeys(("float", "float32"), 4),
    **dict.fromkeys(("double", "float64"), 8),
    **dict.fromkeys(("half", "float16"), 2),
    **dict.fromkeys(("bfloat16",), 2),
    **dict.fromkeys(("long", "long int", "int64", "int64_t", "long long"), 8),
    **dict.fromkeys(("int", "int32", "int32_t"), 4),
    **dict.fromkeys(("short", "short int", "int16", "int16_t"), 2),
    **dict.fromkeys(("char", "signed char", "int8", "int8_t"), 1),
    **dict.fromkeys(("byte", "unsigned char", "uint8", "uint8_t"), 1),
    **dict.fromkeys(("uint16", "uint16_t", "unsigned short"), 2),
    **dict.fromkeys(("uint32", "uint32_t", "unsigned int"), 4),
    **dict.fromkeys(("uint64", "uint64_t", "unsigned long", "unsigned long int"), 8),
    "bool": 1,
    **dict.fromkeys(
        (
            "float8_e4m3fn",
            "float8_e5m2",
            "float8_e4m3fnuz",
            "float8_e5m2fnuz",
            "float8_e8m0fnu",
            "float4_e2m1fn_x2",
        ),
        1,
    ),
    **dict.fromkeys(("complexhalf", "complex<c10::half>", "complex32"), 4),
    **dict.fromkeys(("complexfloat", "complex<float>", "complex64"), 8),
    **dict.fromkeys(("complexdouble", "complex<double>", "complex128"), 16),
    **dict.fromkeys(("qint8", "quint8", "quint4x2", "quint2x4"), 1),
    "qint32": 4,
}

#: The plugin's own table (`analyze_communication_nodes`); every other type is 0 bytes.
PLUGIN_DTYPE_BYTES: dict[str, int] = {
    "long int": 8,
    "float": 4,
    "int": 4,
    "c10::Half": 2,
    "c10::BFloat16": 2,
    "unsigned char": 1,
}


def kind_of(spelling: pl.Expr) -> pl.Expr:
    """The kind ("all_reduce", "send_recv" ...) of an op name, `Collective name` or NCCL kernel
    name; the spelling itself (without its lib prefix) when it is none of the known ones."""
    kernel_op = spelling.str.extract(NCCL_KERNEL + r"([A-Za-z]+)", 2)
    bare = kernel_op.fill_null(spelling.str.replace(COLLECTIVE_OP, "").str.replace(r"[ (<].*$", ""))
    key = bare.str.to_lowercase().str.replace_all("_", "")
    return key.replace_strict(_KINDS, default=bare.str.strip_chars("_"), return_dtype=pl.String)


def dtype_bytes(dtype: pl.Expr) -> pl.Expr:
    """Bytes per element of a dtype spelling; null when unknown."""
    key = dtype.str.to_lowercase().str.strip_prefix("c10::").str.strip_chars()
    return key.replace_strict(DTYPE_BYTES, default=None, return_dtype=pl.Int64)


def bus_factor(kind: pl.Expr, ranks: pl.Expr) -> pl.Expr:
    """NCCL's bus-bandwidth factor of a collective kind among `ranks` ranks."""
    n = ranks.cast(pl.Float64)
    return (
        pl.when(kind.is_in(_RING_TWICE))
        .then(2 * (n - 1) / n)
        .when(kind.is_in(_RING_ONCE))
        .then((n - 1) / n)
        .otherwise(1.0)
    )
