"""Issue 24, point 6: AMD matrix cores. MFMA GEMMs (Tensile's `Cijk_*_MI16x16x1*`, MIOpen's
xdlops `igemm_*_gtcx*`, Composable Kernel's `*_xdl_*`) count as matrix-core kernels, MIOpen's
`SubTensorOp*` elementwise kernels do not, and an accelerator whose kernel names cannot tell
(MTIA) has no figure (n/a) rather than 0%."""

from __future__ import annotations

import gzip
import json
import re
from pathlib import Path

import polars as pl
import pytest

from hta_tui.analysis import (
    gpu_metric_series,
    gpu_metrics,
    kernel_view,
    operators,
    tensor_cores,
)
from tests.hta_parity import trace_set
from tests.rocm_cases import MI300, rocm_trace

#: the MFMA families as their libraries document them, written independently of the code
MFMA = re.compile(r"^(Cijk_.*_MI\d+x\d+x\d+|igemm_(fwd|bwd|wrw)_gtcx\d*_|.*_xdl_)")


def _raw_kernels(folder: Path) -> dict[str, float]:
    """Kernel name -> summed duration (us), as written in the file."""
    (file,) = [p for p in folder.iterdir() if ".json" in p.name]
    with gzip.open(file, "rt") as f:
        events = json.load(f)["traceEvents"]
    out: dict[str, float] = {}
    for e in events:
        if e.get("ph") == "X" and e.get("cat") == "kernel":
            out[e["name"]] = out.get(e["name"], 0.0) + float(e.get("dur", 0))
    return out


@pytest.mark.shared
def test_mi300_mfma_share_is_counted(tmp_path_factory: pytest.TempPathFactory) -> None:
    """The MI300 trace spends a quarter of its kernel time in MFMA convolutions and GEMMs;
    before, the GPU metrics said 0%."""
    folder = rocm_trace(MI300, tmp_path_factory)
    raw = _raw_kernels(folder)
    mfma = sum(d for n, d in raw.items() if MFMA.match(n))
    expected = 100 * mfma / sum(raw.values())
    assert expected > 20
    frames = trace_set(folder).frames()
    metrics = gpu_metrics.gpu_metrics(frames)
    assert metrics["tc_kernel_pct"].to_list() == [pytest.approx(expected, rel=1e-6)]
    table = kernel_view.kernel_table(frames)
    used = dict(zip(table["name"], table["tc_used"], strict=True))
    assert all(used[n] for n in raw if MFMA.match(n))
    sub = [n for n in raw if n.startswith("SubTensorOp")]
    assert sub and not any(used[n] for n in sub)
    _mi300_families(raw, expected)


def _mi300_families(raw: dict[str, float], shown: float) -> None:
    """Issue 24 expected 39% on an MI300 trace; on this one every kernel name falls in one
    family of MI300_FAMILIES, and the MFMA families hold 26.6% of the kernel time, which the
    GPU metrics show. (39% is about what MFMA's share would be without the batch-norm
    backward kernel, 31% of the time and vector code: not a matrix-core kernel.)"""
    family = {}
    for name in raw:
        found = [f for f, (_, rx) in MI300_FAMILIES.items() if re.search(rx, name)]
        assert len(found) == 1, (name, found)  # no kernel left unexplained, none twice
        family[name] = found[0]
    mfma = sum(d for n, d in raw.items() if MI300_FAMILIES[family[n]][0])
    share = 100 * mfma / sum(raw.values())
    assert share == pytest.approx(26.57, abs=0.01) and share == pytest.approx(shown, rel=1e-9)
    bn = sum(d for n, d in raw.items() if n.startswith("void at::native::batch_norm_backward"))
    assert 100 * mfma / (sum(raw.values()) - bn) == pytest.approx(38.5, abs=0.1)


def test_names_that_match_and_not() -> None:
    names = [
        "Cijk_Ailk_Bljk_BBS_BH_Bias_HA_S_SAV_UserArgs_MT32x32x128_MI16x16x1_SN_LDSB1",
        "igemm_fwd_gtcx3_nhwc_bf16_bx0_ex1_bt128x64x32_wt32x32x8_ws1x1",
        "kernel_gemm_xdlops_v2r3",
        "SubTensorOpWithScalar1d",
        "SubTensorOpWithCastTensor1d",
        "cutlass_80_tensorop_s16816gemm_f16_128x128",
        "batched_transpose_32x32_half",
    ]
    got = pl.select(tensor_cores.uses_tc(pl.Series(names), modern=True)).to_series().to_list()
    assert got == [True, True, True, False, False, True, False]


def test_mtia_says_na_not_zero(tmp_path_factory: pytest.TempPathFactory) -> None:
    """MTIA's device ops name no matrix unit: the share is unknown (null), not 0%."""
    frames = trace_set(rocm_trace("mtia", tmp_path_factory)).frames()
    metrics = gpu_metrics.gpu_metrics(frames)
    assert metrics.height > 0
    assert metrics["tc_kernel_pct"].is_null().all()
    assert metrics["tc_kernel_pct_plugin_list"].is_null().all()
    table = kernel_view.kernel_table(frames)
    assert table.height > 0 and table["tc_used"].is_null().all()
    series = gpu_metric_series.metric_series(frames)
    assert series.height > 0 and series["tc_pct"].is_null().all()
    ops = operators.operator_tables(frames)["name"]
    with_device = ops.filter(pl.col("device_self_duration (us)") > 0)
    assert with_device.height > 0 and with_device["tc_self_ratio"].is_null().all()


def test_rocm_shape_still_has_a_figure(tmp_path_factory: pytest.TempPathFactory) -> None:
    """A ROCm rank (hip launches) keeps a number."""
    frames = trace_set(rocm_trace("rocm", tmp_path_factory)).frames()
    metrics = gpu_metrics.gpu_metrics(frames)
    assert metrics.height > 0 and metrics["tc_kernel_pct"].is_not_null().all()


#: Every kernel family of the MI300 ResNet-18 trace, by what its name says it runs. MFMA: the
#: GEMMs and convolutions whose names carry their matrix instruction or xdlops pipeline.
#: Not MFMA: PyTorch's own batch-norm, pooling, reduction and elementwise kernels (vector
#: ALU code), MIOpen's layout transposes (NCHW <-> NHWC data movement around the NHWC
#: convolutions) and MIOpen's SubTensorOp elementwise kernels.
MI300_FAMILIES: dict[str, tuple[bool, str]] = {
    "tensile_gemm": (True, r"^Cijk_.*_MI16x16x1_"),
    "miopen_xdlops_conv": (True, r"^igemm_(fwd|bwd|wrw)_gtcx3_"),
    "ck_xdl_conv": (True, r"^_ZN2ck16tensor_operation.*_xdl_cshuffle"),
    "batch_norm": (False, r"^void at::native::batch_norm_"),
    "pooling": (False, r"^void at::native::\(anonymous namespace\)::max_pool_"),
    "elementwise": (
        False,
        r"^void at::native::(vectorized_elementwise_kernel|elementwise_kernel_manual_unroll|"
        r"\(anonymous namespace\)::(unrolled_elementwise_kernel_for_multi_outputs|"
        r"multi_tensor_apply_kernel))<",
    ),
    "reduction": (False, r"^void at::native::reduce_kernel<"),
    "miopen_transpose": (False, r"^batched_transpose_\d+x\d+_half$"),
    "miopen_subtensor": (False, r"^SubTensorOp"),
}
