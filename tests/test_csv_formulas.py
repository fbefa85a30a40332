"""CSV exports meant for people never run a cell as a formula (issue 16); `--csv-raw` keeps
every value for programs.

A kernel named `=HYPERLINK("http://x","click")` was written as is by `--csv` and the app's `e`:
a spreadsheet opening the file evaluates it. Text cells starting with =, +, -, @, tab or CR
now get a leading `'`; numbers (negative ones included) are left alone. Every view's
exports are checked on the one walk over every view (test_every_view.py).
"""

from __future__ import annotations

import csv
import gzip
from pathlib import Path

import orjson
import polars as pl
import pytest

from hta_tui.analysis.tables import csv_ready, neutralise_formulas
from hta_tui.cli import main
from tests.test_app_support import make_screen_app, rank_trace, settle, wait_until

#: one kernel name per rank, each starting with a character a spreadsheet runs
FORMULAS = ['=HYPERLINK("http://x","click")', "+cmd|' /C calc'!A0", "-2+3", "@SUM(1+1)*cmd"]
FORMULAS_WS = ["\t=1+1", "\r=1+1"]
GEMM = "ampere_sgemm_128x64_tn"


def test_neutralise_text_cells_only() -> None:
    df = pl.DataFrame(
        {
            "name": [*FORMULAS, *FORMULAS_WS, "a=b", "void k<-1>", "", None],
            "n": [-5, -1, 0, 1, 2, 3, 4, 5, 6, 7],
            "x": [-1.5, 2.0, -0.25, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0, 9.0],
            "kind": pl.Series(["-"] * 10, dtype=pl.Enum(["-"])),
        }
    )
    out = neutralise_formulas(df)
    want = [*(f"'{f}" for f in FORMULAS + FORMULAS_WS), "a=b", "void k<-1>", "", None]
    assert out["name"].to_list() == want
    assert out["n"].to_list() == df["n"].to_list()  # negative numbers are numbers
    assert out["x"].to_list() == df["x"].to_list()
    assert out["kind"].to_list() == ["'-"] * 10  # categories are text
    assert neutralise_formulas(pl.DataFrame({"=x": [1], "ok": [2]})).columns == ["'=x", "ok"]


@pytest.fixture(scope="module")
def formula_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("formulas") / "traces"
    root.mkdir()
    names = FORMULAS + FORMULAS_WS
    for rank, name in enumerate(names):
        trace = rank_trace(rank % 4, world=len(names))
        trace["distributedInfo"]["rank"] = rank
        for ev in trace["traceEvents"]:
            if ev.get("name") == GEMM:
                ev["name"] = name
        (root / f"rank-{rank}.json.gz").write_bytes(gzip.compress(orjson.dumps(trace), mtime=0))
    return root


def read_rows(path: Path) -> list[list[str]]:
    with path.open(newline="") as f:
        return list(csv.reader(f))


def test_report_csv_neutralises_and_csv_raw_keeps(
    formula_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    people, raw = tmp_path / "people", tmp_path / "raw"
    # one cache for both: the tables made once, written each way
    monkeypatch.setenv("HTA_TUI_CACHE", str(tmp_path / "cache"))
    assert main(["report", str(formula_dir), "--csv", str(people)]) == 0
    assert main(["report", str(formula_dir), "--csv-raw", str(raw)]) == 0
    files = sorted(p.name for p in people.glob("*.csv"))
    assert (
        files == sorted(p.name for p in raw.glob("*.csv")) and "gpu_kernel_breakdown.csv" in files
    )
    kernels = {row[0] for row in read_rows(raw / "gpu_kernel_breakdown.csv")[1:]}
    assert set(FORMULAS + FORMULAS_WS) <= kernels  # raw: the names exactly as in the traces
    neutralised = 0
    for name in files:
        for p_row, r_row in zip(read_rows(people / name), read_rows(raw / name), strict=True):
            for p_cell, r_cell in zip(p_row, r_row, strict=True):
                if r_cell[:1] in ("=", "+", "@", "\t", "\r") or (
                    r_cell[:1] == "-" and not _number(r_cell)
                ):
                    assert p_cell == "'" + r_cell, (name, r_cell)
                    neutralised += 1
                else:
                    assert p_cell == r_cell, (name, r_cell)  # numbers, negative ones too
    assert neutralised >= len(FORMULAS + FORMULAS_WS)


def _number(cell: str) -> bool:
    try:
        float(cell)
    except ValueError:
        return False
    return True


async def test_app_export_neutralises(formula_dir: Path, tmp_path: Path) -> None:
    app = make_screen_app(formula_dir, tmp_path)
    async with app.run_test(size=(100, 30)) as pilot:
        await settle(pilot)
        await pilot.press("K")
        screen = app.screen
        await wait_until(pilot, lambda: getattr(screen, "result", None) is not None)
        await pilot.press("o")  # every kernel, none folded into "others"
        await pilot.pause(0.3)
        table = screen.query_one("#kernel-table")
        table.focus()
        await pilot.press("e")
        await wait_until(pilot, lambda: list((tmp_path / "exports").glob("*.csv")))
        view = csv_ready(table.view_frame)
    (path,) = (tmp_path / "exports").glob("*.csv")
    rows = read_rows(path)
    names = [r[rows[0].index("name")] for r in rows[1:]]
    assert {f"'{f}" for f in FORMULAS + FORMULAS_WS} <= set(names)
    assert not any(n[:1] in ("=", "+", "-", "@", "\t", "\r") for n in names)
    sums = [float(r[rows[0].index("sum us")]) for r in rows[1:]]
    assert sums == view["sum us"].to_list()  # the numbers as they were


#: A formula in every name a view shows (`hta_tui.synth.hostile` with it as its payload).
FORMULA = '=HYPERLINK("http://x","click")'


@pytest.fixture(scope="module")
def formula_names_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from hta_tui.synth.hostile import FOLDER_PAYLOAD, write_hostile_dir

    out = tmp_path_factory.mktemp("formula-names")
    write_hostile_dir(out, ranks=2, steps=3, payload=FORMULA)
    return out / FOLDER_PAYLOAD


def formula_cells(path: Path) -> list[str]:
    """Cells a spreadsheet would run: text starting with = + - @ tab or CR (numbers aside)."""
    return [
        cell
        for row in read_rows(path)
        for cell in row
        if cell[:1] in ("=", "+", "@", "\t", "\r") or (cell[:1] == "-" and not _number(cell))
    ]


def test_report_csv_of_every_key_neutralises(formula_names_dir: Path, tmp_path: Path) -> None:
    """`report --csv` of every analysis and table `--only` knows, on traces whose every name is
    a formula: no cell runs, and the tables of names hold them behind their `'`."""
    from hta_tui.analysis import catalog

    keys = [a.name for a in catalog.ANALYSES] + list(catalog.TABLE_OWNER)
    out = tmp_path / "csv"
    argv = ["report", str(formula_names_dir), "--no-cache", "--csv", str(out)]
    assert main([*argv, "--only", ",".join(keys)]) == 0
    files = {p.stem: p for p in out.glob("*.csv")}
    assert set(keys) <= set(files)
    assert not {name: cells for name, path in files.items() if (cells := formula_cells(path))}
    for name in ("operator_stats", "memory_events", "module_stats", "syncs", "gpu_devices"):
        cells = [cell for row in read_rows(files[name]) for cell in row]
        assert any(cell.startswith(f"'{FORMULA}") for cell in cells), name
