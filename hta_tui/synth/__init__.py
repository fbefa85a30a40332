"""Synthetic multi-rank Kineto traces: the app's `--demo`, the tests and the benchmarks.

The generator simulates a small data-parallel training loop (DDP, one GPU per rank) instead of
emitting random events, so every HTA analysis has something true to find:

* CPU side: `ProfilerStep#N` on the main thread, record_function ranges, properly nested aten
  ops, `cudaLaunchKernel`/`cudaMemcpyAsync`/... runtime calls; backward runs on a separate
  autograd thread, as it does in PyTorch.
* GPU side: a compute stream (7), a copy stream (20) and an NCCL stream (28). Kernels start
  no earlier than their launch's end plus a launch delay, never overlap on their stream and
  honour cross-stream waits (`cudaStreamWaitEvent`), so gradient all-reduces overlap backward
  compute, the optimizer waits for the last all-reduce ("other" idle time), the data loader
  and CPU hiccups starve the GPU ("host wait") and queued kernels leave short gaps ("kernel
  wait").
* One straggler rank whose GPU work takes ~30% longer.

Speed matters (benchmarks write 8 ranks x 100 MB): all times are integer nanoseconds, the
static parts of events (kernel names, launch geometry, input shapes) are built once per model
and events are produced in chunks that are serialised by orjson and streamed to gzip, so
memory stays at a few chunks whatever the file size. Output is a pure function of the
arguments (no global random state, gzip header without name or mtime).
"""

from hta_tui.synth.__main__ import _main  # noqa: F401 (the tests run the command line)
from hta_tui.synth.constants import COMPUTE_STREAM, COPY_STREAM, NCCL_STREAM
from hta_tui.synth.files import make_trace, plan_size, trace_file_name, write_trace, write_trace_dir
from hta_tui.synth.memory import MemoryOptions
from hta_tui.synth.tweaks import Tweaks

__all__ = [
    "COMPUTE_STREAM",
    "COPY_STREAM",
    "NCCL_STREAM",
    "MemoryOptions",
    "Tweaks",
    "make_trace",
    "plan_size",
    "trace_file_name",
    "write_trace",
    "write_trace_dir",
]
