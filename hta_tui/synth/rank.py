"""One rank's profiler window: state and the CPU-side event writers; the GPU side, the model's
ops and the step loop live in the mixins it combines."""

from __future__ import annotations

import random
from collections import deque
from typing import Any

from hta_tui.synth.constants import (
    _QUEUE_DEPTH,
    _US,
    COMPUTE_STREAM,
    COPY_STREAM,
    NCCL_STREAM,
    SLOW_FACTOR,
)
from hta_tui.synth.gpu_work import _GpuWork
from hta_tui.synth.kernels import (
    _cpu_pid,
    _us,
)
from hta_tui.synth.model import (
    _Model,
)
from hta_tui.synth.model_ops import _ModelOps
from hta_tui.synth.step import _StepDriver
from hta_tui.synth.tweaks import DEFAULT, Tweaks


class _Rank(_GpuWork, _ModelOps, _StepDriver):
    """Simulates one rank's profiler window and produces its traceEvents in chunks."""

    def __init__(
        self,
        model: _Model,
        rank: int,
        *,
        world_size: int,
        seed: int,
        slow: bool,
        slow_factor: float = SLOW_FACTOR,
        tweaks: Tweaks | None = None,
    ) -> None:
        self.m = model
        self.tweaks = tweaks or DEFAULT
        self.rank = rank
        self.world_size = world_size
        self.rng = random.Random(seed * 1_000_003 + rank * 7919 + 17)
        rng = self.rng
        self.device = rank % 8
        self.pid = _cpu_pid(seed, rank)
        self.tid_main = self.pid
        self.tid_bwd = self.pid + 9_000 + rank * 3 + 1
        self.gpu_scale = (slow_factor if slow else 1.0) * (1 + 0.04 * (rng.random() - 0.5))
        self.cpu_scale = 1 + 0.06 * (rng.random() - 0.5)
        # timestamps: steady-clock microseconds as Kineto writes them (days of uptime)
        base = 1_212_075_000_000_000 + (seed % 97) * 3_600_000_000_000
        self.t0 = base + rng.randrange(200_000, 900_000)
        self.t = self.t0 + 2_000 * _US + rng.randrange(0, 400 * _US)
        self.corr = 19_800 + rng.randrange(0, 200)
        self.ext = 0
        self.ev_idx = 0
        self.seq = 1_000 + rng.randrange(0, 50)
        self.flow_id = 0
        self.py_id = 0
        self.event_id = 0
        self.free = {COMPUTE_STREAM: 0, COPY_STREAM: 0, NCCL_STREAM: 0}
        self.wait = {COMPUTE_STREAM: 0, COPY_STREAM: 0, NCCL_STREAM: 0}
        self.ann_first: int | None = None
        self.queue: dict[int, deque[int]] = {
            s: deque(maxlen=_QUEUE_DEPTH) for s in (COMPUTE_STREAM, COPY_STREAM, NCCL_STREAM)
        }
        self.out: list[dict[str, Any]] = []
        self.end = self.t

    # -- small helpers ---------------------------------------------------------------------

    def _gap(self, lo_us: float, hi_us: float) -> int:
        """A CPU-side pause in ns (scaled by this rank's CPU speed)."""
        return int((lo_us + (hi_us - lo_us) * self.rng.random()) * self.cpu_scale * _US)

    def _next_ext(self) -> int:
        self.ext += 1
        return self.ext

    def _next_corr(self) -> int:
        # Kineto skips ids of blocklisted runtime calls, so correlations are sparse
        self.corr += 1 if self.rng.random() < 0.8 else 2 + int(self.rng.random() * 3)
        return self.corr

    def _op(
        self,
        name: str,
        tid: int,
        ts: int,
        end: int,
        ext: int,
        dims: tuple[Any, Any] | None = None,
        seq: int | None = None,
        cat: str = "cpu_op",
    ) -> None:
        self.ev_idx += 1
        if seq is not None:
            if dims is not None:
                args: dict[str, Any] = {
                    "External id": ext,
                    "Record function id": ext,
                    "Sequence number": seq,
                    "Fwd thread id": 0,
                    "Input type": dims[1],
                    "Input Dims": dims[0],
                    "Ev Idx": self.ev_idx,
                }
            else:
                args = {
                    "External id": ext,
                    "Record function id": ext,
                    "Sequence number": seq,
                    "Fwd thread id": 1,
                    "Ev Idx": self.ev_idx,
                }
        elif dims is not None:
            args = {
                "External id": ext,
                "Record function id": ext,
                "Input type": dims[1],
                "Input Dims": dims[0],
                "Ev Idx": self.ev_idx,
            }
        else:
            args = {"External id": ext, "Record function id": ext, "Ev Idx": self.ev_idx}
        self.out.append(
            {
                "ph": "X",
                "cat": cat,
                "name": name,
                "pid": self.pid,
                "tid": tid,
                "ts": _us(ts),
                "dur": _us(end - ts),
                "args": args,
            }
        )

    def _runtime(self, name: str, cbid: int, tid: int, ts: int, dur: int, ext: int) -> int:
        """A CUDA runtime call; returns its correlation id."""
        corr = self._next_corr()
        self.out.append(
            {
                "ph": "X",
                "cat": "cuda_runtime",
                "name": name,
                "pid": self.pid,
                "tid": tid,
                "ts": _us(ts),
                "dur": _us(dur),
                "args": {"External id": ext, "cbid": cbid, "correlation": corr},
            }
        )
        return corr
