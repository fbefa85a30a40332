"""`[memory]` instant events -> the `memory` frame (schema.MEMORY_SCHEMA).

PyTorch writes one per allocation and free when profiling with `profile_memory=True`
(`ph: "i"`, args Bytes, Total Allocated, Total Reserved, Addr, Device Type, Device Id). They
are a small share of a trace's events and absent from most, so they are picked out of the
non-complete events a chunk already separates, and cost nothing where there are none.
"""

from __future__ import annotations

import polars as pl

from hta_tui.trace.events import Event, args_of
from hta_tui.trace.fields import reader
from hta_tui.trace.numbers import ns_column
from hta_tui.trace.schema import MEMORY_SCHEMA

MEMORY_NAME = "[memory]"

#: frame column -> EventArgs field (the rest come from the event itself)
_ARGS = {
    "bytes": "mem_bytes",
    "total_allocated": "total_allocated",
    "total_reserved": "total_reserved",
    "addr": "addr",
    "device_type": "device_type",
    "device_id": "device_id",
}


def memory_columns(events: list[Event]) -> pl.DataFrame | None:
    """The `[memory]` events among `events` (no complete ones) as columns; ts in ns (null
    where not a number). InexactNumbers as `numbers.ns_column`."""
    mem = [e for e in events if e.ph == "i" and e.name == MEMORY_NAME]
    if not mem:
        return None
    args = args_of(mem)
    cols = [ns_column("ts", [e.ts for e in mem])]
    cols += [
        pl.Series(col, reader(f)(args), MEMORY_SCHEMA[col], strict=False)
        for col, f in _ARGS.items()
    ]
    cols += [
        pl.Series(c, [getattr(e, c) for e in mem], dtype=pl.Int64, strict=False)
        for c in ("pid", "tid")
    ]
    return pl.DataFrame(cols)


def memory_frame(parts: list[pl.DataFrame]) -> pl.DataFrame:
    """The file's memory frame from its chunks' columns. Events without a usable timestamp
    cannot be placed on the curve and are dropped."""
    if not parts:
        return pl.DataFrame(schema=MEMORY_SCHEMA)
    return pl.concat(parts).filter(pl.col("ts").is_not_null()).select(list(MEMORY_SCHEMA))
