"""A copy of a rank's trace with queue-length and memory-bandwidth counters added.

HTA's `TraceAnalysis.generate_trace_with_counters`: the original trace, every event kept as
written, plus Chrome-trace counter events ("ph": "C") that Perfetto and chrome://tracing draw
as tracks:
- "Queue Length", one series per stream ("id": the stream), args {"Queue Length": n};
- one series per memory kind ("Memcpy DtoH", "Memset", ...), args {"Memcpy BW": GB/s}.
Each counter has the pid (and tid) of the GPU events it describes and "ts" in microseconds on
the file's own clock, written as an exact decimal (no float rounding of ns timestamps).

Differences from HTA, on purpose:
- the output goes where the caller says, never beside the source trace unless
  `allow_in_trace_dir=True` (HTA writes `<name>_with_counters.json` next to the trace); the
  source itself is never overwritten;
- the copy is byte-for-byte the source's top-level values with the counters appended to
  `traceEvents` (HTA re-serialises the whole trace with indent=2), gzipped when `out_path`
  ends with ".gz" (HTA always gzips, even into a ".json" name);
- counters carry a tid as well (HTA's have pid only); an event whose pid is not a number in
  the file gets pid 0.
"""

from __future__ import annotations

import gzip
from collections.abc import Iterable
from pathlib import Path
from typing import NamedTuple

import msgspec
import orjson
import polars as pl

from hta_tui.analysis.memory import memory_bw_series
from hta_tui.analysis.queue import queue_length_series
from hta_tui.trace.parse import read_bytes

TIME_SERIES: tuple[str, ...] = ("queue_length", "memory_bw")
QUEUE_COUNTER = "Queue Length"
MEMORY_COUNTER = "Memcpy BW"


class CountersWritten(NamedTuple):
    path: Path
    queue_length: int  # counter events added
    memory_bw: int


def _us_text(ns: pl.Expr) -> pl.Expr:
    """Integer ns -> exact decimal us text: 1500 -> "1.500", 2000 -> "2"."""
    whole = (ns // 1000).cast(pl.String)
    frac = (ns % 1000).cast(pl.String).str.zfill(3)
    return pl.when(ns % 1000 == 0).then(whole).otherwise(pl.concat_str(whole, pl.lit("."), frac))


def counter_events(
    series: pl.DataFrame,
    *,
    name: pl.Expr,
    arg: str,
    value: str,
    series_id: str | None = None,
) -> bytes:
    """Chrome-trace counter events for a step series, one JSON object per row, joined by
    commas (b"" for an empty series): ready to go inside a JSON list.

    `name` gives each row's counter name, `arg` the key of its args, `value` the value column
    and `series_id` an optional column written as "id" (Chrome keys counters by name + id).
    """
    if series.is_empty():
        return b""
    df = series.with_columns(name.cast(pl.String).alias("__name"))
    # JSON-escape each distinct counter name once (there are a handful)
    distinct = df["__name"].unique().drop_nulls().to_list()
    quoted = {n: orjson.dumps(n).decode() for n in distinct}
    json_name = pl.col("__name").replace_strict(quoted, default='""', return_dtype=pl.String)
    arg_json = orjson.dumps(arg).decode()
    parts: list[pl.Expr | str] = ['{"ph":"C","name":', json_name]
    if series_id is not None:
        parts += [',"id":', pl.col(series_id).cast(pl.String)]
    parts += [
        ',"pid":',
        pl.col("pid").fill_null(0).cast(pl.String),
        ',"tid":',
        pl.col("tid").fill_null(0).cast(pl.String),
        ',"ts":',
        _us_text(pl.col("ts")),
        ',"args":{',
        arg_json,
        ":",
        pl.col(value).cast(pl.String),
        "}}",
    ]
    exprs = [pl.lit(p) if isinstance(p, str) else p for p in parts]
    text = df.select(pl.concat_str(exprs).alias("ev"))["ev"]
    return text.str.join(",").item().encode()


def _check_target(src: Path, out: Path, *, allow_in_trace_dir: bool) -> None:
    src_r, out_r = src.resolve(), out.resolve()
    if out_r == src_r:
        raise ValueError(f"refusing to overwrite the source trace {src}")
    if not allow_in_trace_dir and out_r.is_relative_to(src_r.parent):
        raise ValueError(
            f"refusing to write {out} inside the trace folder {src_r.parent} "
            "(pass allow_in_trace_dir=True to allow it)"
        )


def _splice(raw_top: dict[str, msgspec.Raw], counters: list[bytes]) -> bytes:
    """The source's top-level object with `counters` appended to its traceEvents."""
    out = [b"{"]
    for i, (key, raw) in enumerate(raw_top.items()):
        val = bytes(raw)
        if key == "traceEvents" and counters:
            inner = val[1:-1].strip()
            val = b"[" + inner + (b"," if inner else b"") + b",".join(counters) + b"]"
        out += [b"," if i else b"", orjson.dumps(key), b":", val]
    if "traceEvents" not in raw_top and counters:
        out += [b"," if raw_top else b"", b'"traceEvents":[', b",".join(counters), b"]"]
    out.append(b"}")
    return b"".join(out)


def write_counters_trace(
    src_trace_path: str | Path,
    events_frame: pl.DataFrame,
    out_path: str | Path,
    *,
    rank: int,
    time_series: Iterable[str] = TIME_SERIES,
    hta_compat: bool = False,
    allow_in_trace_dir: bool = False,
) -> CountersWritten:
    """Write `src_trace_path` plus counters to `out_path` (see the module docstring).

    `events_frame` is the parsed `events` frame of that same file (rank `rank`); the series
    are `queue_length_series` and `memory_bw_series` of it (`time_series` picks which).
    Raises ValueError for a target inside the source's folder (unless allowed) or equal to
    the source, and for an unknown series name. A rank without GPU work gets an unchanged
    copy.
    """
    src, out = Path(src_trace_path), Path(out_path)
    wanted = set(time_series)
    unknown = wanted - set(TIME_SERIES)
    if unknown:
        raise ValueError(f"unknown time series {sorted(unknown)}; choose from {TIME_SERIES}")
    _check_target(src, out, allow_in_trace_dir=allow_in_trace_dir)
    ranks = {rank: events_frame}
    chunks: list[bytes] = []
    n_queue = n_mem = 0
    if "queue_length" in wanted:
        q = queue_length_series(ranks, hta_compat=hta_compat)
        n_queue = q.height
        chunks.append(
            counter_events(
                q,
                name=pl.lit(QUEUE_COUNTER),
                arg=QUEUE_COUNTER,
                value="queue_length",
                series_id="stream",
            )
        )
    if "memory_bw" in wanted:
        m = memory_bw_series(ranks, hta_compat=hta_compat)
        n_mem = m.height
        chunks.append(
            counter_events(m, name=pl.col("name"), arg=MEMORY_COUNTER, value="memory_bw_gbps")
        )
    top = msgspec.json.decode(read_bytes(src), type=dict[str, msgspec.Raw])
    data = _splice(top, [c for c in chunks if c])
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(out.name + ".tmp")
    if out.name.endswith(".gz"):
        tmp.write_bytes(gzip.compress(data, compresslevel=6))
    else:
        tmp.write_bytes(data)
    tmp.replace(out)
    return CountersWritten(out, n_queue, n_mem)
