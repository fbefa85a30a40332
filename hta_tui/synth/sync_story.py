"""A small trace that tells the backward-sync story end to end, for the sync finder.

Each step runs `Net_0` (`Linear_0`, `PatchDrop_0`, `CrossEntropyLoss_0`) with `with_stack`,
`with_modules` and fwdbwd flows, as PyTorch 2.x writes them:

* forward: `PatchDrop_0` calls `torch.gather` at `train.py(20): forward` (an `aten::gather`
  with autograd sequence number S, the start of a fwdbwd flow); the loss calls `.item()` at
  `loss.py(88): forward`, a forward sync (`aten::item` -> `aten::_local_scalar_dense` ->
  `cudaMemcpyAsync` into pageable memory + `cudaStreamSynchronize`);
* backward, on the autograd thread with no module frame or annotation of the user's:
  `GatherBackward0` (sequence number S, the flow's finish) calls `aten::to` -> `aten::copy_`
  -> `cudaStreamSynchronize` while the step's kernels still run on stream 7: the sync to find.

`hook_markers=True` adds the "before/after backward of PatchDrop" annotations users put in
with backward hooks; the finder must not need them. The trace is built directly (not from the
DDP simulation of the other modules), so the default generator output is untouched.
"""

from __future__ import annotations

from typing import Any

from hta_tui.synth.constants import COMPUTE_STREAM

PID = 4242
MAIN_TID = 4242
BWD_TID = 4250
DEVICE = 0
#: What the story's syncs must be attributed to (the tests read these).
BACKWARD_SYNC_MODULE = "PatchDrop_0"
BACKWARD_SYNC_CALL_SITE = "train.py(20): forward"
FORWARD_SYNC_MODULE = "CrossEntropyLoss_0"
FORWARD_SYNC_CALL_SITE = "loss.py(88): forward"


class _Writer:
    """Events with consecutive correlation / external / python ids."""

    def __init__(self) -> None:
        self.events: list[dict[str, Any]] = []
        self.next_id = 1
        self.next_py = 1

    def new_id(self) -> int:
        self.next_id += 1
        return self.next_id

    def x(self, cat: str, name: str, tid: int, ts: float, dur: float, **args: Any) -> None:
        pid = args.pop("_pid", PID)
        ev = {"ph": "X", "cat": cat, "name": name, "pid": pid, "tid": tid, "ts": ts, "dur": dur}
        ev["args"] = args
        self.events.append(ev)

    def py(
        self, name: str, tid: int, ts: float, dur: float, parent: int | None, **extra: Any
    ) -> int:
        pid_ = self.next_py
        self.next_py += 1
        self.x(
            "python_function",
            name,
            tid,
            ts,
            dur,
            **{"Python parent id": parent, "Python id": pid_},
            **extra,
        )
        return pid_

    def module(self, name: str, tid: int, ts: float, dur: float, parent: int | None) -> int:
        """An nn.Module frame, with the `_call_impl` frame PyTorch puts above it."""
        call = self.py("torch/nn/modules/module.py(1750): _call_impl", tid, ts, dur, parent)
        return self.py(
            f"nn.Module: {name}", tid, ts + 0.5, dur - 1, call, **{"Python module id": 0}
        )

    def launch(
        self,
        name: str,
        kernel: str,
        tid: int,
        ts: float,
        gpu_ts: float,
        gpu_dur: float,
        stream: int = COMPUTE_STREAM,
        cat: str = "kernel",
    ) -> None:
        corr = self.new_id()
        self.x("cuda_runtime", name, tid, ts, 4.0, correlation=corr)
        self.x(
            cat,
            kernel,
            stream,
            gpu_ts,
            gpu_dur,
            _pid=DEVICE,
            device=DEVICE,
            stream=stream,
            correlation=corr,
        )

    def sync(self, tid: int, ts: float, dur: float) -> None:
        corr = self.new_id()
        self.x("cuda_runtime", "cudaStreamSynchronize", tid, ts, dur, correlation=corr)
        self.x(
            "cuda_sync",
            "Stream Sync",
            COMPUTE_STREAM,
            ts + 1,
            dur - 2,
            _pid=DEVICE,
            cuda_sync_kind="Stream Sync",
            stream=COMPUTE_STREAM,
            device=DEVICE,
            correlation=corr,
        )

    def flow(self, ph: str, fid: int, tid: int, ts: float) -> None:
        self.events.append(
            {
                "ph": ph,
                "id": fid,
                "pid": PID,
                "tid": tid,
                "ts": ts,
                "cat": "fwdbwd",
                "name": "fwdbwd",
                **({"bp": "e"} if ph == "f" else {}),
            }
        )


def _step(w: _Writer, step: int, t0: float, hook_markers: bool) -> float:
    """One training step from t0 (us); returns its end."""
    seq = 100 + 10 * step
    w.x("user_annotation", f"ProfilerStep#{step}", MAIN_TID, t0, 2000.0)
    root = w.py("train.py(140): <module>", MAIN_TID, t0 + 1, 1998.0, None)
    loop = w.py("train.py(120): train_step", MAIN_TID, t0 + 2, 1996.0, root)
    net = w.module("Net_0", MAIN_TID, t0 + 5, 900.0, loop)
    fwd = w.py("train.py(40): forward", MAIN_TID, t0 + 6, 898.0, net)
    # Linear_0: a matmul whose kernel keeps the GPU busy well into the backward pass.
    lin = w.module("Linear_0", MAIN_TID, t0 + 10, 200.0, fwd)
    w.x(
        "cpu_op",
        "aten::linear",
        MAIN_TID,
        t0 + 20,
        150.0,
        **{"Sequence number": seq, "Fwd thread id": 0},
    )
    w.launch("cudaLaunchKernel", "ampere_sgemm_128x64_nn", MAIN_TID, t0 + 30, t0 + 40, 800.0)
    del lin
    # PatchDrop_0: torch.gather at train.py(20).
    drop = w.module(BACKWARD_SYNC_MODULE, MAIN_TID, t0 + 220, 300.0, fwd)
    site = w.py(BACKWARD_SYNC_CALL_SITE, MAIN_TID, t0 + 222, 296.0, drop)
    w.py("<built-in method gather of type object at 0x7f0>", MAIN_TID, t0 + 225, 260.0, site)
    w.x(
        "cpu_op",
        "aten::gather",
        MAIN_TID,
        t0 + 230,
        250.0,
        **{"Sequence number": seq + 1, "Fwd thread id": 0},
    )
    w.flow("s", seq + 1, MAIN_TID, t0 + 230)
    w.launch("cudaLaunchKernel", "gather_kernel", MAIN_TID, t0 + 240, t0 + 842, 20.0)
    # CrossEntropyLoss_0: loss.item() at loss.py(88), a forward sync.
    loss = w.module(FORWARD_SYNC_MODULE, MAIN_TID, t0 + 540, 360.0, fwd)
    site = w.py(FORWARD_SYNC_CALL_SITE, MAIN_TID, t0 + 542, 356.0, loss)
    w.x("cpu_op", "aten::item", MAIN_TID, t0 + 550, 340.0)
    w.x("cpu_op", "aten::_local_scalar_dense", MAIN_TID, t0 + 552, 336.0)
    w.launch(
        "cudaMemcpyAsync",
        "Memcpy DtoH (Device -> Pageable)",
        MAIN_TID,
        t0 + 560,
        t0 + 865,
        2.0,
        cat="gpu_memcpy",
    )
    w.sync(MAIN_TID, t0 + 570, 300.0)
    del site
    # Backward on the autograd thread: GatherBackward0 -> aten::to -> aten::copy_ -> sync.
    b0 = t0 + 1000
    if hook_markers:
        w.x(
            "user_annotation",
            f"before backward of {BACKWARD_SYNC_MODULE.rsplit('_', 1)[0]}",
            BWD_TID,
            b0 - 20,
            5.0,
        )
    w.x(
        "cpu_op",
        "autograd::engine::evaluate_function: GatherBackward0",
        BWD_TID,
        b0,
        500.0,
        **{"Sequence number": seq + 1, "Fwd thread id": 1},
    )
    w.x(
        "cpu_op",
        "GatherBackward0",
        BWD_TID,
        b0 + 2,
        496.0,
        **{"Sequence number": seq + 1, "Fwd thread id": 1},
    )
    w.flow("f", seq + 1, BWD_TID, b0 + 2)
    w.x("cpu_op", "aten::gather_backward", BWD_TID, b0 + 5, 490.0)
    w.launch("cudaLaunchKernel", "gather_backward_kernel", BWD_TID, b0 + 6, b0 + 15, 450.0)
    w.x("cpu_op", "aten::to", BWD_TID, b0 + 10, 480.0)
    w.x("cpu_op", "aten::copy_", BWD_TID, b0 + 12, 476.0)
    w.sync(BWD_TID, b0 + 20, 460.0)
    if hook_markers:
        w.x(
            "user_annotation",
            f"after backward of {BACKWARD_SYNC_MODULE.rsplit('_', 1)[0]}",
            BWD_TID,
            b0 + 510,
            5.0,
        )
    return t0 + 2000.0


def make_sync_story(*, steps: int = 2, hook_markers: bool = False) -> dict[str, Any]:
    """The story's trace as a dict (write it with `files.write_trace`)."""
    w = _Writer()
    t = 1_700_000_000_000.0
    for step in range(1, steps + 1):
        t = _step(w, step, t, hook_markers) + 100.0
    meta = [
        {"ph": "M", "name": "thread_name", "pid": PID, "tid": MAIN_TID, "args": {"name": "python"}},
        {
            "ph": "M",
            "name": "thread_name",
            "pid": PID,
            "tid": BWD_TID,
            "args": {"name": "autograd"},
        },
    ]
    return {
        "schemaVersion": 1,
        "distributedInfo": {"backend": "nccl", "rank": 0, "world_size": 1},
        "traceEvents": meta + w.events,
        "displayTimeUnit": "ms",
    }
