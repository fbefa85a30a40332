"""GPU `[memory]` events (profile_memory=True) for a synthetic rank: an option of the generator
(`make_trace(..., memory=MemoryOptions())`); without it the output is unchanged.

A caching allocator is simulated per step, in time order of the step's operators:
- forward operators allocate their outputs (activations, `ACTIVATION_MB` by name), which live
  until the backward pass frees them, last allocated first;
- backward operators allocate a gradient temporary freed when the next backward operator runs,
  and AccumulateGrad keeps each parameter gradient for the rest of the trace (allocated once);
- sizes are rounded to 512 B blocks; a freed block's address is reused by the next allocation
  of the same size, and the reserved memory grows in 20 MiB segments when an allocation does not
  fit, never shrinking: reserved >= allocated at every event, as in PyTorch's allocator;
- `leak_op` additionally allocates `leak_bytes` every step and never frees them (a leak that
  grows across steps).
`extra_per_op` more temporaries per operator make dense traces for benchmarks: each allocated
and freed before the next, 1 ns apart from the operator's start (before its first child), so
each is one allocation / free pair at the reused address.
"""

from __future__ import annotations

import random
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from hta_tui.synth.constants import _FIRST_STEP
from hta_tui.synth.kernels import _us

MIB = 1024 * 1024
#: forward outputs kept for backward, MiB per call, by operator
ACTIVATION_MB: dict[str, float] = {
    "aten::addmm": 6.0,
    "aten::gelu": 4.0,
    "aten::add": 4.0,
    "aten::native_layer_norm": 2.0,
    "aten::empty_strided": 3.0,
    "aten::_log_softmax": 1.0,
}
BACKWARD_TEMP_MB = 5.0
GRAD_MB = 2.0
SEGMENT = 20 * MIB
BLOCK = 512
ADDR_BASE = 0x7F00_0000_0000


@dataclass(frozen=True)
class MemoryOptions:
    """What the generator writes: GPU memory events on the rank's device (Device Type 1)."""

    leak_op: str | None = None
    leak_bytes: int = 8 * MIB
    extra_per_op: int = 0
    temp_bytes: int = 256 * 1024


class _Allocator:
    """PyTorch's caching allocator, as far as the memory events show it."""

    def __init__(self) -> None:
        self.allocated = 0
        self.reserved = 0
        self.next_addr = ADDR_BASE
        self.cached: dict[int, list[int]] = {}

    def malloc(self, size: int) -> tuple[int, int]:
        size = -(-size // BLOCK) * BLOCK
        cached = self.cached.get(size)
        if cached:
            addr = cached.pop()
        else:
            addr = self.next_addr
            self.next_addr += size
        self.allocated += size
        while self.allocated > self.reserved:
            self.reserved += SEGMENT
        return addr, size

    def free(self, addr: int, size: int) -> None:
        self.allocated -= size
        self.cached.setdefault(size, []).append(addr)


def _is_cpu_op(e: dict[str, Any]) -> bool:
    return e.get("ph") == "X" and e.get("cat") == "cpu_op"


def events_with_memory(sim: Any, steps: int, opts: MemoryOptions) -> Iterator[list[dict[str, Any]]]:
    """`sim.events(steps)` with memory events added to each step's chunk (a step's events are
    gathered so its operators can be walked in time order)."""
    alloc = _Allocator()
    state = _State(sim, alloc, opts)
    for i in range(steps):
        chunk: list[dict[str, Any]] = []
        for part in sim.step(_FIRST_STEP + i):
            chunk.extend(part)
        chunk.extend(state.step(chunk))
        yield chunk
    yield sim._tail()


class _State:
    def __init__(self, sim: Any, alloc: _Allocator, opts: MemoryOptions) -> None:
        self.sim = sim
        self.alloc = alloc
        self.opts = opts
        self.rng = random.Random(sim.rank * 31 + 7)
        self.grads: dict[int, int] = {}  # n-th AccumulateGrad of a step -> bytes held
        self.out: list[dict[str, Any]] = []

    def _event(self, ts: int, tid: int, addr: int, size: int) -> None:
        self.sim.ev_idx += 1
        self.out.append(
            {
                "ph": "i",
                "cat": "cpu_instant_event",
                "s": "t",
                "name": "[memory]",
                "pid": self.sim.pid,
                "tid": tid,
                "ts": _us(ts),
                "args": {
                    "Total Reserved": self.alloc.reserved,
                    "Total Allocated": self.alloc.allocated,
                    "Bytes": size,
                    "Addr": addr,
                    "Device Id": self.sim.device,
                    "Device Type": 1,
                    "Ev Idx": self.sim.ev_idx,
                },
            }
        )

    def _malloc(self, ts: int, tid: int, size: int) -> tuple[int, int]:
        addr, size = self.alloc.malloc(size)
        self._event(ts, tid, addr, size)
        return addr, size

    def _free(self, ts: int, tid: int, block: tuple[int, int]) -> None:
        self.alloc.free(*block)
        self._event(ts, tid, block[0], -block[1])

    def step(self, chunk: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """The memory events of one step's events."""
        self.out = []
        ops = sorted((e for e in chunk if _is_cpu_op(e)), key=lambda e: (e["ts"], -e["dur"]))
        acts: list[tuple[int, int]] = []
        temp: tuple[int, int] | None = None
        n_grad = 0
        bwd = self.sim.tid_bwd
        for e in ops:
            name, tid = e["name"], e["tid"]
            ts = round(e["ts"] * 1000)
            dur = max(4, round(e["dur"] * 1000))
            at = ts + dur // 4
            for k in range(self.opts.extra_per_op):  # 1 ns apart, before any child starts
                block = self._malloc(ts + 1 + 2 * k, tid, self.opts.temp_bytes)
                self._free(ts + 2 + 2 * k, tid, block)
            mb = ACTIVATION_MB.get(name)
            if mb is not None and tid != bwd:
                acts.append(self._malloc(at + 2, tid, int(mb * MIB)))
            if name == self.opts.leak_op:
                self._malloc(at + 3, tid, self.opts.leak_bytes)
            if tid != bwd or not name.startswith(("aten::", "torch::autograd::AccumulateGrad")):
                continue
            if temp is not None:
                self._free(at, tid, temp)
                temp = None
            if acts:
                self._free(at + 1, tid, acts.pop())
            if name == "torch::autograd::AccumulateGrad":
                if n_grad not in self.grads:
                    self.grads[n_grad] = self._malloc(at + 2, tid, int(GRAD_MB * MIB))[1]
                n_grad += 1
            elif name in ("aten::mm", "aten::gelu_backward", "aten::native_layer_norm_backward"):
                temp = self._malloc(at + 2, tid, int(BACKWARD_TEMP_MB * MIB))
        last = ops[-1] if ops else None
        if last is not None:
            end = round((last["ts"] + last["dur"]) * 1000)
            tid = last["tid"]
            if temp is not None:
                self._free(end, tid, temp)
            while acts:
                self._free(end, tid, acts.pop())
        return self.out
