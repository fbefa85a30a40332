"""A multi-rank NCCL job whose collectives have a known story, for the distributed analyses.

Each step runs, on every rank, a compute kernel and then the step's collectives, each
recorded as PyTorch 2.x does: a `record_param_comms` cpu op carrying the collective args
(`Collective name`, in/out msg nelems, `dtype`, group size, `Process Group Name` / `Ranks`,
`Seq`), an `nccl:<op>` annotation and an `ncclDevKernel_*` kernel with the record_param_comms
op's External id. What the analyses must find is set here, exactly:

* `late_rank` reaches every collective `late_us` after the others (its compute kernel runs
  that much longer), so each instance costs the others (ranks - 1) x late_us of waiting;
* every collective takes `transfer_us` once all ranks have arrived;
* two process groups: "0" (every rank, all_reduce of `NELEMS` bf16) and "1" (the even ranks,
  all_gather of `NELEMS` fp8 per rank);
* `extra_rank` issues one more all_reduce than the others in its last step (unequal counts).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson

NELEMS = 1 << 20
_T0 = 1_700_000_000_000_000  # us
_STEP_US = 10_000
_COMPUTE_US = 2_000


def _comm(rank: int, ranks: int, seq: int, pg: str, ts: int, ext: int) -> dict[str, Any]:
    members = list(range(ranks)) if pg == "0" else list(range(0, ranks, 2))
    gather = pg == "1"
    return {
        "Collective name": "_allgather_base" if gather else "allreduce",
        "In msg nelems": NELEMS,
        "Out msg nelems": NELEMS * len(members) if gather else NELEMS,
        "Group size": len(members),
        "dtype": "Float8_e4m3fn" if gather else "BFloat16",
        "Process Group Name": pg,
        "Process Group Ranks": str(members),
        "Seq": seq,
        "External id": ext,
    }


def nccl_job_trace(
    rank: int,
    *,
    ranks: int = 4,
    steps: int = 3,
    late_rank: int = 2,
    late_us: int = 500,
    transfer_us: int = 200,
    extra_rank: int | None = 1,
) -> dict[str, Any]:
    """One rank's trace (a dict ready for JSON)."""
    cpu = {"ph": "X", "pid": rank, "tid": 1}
    gpu = {"ph": "X", "pid": rank, "tid": 28}
    ev: list[dict[str, Any]] = []
    seqs = {"0": 0, "1": 0}
    ext = 1
    for step in range(steps):
        t = _T0 + step * _STEP_US
        ev.append({**cpu, "cat": "user_annotation", "name": f"ProfilerStep#{step}", "ts": t,
                   "dur": _STEP_US - 1})  # fmt: skip
        compute = _COMPUTE_US + (late_us if rank == late_rank else 0)
        ev.append({**gpu, "cat": "kernel", "name": "sm90_xmma_gemm", "ts": t + 10,
                   "dur": compute, "args": {"stream": 7, "device": rank}})  # fmt: skip
        arrive = t + 10 + compute
        groups = ["0", "1"] if rank % 2 == 0 else ["0"]
        calls = [*groups, "0"] if rank == extra_rank and step == steps - 1 else groups
        for pg in calls:
            args = _comm(rank, ranks, seqs[pg], pg, arrive, ext)
            seqs[pg] += 1
            op = "nccl:_all_gather_base" if pg == "1" else "nccl:all_reduce"
            kernel = (
                "ncclDevKernel_AllGather_RING_LL"
                if pg == "1"
                else "ncclDevKernel_AllReduce_Sum_bf16_RING_LL"
            )
            ev.append({**cpu, "cat": "cpu_op", "name": "record_param_comms", "ts": t + 20,
                       "dur": 5, "args": args})  # fmt: skip
            ev.append({**cpu, "cat": "user_annotation", "name": op, "ts": t + 26, "dur": 5,
                       "args": {"External id": ext + 1}})  # fmt: skip
            last = t + 10 + _COMPUTE_US + late_us  # the late rank's arrival
            end = max(last, arrive) + transfer_us
            ev.append({**gpu, "cat": "kernel", "name": kernel, "ts": arrive, "dur": end - arrive,
                       "args": {**args, "stream": 28, "device": rank}})  # fmt: skip
            arrive = end
            ext += 2
    info = {"backend": "nccl", "rank": rank, "world_size": ranks}
    return {"distributedInfo": info, "traceEvents": ev}


def write_nccl_job(out_dir: Path, **kw: Any) -> list[Path]:
    """Every rank's trace as `rank-N.json` under out_dir."""
    out_dir.mkdir(parents=True, exist_ok=True)
    paths = []
    for rank in range(kw.get("ranks", 4)):
        path = out_dir / f"rank-{rank}.json"
        path.write_bytes(orjson.dumps(nccl_job_trace(rank, **kw)))
        paths.append(path)
    return paths
