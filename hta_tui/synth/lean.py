"""Lean events: the same trace with only the args the analyses read, so a file of a given
size holds many more events (issue 15's 2 GB rank of ~10 M events; the default events carry
input shapes, launch geometry and ids that make one event ~340 bytes)."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any

#: The args kept: what links, places and classifies an event (correlation, stream, device,
#: sync kind, collective args, bytes); the rest (input shapes, grid, registers, occupancy,
#: record-function ids, Python ids) go.
KEPT_ARGS = frozenset(
    {
        "External id",
        "correlation",
        "stream",
        "device",
        "bytes",
        "cuda_sync_kind",
        "wait_on_stream",
        "Collective name",
        "In msg nelems",
        "Out msg nelems",
        "Group size",
        "dtype",
        "Process Group Name",
        "Process Group Ranks",
        "Seq",
        "name",
    }
)

#: CPU ops, annotations and Python frames lose their External id too (runtime calls and GPU
#: events keep it, and correlation ids link launches to kernels): 8% of a lean file.
_NO_EXTERNAL_ID = frozenset({"cpu_op", "user_annotation", "python_function"})
_KEPT_ON_OPS = KEPT_ARGS - {"External id"}


def lean_event(event: dict[str, Any]) -> dict[str, Any]:
    """`event` with only the kept args (an event without args is returned as it is)."""
    args = event.get("args")
    if not args:
        return event
    keep = KEPT_ARGS if event.get("cat") not in _NO_EXTERNAL_ID else _KEPT_ON_OPS
    kept = {k: v for k, v in args.items() if k in keep}
    out = {k: v for k, v in event.items() if k != "args"}
    if kept:
        out["args"] = kept
    return out


def lean_chunks(chunks: Iterable[list[dict[str, Any]]]) -> Iterator[list[dict[str, Any]]]:
    """Each chunk of events, lean."""
    for chunk in chunks:
        yield [lean_event(e) for e in chunk]
