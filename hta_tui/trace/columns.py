"""Decoded events -> the frames of `schema.FRAME_SCHEMAS`.

Each chunk of events becomes plain columns, one Python pass per field: the only per-event
Python work. Everything derived (nanoseconds, kinds, launch dimensions, args spread over the
rows they belong to) is computed once per file by polars. Each polars call has a fixed cost,
and paid for every chunk those calls came to a fifth of the parse.
"""

from __future__ import annotations

import operator
from collections import Counter
from collections.abc import Iterable
from itertools import chain, compress
from typing import Any

import orjson
import polars as pl

from hta_tui.trace.arg_text import arg_texts, distinct_texts, text_blob
from hta_tui.trace.events import (
    KNOWN_PHASES,
    NO_ARGS,
    Decoded,
    Event,
    EventArgs,
    Metadata,
    annotations,
    args_of,
)
from hta_tui.trace.fields import reader
from hta_tui.trace.memory import memory_columns, memory_frame
from hta_tui.trace.numbers import (
    MAX_DUR_NS,
    InexactNumbers,
    dropped_reasons,
    null_column,
    plain_us,
    range_reasons,
    resolve_ns,
    text_ns,
    time_column,
)
from hta_tui.trace.schema import (
    COMM_COLUMNS,
    EVENTS_SCHEMA,
    FLOWS_SCHEMA,
    KIND,
    KINDS,
    LAUNCH_KINDS,
    THREADS_SCHEMA,
    empty,
)
from hta_tui.trace.series import column

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
assert set(_CAT_KIND.values()) <= set(KINDS)


def kind_of_category(cat: str | None) -> str:
    """Normalised kind for a category, in any dialect (legacy capitalised, xpu_/mtia_ ...)."""
    if not cat:
        return "other"
    low = cat.lower()
    kind = _CAT_KIND.get(low)
    if kind is not None:
        return kind
    for suffix in ("runtime", "driver", "memcpy", "memset"):
        if low.endswith("_" + suffix):
            return suffix
    if low.endswith("kernel"):
        return "kernel"
    return "other"


#: Most args live on a few kinds of rows (launch dimensions on kernels, bytes on copies,
#: shapes on cpu ops): each is read only where it can be and is null elsewhere. "other" is in
#: every family with args: unknown categories keep whatever args they carry.
#: family -> (its kinds, typed args, args kept as JSON text)
_FAMILIES: dict[str, tuple[tuple[str, ...], tuple[str, ...], tuple[str, ...]]] = {
    "gpu": (("kernel", "memcpy", "memset", "sync", "gpu_annotation", "other"), ("device",), ()),
    "copy": (("memcpy", "memset", "other"), ("bytes", "bandwidth"), ()),
    "kernel": (
        ("kernel", "other"),
        ("registers", "shared_memory", "occupancy", "blocks_per_sm"),
        ("grid", "block"),
    ),
    "sync": (("sync",), ("sync_kind", "wait_on_stream"), ()),
    "shape": (
        ("cpu_op", "annotation", "python", "other"),
        ("seq", "call_stack"),
        ("input_dims", "input_type"),
    ),
    "comm": (("cpu_op", "kernel", "other"), COMM_COLUMNS, ()),
    "python": (("python",), ("python_id", "python_parent_id", "python_module_id"), ()),
    # CUDA-graph kernel annotations: the first of four args (`events.annotations`)
    "graph": (("kernel",), ("annotation",), ()),  # (read by `events.annotations`)
}
#: Families read only on the rows where one field is present: collective args sit on a few
#: record_param_comms and NCCL kernel rows among many cpu ops and kernels, so one pass finds
#: those rows and the other fields are read there alone.
_ONLY_WITH: dict[str, str] = {"comm": "coll_name"}


def build_frames(
    chunks: Iterable[list[Event]], dropped: Counter[str] | None = None
) -> dict[str, pl.DataFrame]:
    """The frames of a file whose events come in chunks (each chunk's structs can be freed
    before the next is decoded). Events that cannot be used are left out and counted by
    reason in `dropped`. A chunk decoded with floats that cannot keep its numbers exact
    (`numbers.InexactNumbers`) is decoded again (`events.Decoded`). A chunk is used up before
    the next is asked for: its Raw args may be views into a buffer the next one reuses."""
    gathered = _Gathered(dropped)
    for events in chunks:
        try:
            gathered.add(events)
        except InexactNumbers:
            if not isinstance(events, Decoded):
                raise
            gathered.add(events.exact())
        del events
    return gathered.frames()


class _Gathered:
    """A file's events as plain columns, chunk by chunk."""

    def __init__(self, dropped: Counter[str] | None = None) -> None:
        self.dropped: Counter[str] = Counter() if dropped is None else dropped
        self.n = 0  # complete events so far: the next one's idx
        self.main: list[pl.DataFrame] = []
        self.family: dict[str, list[pl.DataFrame]] = {f: [] for f in _FAMILIES}
        self.texts: dict[str, list[bytes]] = {t: [] for f in _FAMILIES.values() for t in f[2]}
        self.flows: list[pl.DataFrame] = []
        self.threads: list[pl.DataFrame] = []
        self.memory: list[pl.DataFrame] = []

    def add(self, events: list[Event]) -> None:
        """One chunk's events; raises InexactNumbers (numbers.plain_us) before it changes
        anything."""
        if type(events) is Metadata:  # every event is ph "M" (`parse._metadata_chunk`)
            threads = _metadata_frame(events)
            if not threads.is_empty():
                self.threads.append(threads)
            return
        rest = [e for e in events if e.ph != "X"]
        if not rest:
            self._complete(events)
            return
        rest_phs = _PH(rest)
        kinds = set(rest_phs)
        flows = None
        if kinds & _FLOW_PHASES:
            flows = _flows_columns([e for e in rest if e.ph in _FLOW_PHASES])
        memory = memory_columns(rest) if "i" in kinds else None
        complete = [e for e in events if e.ph == "X"]
        if complete:
            self._complete(complete)
        if not kinds <= KNOWN_PHASES:
            odd = Counter(p for p in rest_phs if p not in KNOWN_PHASES)
            self.dropped["no ph"] += odd.pop("", 0)
            self.dropped["unknown ph"] += sum(odd.values())
        if flows is not None:
            self.flows.append(flows)
        if "M" in kinds:
            threads = _threads_frame([e for e in rest if e.ph == "M"])
            if not threads.is_empty():
                self.threads.append(threads)
        if memory is not None:
            self.memory.append(memory)

    def _complete(self, evs: list[Event]) -> None:
        times = _times(evs)
        args = args_of(evs)
        tids = _TID(evs)
        cats = column("cat", _CAT(evs), pl.String)
        tid = _ints("tid", tids)
        cols = [
            *times,
            column("name", _NAME(evs), pl.String, strict=False),
            cats,
            _ints("pid", _PID(evs)),
            tid,
            _streams(args, tids, tid),
            _typed(args, "correlation"),
            _external_ids(args),
        ]
        self.main.append(pl.DataFrame(cols))
        first, self.n = self.n, self.n + len(evs)
        rows_of = _rows_by_kind(cats)
        for family, (kinds, fields, texts) in _FAMILIES.items():
            key = _ONLY_WITH.get(family)
            if key is not None:
                rows = _rows_with(args, key)
            else:
                rows = list(chain.from_iterable(rows_of.get(k, ()) for k in kinds))
            if not rows:
                continue
            sub = [args[rows[0]]] if len(rows) == 1 else operator.itemgetter(*rows)(args)
            idx = column("idx", rows, pl.UInt32) + first
            self.family[family].append(pl.DataFrame([idx, *(_typed(sub, f) for f in fields)]))
            for field in texts:
                self.texts[field].append(text_blob(_text_arg(field, sub)))

    def frames(self) -> dict[str, pl.DataFrame]:
        return {
            "events": self._events(),
            "flows": _flows_frame(self.flows, self.dropped),
            "threads": pl.concat(self.threads) if self.threads else empty("threads"),
            "memory": memory_frame(self.memory),
        }

    def _events(self) -> pl.DataFrame:
        if not self.main:
            return empty("events")
        # "diagonal": a chunk has ts_us or ts (`_times`), and `dropped` only if it dropped
        main = pl.concat(self.main, how="diagonal")
        self.main.clear()
        if "dropped" not in main.columns:
            main = main.with_columns(pl.lit(None, pl.String).alias("dropped"))
        main = resolve_ns(main, "ts", "dur")
        n = main.height
        kinds = {c: kind_of_category(c) for c in main["cat"].unique().to_list()}
        spread: list[pl.Series | pl.Expr] = []
        for family, (_, fields, texts) in _FAMILIES.items():
            parts = self.family[family]
            if not parts:
                spread += [_nulls(f, n) for f in (*fields, *texts)]
                continue
            frame = pl.concat(parts)
            idx = frame["idx"]
            spread += [_spread(frame[f], idx, n) for f in fields]
            for field in texts:
                kept = EVENTS_SCHEMA[field] == pl.String  # else read as numbers (_dim3)
                text = arg_texts(field, self.texts[field], spaced=kept)
                spread.append(_spread(text, idx, n) if kept else _dim3(text, idx, n))
        reasons = _file_reasons(main)
        by_category = main["cat"].replace_strict(kinds, return_dtype=KIND)
        kind = _kind(main, by_category) if _MTIA in kinds else by_category
        out = main.with_columns(
            pl.int_range(n, dtype=pl.UInt32).alias("idx"),
            pl.col("dur").fill_null(0),
            kind.alias("kind"),
            # A CPU-side call has no stream whatever its args say: ROCm's hip calls carry
            # `"stream": "0x0"` (HTA: -1), which would make every launch look like GPU work.
            pl.when(~pl.lit(kind.is_in(LAUNCH_KINDS))).then(pl.col("stream")).alias("stream"),
            # Legacy traces put kernels on a device pid with a "stream N" tid: keep it numeric.
            pl.when(pl.col("tid").is_null() & pl.col("stream").is_not_null())
            .then(pl.col("stream"))
            .otherwise(pl.col("tid"))
            .alias("tid"),
            *spread,
        )
        if reasons is not None:  # rows with a reason are counted and left out
            for reason, count in reasons.drop_nulls().value_counts().iter_rows():
                self.dropped[reason] += count
            out = out.filter(reasons.is_null())
            out = out.with_columns(pl.int_range(out.height, dtype=pl.UInt32).alias("idx"))
        return out.select(list(EVENTS_SCHEMA))


_MTIA = "mtia_ccp_events"


def _kind(main: pl.DataFrame, by_category: pl.Series) -> pl.Series:
    """Kinds that need the name too: MTIA's device ops (`mtia_ccp_events`) are kernels, or
    copies when named `dma_*` (HTA's MEMORY). Their args are read as "other" rows' are
    (every family), since one category holds both. Called only for files with such ops, so
    other files' names are not read here."""
    mtia = pl.col("cat") == _MTIA
    dma = pl.col("name").str.starts_with("dma")
    return main.select(
        pl.when(mtia & dma)
        .then(pl.lit("memcpy", KIND))
        .when(mtia)
        .then(pl.lit("kernel", KIND))
        .otherwise(pl.lit(by_category))
    ).to_series()


def _rows_by_kind(cats: pl.Series) -> dict[str, list[int]]:
    """Positions of each kind's rows (in no particular order: each row keeps its idx)."""
    by_cat = cats.to_frame().with_row_index("i").group_by("cat").agg("i")
    out: dict[str, list[int]] = {}
    for cat, rows in by_cat.iter_rows():
        out.setdefault(kind_of_category(cat), []).extend(rows)
    return out


def _rows_with(args: list[EventArgs], field: str) -> list[int]:
    """The rows whose `field` is present and not empty (whatever their kind): the values
    read by one comprehension (`fields.reader`), the rows picked by `compress` in C."""
    return list(compress(range(len(args)), reader(field)(args)))


# ---------------------------------------------------------------------------------------------
# one column from Python values


def _ints(name: str, values: list[Any]) -> pl.Series:
    """Ints as they are, digit strings parsed ("12"), any other string null - in Rust."""
    return column(name, values, pl.Int64, strict=False)


def _typed(args: list[EventArgs] | tuple[EventArgs, ...], field: str) -> pl.Series:
    dtype = EVENTS_SCHEMA[field]
    values = annotations(args) if field == "annotation" else reader(field)(args)
    if field in _JSON_TEXT:  # a few collective rows: lists back to their JSON text
        values = [orjson.dumps(v).decode() if isinstance(v, list) else v for v in values]
    return column(field, values, dtype, strict=False)


#: Typed fields that may hold a JSON list, kept as its text.
_JSON_TEXT = frozenset({"pg_ranks"})


def _text_arg(field: str, args: list[EventArgs]) -> list[Any]:
    """One Raw arg of each event; `input_dims` also from the 2021 spelling `Input dims` (an
    old trace's operators would otherwise all share one empty shape)."""
    texts = reader(field)(args)
    if field != "input_dims":
        return texts
    legacy = reader("input_dims_legacy")(args)
    if not b"".join(legacy):  # the usual case: no event of the chunk spells it so
        return texts
    return [t or old for t, old in zip(texts, legacy, strict=True)]


def _external_ids(args: list[EventArgs]) -> pl.Series:
    """The "External id" arg, or old profilers' "external id"."""
    out = _typed(args, "external_id")
    legacy = [a.external_id_legacy for a in args]
    if legacy.count(None) < len(legacy):
        out = out.fill_null(_ints("external_id", legacy))
    return out


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


def _streams(args: list[EventArgs], tids: list[Any], tid_col: pl.Series) -> pl.Series:
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
            # (a stream of text beside numbers is no one type: its nulls are told apart here)
            no_stream = pl.Series([x is None for x in raw], dtype=pl.Boolean)
            out = pl.select(pl.when(no_stream).then(from_tid).otherwise(out))
            out = out.to_series()
    return out.rename("stream")


# ---------------------------------------------------------------------------------------------
# derived once per file


_PH, _TS, _DUR, _CAT, _NAME, _PID, _TID, _ID = map(
    reader, ("ph", "ts", "dur", "cat", "name", "pid", "tid", "id")
)


_FLOW_PHASES = frozenset({"s", "f", "t"})


def _times(evs: list[Event]) -> list[pl.Series]:
    """ts and dur (`numbers.time_column`: ns read from text, or float microseconds), and
    why each event cannot be used where the chunk's numbers are not all plain (absent
    elsewhere; `_file_reasons` adds the bounds of plain durations)."""
    ts_values, dur_values = _TS(evs), _DUR(evs)
    ts_us = plain_us("ts", ts_values)
    dur_us = plain_us("dur", dur_values, optional=True)
    if ts_us is not None and dur_us is not None:
        return [ts_us.rename("ts_us"), dur_us.rename("dur_us")]
    ts_text, ts = text_ns("ts", ts_values)
    dur_text, dur = text_ns("dur", dur_values)
    times = pl.DataFrame([ts, dur])
    why = dropped_reasons(pl.DataFrame([ts_text, dur_text]), times)
    return [ts, dur] if why is None else [ts, dur, why]


def _file_reasons(main: pl.DataFrame) -> pl.Series | None:
    """Why each complete event cannot be used (null where it can); None when every event
    can (the common case costs a count and two bounds)."""
    dur = main["dur"]
    if (
        main["dropped"].null_count() == main.height
        and (dur.min() or 0) >= 0  # type: ignore[operator]
        and (dur.max() or 0) <= MAX_DUR_NS  # type: ignore[operator]
    ):
        return None
    return main.select(pl.coalesce("dropped", range_reasons(pl.col("dur")))).to_series()


def _nulls(name: str, n: int, dtype: pl.DataType | None = None) -> pl.Series:
    """n nulls of the column's type."""
    return null_column(name, n, dtype or EVENTS_SCHEMA[name])


def _spread(values: pl.Series, idx: pl.Series, n: int) -> pl.Series:
    """`values` of rows `idx` into a column of n rows, null elsewhere."""
    return _nulls(values.name, n, values.dtype).scatter(idx, values)


#: "[x, y, z]" launch dimensions; anything else (triton's "grid(1,)", two numbers) is not.
_DIM3 = r"^\[\s*(-?\d+)\s*,\s*(-?\d+)\s*,\s*(-?\d+)\s*\]$"


def _dim3(text: pl.Series, idx: pl.Series, n: int) -> pl.Series:
    """Launch dimensions as a fixed-size array (null where the text is not three integers).
    Text functions of polars, several times cheaper than decoding JSON, and they cannot fail
    on odd input: a regex says which texts are three integers, a split reads them. Read once
    per distinct text (a trace launches a few shapes many times), then placed by gather
    (polars cannot scatter arrays)."""
    distinct, where = distinct_texts(text)
    split = distinct.str.strip_chars("[]").str.split_exact(",", 2).struct.unnest()
    parts = [split.to_series(i).str.strip_chars().str.to_integer(strict=False) for i in range(3)]
    valid = distinct.str.contains(_DIM3)
    arrays = pl.select(pl.when(valid).then(pl.concat_arr(parts))).to_series()
    return arrays.gather(_spread(where, idx, n)).alias(text.name)


# ---------------------------------------------------------------------------------------------
# flows and metadata


def _flows_columns(evs: list[Event]) -> pl.DataFrame:
    return pl.DataFrame(
        [
            _ints("id", _ID(evs)),
            column("ph", _PH(evs), pl.String),
            column("cat", _CAT(evs), pl.String),
            time_column("ts", _TS(evs)),
            _ints("pid", _PID(evs)),
            _ints("tid", _TID(evs)),
        ]
    )


def _flows_frame(parts: list[pl.DataFrame], dropped: Counter[str]) -> pl.DataFrame:
    if not parts:
        return empty("flows")
    flows = resolve_ns(pl.concat(parts, how="diagonal"), "ts")
    bad = flows["ts"].null_count()
    if bad:
        dropped["flow ts is not a number"] += bad
        flows = flows.drop_nulls("ts")
    return flows.select(list(FLOWS_SCHEMA))


def _int_or_none(v: Any) -> int | None:
    if isinstance(v, int):
        return v
    if isinstance(v, str):
        s = v.strip()
        if s.lstrip("-").isdigit():
            return int(s)
    return None


def _str_or_none(v: Any) -> str | None:
    return None if v is None else str(v)


def _threads_frame(evs: list[Event]) -> pl.DataFrame:
    """The metadata events' names (process_name, thread_name, labels, sort indexes), one
    column at a time: a trace can name tens of thousands of processes and threads (310k
    metadata events in a real MTIA trace), and a Python pass per event over five fields was
    a third of its parse. A column whose values are not all of the usual type (a pid given
    as text) is read value by value, as before."""
    args = [e.args for e in evs]
    keep = [a is not None and a is not NO_ARGS for a in args]
    if not all(keep):
        evs, args = list(compress(evs, keep)), list(compress(args, keep))
    if not evs:
        return empty("threads")
    name = _text_column("value", _ARG_NAME(args))
    labels = column("labels", _LABELS(args), pl.String, strict=False)
    sort = column("sort_index", _SORT_INDEX(args), pl.Int64, strict=False).cast(pl.String)
    value = pl.select(pl.coalesce(name, labels, sort).alias("value")).to_series()
    key = _text_column("key", _NAME(evs))
    pid, tid = _int_column("pid", _PID(evs)), _int_column("tid", _TID(evs))
    return pl.DataFrame([pid, tid, key, value]).select(list(THREADS_SCHEMA))


_ARG_NAME, _LABELS, _SORT_INDEX = map(reader, ("name", "labels", "sort_index"))


def _metadata_frame(evs: Metadata) -> pl.DataFrame:
    """`_threads_frame` of a chunk of metadata events only, each with args
    (`parse._metadata_chunk`): the name or labels chosen in one pass, one column instead of
    two, the same values (the first of name, labels and sort index given, as text)."""
    args = [e.args for e in evs]
    value = _text_column("value", [a.labels if a.name is None else a.name for a in args])
    sorts = _SORT_INDEX(args)
    if sorts.count(None) != len(sorts):  # (an index past Int64 is null, as before)
        sort = column("sort_index", sorts, pl.Int64, strict=False).cast(pl.String)
        value = pl.select(pl.coalesce(value, sort).alias("value")).to_series()
    key = _text_column("key", _NAME(evs))
    pid, tid = _int_column("pid", _PID(evs)), _int_column("tid", _TID(evs))
    return pl.DataFrame([pid, tid, key, value])


def _int_column(name: str, values: list[Any]) -> pl.Series:
    """Ints as they are; a column holding anything else is read value by value
    (`_int_or_none`: text with digits, and signs and spaces, is a number too)."""
    try:
        return column(name, values, pl.Int64)
    except Exception:  # not all ints
        return pl.Series(name, [_int_or_none(v) for v in values], dtype=pl.Int64, strict=False)


def _text_column(name: str, values: list[Any]) -> pl.Series:
    """Strings as they are; a column holding anything else (a number) as `str()` of each."""
    try:
        return column(name, values, pl.String)
    except Exception:  # not all strings
        return pl.Series(name, [_str_or_none(v) for v in values], dtype=pl.String)
