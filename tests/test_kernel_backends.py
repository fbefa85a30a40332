"""Issue 31 point 2: compiled code rolls up to the compiled region that launched it
(`CompiledFunction`, `Torch-Compiled Region`), with each kernel's backend (cuBLAS, Triton,
MIOpen, hipBLASLt...)."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import numpy as np
import polars as pl
import pytest

from hta_tui.analysis import kernel_owners as ko
from hta_tui.analysis.kernel_backend import backend
from hta_tui.synth import graph_replay as gr
from hta_tui.synth.files import write_trace
from hta_tui.trace.parse import parse_bytes, read_bytes
from tests.shared_sets import parsed


@pytest.mark.parametrize(
    ("name", "launch", "want"),
    [
        ("ampere_sgemm_128x64_tn", "cudaLaunchKernel", "cuBLAS"),
        ("nvjet_tst_64x64_64x16_2x1_2cta_v_bz_bias_TNT", "cudaLaunchKernel", "cuBLAS"),
        ("sm80_xmma_fprop_implicit_gemm_f16f16", "cudaLaunchKernel", "cuDNN"),
        ("ncclDevKernel_AllGather_RING_LL(ncclDevKernelArgsStorage<4096ul>)", None, "NCCL"),
        ("triton_poi_fused_add_0", "cuLaunchKernel", "Triton"),
        ("_copy_page_indices_kernel", "cuLaunchKernelEx", "Triton / JIT"),
        ("_copy_page_indices_kernel", "cudaLaunchKernel", "other"),
        (
            "Cijk_Alik_Bljk_BBS_BH_Bias_HA_S_SAV_UserArgs_MT64x32x128",
            "hipLaunchKernel",
            "hipBLASLt",
        ),
        ("Cijk_Ailk_Bljk_HHS_BH_MT128x128x32", "hipLaunchKernel", "rocBLAS"),
        ("igemm_fwd_gtcx3_nhwc_bf16_bx0_ex1", "hipExtModuleLaunchKernel", "MIOpen"),
        ("void cutlass::Kernel<cutlass_80_tensorop_s1688gemm>(Params)", None, "CUTLASS"),
        ("void at::native::vectorized_elementwise_kernel<4>", None, "ATen"),
    ],
)
def test_backend_by_name_and_launch(name: str, launch: str | None, want: str) -> None:
    frame = pl.DataFrame(
        {"name": [name], "launch": [launch]}, schema={"name": pl.String, "launch": pl.String}
    )
    assert frame.select(backend(pl.col("name"), pl.col("launch")).alias("b"))["b"].item() == want


def test_graph_kernels_roll_up_to_their_compiled_region(tmp_path: Path) -> None:
    path = write_trace(gr.make_graph_replay(steps=2, kernels=8), tmp_path / "t.json")
    events = parse_bytes(read_bytes(path)).frames["events"]
    owners = ko.kernel_owners(events)
    graph = owners.filter(pl.col("graph"))
    assert set(graph["compiled_region"]) == {gr.COMPILED_OP}
    copy = owners.filter(~pl.col("graph"))
    assert copy["compiled_region"].to_list() == [None, None]
    table = ko.kernel_backends({0: events})
    rows = {(b, r): (k, t) for _, b, r, k, t, _ in table.iter_rows()}
    # 8 kernels a replay cycle the four names: 2 of each, 2 replays
    assert rows[("Triton", gr.COMPILED_OP)] == (12, 12 * gr.KERNEL_US)
    assert rows[("cuBLAS", gr.COMPILED_OP)] == (4, 4 * gr.KERNEL_US)
    assert rows[("other", None)] == (2, 2 * gr.COPY_KERNEL_US)
    assert table["share_pct"].sum() == pytest.approx(100)


def _raw(shared: Path, case: str) -> tuple[list[dict], Path]:
    (path,) = (shared / "traces" / case).iterdir()
    with gzip.open(path) as f:
        return json.load(f)["traceEvents"], path


@pytest.mark.shared
def test_rocm_backends_on_mi300(shared: Path) -> None:
    """MIOpen's convolution kernels and hipBLASLt's GEMMs, counted from the raw names."""
    raw, path = _raw(shared, "tracelens_mi300_ddp_resnet18")
    names = [e["name"] for e in raw if e.get("cat") == "kernel"]
    miopen = sum(n.startswith(("igemm_", "batched_transpose", "SubTensorOp")) for n in names)
    hipblaslt = sum(n.startswith("Cijk_") and "UserArgs" in n for n in names)
    assert miopen and hipblaslt
    table = ko.kernel_backends({0: parsed(path).frames["events"]})
    kernels = dict(table.group_by("backend").agg(pl.col("kernels").sum()).rows())
    assert kernels["MIOpen"] == miopen
    assert kernels["hipBLASLt"] == hipblaslt


@pytest.mark.shared
@pytest.mark.parametrize(
    ("case", "region"),
    [
        ("tracelens_b200_eager_nccl", "Torch-Compiled Region"),
        ("negative_queue_length_values_check", "CompiledFunction"),
    ],
)
def test_kernels_of_compiled_regions(shared: Path, case: str, region: str) -> None:
    """The kernels whose launch lies inside a compiled region on its thread (raw JSON, by
    time) are those `kernel_backends` puts under one."""
    raw, path = _raw(shared, case)
    regions = [
        e
        for e in raw
        if e.get("ph") == "X" and e.get("cat") != "python_function" and e["name"].startswith(region)
    ]
    assert regions
    r_pid = np.array([r["pid"] for r in regions])
    r_tid = np.array([r["tid"] for r in regions])
    r_ts = np.array([r["ts"] for r in regions])
    r_end = r_ts + np.array([r["dur"] for r in regions])
    launches = {
        e["args"]["correlation"]
        for e in raw
        if e.get("cat") in ("cuda_runtime", "cuda_driver")
        and "correlation" in e.get("args", {})
        and (
            (r_pid == e["pid"])
            & (r_tid == e["tid"])
            & (r_ts <= e["ts"])
            & (r_end >= e["ts"] + e["dur"])
        ).any()
    }
    expected = sum(
        1 for e in raw if e.get("cat") == "kernel" and e["args"]["correlation"] in launches
    )
    assert expected
    table = ko.kernel_backends({0: parsed(path).frames["events"]})
    inside = table.filter(pl.col("compiled_region").str.starts_with(region))
    assert inside["kernels"].sum() == expected
