"""Files an attacker drops into a shared profiling folder (issue 25), at any size: a small
gzip that expands to a huge trace, a gzip of many empty members, a step number and a file
name no integer holds, launches, kernels and operators sharing one id, and device properties
of the wrong type. The tests write them small, `bench/bench_hostile.py` at the sizes that
broke the loader; each is what a real trace can become by corruption or by hand.
"""

from __future__ import annotations

import gzip
import zlib
from pathlib import Path
from typing import Any

import orjson

from hta_tui.synth.files import make_trace

HUGE_DIGITS = "9" * 23  # beyond 2**64


def good_trace(rank: int = 0, *, world_size: int = 8) -> dict[str, Any]:
    """A small realistic rank (the one the hostile files sit beside)."""
    return make_trace(rank, world_size=world_size, steps=3, seed=1, kernels_per_step=10)


def expanding_gzip(json_mb: float, *, rank: int = 1) -> bytes:
    """A valid trace of about `json_mb` MB of JSON that gzips to a small fraction of it:
    one event repeated (1.9 MB of gzip held 563 MB of JSON, 5.2 M events)."""
    event = orjson.dumps(
        {"ph": "X", "cat": "cpu_op", "name": "aten::add", "pid": 1, "tid": 1, "ts": 1, "dur": 1}
    )
    n = max(1, int(json_mb * 1e6 / (len(event) + 1)))
    head = b'{"distributedInfo": {"rank": %d}, "traceEvents": [' % rank
    body = zlib.compressobj(9, zlib.DEFLATED, 31)
    parts = [body.compress(head)]
    block = b",".join([event] * 10_000)
    for start in range(0, n, 10_000):
        count = min(10_000, n - start)
        piece = block if count == 10_000 else b",".join([event] * count)
        parts.append(body.compress((b"," if start else b"") + piece))
    parts.append(body.compress(b"]}"))
    parts.append(body.flush())
    return b"".join(parts)


def gzip_members(trace: dict[str, Any], members: int) -> bytes:
    """`trace` gzipped, followed by `members` empty gzip members (valid gzip: 4 MB of them
    made a quadratic gunzip take 59 s)."""
    empty = gzip.compress(b"", mtime=0)
    return gzip.compress(orjson.dumps(trace), mtime=0) + empty * members


def huge_step(trace: dict[str, Any]) -> dict[str, Any]:
    """`trace` (changed in place) with one more step, numbered beyond any integer column."""
    step = next(e for e in trace["traceEvents"] if e.get("name", "").startswith("ProfilerStep#"))
    trace["traceEvents"].append({**step, "name": f"ProfilerStep#{HUGE_DIGITS}"})
    return trace


def shared_ids(n: int, *, rank: int = 3) -> dict[str, Any]:
    """`n` operators, `n` launches and `n` kernels all sharing one correlation and one
    External id (a corrupted or merged file): any join on the ids grows as n squared."""
    cpu = {"pid": 1, "tid": 1}
    gpu = {"pid": 0, "tid": 7}
    args = {"External id": 5, "correlation": 5}
    events: list[dict[str, Any]] = [
        {
            "ph": "X",
            "cat": "user_annotation",
            "name": "ProfilerStep#1",
            **cpu,
            "ts": 0,
            "dur": 40 * n + 100,
            "args": {"External id": 1},
        },
    ]
    for i in range(n):
        t = 10 + 40 * i
        events += [
            {
                "ph": "X",
                "cat": "cpu_op",
                "name": "aten::mm",
                **cpu,
                "ts": t,
                "dur": 30,
                "args": {"External id": 5},
            },
            {
                "ph": "X",
                "cat": "cuda_runtime",
                "name": "cudaLaunchKernel",
                **cpu,
                "ts": t + 1,
                "dur": 5,
                "args": args,
            },
            {
                "ph": "X",
                "cat": "kernel",
                "name": "gemm",
                **gpu,
                "ts": t + 10,
                "dur": 20,
                "args": {**args, "stream": 7, "device": 0},
            },
        ]
    return {"distributedInfo": {"rank": rank}, "traceEvents": events}


def bad_device(trace: dict[str, Any]) -> dict[str, Any]:
    """`trace` (changed in place) whose GPU's `numSms` is text."""
    trace["deviceProperties"][0]["numSms"] = "many"
    return trace


def write_hostile_folder(
    out: str | Path, *, expand_mb: float = 5, members: int = 2_000, shared: int = 300
) -> dict[str, Path]:
    """A good rank 0 beside every hostile file above (sizes as given), without a
    distributedInfo rank where the file name is the attack; returns name -> path."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    files: dict[str, bytes] = {
        "rank-0.json": orjson.dumps(good_trace(0)),
        "expanding.json.gz": expanding_gzip(expand_mb, rank=1),
        "members.json.gz": gzip_members(_without_rank(good_trace(2)) | _rank(2), members),
        "shared-ids.json": orjson.dumps(shared_ids(shared, rank=3)),
        "huge-step.json": orjson.dumps(huge_step(good_trace(4)) | _rank(4)),
        f"rank{HUGE_DIGITS}.json": orjson.dumps(_without_rank(good_trace(5))),
        "bad-device.json": orjson.dumps(bad_device(good_trace(6)) | _rank(6)),
    }
    paths = {}
    for name, data in files.items():
        (out / name).write_bytes(data)
        paths[name] = out / name
    return paths


def _rank(rank: int) -> dict[str, Any]:
    return {"distributedInfo": {"backend": "nccl", "rank": rank, "world_size": 8}}


def _without_rank(trace: dict[str, Any]) -> dict[str, Any]:
    trace.pop("distributedInfo", None)
    return trace
