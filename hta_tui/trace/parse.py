"""One Kineto trace file -> typed polars frames.

msgspec decodes straight into small typed structs, skipping every field no analysis uses:
about 4x faster than `orjson.loads` into dicts on a 35 MB trace and a fraction of its memory.
The events are decoded a chunk at a time, so a rank's structs never all exist at once.
Every dialect is normalised here, once (see `schema.KINDS`), so nothing downstream looks at
raw categories, string tids or fractional microseconds.
"""

from __future__ import annotations

import contextlib
import gc
import gzip
import operator
import zlib
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import msgspec
import orjson
import polars as pl

from hta_tui.trace.schema import EVENTS_SCHEMA, FLOWS_SCHEMA, KINDS, THREADS_SCHEMA, empty

#: Bumped whenever the frames change shape or meaning; part of the cache key.
PARSER_VERSION = 3

Num = int | float


class TraceFileError(Exception):
    """A file that cannot become a rank. `incomplete` files may still be being written."""

    def __init__(self, message: str, *, incomplete: bool = False, not_trace: bool = False):
        super().__init__(message)
        self.incomplete = incomplete
        self.not_trace = not_trace


class _Args(msgspec.Struct, gc=False):
    external_id: int | None = msgspec.field(default=None, name="External id")
    external_id_legacy: int | None = msgspec.field(default=None, name="external id")
    correlation: int | None = None
    stream: int | str | None = None
    device: int | None = None
    bytes: int | None = None
    bandwidth: Num | None = msgspec.field(default=None, name="memory bandwidth (GB/s)")
    # kept as JSON text and decoded by polars: triton cpu ops write a string here
    grid: msgspec.Raw = msgspec.field(default_factory=msgspec.Raw)
    block: msgspec.Raw = msgspec.field(default_factory=msgspec.Raw)
    registers: int | None = msgspec.field(default=None, name="registers per thread")
    shared_memory: int | None = msgspec.field(default=None, name="shared memory")
    occupancy: Num | None = msgspec.field(default=None, name="est. achieved occupancy %")
    sync_kind: str | None = msgspec.field(default=None, name="cuda_sync_kind")
    input_dims: msgspec.Raw = msgspec.field(default_factory=msgspec.Raw, name="Input Dims")
    input_type: msgspec.Raw = msgspec.field(default_factory=msgspec.Raw, name="Input type")
    seq: int | None = msgspec.field(default=None, name="Sequence number")
    # metadata ("M") events carry their value here
    name: str | int | None = None
    labels: str | None = None
    sort_index: int | None = None


class _Event(msgspec.Struct, gc=False):
    ph: str = ""
    cat: str | None = None
    name: str | int | float | None = None
    pid: int | str | None = None
    tid: int | str | None = None
    ts: Num | None = None
    dur: Num | None = None
    id: int | str | None = None
    args: _Args | None = None


class _Trace(msgspec.Struct):
    # each event's JSON text (a view into the file's bytes), decoded in chunks (`_decoded`);
    # the lenient path puts decoded events here instead
    traceEvents: list[msgspec.Raw] | None = None
    distributedInfo: msgspec.Raw = msgspec.field(default_factory=msgspec.Raw)
    deviceProperties: msgspec.Raw = msgspec.field(default_factory=msgspec.Raw)
    computeProperties: msgspec.Raw = msgspec.field(default_factory=msgspec.Raw)
    schemaVersion: msgspec.Raw = msgspec.field(default_factory=msgspec.Raw)
    traceName: str | None = None
    baseTimeNanoseconds: int | None = None
    displayTimeUnit: str | None = None
    # PyTorch execution traces (not Kineto) have these instead of traceEvents
    nodes: msgspec.Raw = msgspec.field(default_factory=msgspec.Raw)
    schema: msgspec.Raw = msgspec.field(default_factory=msgspec.Raw)


_DECODER = msgspec.json.Decoder(_Trace)
_EVENTS = msgspec.json.Decoder(list[_Event])

#: Events decoded into structs at a time. All of a 100 MB trace's events as structs took 400 MB
#: on top of its bytes; a chunk at a time keeps the parse of a 100 MB rank under 400 MB, and
#: a chunk that fits the CPU caches decodes faster too (20k events: about 15 MB of structs).
CHUNK = 20_000

#: Which rows each sparse arg is read on (see `_events_frame`). "other" is in every list:
#: unknown categories keep whatever args they carry.
GPU_KINDS = ("kernel", "memcpy", "memset", "sync", "gpu_annotation", "other")
COPY_KINDS = ("memcpy", "memset", "other")
KERNEL_KINDS = ("kernel", "other")
SHAPE_KINDS = ("cpu_op", "annotation", "python", "other")

_CAT_KIND: dict[str, str] = {
    "kernel": "kernel",
    "gpu_memcpy": "memcpy",
    "memcpy": "memcpy",
    "gpu_memset": "memset",
    "memset": "memset",
    "cuda_sync": "sync",
    "gpu_user_annotation": "gpu_annotation",
    "cuda_runtime": "runtime",
    "runtime": "runtime",
    "cuda_driver": "driver",
    "cpu_op": "cpu_op",
    "operator": "cpu_op",
    "user_annotation": "annotation",
    "python_function": "python",
    "trace": "trace_span",
}


def kind_of_category(cat: str | None) -> str:
    """Normalised kind for a category, in any dialect (legacy capitalised, xpu_/mtia_ ...)."""
    if not cat:
        return "other"
    low = cat.lower()
    kind = _CAT_KIND.get(low)
    if kind is not None:
        return kind
    if low.endswith("_runtime"):
        return "runtime"
    if low.endswith("_driver"):
        return "driver"
    if low.endswith("_memcpy"):
        return "memcpy"
    if low.endswith("_memset"):
        return "memset"
    if low.endswith("kernel"):
        return "kernel"
    return "other"


@dataclass
class ParsedTrace:
    """What one file holds: metadata plus the frames of `schema.FRAME_SCHEMAS`."""

    meta: dict[str, Any]
    frames: dict[str, pl.DataFrame] = field(default_factory=dict)


def read_bytes(path: str | Path) -> bytes:
    """The file's JSON bytes, gunzipped when compressed (by magic, not by name)."""
    data = Path(path).read_bytes()
    if data[:2] == b"\x1f\x8b":
        try:
            return _gunzip(data)
        except (EOFError, zlib.error, gzip.BadGzipFile, OSError) as exc:
            raise TraceFileError(
                f"truncated or corrupt gzip ({exc})", incomplete=isinstance(exc, EOFError)
            ) from exc
    return data


def _gunzip(data: bytes) -> bytes:
    """The output buffer is sized from the gzip trailer: growing it as it fills (the library
    default) peaks at twice the trace in memory. Several members (the trailer then gives the
    last one's size only) or a damaged stream go the slow way, which also names the error."""
    try:
        from isal import igzip, isal_zlib  # 2-3x faster than zlib when installed

        whole, one = igzip.decompress, isal_zlib.decompress
    except ImportError:
        whole, one = gzip.decompress, zlib.decompress
    size = int.from_bytes(data[-4:], "little") if len(data) >= 18 else 0
    try:
        out = one(data, wbits=31, bufsize=max(size, 1))
    except Exception:
        return whole(data)
    return out if len(out) % 2**32 == size else whole(data)


def parse_bytes(buf: bytes, *, path: str = "") -> ParsedTrace:
    """Decode and normalise; raises TraceFileError with a one-line reason.

    The cyclic GC is paused meanwhile: a million small structs would trigger it hundreds of
    times for nothing (they hold no cycles), which costs a third of the decode.
    """
    return _parse_owned([buf])


def _parse_owned(holder: list[bytes]) -> ParsedTrace:
    """Parse the bytes in `holder`, taking them out so they are freed as soon as the frames
    are built: for a 500 MB rank that is 500 MB less at the end."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        return _parse_bytes(holder)
    finally:
        if was_enabled:
            gc.enable()


def _parse_bytes(holder: list[bytes]) -> ParsedTrace:
    buf = holder.pop()
    head = buf[:4096].lstrip()
    if not head:
        raise TraceFileError("empty file", incomplete=True)
    if head[:1] == b"[":
        raise TraceFileError("not a Kineto trace: a JSON list (memory timeline?)", not_trace=True)
    if head[:1] != b"{":
        raise TraceFileError("not JSON", not_trace=True)
    lenient = False
    try:
        trace = _DECODER.decode(buf)
    except msgspec.DecodeError as exc:
        msg = str(exc)
        truncated = "truncated" in msg.lower()
        if not truncated and "Expected `" not in msg:
            raise TraceFileError(f"invalid JSON ({msg})") from exc
        if truncated:
            raise TraceFileError("incomplete JSON (still being written?)", incomplete=True) from exc
        trace, lenient = _lenient_decode(buf), True
    if trace.traceEvents is None:
        if len(trace.nodes):
            raise TraceFileError("not a Kineto trace: PyTorch execution trace", not_trace=True)
        raise TraceFileError("not a Kineto trace: no traceEvents", not_trace=True)
    meta = _meta(trace)
    items, trace.traceEvents = trace.traceEvents, None
    if lenient:
        frames = build_frames(_slices(items))
    else:
        try:
            frames = build_frames(_decoded(items))
        except msgspec.ValidationError:  # an event field of an unexpected type
            del items
            frames = build_frames(_slices(_lenient_decode(buf).traceEvents or []))
    del buf
    meta.update(_frame_facts(frames["events"]))
    return ParsedTrace(meta=meta, frames=frames)


def _decoded(raws: list[msgspec.Raw]) -> Iterator[list[_Event]]:
    """The events as structs, CHUNK at a time (each raw is one event's JSON text)."""
    for start in range(0, len(raws), CHUNK):
        yield _EVENTS.decode(b"[" + b",".join(raws[start : start + CHUNK]) + b"]")


def _slices(events: list[Any]) -> Iterator[list[_Event]]:
    for start in range(0, len(events), CHUNK):
        yield events[start : start + CHUNK]


def parse_file(path: str | Path) -> ParsedTrace:
    parsed = _parse_owned([read_bytes(path)])
    parsed.meta["path"] = str(path)
    return parsed


def _lenient_decode(buf: bytes) -> _Trace:
    """Slow path for files whose fields have unexpected types: coerce event by event."""
    try:
        raw = orjson.loads(buf)
    except orjson.JSONDecodeError as exc:
        raise TraceFileError(f"invalid JSON ({exc})") from exc
    if not isinstance(raw, dict):
        raise TraceFileError("not a Kineto trace", not_trace=True)
    events = raw.pop("traceEvents", None)
    if events is not None and not isinstance(events, list):
        raise TraceFileError("not a Kineto trace: traceEvents is not a list", not_trace=True)
    top = {k: msgspec.Raw(orjson.dumps(v)) for k, v in raw.items() if k in _RAW_KEYS}
    for k in ("traceName", "displayTimeUnit"):
        if isinstance(raw.get(k), str):
            top[k] = raw[k]
    if isinstance(raw.get("baseTimeNanoseconds"), int):
        top["baseTimeNanoseconds"] = raw["baseTimeNanoseconds"]
    trace = _Trace(**top)
    if events is not None:
        trace.traceEvents = [ev for ev in map(_coerce_event, events) if ev is not None]
    return trace


_RAW_KEYS = {
    "distributedInfo",
    "deviceProperties",
    "computeProperties",
    "schemaVersion",
    "nodes",
    "schema",
}


_ARGS_FIELDS = msgspec.structs.fields(_Args)
_EVENT_FIELDS = [f for f in msgspec.structs.fields(_Event) if f.name != "args"]


def _coerce_event(raw: Any) -> _Event | None:
    if not isinstance(raw, dict):
        return None
    args = raw.get("args")
    clean_args = None
    if isinstance(args, dict):
        clean = {}
        for f in _ARGS_FIELDS:
            v = args.get(f.encode_name)
            if v is None:
                continue
            if f.type is msgspec.Raw:
                clean[f.name] = msgspec.Raw(orjson.dumps(v))
                continue
            with contextlib.suppress(msgspec.ValidationError):
                clean[f.name] = msgspec.convert(v, f.type, strict=False)
        clean_args = _Args(**clean)
    out = {}
    for f in _EVENT_FIELDS:
        v = raw.get(f.name)
        if v is None:
            continue
        try:
            out[f.name] = msgspec.convert(v, f.type, strict=False)
        except msgspec.ValidationError:
            out[f.name] = str(v) if f.name in ("name", "cat", "ph") else None
    return _Event(args=clean_args, **{k: v for k, v in out.items() if v is not None})


def _raw_json(raw: msgspec.Raw) -> Any:
    return orjson.loads(bytes(raw)) if len(raw) else None


def _meta(trace: _Trace) -> dict[str, Any]:
    dist = _raw_json(trace.distributedInfo)
    props = _raw_json(trace.deviceProperties)
    if props is None:
        props = _raw_json(trace.computeProperties)  # ROCm / older profilers
    rank = dist.get("rank") if isinstance(dist, dict) else None
    return {
        "distributed_info": dist if isinstance(dist, dict) else None,
        "rank_in_file": rank if isinstance(rank, int) else None,
        "device_properties": props if isinstance(props, list) else [],
        "schema_version": _raw_json(trace.schemaVersion),
        "trace_name": trace.traceName,
        "base_time_ns": trace.baseTimeNanoseconds,
        "parser_version": PARSER_VERSION,
    }


def _frame_facts(events: pl.DataFrame) -> dict[str, Any]:
    """Small per-file facts kept in the cache's metadata, so a warm open reads no frames."""
    if events.is_empty():
        return {"min_ts": None, "max_end": None, "n_events": 0, "n_kernels": 0, "step_names": []}
    steps = events.filter(pl.col("name").str.contains("ProfilerStep", literal=True))
    row = events.select(
        pl.col("ts").min().alias("min_ts"),
        (pl.col("ts") + pl.col("dur")).max().alias("max_end"),
        pl.len().alias("n_events"),
        (pl.col("kind") == "kernel").sum().alias("n_kernels"),
    ).row(0, named=True)
    row["step_names"] = sorted(steps["name"].unique().drop_nulls().to_list())
    return row


# ---------------------------------------------------------------------------------------------
# events -> columns


def _us_to_ns(values: list[Any]) -> pl.Series:
    """Microseconds (int or float) -> exact integer ns.

    Multiplying a float like 1.6e15 by 1000 would leave the 2**53 range, so the whole and the
    fractional parts are converted apart.
    """
    s = pl.Series(values, dtype=pl.Float64, strict=False)
    whole = s.floor()
    frac_ns = ((s - whole) * 1000.0).round(0)
    return (whole.cast(pl.Int64) * 1000 + frac_ns.cast(pl.Int64)).rename("ts")


def _int_or_none(v: Any) -> int | None:
    if isinstance(v, int):
        return v
    if isinstance(v, str):
        s = v.strip()
        if s.lstrip("-").isdigit():
            return int(s)
    return None


def _ints(name: str, values: list[Any]) -> pl.Series:
    """Ints as they are, digit strings parsed ("12"), any other string null - in Rust."""
    return pl.Series(name, values, dtype=pl.Int64, strict=False)


def _label_ints(labels: pl.Series) -> pl.Series:
    """'7', 'stream 7', '0x1', 'stream 0x1' (ROCm) -> int; anything else null."""
    body = labels.str.strip_prefix("stream").str.strip_chars()
    hexa = body.str.to_lowercase().str.strip_prefix("0x")
    is_hex = body.str.to_lowercase().str.starts_with("0x")
    return pl.select(
        pl.when(is_hex)
        .then(hexa.str.to_integer(base=16, strict=False))
        .otherwise(body.str.to_integer(base=10, strict=False))
    ).to_series()


def _streams(args: list[_Args], tids: list[Any], tid_col: pl.Series) -> pl.Series:
    """args.stream, else a legacy "stream N" tid; labels parsed only where there are any.

    Text is spotted by counting: an int column has more nulls than the list has Nones only
    where some values were not ints, so the common all-int trace costs one pass, not three.
    """
    raw = [a.stream for a in args]
    out = _ints("stream", raw)
    if out.null_count() > raw.count(None):
        str_streams = [x if type(x) is str else None for x in raw]
        out = out.fill_null(_label_ints(pl.Series(str_streams, dtype=pl.String)))
    if tid_col.null_count() > tids.count(None):
        stream_tids = [t if type(t) is str and t.startswith("stream") else None for t in tids]
        if any(t is not None for t in stream_tids):
            from_tid = _label_ints(pl.Series(stream_tids, dtype=pl.String))
            out = pl.select(pl.when(pl.Series(raw).is_null()).then(from_tid).otherwise(out))
            out = out.to_series()
    return out.rename("stream")


def build_frames(chunks: Iterable[list[_Event]]) -> dict[str, pl.DataFrame]:
    """The frames of a file whose events come in chunks (each chunk's structs are freed before
    the next is decoded)."""
    parts: dict[str, list[pl.DataFrame]] = {"events": [], "flows": [], "threads": []}
    n_complete = 0
    for events in chunks:
        complete = [e for e in events if e.ph == "X"]
        rest = [e for e in events if e.ph != "X"] if len(complete) < len(events) else []
        del events
        if complete:
            parts["events"].append(_events_frame(complete, first_idx=n_complete))
            n_complete += len(complete)
            del complete
        parts["flows"].append(_flows_frame([e for e in rest if e.ph in ("s", "f", "t")]))
        parts["threads"].append(_threads_frame([e for e in rest if e.ph == "M"]))
    return {
        name: pl.concat(frames, rechunk=False) if frames else empty(name)
        for name, frames in parts.items()
    }


def _events_frame(evs: list[_Event], first_idx: int = 0) -> pl.DataFrame:
    """`first_idx`: the file-wide position of the first event (idx counts complete events in
    file order)."""
    if not evs:
        return empty("events")
    no_args = _Args()
    args = [e.args or no_args for e in evs]
    cats = pl.Series("cat", [e.cat for e in evs], dtype=pl.String)
    kinds = {c: kind_of_category(c) for c in cats.unique().to_list()}
    tids = [e.tid for e in evs]
    cols: dict[str, pl.Series] = {}

    def put(name: str, values: list[Any]) -> None:
        cols[name] = pl.Series(name, values, dtype=EVENTS_SCHEMA[name], strict=False)

    cols["idx"] = pl.int_range(first_idx, first_idx + len(evs), dtype=pl.UInt32, eager=True).rename(
        "idx"
    )
    cols["ts"] = _us_to_ns([e.ts for e in evs]).rename("ts")
    cols["dur"] = _us_to_ns([e.dur if e.dur is not None else 0.0 for e in evs]).rename("dur")
    put("name", [e.name for e in evs])  # int names become text (strict=False)
    cols["cat"] = cats
    cols["kind"] = cats.replace_strict(kinds, return_dtype=EVENTS_SCHEMA["kind"]).rename("kind")
    cols["pid"] = _ints("pid", [e.pid for e in evs])
    cols["tid"] = _ints("tid", tids)
    cols["stream"] = _streams(args, tids, cols["tid"])
    put("correlation", [a.correlation for a in args])
    put("external_id", [a.external_id for a in args])
    legacy = [a.external_id_legacy for a in args]  # old profilers: "external id"
    if legacy.count(None) < len(legacy):
        cols["external_id"] = cols["external_id"].fill_null(_ints("external_id", legacy))
    # Most args live on a few kinds of rows (launch dimensions on kernels, bytes on copies,
    # shapes on cpu ops): read each only where it can be, and leave the rest null.
    n = len(evs)
    kind = cols["kind"]
    gpu_rows = kind.is_in(GPU_KINDS).arg_true().to_list()
    copy_rows = kind.is_in(COPY_KINDS).arg_true().to_list()
    kernel_rows = kind.is_in(KERNEL_KINDS).arg_true().to_list()
    sync_rows = kind.is_in(("sync",)).arg_true().to_list()
    cpu_rows = kind.is_in(SHAPE_KINDS).arg_true().to_list()
    gpu_args = [args[i] for i in gpu_rows]
    copy_args = [args[i] for i in copy_rows]
    kernel_args = [args[i] for i in kernel_rows]
    cpu_args = [args[i] for i in cpu_rows]
    cols["device"] = _sparse(gpu_args, "device", gpu_rows, n)
    cols["bytes"] = _sparse(copy_args, "bytes", copy_rows, n)
    cols["bandwidth"] = _sparse(copy_args, "bandwidth", copy_rows, n)
    cols["grid"] = _dim3(_raw_texts(kernel_args, "grid"), kernel_rows, n)
    cols["block"] = _dim3(_raw_texts(kernel_args, "block"), kernel_rows, n)
    cols["registers"] = _sparse(kernel_args, "registers", kernel_rows, n)
    cols["shared_memory"] = _sparse(kernel_args, "shared_memory", kernel_rows, n)
    cols["occupancy"] = _sparse(kernel_args, "occupancy", kernel_rows, n)
    cols["sync_kind"] = _sparse([args[i] for i in sync_rows], "sync_kind", sync_rows, n)
    cols["input_dims"] = _spread(_raw_texts(cpu_args, "input_dims"), cpu_rows, n)
    cols["input_type"] = _spread(_raw_texts(cpu_args, "input_type"), cpu_rows, n)
    cols["seq"] = _sparse(cpu_args, "seq", cpu_rows, n)
    df = pl.DataFrame(cols)
    # Legacy traces put kernels on a device pid with a "stream N" tid; keep tid numeric there.
    return df.with_columns(
        pl.when(pl.col("tid").is_null() & pl.col("stream").is_not_null())
        .then(pl.col("stream"))
        .otherwise(pl.col("tid"))
        .alias("tid")
    ).select(list(EVENTS_SCHEMA))


def _str_or_none(v: Any) -> str | None:
    return None if v is None else str(v)


def _nulls(name: str, n: int, dtype: pl.DataType) -> pl.Series:
    """n nulls, without a Python list (polars scans a list of Nones for a first value)."""
    return pl.Series(name, [], dtype=dtype).extend_constant(None, n)


def _sparse(sub: list[_Args], field: str, rows: list[int], n: int) -> pl.Series:
    """One arg on the given rows (`sub` holds their args; null elsewhere), typed as the
    schema says."""
    dtype = EVENTS_SCHEMA[field]
    out = _nulls(field, n, dtype)
    if rows:
        values = pl.Series(list(map(operator.attrgetter(field), sub)), dtype=dtype, strict=False)
        out = out.scatter(rows, values)
    return out


def _raw_texts(sub: list[_Args], field: str) -> pl.Series:
    """The JSON text of one Raw arg of each of `sub` (null where absent), kept as text and
    decoded later, by polars, only where an analysis needs it. The raws are joined into one
    buffer and split by polars: no Python object per value (NUL never occurs in JSON text)."""
    joined = b"\x00".join(map(operator.attrgetter(field), sub)).decode("utf-8", "replace")
    parts = pl.Series(field, [joined], dtype=pl.String).str.split("\x00").explode()
    return pl.select(pl.when(parts != "").then(parts)).to_series()


def _spread(values: pl.Series, rows: list[int], n: int) -> pl.Series:
    """`values` of the given rows into a column of n rows, null elsewhere."""
    if len(rows) == n:
        return values
    return _nulls(values.name, n, values.dtype).scatter(rows, values)


#: "[x, y, z]" launch dimensions; anything else (triton's "grid(1,)", two numbers) is not.
_DIM3 = r"^\[\s*(-?\d+)\s*,\s*(-?\d+)\s*,\s*(-?\d+)\s*\]$"


def _dim3(text: pl.Series, rows: list[int], n: int) -> pl.Series:
    """Launch dimensions of the given rows as a fixed-size array of n rows (null elsewhere and
    where the text is not three integers). A regex in polars, several times cheaper than
    decoding JSON, and it cannot fail on odd input."""
    groups = text.str.extract_groups(_DIM3)
    parts = [
        _spread(groups.struct.field(g).cast(pl.Int64, strict=False), rows, n)
        for g in ("1", "2", "3")
    ]
    whole = pl.all_horizontal(p.is_not_null() for p in parts)
    return pl.select(pl.when(whole).then(pl.concat_arr(parts))).to_series().rename(text.name)


def _flows_frame(evs: list[_Event]) -> pl.DataFrame:
    if not evs:
        return empty("flows")
    df = pl.DataFrame(
        {
            "id": _ints("id", [e.id for e in evs]),
            "ph": pl.Series([e.ph for e in evs], dtype=pl.String),
            "cat": pl.Series([e.cat for e in evs], dtype=pl.String),
            "ts": _us_to_ns([e.ts for e in evs]),
            "pid": _ints("pid", [e.pid for e in evs]),
            "tid": _ints("tid", [e.tid for e in evs]),
        }
    )
    return df.select(list(FLOWS_SCHEMA))


def _threads_frame(evs: list[_Event]) -> pl.DataFrame:
    rows = []
    for e in evs:
        a = e.args
        if a is None:
            continue
        value = a.name if a.name is not None else a.labels
        if value is None and a.sort_index is not None:
            value = a.sort_index
        rows.append((_int_or_none(e.pid), _int_or_none(e.tid), _str_or_none(e.name), value))
    if not rows:
        return empty("threads")
    pid, tid, key, value = zip(*rows, strict=False)
    return pl.DataFrame(
        {
            "pid": pl.Series(pid, dtype=pl.Int64),
            "tid": pl.Series(tid, dtype=pl.Int64),
            "key": pl.Series(key, dtype=pl.String),
            "value": pl.Series([_str_or_none(v) for v in value], dtype=pl.String),
        }
    ).select(list(THREADS_SCHEMA))


assert set(_CAT_KIND.values()) <= set(KINDS)
