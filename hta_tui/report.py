"""The headless front end: the app's analyses as text tables or one JSON object.

Exit status: 0 when at least one trace loaded, 1 when none did (2, usage errors, comes from
the CLI). Analyses that have nothing to say give empty lists, never errors.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any, TextIO

import orjson
import polars as pl

from hta_tui.analysis.overview import file_table, precompute, temporal_table
from hta_tui.trace.cache import Cache
from hta_tui.trace.model import TraceSet, open_set

FILE_KEYS = ("path", "rank", "span", "status", "error")


def build_report(ts: TraceSet, *, hta_compat: bool = False) -> dict[str, Any]:
    """Every section of the report as lists of records (the JSON shape)."""
    files = file_table(ts)
    return {
        "files": files.select(FILE_KEYS).to_dicts(),
        "temporal_breakdown": temporal_table(ts, hta_compat=hta_compat).to_dicts(),
    }


def _text(ts: TraceSet, out: TextIO, *, hta_compat: bool) -> None:
    files = file_table(ts).drop("seconds", "cached", "selected")
    temporal = temporal_table(ts, hta_compat=hta_compat)
    with pl.Config(
        tbl_rows=-1,
        tbl_cols=-1,
        tbl_hide_dataframe_shape=True,
        tbl_hide_column_data_types=True,
        tbl_formatting="ASCII_MARKDOWN",
        fmt_str_lengths=80,
        tbl_width_chars=200,
    ):
        print(f"# Files in {ts.root}", file=out)
        print(files, file=out)
        print("\n# Temporal breakdown (HTA definitions, microseconds)", file=out)
        if temporal.is_empty():
            print("no GPU kernels in the loaded ranks", file=out)
        else:
            print(temporal, file=out)


def run_report(
    path: Path,
    *,
    as_json: bool = False,
    no_cache: bool = False,
    workers: int | None = None,
    hta_compat: bool = False,
    out: TextIO | None = None,
    cache: Cache | None = None,
) -> int:
    out = out or sys.stdout
    cache = cache if cache is not None else Cache(enabled=not no_cache)
    ts = open_set(path, cache, workers=workers, after_parse=precompute)
    if as_json:
        doc = build_report(ts, hta_compat=hta_compat)
        out.write(orjson.dumps(doc, option=orjson.OPT_INDENT_2).decode() + "\n")
    else:
        _text(ts, out, hta_compat=hta_compat)
    return 0 if ts.loaded() else 1
