"""One trace in the layouts real files come in: key orders and whitespace.

The generator writes the events array near the end of a compact document. Real files differ:
recent Kineto appends log arrays (`INFO`, `WARNING`, `ERROR`, whose lines contain "]") and
names after the events; other writers put the events first or last, pretty-print, or end
lines with CRLF. The parser must find the events array in each without decoding the rest
twice (tests/test_layouts.py, bench/bench_layouts.py).
"""

from __future__ import annotations

from typing import Any

import orjson

LAYOUTS = ("kineto", "events_first", "events_last", "compact", "pretty", "crlf")

#: Log lines as Kineto writes them after the events (each has a "]" inside a string).
KINETO_LOGS: dict[str, list[str]] = {
    "INFO": [
        "INFO:2024-05-22 17:15:23 2910249:2910249 CuptiActivityProfiler.cpp:1217] Traces Recorded:",
        "INFO:2024-05-22 17:15:23 2910249:2910249 CuptiActivityProfiler.cpp:1220] PyTorch "
        "Profiler: 1 iterations",
    ],
    "WARNING": [
        "WARNING:2024-05-22 17:15:22 2910249:2910249 CuptiActivityProfiler.cpp:933] "
        "Memory records [0x7f..] dropped: buffer full }, {",
    ],
    "ERROR": [],
}

_TAIL = ("traceName", "displayTimeUnit", "baseTimeNanoseconds")


def relayout(data: bytes, layout: str) -> bytes:
    """The trace `data` (a JSON document with `traceEvents`) in `layout`; the same events."""
    if layout not in LAYOUTS:
        raise ValueError(f"layout must be one of {', '.join(LAYOUTS)}")
    doc: dict[str, Any] = orjson.loads(data)
    events = doc.pop("traceEvents")
    tail = {k: doc.pop(k) for k in _TAIL if k in doc}
    if layout == "events_first":
        return orjson.dumps({"traceEvents": events, **doc, **tail})
    if layout == "events_last":
        return orjson.dumps({**doc, **tail, "traceEvents": events})
    if layout == "compact":
        return orjson.dumps({**doc, "traceEvents": events, **tail})
    kineto = orjson.dumps({**doc, "traceEvents": events, **KINETO_LOGS, **tail})
    if layout == "kineto":
        return kineto
    pretty = orjson.dumps(orjson.loads(kineto), option=orjson.OPT_INDENT_2)
    return pretty if layout == "pretty" else pretty.replace(b"\n", b"\r\n")
