"""Seeded hostile variants of real and synthetic traces, for the loader's fuzz test.

Each mutant is a pure function of (source bytes, kind, seed), so a failure names a mutant
that can be made again. Nothing is committed as a file: the regression cases are rebuilt
from their recipe.
"""

from __future__ import annotations

import gzip
import random
from collections.abc import Callable
from typing import Any

import orjson

from hta_tui.synth.layouts import LAYOUTS, relayout

Doc = dict[str, Any]

#: Values of every JSON type, and the numbers JSON cannot hold well.
ODD_VALUES: list[Any] = [
    "NaN",
    "Infinity",
    "-Infinity",
    "12",
    "",
    "x" * 50,
    None,
    True,
    [],
    [1, [2, [3]]],
    {},
    {"a": {"b": None}},
    -1,
    0,
    2**63,
    -(2**64),
    10**30,
    1e308,
    -1e308,
    1.5e-300,
    0.1,
]
FIELDS = ["ts", "dur", "ph", "cat", "name", "pid", "tid", "id", "args"]
ARG_FIELDS = ["External id", "correlation", "stream", "device", "bytes", "grid", "block",
              "Input Dims", "memory bandwidth (GB/s)", "registers per thread", "name"]  # fmt: skip


def _events(doc: Doc) -> list[Any]:
    events = doc.get("traceEvents")
    return events if isinstance(events, list) else []


def _pick(rng: random.Random, events: list[Any], n: int) -> list[int]:
    return rng.sample(range(len(events)), min(n, len(events))) if events else []


def truncate(data: bytes, rng: random.Random) -> bytes:
    return data[: rng.randrange(len(data) + 1)]


def flip_bytes(data: bytes, rng: random.Random) -> bytes:
    buf = bytearray(data)
    for _ in range(rng.randint(1, 8)):
        i = rng.randrange(len(buf))
        buf[i] ^= 1 << rng.randrange(8)
    return bytes(buf)


def gzip_cut(data: bytes, rng: random.Random) -> bytes:
    packed = gzip.compress(data, compresslevel=1, mtime=0)
    return packed[: rng.randrange(10, len(packed))]


def gzip_flip(data: bytes, rng: random.Random) -> bytes:
    return flip_bytes(gzip.compress(data, compresslevel=1, mtime=0), rng)


def type_swap(doc: Doc, rng: random.Random) -> Doc:
    events = _events(doc)
    for i in _pick(rng, events, rng.randint(1, 20)):
        ev = events[i]
        if not isinstance(ev, dict):
            continue
        if rng.random() < 0.4 and isinstance(ev.get("args"), dict):
            ev["args"][rng.choice(ARG_FIELDS)] = rng.choice(ODD_VALUES)
        else:
            ev[rng.choice(FIELDS)] = rng.choice(ODD_VALUES)
    return doc


def nan_times(doc: Doc, rng: random.Random) -> Doc:
    events = _events(doc)
    for i in _pick(rng, events, rng.randint(1, 10)):
        if isinstance(events[i], dict):
            events[i][rng.choice(["ts", "dur"])] = rng.choice(["NaN", "Infinity", "-Infinity"])
    return doc


def huge_numbers(doc: Doc, rng: random.Random) -> Doc:
    events = _events(doc)
    for i in _pick(rng, events, rng.randint(1, 10)):
        if isinstance(events[i], dict):
            events[i][rng.choice(["ts", "dur", "pid", "tid"])] = rng.choice(
                [2**63, 2**64 + 1, 10**40, -(10**19), 1e300, 9.2e15, -1e15]
            )
    return doc


def top_level_swap(doc: Doc, rng: random.Random) -> Doc:
    key = rng.choice(["distributedInfo", "deviceProperties", "traceName", "schemaVersion",
                      "baseTimeNanoseconds", "displayTimeUnit", "traceEvents"])  # fmt: skip
    doc[key] = rng.choice([*ODD_VALUES, {"rank": rng.choice(ODD_VALUES)}])
    return doc


def deep_nesting(data: bytes, rng: random.Random) -> bytes:
    """An arg nested hundreds or thousands of lists deep inside one event."""
    depth = rng.choice([100, 600, 5000, 100_000])
    at = data.find(b'{"', rng.randrange(len(data)))
    if at < 0:
        return data
    return data[: at + 1] + b'"deep":' + b"[" * depth + b"]" * depth + b"," + data[at + 1 :]


def long_names(doc: Doc, rng: random.Random) -> Doc:
    events = _events(doc)
    for i in _pick(rng, events, rng.randint(1, 3)):
        if isinstance(events[i], dict):
            events[i]["name"] = rng.choice('ab]}, {"\\') * 1_000_000
    return doc


def bad_events(doc: Doc, rng: random.Random) -> Doc:
    events = _events(doc)
    for i in _pick(rng, events, rng.randint(1, 10)):
        choice = rng.randrange(4)
        if choice == 0 and isinstance(events[i], dict):
            events[i].pop("ph", None)
        elif choice == 1 and isinstance(events[i], dict):
            events[i]["ph"] = rng.choice(["Q", "", "XX", "x"])
        else:
            events[i] = rng.choice([17, "event", [1, 2], None, 1.5])
    return doc


def reorder_keys(doc: Doc, rng: random.Random) -> Doc:
    events = _events(doc)
    for i in range(len(events)):
        ev = events[i]
        if isinstance(ev, dict):
            keys = list(ev)
            rng.shuffle(keys)
            events[i] = {k: ev[k] for k in keys}
    keys = list(doc)
    rng.shuffle(keys)
    return {k: doc[k] for k in keys}


def duplicate_keys(data: bytes, rng: random.Random) -> bytes:
    """A second "ts" / "ph" / "name" in some events (JSON allows it; the last one wins)."""
    out, start = bytearray(), 0
    for _ in range(rng.randint(1, 10)):
        at = data.find(b'{"', rng.randrange(len(data)))
        if at < 0:
            break
        out += data[start : at + 1] + rng.choice([b'"ts":"x",', b'"ph":"X",', b'"name":[1],'])
        start = at + 1
    return bytes(out + data[start:])


def huge_digits(doc: Doc, rng: random.Random) -> Doc:
    """Digit runs no integer holds in names: a ProfilerStep's number, others' tails."""
    events = _events(doc)
    for i in _pick(rng, events, rng.randint(1, 3)):
        ev = events[i]
        if isinstance(ev, dict):
            digits = "9" * rng.randint(19, 40)
            name = str(ev.get("name", ""))
            steps = name.startswith("ProfilerStep#") or rng.random() < 0.5
            ev["name"] = f"ProfilerStep#{digits}" if steps else f"{name}{digits}"
    return doc


def shared_ids(doc: Doc, rng: random.Random) -> Doc:
    """Many events' correlation and External id set to one value (a corrupted or merged
    file): joins on them must not grow as the square."""
    events = _events(doc)
    value = rng.choice([1, 0, 7, 2**40])
    for i in _pick(rng, events, rng.randint(50, 400)):
        ev = events[i]
        if isinstance(ev, dict) and isinstance(ev.get("args"), dict):
            ev["args"]["correlation"] = value
            ev["args"]["External id"] = value
    return doc


def gzip_members(data: bytes, rng: random.Random) -> bytes:
    """The trace gzipped, then up to 3,000 empty gzip members (some with zero padding)."""
    empty = gzip.compress(b"", mtime=0)
    tail = empty + (b"\x00" * rng.randint(0, 3))
    return gzip.compress(data, compresslevel=1, mtime=0) + tail * rng.randint(1, 3_000)


#: File names no rank fits in (the fuzz test names some mutants so).
HUGE_RANK_NAME = "rank" + "9" * 23


#: Values a cache entry's meta.json must not be trusted to hold by type.
META_FIELDS = ["step_names", "n_events", "n_kernels", "min_ts", "max_end", "dropped_events",
               "rank_in_file", "device_properties", "distributed_info", "path",
               "cache_files"]  # fmt: skip


def meta_swap(meta: Doc, rng: random.Random) -> Doc:
    """A cache entry's meta.json with one to three fields of a wrong type."""
    for _ in range(rng.randint(1, 3)):
        field = rng.choice(META_FIELDS)
        meta[field] = rng.choice([v for v in ODD_VALUES if type(v) is not type(meta.get(field))])
    return meta


def layout(data: bytes, rng: random.Random) -> bytes:
    return relayout(data, rng.choice(LAYOUTS))


DOC_KINDS: dict[str, Callable[[Doc, random.Random], Doc]] = {
    "type_swap": type_swap,
    "nan_times": nan_times,
    "huge_numbers": huge_numbers,
    "top_level_swap": top_level_swap,
    "long_names": long_names,
    "bad_events": bad_events,
    "reorder_keys": reorder_keys,
    "huge_digits": huge_digits,
    "shared_ids": shared_ids,
}
BYTE_KINDS: dict[str, Callable[[bytes, random.Random], bytes]] = {
    "truncate": truncate,
    "flip_bytes": flip_bytes,
    "gzip_cut": gzip_cut,
    "gzip_flip": gzip_flip,
    "duplicate_keys": duplicate_keys,
    "deep_nesting": deep_nesting,
    "layout": layout,
    "gzip_members": gzip_members,
}
KINDS = [*DOC_KINDS, *BYTE_KINDS]


def mutate(source: bytes, kind: str, seed: int) -> bytes:
    """The mutant `kind` of the JSON document `source`, made with `seed`."""
    rng = random.Random(f"{kind}:{seed}")
    if kind in BYTE_KINDS:
        return BYTE_KINDS[kind](source, rng)
    doc = DOC_KINDS[kind](orjson.loads(source), rng)
    try:
        data = orjson.dumps(doc, option=orjson.OPT_INDENT_2 if rng.random() < 0.3 else None)
    except orjson.JSONEncodeError:  # integers beyond 64 bits: the standard library writes them
        import json

        data = json.dumps(doc).encode()
    return data
