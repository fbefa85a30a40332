"""One complete ("X") Kineto event as the profiler writes it: the one builder the small
hand-shaped generators (graph replay, FSDP) and the tests' traces share."""

from __future__ import annotations

from typing import Any


def complete(cat: str, name: str, pid: int, tid: int, ts: float, dur: float, **args: Any) -> dict:
    """A complete event of `dur` us from `ts` us on `pid`/`tid`, with `args` as given."""
    return {"ph": "X", "cat": cat, "name": name, "pid": pid, "tid": tid, "ts": ts, "dur": dur,
            "args": args}  # fmt: skip
