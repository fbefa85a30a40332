"""One training step (data, forward, backward with bucketed all-reduces, optimizer) and the
spans and metadata that close a trace."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from hta_tui.synth.constants import (
    _CHUNK_EVENTS,
    _FIRST_STEP,
    COMPUTE_STREAM,
    COPY_STREAM,
    NCCL_STREAM,
)
from hta_tui.synth.kernels import (
    _us,
)
from hta_tui.synth.model import (
    _Comm,
)


class _StepDriver:
    """Part of `_Rank`: the step loop, collectives and annotations."""

    def _collective(self, tid: int, t: int, comm: _Comm, src_stream: int = COMPUTE_STREAM) -> int:
        """record_param_comms > nccl:<op> > event record/wait + NCCL kernel on the comm stream."""
        t0 = t
        e0, e1 = self._next_ext(), self._next_ext()
        t += self._gap(4, 12)
        t1 = t
        t = self._record_and_wait(tid, t + self._gap(2, 5), e1, src_stream, NCCL_STREAM)
        t = self._launch(tid, t + self._gap(2, 6), e1, comm.kernel, NCCL_STREAM, comm.args)
        t += self._gap(3, 10)
        self.ev_idx += 1
        self.out.append(
            {
                "ph": "X",
                "cat": "user_annotation",
                "name": comm.name,
                "pid": self.pid,
                "tid": tid,
                "ts": _us(t1),
                "dur": _us(t - t1),
                "args": {"External id": e1, "Record function id": e1, "Ev Idx": self.ev_idx},
            }
        )
        t += self._gap(4, 15)
        self.ev_idx += 1
        self.out.append(
            {
                "ph": "X",
                "cat": "cpu_op",
                "name": "record_param_comms",
                "pid": self.pid,
                "tid": tid,
                "ts": _us(t0),
                "dur": _us(t - t0),
                "args": {
                    "External id": e0,
                    "Record function id": e0,
                    **comm.args,
                    "Global rank start": 0,
                    "Global rank stride": 1,
                    "Ev Idx": self.ev_idx,
                },
            }
        )
        return t

    def _annotation(self, name: str, tid: int, ts: int, end: int, ext: int) -> None:
        self._op(name, tid, ts, end, ext, cat="user_annotation")

    def _gpu_annotation(self, name: str, ext: int, start: int | None, end: int) -> None:
        if start is None or end <= start:
            return
        self.out.append(
            {
                "ph": "X",
                "cat": "gpu_user_annotation",
                "name": name,
                "pid": self.device,
                "tid": COMPUTE_STREAM,
                "ts": _us(start),
                "dur": _us(end - start),
                "args": {"External id": ext},
            }
        )

    # -- a training step -----------------------------------------------------------------------

    def step(self, number: int) -> Iterator[list[dict[str, Any]]]:
        """Simulates one step, yielding event chunks as they fill."""
        m, k, d = self.m, self.m.k, self.m.dims
        tm = self.tid_main
        t = self.t
        step_start = t
        step_ext = self._next_ext()
        t += self._gap(8, 25)

        # data loader: usually quick, sometimes a stall that starves the GPU
        e = self._next_ext()
        t_dl = t
        dl = self._gap(1_500, 5_000) if self.rng.random() < 0.2 else self._gap(150, 600)
        dl = int(dl * self.tweaks.input_wait)
        t += dl
        self._annotation(
            "enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__", tm, t_dl, t, e
        )
        t += self._gap(5, 20)

        # inputs: pinned HtoD on the copy stream, labels pageable HtoD on the compute stream
        t = self._to_device(t, "to", "copy_", m.tokens * m.hidden * 4, COPY_STREAM)
        t = self._record_and_wait(
            tm, t + self._gap(2, 5), self._next_ext(), COPY_STREAM, COMPUTE_STREAM
        )
        t = self._to_device(t + self._gap(3, 10), "labels", "copy_l", m.tokens * 8, COMPUTE_STREAM)

        # zero_grad (set_to_none: CPU only)
        e = self._next_ext()
        t0 = t + self._gap(5, 15)
        t = t0 + self._gap(20, 70)
        self._annotation("Optimizer.zero_grad#SGD.zero_grad", tm, t0, t, e)

        # forward
        self.ann_first = None
        e_fwd, e_ddp = self._next_ext(), self._next_ext()
        t_fwd = t + self._gap(5, 15)
        t_ddp = t_fwd + self._gap(10, 40)
        t = t_ddp + self._gap(20, 60)
        t = self._collective(tm, t, m.broadcast)  # DDP buffer broadcast
        fwd_logs: list[list[tuple[int, int]]] = []
        for b in range(m.blocks):
            log: list[tuple[int, int]] = []
            t = self._fwd_block(t + self._gap(2, 8), b, log)
            fwd_logs.append(log)
            if len(self.out) >= _CHUNK_EVENTS:
                yield self._take()
        t, s_head, ts_head = self._linear(tm, t + self._gap(3, 10), "h", k["head"])
        self.seq += 1
        s_loss = self.seq
        t_loss = t + self._gap(3, 10)
        e_loss = self._next_ext()
        t = self._simple(
            tm,
            t_loss + self._gap(3, 8),
            ("aten::log_softmax", "aten::_log_softmax"),
            (d["log_softmax"], d["log_softmax"]),
            k["softmax"],
            s_loss,
        )
        self.seq += 1
        s_nll = self.seq
        t = self._simple(
            tm,
            t + self._gap(2, 6),
            ("aten::nll_loss_nd", "aten::nll_loss_forward"),
            (d["nll"], d["nll"]),
            k["nll"],
            s_nll,
        )
        t += self._gap(2, 6)
        self._op("aten::cross_entropy_loss", tm, t_loss, t, e_loss, d["nll"])
        t += self._gap(5, 20)
        self._annotation("DistributedDataParallel.forward", tm, t_ddp, t, e_ddp)
        t += self._gap(3, 10)
        self._annotation("## forward ##", tm, t_fwd, t, e_fwd)
        self._gpu_annotation("## forward ##", e_fwd, self.ann_first, self.free[COMPUTE_STREAM])

        # backward: main thread seeds the graph, the autograd thread runs it
        self.ann_first = None
        e_bwd = self._next_ext()
        t_bwd = t + self._gap(5, 15)
        t = self._simple(
            tm,
            t_bwd + self._gap(5, 15),
            ("aten::ones_like", "aten::fill_"),
            (d["ones_like"], d["fill_"]),
            k["fill"],
        )
        ta = t + self._gap(15, 40)
        # loss backward (with the memset of the zeroed grad input)
        ta = self._bwd_simple(
            ta,
            (s_nll, t_loss),
            "NllLossBackward0",
            "aten::nll_loss_backward",
            d["nll"],
            [k["nll_bwd"]],
        )
        e_z = self._next_ext()
        tz = ta + self._gap(2, 5)
        ta = self._copy(
            self.tid_bwd,
            tz + self._gap(2, 6),
            e_z,
            "Memset (Device)",
            m.tokens * m.classes * 4,
            1400,
            COMPUTE_STREAM,
        )
        ta += self._gap(2, 5)
        self._op("aten::zero_", self.tid_bwd, tz, ta, e_z, d["zeros"])
        ta = self._bwd_simple(
            ta + self._gap(2, 6),
            (s_loss, t_loss),
            "LogSoftmaxBackward0",
            "aten::_log_softmax_backward_data",
            d["log_softmax"],
            [k["softmax_bwd"]],
        )
        ta = self._bwd_addmm(ta + self._gap(2, 6), (s_head, ts_head), "h")
        bucket_iter = iter(m.buckets)
        nxt = next(bucket_iter, None)
        for done, b in enumerate(range(m.blocks - 1, -1, -1), start=1):
            ta = self._bwd_block(ta + self._gap(2, 8), fwd_logs[b])
            while nxt is not None and done >= nxt[0]:
                ta = self._bucket_ready(ta, nxt)
                nxt = next(bucket_iter, None)
            if len(self.out) >= _CHUNK_EVENTS:
                yield self._take()
        while nxt is not None:
            ta = self._bucket_ready(ta, nxt)
            nxt = next(bucket_iter, None)
        # DDP finalize: the compute stream waits for the last all-reduce
        t = max(t, ta) + self._gap(10, 30)
        t = self._record_and_wait(tm, t, self._next_ext(), NCCL_STREAM, COMPUTE_STREAM)
        t += self._gap(5, 15)
        self._annotation("## backward ##", tm, t_bwd, t, e_bwd)
        self._gpu_annotation("## backward ##", e_bwd, self.ann_first, self.free[COMPUTE_STREAM])

        # optimizer: Python-heavy, the GPU often waits for the host
        self.ann_first = None
        e_opt, e_step = self._next_ext(), self._next_ext()
        t_opt = t + self._gap(5, 15)
        t_step = t_opt + self._gap(10, 30)
        t = t_step + self._gap(30, 90)
        for _ in range(m.n_opt):
            t = self._stall(t, 0.05)
            e = self._next_ext()
            t0 = t
            t = self._launch(tm, t + self._gap(8, 25), e, k["opt"]) + self._gap(3, 9)
            self._op("aten::_foreach_add_", tm, t0, t, e, d["foreach"])
            t += self._gap(40, 140)
        t += self._gap(10, 30)
        self._annotation("Optimizer.step#SGD.step", tm, t_step, t, e_step)
        t += self._gap(3, 10)
        self._annotation("## optimizer ##", tm, t_opt, t, e_opt)
        self._gpu_annotation("## optimizer ##", e_opt, self.ann_first, self.free[COMPUTE_STREAM])

        # logging: all-reduce the loss, wait for the step (Event Sync), read it (Stream Sync)
        t = self._collective(tm, t + self._gap(10, 30), m.loss_allreduce)
        t = self._record_and_wait(
            tm, t + self._gap(3, 8), self._next_ext(), NCCL_STREAM, COMPUTE_STREAM
        )
        if self.tweaks.log_loss:
            t = self._event_sync(tm, t + self._gap(5, 15))
            t = self._item(tm, t + self._gap(5, 15))
        t += self._gap(10, 40)
        self._annotation(f"ProfilerStep#{number}", tm, step_start, t, step_ext)
        self.t = t + self._gap(5, 20)
        self.end = max(self.t, self.free[COMPUTE_STREAM], self.free[NCCL_STREAM])
        yield self._take()

    def _bucket_ready(self, ta: int, bucket: tuple[int, _Comm, int]) -> int:
        """A gradient bucket is full: copy it flat (DtoD) and all-reduce it on the NCCL stream."""
        _, comm, nbytes = bucket
        tid = self.tid_bwd
        e = self._next_ext()
        t0 = ta + self._gap(3, 10)
        t = self._copy(
            tid,
            t0 + self._gap(3, 8),
            e,
            "Memcpy DtoD (Device -> Device)",
            nbytes,
            900,
            COMPUTE_STREAM,
        )
        t += self._gap(2, 6)
        self._op("aten::copy_", tid, t0, t, e, self.m.dims["bucket_copy"])
        return self._collective(tid, t + self._gap(5, 20), comm)

    def _take(self) -> list[dict[str, Any]]:
        out, self.out = self.out, []
        return out

    # -- whole trace -------------------------------------------------------------------------

    def events(self, steps: int) -> Iterator[list[dict[str, Any]]]:
        """All traceEvents in chunks: steps first, then spans, instants and metadata."""
        for i in range(steps):
            yield from self.step(_FIRST_STEP + i)
        yield self._tail()

    def _tail(self) -> list[dict[str, Any]]:
        start = self.t0
        end = self.end + self._gap(50, 300)
        ts = _us(start + 28_000)
        pid = self.pid
        out: list[dict[str, Any]] = []

        def meta(name: str, p: Any, tid: Any, key: str, value: Any, at: float = ts) -> None:
            out.append(
                {"name": name, "ph": "M", "ts": at, "pid": p, "tid": tid, "args": {key: value}}
            )

        meta("process_name", pid, 0, "name", "python3.10")
        meta("process_labels", pid, 0, "labels", "CPU")
        meta("process_sort_index", pid, 0, "sort_index", pid)
        for dev in range(8):
            meta("process_name", dev, 0, "name", "python3.10")
            meta("process_labels", dev, 0, "labels", f"GPU {dev}")
            meta("process_sort_index", dev, 0, "sort_index", 16_777_216 + dev)
        for s in (COMPUTE_STREAM, COPY_STREAM, NCCL_STREAM):
            meta("thread_name", self.device, s, "name", f"stream {s} ")
            meta("thread_sort_index", self.device, s, "sort_index", s)
        for tid, tname in ((self.tid_bwd, "pt_autograd_0"), (self.tid_main, "pt_main_thread")):
            meta("thread_name", pid, tid, "name", f"thread {tid} ({tname})")
            meta("thread_sort_index", pid, tid, "sort_index", tid)
        out.append(
            {
                "ph": "X",
                "cat": "Trace",
                "ts": _us(start),
                "dur": _us(end - start),
                "pid": "Spans",
                "tid": "PyTorch Profiler",
                "name": "PyTorch Profiler (0)",
                "args": {"Op count": 0},
            }
        )
        meta("process_sort_index", "Spans", 0, "sort_index", 536_870_912, _us(start))
        out.append(
            {
                "name": "Iteration Start: PyTorch Profiler",
                "ph": "i",
                "s": "g",
                "pid": "Traces",
                "tid": "Trace PyTorch Profiler",
                "ts": _us(start),
            }
        )
        out.append(
            {"name": "Record Window End", "ph": "i", "s": "g", "pid": "", "tid": "", "ts": _us(end)}
        )
        return out
