"""Issue 28: on every real trace, the rules that fire (warn or fail), each checked by hand
against the numbers the views show (the comment beside each case says which). A rule not
named here is quiet, says info or abstains on that case."""

from __future__ import annotations

from pathlib import Path

import polars as pl
import pytest

from tests.shared_sets import analysis

pytestmark = pytest.mark.shared

#: case -> {rule id: severity} of the rules at warn or fail
FIRED: dict[str, dict[str, str]] = {
    # Step time: rank 0's step 413.5 ms, GPU busy 45 us of it (GPU metrics: 0.01%)
    "call_stack": {"gpu.util.low": "fail"},
    # CPU-only: every GPU rule abstains; no DataLoader in its one step
    "cpu_only": {},
    # no ProfilerStep: the per-step rules abstain
    "critical_path/alexnet": {},
    "distributed_info_unavailable": {},
    "execution_trace": {},
    "memory_analysis": {},  # not a Kineto trace: nothing loaded
    # GPU metrics: utilization 23.3% (< 30); Step time: CPU Exec 134.5 ms of 222.4 ms
    "nccl_parser_config": {"gpu.util.low": "fail"},
    # Syncs: pageable copies (aten::copy_) block 758.4 ms of the 5 steps' 1229.2 ms (61.7%);
    # Step time: p95 338.0 ms / p50 216.2 ms = 1.56; GPU metrics 32.2%; Communication
    # 37.0 ms of a 245.8 ms step (15.1%)
    "negative_queue_length_values_check": {
        "memcpy.pageable": "fail",
        "step.variance": "fail",
        "gpu.util.low": "warn",
        "comm.exposed": "warn",
    },
    # Step time: rank 1 Communication 11117 of 18584 us (59.8%), rank 6 DataLoader 1282 of
    # 13091 us (9.8%); GPU metrics: rank 7 21.1%; Syncs: rank 1 blocked 7527 us of which
    # 903 us in copies (6624 us, 35.6%); Kernels: rank 7's kernels under 10 us 29%
    "param_dlrm_8rank": {
        "comm.exposed": "fail",
        "gpu.util.low": "fail",
        "sync.host": "fail",
        "launch.bound": "fail",
        "input.dataloader": "warn",
        "memcpy.pageable": "warn",
        "kernel.small": "warn",
    },
    # Step time stats: rank 2 p95 47583.5 / p50 30314.8 us = 1.57 (rank 3 does 4x the work
    # but every rank waits in gloo)
    "pytorch_cpu_ddp_gloo_4": {"step.variance": "fail"},
    "pytorch_cpu_vit_memory": {},  # CPU-only, two steps: too few for a trend or a p95
    "rank_unavailable": {},
    # Step time: DataLoader 725 us of 13410 us (5.4%); GPU metrics 0.36%; Kernels: every
    # kernel under 10 us, volta_sgemm_128x32_nt in aten::mm without tensor cores
    "tb_plugin_gpu_metrics": {
        "gpu.util.low": "fail",
        "launch.bound": "fail",
        "kernel.small": "fail",
        "input.dataloader": "warn",
        "tensorcore.unused": "warn",
    },
    # GPU metrics: 0.18% and 2.96% busy
    "trace_compare/base": {"gpu.util.low": "fail"},
    "trace_compare/test": {"gpu.util.low": "fail"},
    # Syncs: rank 3's copies in aten::copy_ and aten::_local_scalar_dense, 12.6 ms a step
    # (16.3%); Step time: Communication 18.6% of the step
    "trace_diff/control": {"memcpy.pageable": "fail", "comm.exposed": "warn"},
    # Syncs: 53.4 ms a step in copies (43.1%); Step time stats: p95 / p50 = 1.27
    "trace_diff/test": {"memcpy.pageable": "fail", "step.variance": "warn"},
    # Step time: rank 0 Communication 168163.5 of 615120 us (27.3%); GPU metrics: rank 0
    # 44.5%; Straggler scores: rank 1 compute 135548 us vs the median 120900 (+12.1%)
    "trace_filter": {"comm.exposed": "fail", "gpu.util.low": "warn", "rank.straggler": "warn"},
    "tracelens_b200_eager_nccl": {},  # no ProfilerStep
    # GPU metrics 6.9%; Kernels: 86.6% of kernel time in kernels under 10 us (kernel_view)
    "tracelens_h100_bert_memory": {
        "gpu.util.low": "fail",
        "kernel.small": "fail",
        "launch.bound": "warn",
    },
    "tracelens_mi300_ddp_resnet18": {},  # no ProfilerStep
    # one Triton kernel of 1.8 us after a 47.8 us launch in a 13.3 s step
    "triton_example": {"gpu.util.low": "fail", "launch.bound": "fail", "kernel.small": "fail"},
}
#: case -> (ranks, synchronising CUDA calls) where data.quality says the trace holds no
#: `cuda_sync` event (info: no rule reads them). Counted by hand in the files: events named
#: cuda/cu Stream|Device|Event Synchronize and StreamWaitEvent, none of category cuda_sync.
#: critical_path/alexnet holds 41 of them (profiled with enable_cuda_sync_events): quiet;
#: the MI300 trace's hipDeviceSynchronize has no such event to ask for (CUDA's only): quiet.
NO_SYNC_EVENTS: dict[str, tuple[str, int]] = {
    "execution_trace": ("0", 5),  # 5 cudaDeviceSynchronize
    "nccl_parser_config": ("0", 109),  # 84 stream waits, 24 event syncs, 1 device sync
    "negative_queue_length_values_check": ("0", 501),  # 425 waits, 75 + 1 syncs
    "param_dlrm_8rank": ("all", 440),  # 44 waits, 10 + 1 syncs on each of 8 ranks
    "tb_plugin_gpu_metrics": ("0", 3),  # 2 cudaStreamSynchronize, 1 cudaDeviceSynchronize
    "trace_compare/base": ("1", 1),  # 1 cudaDeviceSynchronize
    "trace_compare/test": ("1", 1),
    "trace_diff/control": ("3", 247),  # 186 waits, 60 + 1 syncs
    "trace_diff/test": ("1", 247),
    "tracelens_b200_eager_nccl": ("0", 2),  # 2 cudaStreamWaitEvent
    "tracelens_h100_bert_memory": ("0", 3),  # 2 device syncs, 1 stream sync
    "triton_example": ("0", 1),  # 1 cudaDeviceSynchronize
}
#: the large ones (tens of MB, 8 ranks, or seconds to parse)
HEAVY = {
    "trace_diff/control",
    "trace_diff/test",
    "negative_queue_length_values_check",
    "param_dlrm_8rank",
    "pytorch_cpu_vit_memory",
    "tracelens_mi300_ddp_resnet18",
    "tracelens_b200_eager_nccl",
    "nccl_parser_config",
}


def _cases() -> list[object]:
    return [pytest.param(c, marks=pytest.mark.heavy) if c in HEAVY else c for c in sorted(FIRED)]


def test_every_case_is_named(shared: Path) -> None:
    root = shared / "traces"
    cases = set()
    for d in root.iterdir():
        if not d.is_dir():
            continue
        subs = [s for s in d.iterdir() if s.is_dir()]
        cases |= {f"{d.name}/{s.name}" for s in subs} if subs else {d.name}
    assert cases == set(FIRED)


@pytest.mark.parametrize("case", _cases())
def test_the_rules_that_fire_on_each_shared_case(shared: Path, case: str) -> None:
    found = analysis(shared / "traces" / case).table("findings")
    fired = {
        r["id"]: r["severity"]
        for r in found.iter_rows(named=True)
        if r["severity"] in ("fail", "warn")
    }
    assert fired == FIRED[case]
    for row in found.iter_rows(named=True):
        if row["severity"] in ("fail", "warn"):
            assert row["advice"] and row["reason"] == ""
        if row["severity"] == "abstain":
            assert row["reason"] and row["value"] is None
    quality = found.filter(pl.col("id") == "data.quality").row(0, named=True)
    if case in NO_SYNC_EVENTS:
        ranks, calls = NO_SYNC_EVENTS[case]
        assert quality["severity"] == "info" and quality["ranks"] == ranks
        assert f"{calls} synchronising CUDA call" in quality["advice"]
        assert "enable_cuda_sync_events=True" in quality["advice"]
    else:
        assert "cuda_sync" not in quality["advice"]
