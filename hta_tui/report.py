"""The headless front end: the analyses as text tables, one JSON object, or CSV files.

Exit status: 0 when at least one trace loaded, 1 when none did (2, usage errors, comes from
the CLI). Analyses with nothing to say give empty lists, never errors.
"""

from __future__ import annotations

import dataclasses
import sys
import textwrap
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Any, TextIO

import orjson
import polars as pl

from hta_tui import printable as printable_module
from hta_tui import report_json
from hta_tui.analysis import coverage, registry
from hta_tui.analysis.overview import file_table, precompute, summaries_decide
from hta_tui.analysis.tables import csv_for_people, csv_ready
from hta_tui.exec import Backend, BackendError, open_backend
from hta_tui.exec.blobs import TextFile
from hta_tui.exec.parts import RankParts, whole_frame
from hta_tui.exec.rank_work import Texts
from hta_tui.exec.split import (
    Steps,
    job_cached,
    keep_summaries,
    rank_steps,
    run_split,
    work_ahead,
)
from hta_tui.printable import json_printable, printable, printable_frame
from hta_tui.report_text import (
    DEFAULT_ROWS,
    FOLDED,
    SERIES,
    TIME_ORDER,
    terminal_width,
    write_text,
)
from hta_tui.session import open_session
from hta_tui.trace.cache import Cache, take_notices
from hta_tui.trace.model import TraceSet
from hta_tui.trace.parse import dropped_text

#: `shown`, `worker`, `timestamp` say which span each rank's numbers cover; `conflict` why a
#: file of another process that says the same rank is not used
FILE_KEYS = (
    "path",
    "rank",
    "span",
    "shown",
    "worker",
    "timestamp",
    "conflict",
    "status",
    "error",
    "dropped_events",
    "overlapping_on_stream",
)


def build_tables(
    ts: TraceSet,
    *,
    names: list[str] | None = None,
    options: registry.Options | None = None,
    backend: Backend | None = None,
    cache_root: Path | None = None,
    stream: bool = False,
    covered: Steps | None = None,
    texts: bool = False,
) -> dict[str, Any]:
    """ "files" and every selected analysis's tables, in the registry's order.

    The temporal breakdown comes from the per-file summaries (equal to the analysis over the
    frames, see tests/test_overview.py), so `--only temporal_breakdown` reads no frame when
    the cache is warm; with a summary missing, rank by rank as the others
    (`overview.summaries_decide`). The others go through `exec.split`: rank-wise analyses
    rank by rank on `backend` (in this process when None), their results and whole answers
    kept under `cache_root` (not kept when None). `stream`: a long rank-wise table (a row
    per kernel launch) as its ranks' parts (`exec.parts.RankParts`, read one at a time: the
    report's writers take either), not a frame. `covered`: given each rank's steps covered
    that the rank-wise work handed back (for `table_scopes`). `texts`: with each rank's part
    of its JSON text made by the workers (`TEXTS`), for `_write_json`.
    """
    options = options or registry.Options()
    split = {"stream": stream, "covered": covered, "texts": TEXTS if texts else None}
    selected = [a.name for a in registry.select(names)]
    ahead = backend is not None and cache_root is not None and work_ahead(ts, options, backend)
    if ahead:
        backend.warm()  # (its workers get ready while the work is found)
    temporal = "temporal_breakdown" in selected
    made: dict[str, Any] = {}
    # with work for the workers ahead, the files' summaries are read and their table made
    # meanwhile (~1 s of this process at 10,000 files), from when the work is ready to go
    # out (before, it would delay the workers' start): when the summaries answer the
    # temporal breakdown before they are read, they do after (only more held; not
    # `--hta-compat`'s, which the files table does not read)
    decided = ahead and temporal and summaries_decide(ts, hta_compat=options.hta_compat)
    if ahead and (not temporal or options.hta_compat or decided):
        summed = decided
        rest = [n for n in selected if n != "temporal_breakdown" or not summed]
        with ThreadPoolExecutor(1, thread_name_prefix="files-table") as meanwhile:
            files: list[Future[pl.DataFrame]] = []

            def start() -> None:
                files.append(meanwhile.submit(_files_table, ts, cache_root))

            if rest:
                made = run_split(
                    ts, rest, options, backend, cache_root=cache_root, meanwhile=start, **split
                )
            if not files:
                start()
            tables: dict[str, Any] = {"files": files[0].result()}
    else:
        tables = {"files": _files_table(ts, cache_root)}
        summed = temporal and summaries_decide(ts, hta_compat=options.hta_compat)
        rest = [n for n in selected if n != "temporal_breakdown" or not summed]
        if rest:  # (findings last, on the tables the others made: exec/split.py)
            made = run_split(ts, rest, options, backend, cache_root=cache_root, **split)
    if summed:
        # the overview's table through the door: the same numbers, read from the summaries
        summaries = registry.set_tables(ts, ["overview_temporal"], options)
        tables["temporal_breakdown"] = summaries["overview_temporal"]
    tables.update(made)
    wanted = registry.wanted_tables(names, tables)
    first = {n: wanted.pop(n) for n in ("findings",) if n in wanted}  # what to fix, first
    return {**first, "files": tables["files"], **wanted}


#: The report's JSON text of a rank's part of a long table, made by the worker that made it
#: (`report_json.part_text`): the client writes what it kept.
TEXTS = Texts(report_json.part_text, report_json.text_version())


def _files_table(ts: TraceSet, cache_root: Path | None) -> pl.DataFrame:
    """The files table, every file's summary read at once first (kept per job)."""
    keep_summaries(ts, cache_root)
    return file_table(ts).select(FILE_KEYS)


def build_report(ts: TraceSet, **kw: Any) -> dict[str, Any]:
    """The JSON shape: one list of records per table, and what each covers ("scope")."""
    covered: Steps = {}
    tables = build_tables(ts, **kw, covered=covered)
    return {**_records(tables), "scope": table_scopes(ts, tables, kw.get("options"), None, covered)}


#: Memory tables made from each event's `Total Allocated`: when empty, they say why.
NEED_TOTALS = ("memory_curve", "memory_peak", "memory_device_peaks", "memory_step_peaks")


def why_empty(ts: TraceSet, tables: dict[str, Any]) -> dict[str, str]:
    """table -> why it has no row, where the data says (a device whose memory events carry
    no `Total Allocated`, PyTorch's 2021 format: `memory_no_curve`), as the memory view does."""
    empty = [t for t in NEED_TOTALS if t in tables and tables[t].is_empty()]
    if not empty:
        return {}
    gone = tables.get("memory_no_curve")
    if gone is None:
        gone = registry.table(ts.frames(), "memory_no_curve", frames=ts.frames)
    gone = whole_frame(gone)  # (a row per device)
    if gone.is_empty():
        return {}
    where = ", ".join(f"rank {r} {d}" for r, d in gone.select("rank", "device").iter_rows())
    why = f"{where}: {gone['reason'][0]}"
    return dict.fromkeys(empty, why)


def table_scopes(
    ts: TraceSet,
    tables: dict[str, pl.DataFrame],
    options: registry.Options | None,
    backend: Backend | None = None,
    covered: Steps | None = None,
) -> dict[str, Any]:
    """Per table: its ranks, the span (file) of each, the steps its numbers cover, what a step
    is there and whose definitions (analysis/coverage.py). The steps are those `covered`
    holds (handed back with the tables), else found rank by rank on `backend` (this process
    when None) and kept with the ranks' results (`rank_steps`): the client reads no frame
    for them."""
    options = options or registry.Options()
    spans = {}
    for rank in ts.loaded():
        entry = ts.selected(rank)
        if entry is not None:
            several = len(ts.spans(rank)) > 1
            spans[rank] = {
                "span": entry.file.span_hint if several else "",
                "path": _relative(entry.path, ts.root),
            }
    shown = {t: df for t, df in tables.items() if t != "files"}
    owners = {registry.owner(t) for t in shown if registry.known(t)}
    kinds = {a.steps for a in owners} | {coverage.SHARES_OF.get(a.name, "") for a in owners}
    known = None
    if ts.loaded() and kinds & set(coverage.RANK_KINDS):
        known = coverage.merge_steps(rank_steps(ts, options, backend, covered))
    return coverage.table_scopes(
        list(registry.ANALYSES),
        shown,
        registry.TABLE_OWNER,
        registry.LazyEvents(ts),  # read by nothing above: the steps are known already
        options,
        spans,
        known,
    )


def kept_scope_text(
    ts: TraceSet,
    tables: dict[str, pl.DataFrame],
    options: registry.Options,
    cache_root: Path | None,
    backend: Backend | None = None,
    covered: Steps | None = None,
) -> str:
    """The document's "scope" as written there (`_scope_text` of `table_scopes`, each
    empty table's `why_empty` in its entry), kept per job beside the analyses' answers: a
    second report of the same files reads no frame for it, nor parses and writes it again
    (at 1,000 ranks a few MB of JSON, ~0.1 s)."""
    why = why_empty(ts, tables)
    what = (
        f"scope-text|{_writer_version()}|{sorted(dataclasses.asdict(options).items())}"
        f"|{sorted(tables)}|{sorted(why.items())}"
    )

    def made() -> bytes:
        scope = table_scopes(ts, tables, options, backend, covered)
        for name, said in why.items():
            scope[name]["why_empty"] = said
        return _scope_text(scope).encode()

    return job_cached(ts, cache_root, what, made).decode()


def _writer_version() -> str:
    """What the kept text depends on besides the analyses' code (`code_version`): this
    module's and the printable escapes' source."""
    return report_json.source_version(sys.modules[__name__], printable_module)


def _scope_text(scope: Any) -> str:
    """The scope's text in the document: `orjson.dumps(scope, OPT_INDENT_2)` indented to
    its place and made printable, a table's entry made once for the tables whose entries
    hold the same objects (`coverage.table_scopes` shares them: 64 tables of 10,000 ranks
    have a few, each 1.3 MB of text)."""
    if not scope or not all(isinstance(e, dict) for e in scope.values()):
        return json_printable(orjson.dumps(scope, option=_INDENT).replace(b"\n", b"\n  ").decode())
    made: dict[tuple[Any, ...], str] = {}
    items = []
    for name, entry in scope.items():
        # (the scope holds every entry while its text is made: no object's id is reused)
        key = tuple((k, _held(v)) for k, v in entry.items())
        text = made.get(key)
        if text is None:  # (as nested in the scope, itself nested in the document)
            text = orjson.dumps(entry, option=_INDENT).replace(b"\n", b"\n    ").decode()
            text = made[key] = json_printable(text)
        items.append(f"    {json_printable(orjson.dumps(name).decode())}: {text}")
    return "{\n" + ",\n".join(items) + "\n  }"


def _held(value: Any) -> tuple[Any, ...]:
    """What an entry's value is, as a key: a scalar and its type (1, True and 1.0 are
    written apart), else the object held."""
    if value is None or isinstance(value, (str, int, float)):
        return (type(value), value)
    return (id(value),)


def _relative(path: Path, root: Path) -> str:
    try:
        return str(path.relative_to(root))
    except ValueError:  # the root is the file itself
        return path.name


def _record(name: str, tables: dict[str, pl.DataFrame]) -> Any:
    if name == "files":
        return file_records(tables[name])
    if name == "findings":
        return finding_records(tables["findings"], tables.get("finding_evidence"))
    return registry.json_value(name, tables[name])


_INDENT = orjson.OPT_INDENT_2


def _table_json(name: str, tables: dict[str, Any]) -> Iterator[str | memoryview | TextFile]:
    """A table's text in the report's document: its `orjson.dumps(records, OPT_INDENT_2)`,
    byte for byte, indented to its place and made printable. Written from the frames, a
    slice of rows at a time (`report_json`); a streamed table (`RankParts`) read a rank's
    part at a time too, or the part's text where its worker kept it (`TEXTS`, in bytes). The files
    and findings (their own records), and a table with a column `report_json` does not
    write, and a small table (`report_json.small`: its expressions cost more than its
    records), are made as records (`_records_json`)."""
    table = tables.get(name)
    small = isinstance(table, pl.DataFrame) and report_json.small(table)
    if name not in ("files", "findings") and table is not None and not small:
        frames = table.pieces(TEXTS.version) if isinstance(table, RankParts) else [table]
        at = report_json.TABLE_AT  # (the workers' texts are made at it: `part_text`)
        text = report_json.table_text(table.schema, frames, at, registry.LIST_KEYS.get(name))
        if text is not None:
            yield from text
            return
    for piece in _records_json(name, tables):
        yield json_printable(piece.replace(b"\n", b"\n  ").decode())


def _records_json(name: str, tables: dict[str, Any]) -> Iterator[bytes]:
    """A table's `orjson.dumps(records, OPT_INDENT_2)` from its Python records, JSON_ROWS
    rows at a time."""
    table = tables.get(name)
    if isinstance(table, RankParts):
        if table.is_empty():
            yield orjson.dumps(registry.json_value(name, table.head(0)), option=_INDENT)
        else:
            yield from _sliced_json(name, table.frames())
        return
    if name in ("files", "findings") or table is None or table.height <= report_json.JSON_ROWS:
        yield orjson.dumps(_record(name, tables), option=_INDENT)
        return
    yield from _sliced_json(name, [table])


def _sliced_json(name: str, frames: Iterable[pl.DataFrame]) -> Iterator[bytes]:
    """The records of `frames` one after another, JSON_ROWS rows at a time: the same bytes
    as the whole table's records dumped at once."""
    rows = report_json.JSON_ROWS
    first = True
    for frame in frames:
        for start in range(0, frame.height, rows):
            part = orjson.dumps(registry.json_value(name, frame.slice(start, rows)), option=_INDENT)
            yield (b"[" if first else b",") + part[1:-2]  # its items, without "[" and "\n]"
            first = False
    yield b"[]" if first else b"\n]"


def _write_json(
    out: TextIO,
    tables: dict[str, Any],
    scope: Any,
    *,
    scope_text: str | Callable[[], str] | None = None,
) -> None:
    """`orjson.dumps(doc, OPT_INDENT_2)` of the report's document ({table: records, ...,
    "scope": ...}), byte for byte, written a table (and a slice of a long one) at a time:
    the client holds a slice's text at a time, not the whole report's (a report of 64 ranks
    of 100 MB is 0.5 GB of JSON, 2.5 GB as Python records at once). `scope_text`: the
    scope's text already made (`kept_scope_text`), or what answers it once the tables are
    written, in place of `scope`."""
    keys = [*tables, "scope"]
    out.write("{\n")
    for i, name in enumerate(keys):
        out.write(f"  {json_printable(orjson.dumps(name).decode())}: ")
        if name == "scope":
            if callable(scope_text):
                scope_text = scope_text()
            out.write(scope_text if scope_text is not None else _scope_text(scope))
        else:
            for piece in _table_json(name, tables):
                _write(out, piece)
        out.write(",\n" if i < len(keys) - 1 else "\n")
    out.write("}\n")


def _write(out: TextIO, piece: str | bytes | memoryview | TextFile) -> None:
    """A piece of the document; one in bytes (UTF-8: a part's text a worker made) straight
    to the bytes under `out` when it has them (60 MB of kernel launches decoded and encoded
    again cost ~0.1 s), one left in its file (`TextFile`) from the file to them."""
    if isinstance(piece, str):
        out.write(piece)
        return
    raw = getattr(out, "buffer", None)
    if raw is None:
        out.write((piece.read() if isinstance(piece, TextFile) else bytes(piece)).decode())
        return
    out.flush()  # (the text written before it first)
    if isinstance(piece, TextFile):
        piece.send(raw)
    else:
        raw.write(piece)


def _records(tables: dict[str, pl.DataFrame]) -> dict[str, Any]:
    out = {
        name: file_records(df) if name == "files" else registry.json_value(name, df)
        for name, df in tables.items()
    }
    if "findings" in tables:
        out["findings"] = finding_records(tables["findings"], tables.get("finding_evidence"))
    return out


def finding_records(findings: pl.DataFrame, evidence: pl.DataFrame | None) -> list[dict[str, Any]]:
    """The findings as JSON records, each with its evidence rows (the view and row each
    opens) under "evidence"."""
    by_id: dict[str, list[dict[str, Any]]] = {}
    if evidence is not None:
        for row in evidence.to_dicts():
            by_id.setdefault(row["id"], []).append(row)
    return [{**row, "evidence": by_id.get(row["id"], [])} for row in findings.to_dicts()]


def file_records(files: pl.DataFrame) -> list[dict[str, Any]]:
    """The files table as JSON records; `dropped_events` as {reason: count}."""
    rows = files.to_dicts()
    for row in rows:
        if "dropped_events" in row:
            row["dropped_events"] = {d["reason"]: d["count"] for d in row["dropped_events"] or []}
    return rows


def _flat_files(tables: dict[str, pl.DataFrame]) -> dict[str, pl.DataFrame]:
    """The files table for text and CSV: dropped events as one line of text."""
    files = tables.get("files")
    if files is None or "dropped_events" not in files.columns:
        return tables
    texts = [
        dropped_text({d["reason"]: d["count"] for d in row or []})
        for row in files["dropped_events"].to_list()
    ]  # one per file, not per event
    return {**tables, "files": files.with_columns(pl.Series("dropped_events", texts))}


def _flat_records(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """File records for a text table: dropped events as one line of text."""
    return [{**r, "dropped_events": dropped_text(r.get("dropped_events") or {})} for r in rows]


def write_csv(tables: dict[str, Any], out_dir: Path, *, raw: bool = False) -> list[Path]:
    """One CSV per table, formulas neutralised for spreadsheets unless `raw` (programs); a
    streamed table (`RankParts`) written a rank's part at a time."""
    out_dir.mkdir(parents=True, exist_ok=True)
    paths = []
    flat = csv_ready if raw else csv_for_people
    for name, df in _flat_files(tables).items():
        path = out_dir / f"{name}.csv"
        if isinstance(df, RankParts) and not df.is_empty():
            with path.open("wb") as fh:
                for i, frame in enumerate(df.frames()):
                    flat(frame).write_csv(fh, include_header=not i)
        else:
            flat(whole_frame(df)).write_csv(path)
        paths.append(path)
    return paths


def _text(
    tables: dict[str, Any],
    root: Path,
    out: TextIO,
    named: list[str] | None = None,
    why: dict[str, str] | None = None,
    **text: Any,
) -> None:
    """The text report; long time series only when `named` (--only) names them; `why`:
    what an empty table says instead of "no rows" (`why_empty`). A streamed table
    (`RankParts`) gives its first rows only (whole where the text sorts or folds it, or
    --rows 0 asks for every row)."""
    left = {n: df.height for n, df in tables.items() if n in SERIES and n not in (named or ())}
    left = {n: rows for n, rows in left.items() if rows}  # an empty one says so, as ever
    rows = text.get("rows", DEFAULT_ROWS)
    heights = {n: df.height for n, df in tables.items() if isinstance(df, RankParts)}
    shown = {
        n: _first_rows(n, df, rows) if isinstance(df, RankParts) else df
        for n, df in tables.items()
        if n not in left
    }
    # names and paths from the traces are data: shown as written, never terminal control
    shown = {name: printable_frame(df) for name, df in shown.items()}
    titles = {"files": f"Files in {printable(root)}"}
    write_text(_flat_files(shown), titles, out, why=why, heights=heights, **text)
    if left:
        names = ", ".join(f"{n} ({rows:,} rows)" for n, rows in left.items())
        note = (
            f"(time series left out: {names}; --only NAME prints one, "
            "--json and --csv DIR have them)"
        )
        print(textwrap.fill(note, text.get("width") or terminal_width()), file=out)


def _first_rows(name: str, table: RankParts, rows: int | None) -> pl.DataFrame:
    """What the text shows of a streamed table: its first `rows`, or all of it where the
    text sorts it by time or folds its names over the whole column."""
    if not rows or name in TIME_ORDER or name in FOLDED:
        return table.collect()
    return table.head(rows)


def _no_trace_text(ts: TraceSet, out: TextIO, **text: Any) -> None:
    """Files were found but none loaded: their reasons, and no empty analysis sections."""
    files = {"files": printable_frame(file_table(ts).select(FILE_KEYS))}
    write_text(_flat_files(files), {"files": f"Files in {printable(ts.root)}"}, out, **text)
    print("(no trace loaded, so no analysis to show)", file=out)


def _shape(width: int | None, rows: int | None) -> dict[str, Any]:
    return {"width": width, **({} if rows is None else {"rows": rows})}


def _print_notices() -> None:
    """Damaged cache entries found (and parsed again) while reading: on stderr, so stdout
    stays the report."""
    for text in take_notices():
        print(f"hta-tui: note: {printable(text)}", file=sys.stderr)


def run_report(
    path: Path,
    *,
    as_json: bool = False,
    csv_dir: Path | None = None,
    csv_raw: bool = False,
    only: list[str] | None = None,
    no_cache: bool = False,
    workers: int | None = None,
    hta_compat: bool = False,
    out: TextIO | None = None,
    cache: Cache | None = None,
    options: registry.Options | None = None,
    width: int | None = None,
    rows: int | None = None,
    dask: str | None = None,
    backend: Backend | None = None,
) -> int:
    """`options`: the analyses' parameters (HTA's defaults when None); `hta_compat` is
    applied on top. `csv_raw`: the CSV files keep every value as it is (for programs);
    `width` and `rows` shape the text output (terminal width, 50 rows). `dask`: a Dask
    scheduler's address, or "local[:N]", where files are parsed and rank-wise analyses run
    (`backend`: one already open, kept open)."""
    out = out or sys.stdout
    if backend is None:
        try:
            own = open_backend(dask, workers=workers, lazy=True, one_round=True)
        except BackendError as exc:  # distributed missing, a scheduler out of reach
            print(f"hta-tui: {printable(str(exc))}", file=sys.stderr)
            return 2
        with own:
            return _run_report(path, own, **_settings(locals()))
    return _run_report(path, backend, **_settings(locals()))


def _settings(given: dict[str, Any]) -> dict[str, Any]:
    """run_report's arguments for `_run_report`."""
    return {k: v for k, v in given.items() if k not in ("path", "dask", "backend", "own")}


def _run_report(
    path: Path,
    backend: Backend,
    *,
    as_json: bool,
    csv_dir: Path | None,
    csv_raw: bool,
    only: list[str] | None,
    no_cache: bool,
    workers: int | None,
    hta_compat: bool,
    out: TextIO,
    cache: Cache | None,
    options: registry.Options | None,
    width: int | None,
    rows: int | None,
) -> int:
    cache = cache if cache is not None else Cache(enabled=not no_cache)
    # the session the app opens its files through too: the same files, ranks and reasons
    session = open_session(path, cache, workers=workers, after_parse=precompute, backend=backend)
    ts = session.trace_set
    for notice in session.notices:  # a loader that failed, say
        print(f"hta-tui: note: {printable(notice.text)}", file=sys.stderr)
    if not ts.entries:  # one line, not an empty section per table
        print(f"hta-tui: no trace files in {printable(path)}", file=sys.stderr)
    options = dataclasses.replace(options or registry.Options(), hta_compat=hta_compat)
    cache_root = cache.root if cache.enabled else None
    covered: Steps = {}  # each rank's steps covered, handed back with its tables (the scope's)
    tables = build_tables(
        ts,
        names=only,
        options=options,
        backend=backend,
        cache_root=cache_root,
        stream=True,
        covered=covered,
        texts=as_json,
    )
    if backend.kind == "dask":  # honest about what the cluster did not do
        here = [a.name for a in registry.select(only) if a.scope == "job" and a.rank_part is None]
        if here and ts.loaded():
            print(
                "hta-tui: note: not yet distributed (made here, over every rank's frames): "
                + ", ".join(here),
                file=sys.stderr,
            )
    _print_notices()
    if csv_dir is not None:
        write_csv(tables, csv_dir, raw=csv_raw)
    if as_json:
        # the scope made while the tables are written (each rank's steps read back, the
        # tables' JSON made by polars, which lets go of the GIL): it is written last
        with ThreadPoolExecutor(1, thread_name_prefix="scope") as meanwhile:
            text = meanwhile.submit(
                kept_scope_text, ts, tables, options, cache_root, backend, covered
            )
            _write_json(out, tables, None, scope_text=text.result)
    elif csv_dir is None and ts.entries and not ts.loaded():
        _no_trace_text(ts, out, **_shape(width, rows))
    elif csv_dir is None and ts.entries:
        _text(tables, ts.root, out, only, why=why_empty(ts, tables), **_shape(width, rows))
    return 0 if ts.loaded() else 1


def build_compare(
    control: TraceSet,
    test: TraceSet,
    *,
    control_rank: int | None = None,
    test_rank: int | None = None,
    device_type: str = "ALL",
    use_short_name: bool = False,
    hta_compat: bool = False,
) -> dict[str, Any]:
    """The diff report: both sides' files, HTA's compare_traces and ops_diff, and the
    temporal / kernel-type / per-kernel breakdowns side by side."""
    from hta_tui.analysis import diff

    doc: dict[str, Any] = {
        "control_files": file_records(file_table(control).select(FILE_KEYS)),
        "test_files": file_records(file_table(test).select(FILE_KEYS)),
    }
    c_rank = control_rank if control_rank is not None else min(control.loaded(), default=None)
    t_rank = test_rank if test_rank is not None else min(test.loaded(), default=None)
    if c_rank not in control.loaded() or t_rank not in test.loaded():
        doc["error"] = f"no such rank loaded (control {c_rank}, test {t_rank})"
        return doc
    c_events, t_events = control.loaded()[c_rank].events, test.loaded()[t_rank].events
    doc["control_rank"], doc["test_rank"] = c_rank, t_rank
    kw = {"device_type": device_type, "use_short_name": use_short_name, "hta_compat": hta_compat}
    doc["compare_traces"] = diff.compare_traces(c_events, t_events, **kw).to_dicts()
    doc["ops_diff"] = diff.ops_diff(c_events, t_events, **kw)
    doc["step_time"] = _paired_steps(c_events, t_events)  # one step, one length
    breakdowns = diff.breakdown_diff(c_events, t_events, hta_compat=hta_compat)
    for name, df in breakdowns.items():
        doc[f"{name}_diff"] = df.to_dicts()
    return doc


def _paired_steps(control: pl.DataFrame, test: pl.DataFrame) -> dict[str, Any]:
    """Each side's median step (us) over the steps the step-time view shows on both sides
    (`steps`; `only_here`: a side's steps the other does not show), and what a step is."""
    from hta_tui.analysis import step_pairs

    return step_pairs.paired_steps(control, test) | {"step_definition": coverage.STEPS["plugin"]}


def run_compare_report(
    control_path: Path,
    test_path: Path,
    *,
    as_json: bool = False,
    no_cache: bool = False,
    out: TextIO | None = None,
    cache: Cache | None = None,
    width: int | None = None,
    rows: int | None = None,
    **kw: Any,
) -> int:
    out = out or sys.stdout
    cache = cache if cache is not None else Cache(enabled=not no_cache)
    session = open_session(control_path, cache, compare=test_path, after_parse=precompute)
    control, test = session.trace_set, session.compare_set
    assert test is not None  # a session given `compare` has its test side
    doc = build_compare(control, test, **kw)
    _print_notices()
    if as_json:
        out.write(json_printable(orjson.dumps(doc, option=orjson.OPT_INDENT_2).decode()) + "\n")
    else:
        tables = {
            k: pl.DataFrame(_flat_records(v) if k.endswith("_files") else v)
            for k, v in doc.items()
            if isinstance(v, list) and k != "ops_diff"
        }
        if "compare_traces" in tables:
            tables["compare_traces"] = tables["compare_traces"].sort(
                pl.col("diff_duration").abs(), descending=True
            )
        _text(tables, control.root, out, **_shape(width, rows))
        for category, names in doc.get("ops_diff", {}).items():
            print(f"# ops_diff.{category}: {len(names)}", file=out)
        if "error" in doc:
            print(f"hta-tui: {doc['error']}", file=sys.stderr)
    return 0 if "compare_traces" in doc else 1
