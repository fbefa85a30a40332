"""The shape a cache entry's `meta.json` must have: its values are read as they are (a
`"step_names": 5` made the overview fail), so an entry whose JSON has a wrong type is damage,
found when it is looked up, like a frame file of the wrong size."""

from __future__ import annotations

from collections import Counter
from typing import Any

import msgspec

from hta_tui.trace import metadata


class _Meta(msgspec.Struct):
    """The fields front ends and analyses read; others are let through."""

    cache_files: dict[str, int]
    step_names: list[str] = []
    n_events: int = 0
    n_kernels: int = 0
    min_ts: int | None = None
    max_end: int | None = None
    dropped_events: dict[str, int] = {}
    rank_in_file: int | None = None
    base_time_ns: int | None = None
    parser_version: int | None = None
    path: str = ""
    trace_name: str | None = None
    device_properties: list[dict[str, Any]] = []
    distributed_info: dict[str, Any] | None = None


def problem(meta: Any) -> str | None:
    """What is wrong with the types of `meta` (one line), or None."""
    try:
        shape = msgspec.convert(meta, _Meta)
    except msgspec.ValidationError as exc:
        return f"meta.json: {exc}"
    dropped: Counter[str] = Counter()
    metadata.devices(shape.device_properties, dropped)
    metadata.distributed(shape.distributed_info, dropped)
    return f"meta.json: {next(iter(dropped))}" if dropped else None
