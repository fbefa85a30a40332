"""The GPU side of a rank: launch queues, kernels, copies, stream waits and host syncs."""

from __future__ import annotations

from typing import Any

from hta_tui.synth.constants import (
    _CTX,
    _QUEUE_DEPTH,
    _US,
    COMPUTE_STREAM,
    COPY_STREAM,
)
from hta_tui.synth.kernels import (
    _Kernel,
    _us,
)


class _GpuWork:
    """Part of `_Rank`: what reaches the GPU and when it runs there."""

    def _launch_dur(self) -> int:
        r = self.rng.random()
        if r < 0.01:
            return self._gap(15, 60)
        return self._gap(2.5, 7.5)

    def _gpu_start(self, stream: int, ready: int) -> int:
        """When work submitted at `ready` starts on `stream` (queue, waits, launch delay)."""
        rng = self.rng
        r = rng.random()
        if r < 0.015:
            delay = int((100 + 250 * rng.random()) * _US)  # launch-latency outlier
        else:
            delay = int((1.5 + 5 * rng.random()) * _US)
        queued = self.free[stream] + int((0.8 + 2.5 * rng.random()) * _US)
        start = ready + delay
        if queued > start:
            start = queued
        if self.wait[stream] > start:
            start = self.wait[stream] + int((1 + 2 * rng.random()) * _US)
        self.queue[stream].append(start)
        return start

    def _blocked(self, stream: int, ts: int) -> int:
        """How long a launch at `ts` blocks because `stream`'s launch queue is full."""
        q = self.queue[stream]
        if len(q) == _QUEUE_DEPTH and q[0] > ts:
            return q[0] - ts + int(self.rng.random() * 2 * _US)
        return 0

    def _launch(
        self,
        tid: int,
        ts: int,
        ext: int,
        k: _Kernel,
        stream: int = COMPUTE_STREAM,
        extra: dict[str, Any] | None = None,
    ) -> int:
        """cudaLaunchKernel + its kernel + the ac2g flow; returns the CPU time after the call."""
        rdur = self._launch_dur() + self._blocked(stream, ts)
        corr = self._next_corr()
        pid, dev = self.pid, self.device
        out = self.out
        out.append(
            {
                "ph": "X",
                "cat": "cuda_runtime",
                "name": k.launcher,
                "pid": pid,
                "tid": tid,
                "ts": _us(ts),
                "dur": _us(rdur),
                "args": {"External id": ext, "cbid": k.cbid, "correlation": corr},
            }
        )
        start = self._gpu_start(stream, ts + rdur)
        dur = int(k.ns * self.gpu_scale * (0.93 + 0.14 * self.rng.random()))
        dur = (
            dur
            if self.tweaks.kernel_scale == 1.0
            else max(500, int(dur * self.tweaks.kernel_scale))
        )
        self.free[stream] = start + dur
        if stream == COMPUTE_STREAM and self.ann_first is None:
            self.ann_first = start
        args = {
            "External id": ext,
            "queued": 0,
            "device": dev,
            "context": _CTX,
            "stream": stream,
            "correlation": corr,
            "registers per thread": k.regs,
            "shared memory": k.smem,
            "blocks per SM": k.bps,
            "warps per SM": k.wps,
            "grid": k.grid,
            "block": k.block,
            "est. achieved occupancy %": k.occ,
        }
        if extra:
            args.update(extra)
        out.append(
            {
                "ph": "X",
                "cat": "kernel",
                "name": k.name,
                "pid": dev,
                "tid": stream,
                "ts": _us(start),
                "dur": _us(dur),
                "args": args,
            }
        )
        out.append(
            {
                "ph": "s",
                "id": corr,
                "pid": pid,
                "tid": tid,
                "ts": _us(ts),
                "cat": "ac2g",
                "name": "ac2g",
            }
        )
        out.append(
            {
                "ph": "f",
                "id": corr,
                "pid": dev,
                "tid": stream,
                "ts": _us(start),
                "cat": "ac2g",
                "name": "ac2g",
                "bp": "e",
            }
        )
        return ts + rdur

    def _copy(
        self,
        tid: int,
        ts: int,
        ext: int,
        kind: str,
        nbytes: int,
        gbps: float,
        stream: int,
        *,
        sync: bool = False,
    ) -> int:
        """cudaMemcpyAsync/cudaMemsetAsync + the GPU copy; returns CPU time after the call."""
        is_set = kind == "Memset (Device)"
        rt, cbid = ("cudaMemsetAsync", 51) if is_set else ("cudaMemcpyAsync", 41)
        call = self._gap(3, 9) + self._blocked(stream, ts)
        start = self._gpu_start(stream, ts + (call if not sync else self._gap(2, 4)))
        dur = max(1_000, int((nbytes / gbps + 1_200) * (0.95 + 0.1 * self.rng.random())))
        if stream == COMPUTE_STREAM:  # the straggler's own GPU is slow, not PCIe
            dur = int(dur * self.gpu_scale)
        self.free[stream] = start + dur
        if stream == COMPUTE_STREAM and self.ann_first is None:
            self.ann_first = start
        if sync:  # pageable copies block the CPU until done
            call = max(call, start + dur - ts + self._gap(2, 5))
        corr = self._runtime(rt, cbid, tid, ts, call, ext)
        dev = self.device
        self.out.append(
            {
                "ph": "X",
                "cat": "gpu_memset" if is_set else "gpu_memcpy",
                "name": kind,
                "pid": dev,
                "tid": stream,
                "ts": _us(start),
                "dur": _us(dur),
                "args": {
                    "External id": ext,
                    "device": dev,
                    "context": _CTX,
                    "stream": stream,
                    "correlation": corr,
                    "bytes": nbytes,
                    "memory bandwidth (GB/s)": nbytes / dur,
                },
            }
        )
        self.out.append(
            {
                "ph": "s",
                "id": corr,
                "pid": self.pid,
                "tid": tid,
                "ts": _us(ts),
                "cat": "ac2g",
                "name": "ac2g",
            }
        )
        self.out.append(
            {
                "ph": "f",
                "id": corr,
                "pid": dev,
                "tid": stream,
                "ts": _us(start),
                "cat": "ac2g",
                "name": "ac2g",
                "bp": "e",
            }
        )
        return ts + call

    def _record_and_wait(self, tid: int, t: int, ext: int, src: int, dst: int) -> int:
        """cudaEventRecord on `src` then cudaStreamWaitEvent on `dst` (a cross-stream edge)."""
        d1 = self._gap(1.5, 4)
        rec_corr = self._runtime("cudaEventRecord", 135, tid, t, d1, ext)
        t += d1 + self._gap(0.5, 2)
        d2 = self._gap(1.2, 3.5)
        wait_corr = self._runtime("cudaStreamWaitEvent", 147, tid, t, d2, ext)
        self.event_id += 1
        if self.free[src] > self.wait[dst]:
            self.wait[dst] = self.free[src]
        self.out.append(
            {
                "ph": "X",
                "cat": "cuda_sync",
                "name": "Stream Wait Event",
                "pid": self.device,
                "tid": dst,
                "ts": _us(t + 600),
                "dur": _us(self._gap(1.5, 4)),
                "args": {
                    "External id": ext,
                    "cuda_sync_kind": "Stream Wait Event",
                    "wait_on_stream": src,
                    "wait_on_cuda_event_record_corr_id": rec_corr,
                    "wait_on_cuda_event_id": self.event_id,
                    "stream": dst,
                    "correlation": wait_corr,
                    "device": self.device,
                    "context": _CTX,
                },
            }
        )
        return t + d2

    def _stall(self, t: int, p: float) -> int:
        """Occasional CPU hiccup (GC, GIL, page fault): the GPU drains and waits for the host."""
        if self.rng.random() < p:
            return t + self._gap(300, 2_500)
        return t

    def _to_device(self, t: int, dims: str, copy_dims: str, nbytes: int, stream: int) -> int:
        """aten::to > aten::_to_copy > (aten::empty_strided, aten::copy_ > cudaMemcpyAsync)."""
        tm = self.tid_main
        d = self.m.dims
        pinned = stream == COPY_STREAM
        e0, e1, e2, e3 = (self._next_ext() for _ in range(4))
        t0 = t
        t1 = t0 + self._gap(2, 6)
        t2 = t1 + self._gap(2, 6)
        t3 = t2 + self._gap(3, 10)
        self._op("aten::empty_strided", tm, t2, t3, e2, d["zeros"])
        t4 = t3 + self._gap(1, 4)
        kind = "Memcpy HtoD (Pinned -> Device)" if pinned else "Memcpy HtoD (Pageable -> Device)"
        gbps = 22.0 if pinned else 6.5
        t = self._copy(tm, t4 + self._gap(3, 8), e3, kind, nbytes, gbps, stream, sync=not pinned)
        t += self._gap(2, 6)
        self._op("aten::copy_", tm, t4, t, e3, d[copy_dims])
        t += self._gap(1, 4)
        self._op("aten::_to_copy", tm, t1, t, e1, d[dims])
        t += self._gap(1, 3)
        self._op("aten::to", tm, t0, t, e0, d[dims])
        return t

    def _event_sync(self, tid: int, t: int) -> int:
        """cudaEventRecord + cudaEventSynchronize on the compute stream (step-time logging)."""
        ext = self._next_ext()
        d1 = self._gap(1.5, 4)
        rec = self._runtime("cudaEventRecord", 135, tid, t, d1, ext)
        t += d1 + self._gap(1, 3)
        done = max(self.free[COMPUTE_STREAM], self.wait[COMPUTE_STREAM])
        wait = max(self._gap(2, 6), done - t + self._gap(2, 6))
        corr = self._runtime("cudaEventSynchronize", 137, tid, t, wait, ext)
        self.event_id += 1
        self.out.append(
            {
                "ph": "X",
                "cat": "cuda_sync",
                "name": "Event Sync",
                "pid": self.device,
                "tid": -1,
                "ts": _us(t + 900),
                "dur": _us(wait - 1_500),
                "args": {
                    "External id": ext,
                    "cuda_sync_kind": "Event Sync",
                    "wait_on_stream": COMPUTE_STREAM,
                    "wait_on_cuda_event_record_corr_id": rec,
                    "wait_on_cuda_event_id": self.event_id,
                    "stream": 4294967295,
                    "correlation": corr,
                    "device": self.device,
                    "context": _CTX,
                },
            }
        )
        return t + wait

    def _item(self, tid: int, t: int) -> int:
        """loss.item(): DtoH of 4 bytes then cudaStreamSynchronize on the compute stream."""
        d = self.m.dims
        e0, e1 = self._next_ext(), self._next_ext()
        t0 = t
        t1 = t + self._gap(2, 5)
        readback = self.tweaks.readback_bytes
        t = self._copy(
            tid,
            t1 + self._gap(3, 8),
            e1,
            "Memcpy DtoH (Device -> Pageable)",
            readback,
            0.002 if readback <= 4 else 6.5,
            COMPUTE_STREAM,
            sync=readback > 4,  # a large read back blocks the host until it lands
        )
        t += self._gap(1, 3)
        done = self.free[COMPUTE_STREAM]
        wait = max(self._gap(3, 8), done - t + self._gap(2, 5))
        corr = self._runtime("cudaStreamSynchronize", 131, tid, t, wait, e1)
        self.out.append(
            {
                "ph": "X",
                "cat": "cuda_sync",
                "name": "Stream Sync",
                "pid": self.device,
                "tid": COMPUTE_STREAM,
                "ts": _us(t + 1_200),
                "dur": _us(wait - 1_800),
                "args": {
                    "External id": e1,
                    "cuda_sync_kind": "Stream Sync",
                    "stream": COMPUTE_STREAM,
                    "correlation": corr,
                    "device": self.device,
                    "context": _CTX,
                },
            }
        )
        t += wait + self._gap(2, 5)
        self._op("aten::_local_scalar_dense", tid, t1, t, e1, d["item"])
        t += self._gap(1, 4)
        self._op("aten::item", tid, t0, t, e0, d["item"])
        return t
