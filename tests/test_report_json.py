"""The report's JSON written straight from the frames (`hta_tui.report_json`): the bytes of
`orjson.dumps(records, OPT_INDENT_2)` made printable, with no Python record (or value) per
row, on the values that are hard to write alike: NaN and infinities, -0.0, nulls of every
type, the largest integers, floats in exponent form, Float32, unicode, quotes, every control
and bidi character, names that look like regexes, lists (empty, null, holding nulls), and
a type written the records' way (datetimes, structs)."""

from __future__ import annotations

import io
import math
import os
import shutil
import subprocess
import sys
from datetime import datetime
from pathlib import Path
from typing import Any

import orjson
import polars as pl
import pytest

from hta_tui import report, report_json
from hta_tui.analysis import registry
from hta_tui.printable import json_printable
from hta_tui.report import run_report
from hta_tui.synth.hostile import PAYLOAD
from hta_tui.trace.cache import Cache

FLOATS = [0.0, -0.0, 1.5, 0.1, 1e16, 1e-7, 1e21, 5e-324, 1.7976931348623157e308, 1 / 3]


def _edges() -> pl.DataFrame:
    """Every hard case, a row each (lists cycled to the same length)."""
    floats = [*FLOATS, math.nan, math.inf, -math.inf, None]
    n = len(floats)

    def cycle(values: list[Any]) -> list[Any]:
        return [values[i % len(values)] for i in range(n)]

    texts = ["", 'q"uote\\', "é漢字😀", "\u2028\u2029", PAYLOAD, "/</script>", None]
    return pl.DataFrame(
        {
            "f64": pl.Series(floats, dtype=pl.Float64),
            "f32": pl.Series(cycle([0.1, -0.0, 3.4e38, math.nan, None]), dtype=pl.Float32),
            "i64": pl.Series(cycle([-(2**63), 2**63 - 1, 0, None]), dtype=pl.Int64),
            "u64": pl.Series(cycle([2**64 - 1, 0, None]), dtype=pl.UInt64),
            "i8": pl.Series(cycle([-128, 127, None]), dtype=pl.Int8),
            "u32": pl.Series(cycle([2**32 - 1, None]), dtype=pl.UInt32),
            "flag": pl.Series(cycle([True, False, None]), dtype=pl.Boolean),
            "nothing": pl.Series([None] * n, dtype=pl.Null),
            "text": pl.Series(cycle(texts), dtype=pl.String),
            "cat": pl.Series(cycle(["a", PAYLOAD, None]), dtype=pl.Categorical),
            "enum": pl.Series(cycle(["x", None, "y"]), dtype=pl.Enum(["x", "y"])),
            "ints": pl.Series(cycle([[1, None, 3], [], None]), dtype=pl.List(pl.Int64)),
            "names": pl.Series(cycle([[PAYLOAD, None], [], None]), dtype=pl.List(pl.String)),
            "reals": pl.Series(cycle([[math.nan, -0.0, 1e-7], None]), dtype=pl.List(pl.Float64)),
            # names are data too: a regex's look, quotes, controls, bidi
            "^a.*$": pl.Series(cycle([1, 2]), dtype=pl.Int64),
            f'k"{PAYLOAD}é': pl.Series(cycle(["v"]), dtype=pl.String),
        }
    )


def _expected(tables: dict[str, pl.DataFrame], scope: Any) -> str:
    """The document as the records' way writes it: every table's records at once."""
    doc = {name: registry.json_value(name, df) for name, df in tables.items()}
    return json_printable(
        orjson.dumps({**doc, "scope": scope}, option=orjson.OPT_INDENT_2).decode()
    )


def _refuse_rows(monkeypatch: pytest.MonkeyPatch) -> None:
    """From here on, a frame made into Python rows or values fails the test."""

    def refused(*args: object, **kw: object) -> Any:
        raise AssertionError("a Python object per row")

    for cls, name in [
        (pl.DataFrame, "to_dicts"),
        (pl.DataFrame, "rows"),
        (pl.DataFrame, "iter_rows"),
        (pl.DataFrame, "row"),
        (pl.Series, "to_list"),
        (pl.Series, "__iter__"),
    ]:
        monkeypatch.setattr(cls, name, refused)


def test_json_from_frames_is_the_records_bytes(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every hard value, sliced (2 rows at a time) and as a list table (`LIST_KEYS`),
    written byte for byte as the records' JSON, and no row made a Python object."""
    edges = _edges()
    tables = {
        "edges": edges,
        "empty": edges.clear(),
        "potential_stragglers": pl.DataFrame({"rank": [3, None, 0]}),
    }
    scope = {"edges": {"ranks": [0, 1]}}
    want = _expected(tables, scope) + "\n"  # (the reference makes records)
    monkeypatch.setattr("hta_tui.report_json.SMALL_CELLS", -1)  # (none written as records)
    _refuse_rows(monkeypatch)
    for rows in (2, 10_000):
        monkeypatch.setattr("hta_tui.report_json.JSON_ROWS", rows)
        out = io.StringIO()
        report._write_json(out, tables, scope)
        assert out.getvalue() == want


def test_a_type_written_the_records_way_is_the_same_bytes() -> None:
    """A datetime or struct column (orjson writes Python's datetimes and dicts): that table
    as records, the others still from their frames; the document unchanged."""
    tables = {
        "when": pl.DataFrame({"at": [datetime(2024, 1, 2, 3, 4, 5, 6)], "n": [1.5]}),
        "nested": pl.DataFrame({"s": [{"a": 1, "b": PAYLOAD}, None]}),
        "deep": pl.DataFrame({"l": [[{"a": 1}], []]}),
        "edges": _edges(),
    }
    out = io.StringIO()
    report._write_json(out, tables, {})
    assert out.getvalue() == _expected(tables, {}) + "\n"


def test_small_tables_are_written_as_records_with_no_query(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A report of tiny ranks is ~190 tables of a few rows: each written from its records
    (`report_json.SMALL_CELLS`), no polars query per table, the same bytes; a table of more
    cells still from its frame, no Python row made."""
    edges = _edges()
    big = pl.concat([edges] * 40)  # (~9,000 cells)
    stragglers = pl.DataFrame({"rank": [3, None, 0]})
    tables = {"edges": edges, "empty": edges.clear(), "potential_stragglers": stragglers}
    queries: list[str] = []

    def counting(name: str) -> None:  # (an eager frame's query: polars' `_collect_eager`)
        run = getattr(pl.LazyFrame, name)

        def counted(self: pl.LazyFrame, *args: Any, **kw: Any) -> pl.DataFrame:
            queries.append(name)
            return run(self, *args, **kw)

        monkeypatch.setattr(pl.LazyFrame, name, counted)

    for name in ("collect", "_collect_eager"):
        if hasattr(pl.LazyFrame, name):
            counting(name)
    out = io.StringIO()
    report._write_json(out, tables, {"edges": {"ranks": [0]}})
    assert out.getvalue() == _expected(tables, {"edges": {"ranks": [0]}}) + "\n"
    assert not queries
    assert big.height * big.width > report_json.SMALL_CELLS
    want = _expected({"big": big}, {}) + "\n"
    _refuse_rows(monkeypatch)
    out = io.StringIO()
    report._write_json(out, {"big": big}, {})
    assert out.getvalue() == want
    assert queries


#: A warm report's client runs none of these analyses (its answers are kept): it imports
#: none of their modules either.
NOT_RUN = (
    "hta_tui.analysis.critical_path.tables",
    "hta_tui.analysis.diff",
    "hta_tui.analysis.kernels",
    "hta_tui.analysis.memory_view",
    "hta_tui.analysis.module_view",
    "hta_tui.analysis.collectives",
)

_IMPORTS = """
import io, sys, contextlib
from hta_tui.cli import main
out = io.StringIO()
with contextlib.redirect_stdout(out):
    rc = main(["report", sys.argv[1], "--json", "--only", sys.argv[2]])
sys.stdout.write(out.getvalue())
sys.stderr.write("\\nIMPORTED " + " ".join(sorted(sys.modules)))
sys.exit(rc)
"""


def test_a_warm_report_imports_only_what_it_reads(tmp_path: Path) -> None:
    """A second report, every answer kept, imports no analysis it does not run (nor the
    watcher's asyncio): the registry imports an analysis's module when first used. Its
    JSON is the first report's."""
    from tests import dialects

    root = tmp_path / "t"
    dialects.write(dialects.current(rank=0), root / "rank-0.json")
    cache = tmp_path / "cache"
    first = io.StringIO()
    only = ["idle_time_breakdown", "kernel_duration_stats"]
    assert run_report(root, as_json=True, out=first, cache=Cache(cache), only=only) == 0
    proc = subprocess.run(
        [sys.executable, "-c", _IMPORTS, str(root), ",".join(only)],
        capture_output=True,
        text=True,
        check=False,
        cwd=Path(__file__).resolve().parents[1],  # (this checkout's hta_tui)
        env={**os.environ, "HTA_TUI_CACHE": str(cache)},
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == first.getvalue()
    imported = set(proc.stderr.rpartition("IMPORTED ")[2].split())
    assert "hta_tui.analysis.registry" in imported
    assert not imported & {*NOT_RUN, "asyncio", "watchfiles"}


def test_a_warm_report_reads_every_files_summary_at_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The files table and the temporal breakdown read each file's overview summary: a
    second report reads them from one table kept for the job (`split.keep_summaries`), no
    file's own (a read per file was ~0.5 s of a warm report of 1,000 tiny ranks), a first
    one every file's own in one query; the same JSON. A file changed since is a miss: its
    summary is made from its frames again."""
    from hta_tui.synth.small_job import Dialect, JobShape, write_job
    from hta_tui.trace import model
    from hta_tui.trace.checked import read_checked_rows

    write_job(tmp_path / "job", Dialect(), JobShape(ranks=3, steps=2, ops_per_step=2))
    cache, only = Cache(tmp_path / "cache"), ["temporal_breakdown"]

    def json_report() -> str:
        out = io.StringIO()
        assert run_report(tmp_path / "job", as_json=True, out=out, cache=cache, only=only) == 0
        return out.getvalue()

    first = json_report()
    read: list[str] = []
    checked = model.read_checked

    def counted(path: Path, *args: Any, **kw: Any) -> pl.DataFrame:
        read.append(path.parent.name)
        return checked(path, *args, **kw)

    monkeypatch.setattr(model, "read_checked", counted)
    assert json_report() == first
    assert "derived" not in read
    # no table kept for the job (a first report): each file's summary kept in its entry
    # read with the others' in one query (`read_checked_rows`: one by one, 10,000 files
    # cost 3 s of polars' query setup); one missing or damaged is read alone, made again
    kept = sorted(cache.root.glob("*/*/derived/overview-*.parquet"))
    rows = read_checked_rows([kept[0], tmp_path / "none.parquet", *kept[1:]])
    assert [r is None for r in rows] == [False, True, False, False]
    for path, row in zip(kept, [rows[0], *rows[2:]], strict=True):
        assert row is not None and row.equals(checked(path))
    shutil.rmtree(cache.root / "jobs")
    assert json_report() == first
    assert "derived" not in read
    kept[1].write_bytes(kept[1].read_bytes()[:-3] + b"bad")
    assert [r is None for r in read_checked_rows(kept)] == [False, True, False]
    shutil.rmtree(cache.root / "jobs")
    assert json_report() == first
    assert read.count("derived") == 1
    # neither the job's table nor a file's own summary kept: made from its frames
    shutil.rmtree(cache.root / "jobs")
    shutil.rmtree(next(cache.root.glob("*/*/derived")))
    assert json_report() == first
    doc = orjson.loads(first)
    assert [f["rank"] for f in doc["files"]] == [0, 1, 2]
    assert len(doc["temporal_breakdown"]) == 3
    # rank 2's file changed (other kernels): its numbers are the new file's, as uncached
    other = tmp_path / "other"
    write_job(other, Dialect(), JobShape(ranks=3, steps=2, ops_per_step=5, seed=7))
    changed = next(other.iterdir()).name
    shutil.copyfile(other / changed, tmp_path / "job" / changed)
    fresh = io.StringIO()
    assert run_report(tmp_path / "job", as_json=True, out=fresh, no_cache=True, only=only) == 0
    assert json_report() == fresh.getvalue() != first


def test_a_jobs_id_is_its_ranks_files(tmp_path: Path) -> None:
    """What keys a job's kept answers (`split._set_id`, asked for each one) says each
    loaded rank's rank, entry and file, as the analyses' job keys do (`split._ranks_id`)."""
    from hta_tui.exec import split
    from hta_tui.session import open_session
    from hta_tui.synth.small_job import Dialect, JobShape, write_job

    write_job(tmp_path / "job", Dialect(), JobShape(ranks=2, steps=1, ops_per_step=1))
    ts = open_session(tmp_path / "job", Cache(tmp_path / "cache")).trace_set
    assert split._set_id(ts) == split._ranks_id(split._ranks(ts))
    assert split._set_id(ts).count(b"\n") == 2


def test_the_scope_text_writes_each_shared_entry_once_as_orjson_writes_it_whole(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The scope's entries share their ranks, spans and steps (`coverage.table_scopes`): its
    text makes the entry of tables whose entries hold the same once, and is byte for byte
    `orjson.dumps(scope, OPT_INDENT_2)` indented to its place, printable (bidi and C1
    characters escaped), whatever the entries hold."""
    from hta_tui import report as report_module
    from hta_tui.printable import json_printable

    def whole(scope: Any) -> str:
        text = orjson.dumps(scope, option=orjson.OPT_INDENT_2).replace(b"\n", b"\n  ")
        return json_printable(text.decode())

    ranks = [0, 1, 2]
    spans = {str(r): {"span": "", "path": f"r\u202e{r}.json"} for r in ranks}
    steps = {str(r): [1, 2] for r in ranks}
    scope = {
        f"t{i}": {
            "ranks": ranks, "spans": spans, "steps": steps if i % 2 else None,
            "step_definition": "x", "definitions": "d", "flag": True if i % 3 else 1,
        }
        for i in range(7)
    }  # fmt: skip
    scope["t3"]["why_empty"] = "no curve\u0085"
    scope["empty"] = {}
    dumped: list[Any] = []
    dumps = orjson.dumps

    def counted(value: Any, **kw: Any) -> bytes:
        dumped.append(value)
        return dumps(value, **kw)

    monkeypatch.setattr(report_module.orjson, "dumps", counted)
    text = report_module._scope_text(scope)
    entries = [v for v in dumped if isinstance(v, dict)]
    monkeypatch.undo()
    assert text == whole(scope)
    assert len(entries) == 5  # t0-t3 (t3 with its why_empty) and the empty one: t4-t6 as t2-t0
    for other in ({}, {"x": {}}, {"x": {"a": []}}):
        assert report_module._scope_text(other) == whole(other)
