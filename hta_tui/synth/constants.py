"""Constants shared by the generator's parts: stream numbers, sizes, the time base."""

from __future__ import annotations

COMPUTE_STREAM = 7
COPY_STREAM = 20
NCCL_STREAM = 28

#: Straggler slowdown of GPU work on `slow_rank`.
SLOW_FACTOR = 1.3
#: Events per chunk handed to orjson / gzip (bounds memory for any file size).
_CHUNK_EVENTS = 20_000
#: Pending launches a stream holds before cudaLaunchKernel blocks (CUDA's push buffer).
_QUEUE_DEPTH = 1024
#: Largest model (blocks per step) before `target_mb` sizing adds steps instead.
_MAX_BLOCKS = 1500
_FIRST_STEP = 2  # profiler schedule wait=1, warmup=1: the first recorded step is #2
_BASE_TIME_NS = 1_719_853_884_000_000_000  # baseTimeNanoseconds (wall clock, whole seconds)
_NUM_SMS = 108
_CTX = 1

_US = 1000  # ns per microsecond
