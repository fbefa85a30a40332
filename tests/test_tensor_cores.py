"""Tensor-core detection by kernel name: the plugin's 2021 list and the modern one.

Names are kernels that PyTorch launches on Ampere, Hopper and Blackwell GPUs (cuBLAS, cuBLASLt,
CUTLASS, flash attention, Triton/Inductor templates) and plain SIMT kernels that do not use
tensor cores."""

from __future__ import annotations

import polars as pl
import pytest

from hta_tui.analysis.tensor_cores import tc_eligible_op, tc_names, uses_tc

CASES = [
    # name, plugin list, modern list
    ("ampere_fp16_s16816gemm_fp16_128x128_ldg8_f2f_stages_32x5_nn", True, True),
    ("volta_h884gemm_64x64_ldg8_nn", True, True),
    ("sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64_cublas", True, True),
    ("nvjet_tst_128x256_64x4_1x2_h_bz_coopA_NTN", False, True),
    (
        "void cutlass::device_kernel<flash::enable_sm90_or_later<flash::FlashAttnFwdSm90>>",
        False,
        True,
    ),
    ("sm100_xmma_gemm_e4m3e4m3_e4m3f32_f32_tn_n_tilesize256x128x128", True, True),
    ("void flash_fwd_kernel<Flash_fwd_kernel_traits<128, 64, 64, 4>>", False, True),
    ("triton_tem_fused_mm_0", False, True),
    ("cutlass3x_sm90_tensorop_gemm_bf16_bf16_f32_bf16_bf16_128x256x64_1x2x1_0_tnn", False, True),
    ("ampere_sgemm_128x64_nn", False, False),
    (
        "void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<float>>",
        False,
        False,
    ),
    ("triton_poi_fused_add_0", False, False),
]


@pytest.mark.parametrize(("name", "plugin", "modern"), CASES)
def test_kernel_lists(name: str, plugin: bool, modern: bool) -> None:
    names = pl.DataFrame({"name": [name]})
    assert names.select(uses_tc(pl.col("name"), modern=False)).item() is plugin
    assert names.select(uses_tc(pl.col("name"), modern=True)).item() is modern


def test_eligible_ops() -> None:
    ops = pl.DataFrame({"name": ["aten::mm", "aten::_scaled_mm", "aten::add", None]})
    assert ops.select(tc_eligible_op(pl.col("name"), modern=False)).to_series().to_list() == [
        True, False, False, False,
    ]  # fmt: skip
    assert ops.select(tc_eligible_op(pl.col("name"), modern=True)).to_series().to_list() == [
        True, True, False, False,
    ]  # fmt: skip


def test_tc_names_memo_is_uses_tc() -> None:
    """`tc_names` (the flags per distinct name, kept per process: the op tree and the
    kernels by operator read them) answers as `uses_tc` on every row, nulls, the empty
    name, case variants, MIOpen's look-alikes and repeats included, before and after the
    names are kept."""
    names = [n for n, _, _ in CASES]
    edge = [None, "", "SubTensorOp_fwd", "subtensorop_gemm", "AMPERE_SGEMM_128X64_NN"]
    edge += ["Cijk_Ailk_Bljk_HHS_BH_MT64x64x16", names[0].upper(), names[3].lower()]
    for batch in (names[:5] + edge[:3], names + edge + names, edge[::-1]):
        frame = pl.DataFrame({"name": batch}, schema={"name": pl.String})
        modern, plugin = tc_names(frame["name"])
        got = frame.select(
            pl.col("name").fill_null("").is_in(modern.implode()).alias("m"),
            pl.col("name").fill_null("").is_in(plugin.implode()).alias("p"),
        )
        want = frame.select(
            uses_tc(pl.col("name"), modern=True).alias("m"),
            uses_tc(pl.col("name"), modern=False).alias("p"),
        )
        assert got.equals(want)
        assert want["m"].any() and not want["m"].all() and want["p"].any()
