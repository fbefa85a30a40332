"""File-level structure: header keys, file names, writing (streamed, gzip) and sizing."""

from __future__ import annotations

import gzip
import math
import time
from pathlib import Path
from typing import Any, BinaryIO

import orjson

from hta_tui.synth.constants import (
    _BASE_TIME_NS,
    _MAX_BLOCKS,
    _NUM_SMS,
)
from hta_tui.synth.kernels import (
    _cpu_pid,
)
from hta_tui.synth.lean import lean_chunks
from hta_tui.synth.memory import MemoryOptions, events_with_memory
from hta_tui.synth.model import (
    _blocks_for,
    _build_model,
)
from hta_tui.synth.rank import _Rank
from hta_tui.synth.tweaks import Tweaks, tweak_model

# ---------------------------------------------------------------------------------------------
# file-level structure


def _device_properties() -> list[dict[str, Any]]:
    return [
        {
            "id": i,
            "name": "NVIDIA A100-SXM4-80GB",
            "totalGlobalMem": 85_031_714_816,
            "computeMajor": 8,
            "computeMinor": 0,
            "maxThreadsPerBlock": 1024,
            "maxThreadsPerMultiprocessor": 2048,
            "regsPerBlock": 65536,
            "warpSize": 32,
            "sharedMemPerBlock": 49152,
            "numSms": _NUM_SMS,
            "regsPerMultiprocessor": 65536,
            "sharedMemPerBlockOptin": 166912,
            "sharedMemPerMultiprocessor": 167936,
        }
        for i in range(8)
    ]


def _distributed_info(rank: int, world_size: int) -> dict[str, Any]:
    return {
        "backend": "nccl",
        "rank": rank,
        "world_size": world_size,
        "pg_count": 1,
        "pg_config": [
            {
                "pg_name": "0",
                "pg_desc": "default_pg",
                "backend_config": "cuda:nccl",
                "pg_size": world_size,
                "ranks": list(range(world_size)),
            }
        ],
        "nccl_version": "2.20.5",
    }


def trace_file_name(rank: int, *, seed: int = 0, gzip_files: bool = True) -> str:
    """`rank-{r}.<date>.<pid>.pt.trace.json[.gz]`, the tensorboard handler's naming."""
    month = ("Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec")
    lt = time.gmtime(_BASE_TIME_NS // 1_000_000_000 + (seed % 97) * 3600)
    stamp = (
        f"{month[lt.tm_mon - 1]}_{lt.tm_mday:02d}_{lt.tm_hour:02d}_{lt.tm_min:02d}_{lt.tm_sec:02d}"
    )
    pid = _cpu_pid(seed, rank)
    return f"rank-{rank}.{stamp}.{pid}.pt.trace.json" + (".gz" if gzip_files else "")


def _head(rank: int, world_size: int) -> dict[str, Any]:
    return {
        "schemaVersion": 1,
        "deviceProperties": _device_properties(),
        "cupti_version": 22,
        "cuda_runtime_version": 12010,
        "cuda_driver_version": 12040,
        "record_shapes": 1,
        "distributedInfo": _distributed_info(rank, world_size),
    }


def _tail_keys(rank: int, seed: int) -> dict[str, Any]:
    return {
        "traceName": trace_file_name(rank, seed=seed, gzip_files=False),
        "displayTimeUnit": "ms",
        "baseTimeNanoseconds": _BASE_TIME_NS + (seed % 97) * 3_600_000_000_000,
    }


def _setup(
    rank: int,
    world_size: int,
    steps: int,
    seed: int,
    slow: bool,
    kernels_per_step: int,
    blocks: int | None,
    nccl_style: str,
    tweaks: Tweaks | None = None,
) -> tuple[_Rank, dict[str, Any], dict[str, Any]]:
    if world_size < 1 or not 0 <= rank < world_size:
        raise ValueError(f"rank {rank} outside world_size {world_size}")
    if steps < 1:
        raise ValueError("steps must be >= 1")
    if nccl_style not in ("mixed", "new", "legacy"):
        raise ValueError("nccl_style must be 'mixed', 'new' or 'legacy'")
    n_blocks = blocks if blocks is not None else _blocks_for(kernels_per_step)
    model = _build_model(seed, max(1, n_blocks), world_size, nccl_style)
    if tweaks is not None:
        tweak_model(model, tweaks)
    sim = _Rank(model, rank, world_size=world_size, seed=seed, slow=slow, tweaks=tweaks)
    return sim, _head(rank, world_size), _tail_keys(rank, seed)


def make_trace(
    rank: int,
    *,
    world_size: int,
    steps: int,
    seed: int,
    slow: bool = False,
    kernels_per_step: int = 60,
    blocks: int | None = None,
    nccl_style: str = "mixed",
    memory: MemoryOptions | None = None,
    tweaks: Tweaks | None = None,
) -> dict[str, Any]:
    """One rank's trace as a dict (for tests that tweak it before `write_trace`).

    `kernels_per_step` is approximate (the model has whole blocks of 15 kernels); `blocks`
    sets the model size directly. `nccl_style` "mixed" names the bucket all-reduces like NCCL
    >= 2.19 (`ncclDevKernel_...`) and the small broadcast/loss all-reduce like older NCCL
    (`ncclKernel_...`), so both dialects occur; "new" / "legacy" use one. `memory` adds GPU
    memory events (synth/memory.py); `tweaks` push the job toward a bottleneck (synth/tweaks.py).
    """
    sim, head, tail = _setup(
        rank, world_size, steps, seed, slow, kernels_per_step, blocks, nccl_style, tweaks
    )
    events: list[dict[str, Any]] = []
    for chunk in _events(sim, steps, memory):
        events.extend(chunk)
    return {**head, "traceEvents": events, **tail}


def _events(sim: _Rank, steps: int, memory: MemoryOptions | None, lean: bool = False) -> Any:
    chunks = sim.events(steps) if memory is None else events_with_memory(sim, steps, memory)
    return lean_chunks(chunks) if lean else chunks


def write_trace(trace: dict[str, Any], path: str | Path) -> Path:
    """Writes a trace dict as JSON (gzip when the name ends with .gz); returns the path."""
    path = Path(path)
    data = orjson.dumps(trace)
    with _open_out(path) as f:
        f.write(data)
    return path


def _open_out(path: Path) -> BinaryIO:
    if path.name.endswith(".gz"):
        # no file name or mtime in the header: identical arguments give identical bytes
        raw = path.open("wb")
        return _GzipOwner(raw)
    return path.open("wb")


class _GzipOwner(gzip.GzipFile):
    """GzipFile that closes the file object it writes to (level 1: speed over size)."""

    def __init__(self, raw: BinaryIO) -> None:
        super().__init__(filename="", mode="wb", compresslevel=1, fileobj=raw, mtime=0)
        self._raw = raw

    def close(self) -> None:
        try:
            super().close()
        finally:
            self._raw.close()


def _stream_rank(
    path: Path,
    rank: int,
    world_size: int,
    steps: int,
    seed: int,
    slow: bool,
    blocks: int,
    nccl_style: str,
    memory: MemoryOptions | None = None,
    lean: bool = False,
) -> tuple[Path, int]:
    """Streams one rank to `path` chunk by chunk; returns (path, uncompressed bytes)."""
    sim, head, tail = _setup(rank, world_size, steps, seed, slow, 0, blocks, nccl_style)
    size = 0
    with _open_out(path) as f:
        part = orjson.dumps(head)[:-1] + b',"traceEvents":['
        f.write(part)
        size += len(part)
        sep = b""
        for chunk in _events(sim, steps, memory, lean):
            if not chunk:
                continue
            data = orjson.dumps(chunk)  # "[...]": keep the inside, join chunks with ","
            f.write(sep)
            f.write(memoryview(data)[1:-1])
            size += len(sep) + len(data) - 2
            sep = b","
            del data
        part = b"]," + orjson.dumps(tail)[1:]
        f.write(part)
        size += len(part)
    return path, size


def _measure(
    world_size: int, steps: int, seed: int, blocks: int, nccl_style: str, lean: bool = False
) -> int:
    """Uncompressed size of rank 0 without writing anything."""
    sim, head, tail = _setup(0, world_size, steps, seed, False, 0, blocks, nccl_style)
    size = len(orjson.dumps(head)) + len(orjson.dumps(tail)) + 16
    for chunk in _events(sim, steps, None, lean):
        if chunk:
            size += len(orjson.dumps(chunk)) - 1
    return size


def plan_size(
    target_mb: float,
    *,
    world_size: int,
    steps: int,
    seed: int,
    nccl_style: str = "mixed",
    lean: bool = False,
) -> tuple[int, int]:
    """(steps, blocks) whose files are ~target_mb (10**6 bytes) of uncompressed JSON.

    Keeps the requested number of steps and grows the model (kernels per step); adds steps
    only when a step would exceed `_MAX_BLOCKS` blocks, drops them when even one block per
    step is too big. Sizes are linear in steps and in blocks, so four small measurements fit
    the line.
    """
    target = target_mb * 1_000_000
    b1, b2 = 2, 6
    s11 = _measure(world_size, 1, seed, b1, nccl_style, lean)
    s12 = _measure(world_size, 2, seed, b1, nccl_style, lean)
    s21 = _measure(world_size, 1, seed, b2, nccl_style, lean)
    s22 = _measure(world_size, 2, seed, b2, nccl_style, lean)
    fixed = 2 * s11 - s12
    per1, per2 = s12 - s11, s22 - s21
    per_block = max(1.0, (per2 - per1) / (b2 - b1))
    per_step0 = per1 - per_block * b1  # a step's cost without blocks
    avail = max(0.0, target - fixed)
    n_steps = max(1, steps)
    blocks = (avail / n_steps - per_step0) / per_block
    if blocks > _MAX_BLOCKS:
        n_steps = math.ceil(avail / (per_step0 + per_block * _MAX_BLOCKS))
        blocks = (avail / n_steps - per_step0) / per_block
    if blocks < 1:
        blocks = 1
        n_steps = max(1, round(avail / (per_step0 + per_block)))
    return n_steps, max(1, round(blocks))


def write_trace_dir(
    out_dir: str | Path,
    *,
    ranks: int = 4,
    steps: int = 4,
    target_mb: float | None = None,
    seed: int = 0,
    slow_rank: int | None = 1,
    gzip_files: bool = True,
    kernels_per_step: int = 60,
    nccl_style: str = "mixed",
    workers: int = 1,
    memory: MemoryOptions | None = None,
    lean: bool = False,
) -> list[Path]:
    """Writes one trace per rank into `out_dir`; returns the paths in rank order.

    With `target_mb`, each file's uncompressed JSON is ~target_mb * 10**6 bytes (within a
    few percent): the step count is kept and the model grows (see `plan_size`), so
    `kernels_per_step` is then ignored. `workers` > 1 writes ranks in parallel processes
    (same bytes as sequential). `memory` adds GPU memory events (not counted by `target_mb`).
    `lean` keeps only the args the analyses read (synth/lean.py): ~1.5x the events per MB.
    """
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    if ranks < 1:
        raise ValueError("ranks must be >= 1")
    if target_mb is not None:
        steps, blocks = plan_size(
            target_mb, world_size=ranks, steps=steps, seed=seed, nccl_style=nccl_style, lean=lean
        )
    else:
        blocks = _blocks_for(kernels_per_step)
    jobs = [
        (
            out / trace_file_name(r, seed=seed, gzip_files=gzip_files),
            r,
            ranks,
            steps,
            seed,
            r == slow_rank,
            blocks,
            nccl_style,
            memory,
            lean,
        )
        for r in range(ranks)
    ]
    if workers > 1 and ranks > 1:
        from concurrent.futures import ProcessPoolExecutor

        with ProcessPoolExecutor(max_workers=min(workers, ranks)) as pool:
            futures = [pool.submit(_stream_rank, *job) for job in jobs]
            return [fut.result()[0] for fut in futures]
    return [_stream_rank(*job)[0] for job in jobs]
