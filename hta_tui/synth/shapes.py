"""Named trace shapes of `small_job`: the layouts HTA parity depends on (issue 18).

- `epoch_ns`: CUDA, timestamps at epoch-microsecond scale (~1.7e15 us) with ns digits, where
  a float64 resolves only 0.25 us; many sub-microsecond memsets; two ranks.
- `rocm`: hip runtime calls carrying `"stream": "0x0"`, kernels on integer streams, two
  ProfilerSteps written both CPU side and GPU side (`gpu_user_annotation`).
- `mtia`: MTIA device ops (`mtia_ccp_events`, copies named `dma_*`), the MTIA launch call,
  and a device op as the file's first event.

`python -m hta_tui.synth.shapes OUT` writes each into OUT/<name>/.
"""

from __future__ import annotations

import sys
from pathlib import Path

from hta_tui.synth.small_job import Dialect, JobShape, write_job

ROCM = Dialect(
    launch="hipLaunchKernel",
    memcpy_launch="hipMemcpyAsync",
    memset_launch="hipMemsetAsync",
    kernels=(
        "Cijk_Alik_Bljk_SB_MT64x64x16_MI32x32x2x1_SN_1LDSB0",
        "void at::native::elementwise_kernel<128, 4>(int)",
        "void at::native::reduce_kernel<512, 1>(float*)",
    ),
    comm_kernel="ncclDevKernel_Generic_4(ncclDevKernelArgsStorage<4096ul>)",
    memcpy_name="Memcpy HtoD (Host -> Device)",
    runtime_stream="0x0",
    gpu_steps=True,
    extra_head={"roctracer_version": 4, "hip_runtime_version": 60241134},
)

MTIA = Dialect(
    runtime_cat="mtia_runtime",
    kernel_cat="mtia_ccp_events",
    memcpy_cat="mtia_ccp_events",
    memset_cat="mtia_ccp_events",
    launch="runFunction - job_prep_and_submit_for_execution",
    memcpy_launch="runFunction - job_prep_and_submit_for_execution",
    memset_launch="runFunction - job_prep_and_submit_for_execution",
    kernels=("fused_mm_relu_0", "layer_norm_fwd_1", "embedding_bag_2"),
    comm_kernel="ncclKernel_AllReduce_RING_LL_Sum_float",
    memcpy_name="dma_h2d_copy",
    memset_name="dma_fill",
    device_first=True,
)

SHAPES: dict[str, tuple[Dialect, JobShape]] = {
    "epoch_ns": (Dialect(), JobShape(ranks=2, steps=3, ops_per_step=32, seed=1)),
    "rocm": (
        ROCM,
        JobShape(ranks=1, steps=2, streams=(0, 3), base_ns=1_305_516_305_009_771, seed=2),
    ),
    "mtia": (MTIA, JobShape(ranks=1, steps=3, streams=(1, 2), comm_stream=5, seed=3)),
}


def write_shape(name: str, root: Path) -> list[Path]:
    """The files of one named shape under `root`."""
    dialect, shape = SHAPES[name]
    return write_job(root, dialect, shape)


if __name__ == "__main__":
    out = Path(sys.argv[1] if len(sys.argv) > 1 else "synth-shapes")
    for shape_name in SHAPES:
        for path in write_shape(shape_name, out / shape_name):
            print(path)
