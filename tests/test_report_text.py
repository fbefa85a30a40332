"""The text report (issue 17, point 8): it fits the width it is given (wide tables wrap into
column groups, no column dropped), says how many rows it left out and how to get them, prints
whole numbers without decimals, lists kernels most time first. Every key of the catalog and
of README, `--only` included: tests/test_report_every_key.py."""

from __future__ import annotations

import io
from pathlib import Path

import orjson
import pytest

from hta_tui.analysis.names import fold_name
from hta_tui.report import run_report
from hta_tui.report_text import SENTENCES, SERIES
from hta_tui.trace.cache import Cache


@pytest.fixture(scope="module")
def trace_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from hta_tui.synth import write_trace_dir

    d = tmp_path_factory.mktemp("text_report")
    write_trace_dir(d, ranks=2, steps=3, seed=3, kernels_per_step=40)
    return d


@pytest.fixture(scope="module")
def cache_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One cache for the module: the report's tables made once (each test formats them its
    own way; a report per test made them again, 0.7 s each)."""
    return tmp_path_factory.mktemp("cache")


def _text(trace_dir: Path, cache_dir: Path, **kw) -> str:
    out = io.StringIO()
    assert run_report(trace_dir, out=out, cache=Cache(cache_dir), **kw) == 0
    return out.getvalue()


def _json(trace_dir: Path, cache_dir: Path) -> dict:
    out = io.StringIO()
    run_report(trace_dir, as_json=True, out=out, cache=Cache(cache_dir))
    return orjson.loads(out.getvalue())


def _section(text: str, name: str) -> list[str]:
    """The lines of one `# name` section."""
    lines = ("\n" + text).split("\n# " + name + "\n", 1)[1].split("\n# ", 1)[0]
    return lines.rstrip("\n").splitlines()  # the last section ends the text: no blank


def _cells(line: str) -> list[str]:
    """One table line's cells (a cell may hold "|": a kernel sequence's separator)."""
    return [c.strip() for c in line[2:-2].split(" | ")]


def _column(lines: list[str], header: str) -> list[str]:
    """The cells under `header` in the first column group that has it; a sentence wrapped
    over several lines of its row (its other cells blank) is joined again."""
    for i, line in enumerate(lines):
        if line.startswith("| ") and header in _cells(line):
            names = _cells(line)
            at = names.index(header)
            widths = [len(w) for w in lines[i + 1][2:-2].split("-|-")]
            said = [j for j, n in enumerate(names) if n in SENTENCES]
            out: list[str] = []
            last = [""] * len(names)  # each column's text on the line before
            for row in lines[i + 2 :]:
                if not row.startswith("| "):
                    break
                cells = _cells(row)
                more = [c for n, c in zip(names, cells, strict=True) if n not in SENTENCES]
                # the next line of a wrapped sentence: the other cells blank, and a sentence's
                # first word there did not fit on the line before (else a row of its own
                # whose other cells are empty, as the critical path's across-ranks row)
                wrapped = any(
                    cells[j] and len(f"{last[j]} {cells[j].split(' ', 1)[0]}") > widths[j]
                    for j in said
                )
                if out and not any(more) and wrapped:
                    out[-1] = f"{out[-1]} {cells[at]}".strip() if cells[at] else out[-1]
                else:
                    out.append(cells[at])
                last = cells
            return out
    raise AssertionError(f"no column {header!r}")


@pytest.mark.parametrize("width", [80, 160])
def test_every_line_fits_and_no_column_is_dropped(
    trace_dir: Path, cache_dir: Path, width: int
) -> None:
    text = _text(trace_dir, cache_dir, width=width)
    assert max(len(line) for line in text.splitlines()) <= width
    doc = _json(trace_dir, cache_dir)
    for name, records in doc.items():
        if not records or not isinstance(records, list):
            continue
        if name in SERIES:  # left out unless named (issue 24, point 17), and said so
            assert f"{name} ({len(records):,} rows)" in " ".join(text.split())
            continue
        section = "\n".join(
            _section(text, name if name != "files" else "Files in " + str(trace_dir))
        )
        for column in records[0]:
            if (name, column) == ("findings", "evidence"):  # the finding_evidence table
                continue
            assert f" {column} " in section, (name, column)


def test_rows_left_out_are_counted_and_rows_0_shows_all(trace_dir: Path, cache_dir: Path) -> None:
    total = len(_json(trace_dir, cache_dir)["kernel_duration_stats"])
    assert total > 5
    cut = _section(_text(trace_dir, cache_dir, width=300, rows=5), "kernel_duration_stats")
    assert len(_column(cut, "count")) == 5
    assert f"({total - 5:,} more rows of {total:,} not shown: --rows 0 shows them all" in " ".join(
        cut
    )
    full = _section(_text(trace_dir, cache_dir, width=300, rows=0), "kernel_duration_stats")
    assert len(_column(full, "count")) == total
    assert not any("more rows" in line for line in full)


def test_whole_numbers_print_as_integers(trace_dir: Path, cache_dir: Path) -> None:
    """Counts are floats in HTA's schema (82.0); the text shows 82."""
    doc = _json(trace_dir, cache_dir)
    counts = [r["count"] for r in doc["idle_interval_stats"]]
    assert any(isinstance(c, float) for c in counts)
    text = _text(trace_dir, cache_dir, width=300, rows=0)
    cells = _column(_section(text, "idle_interval_stats"), "count")
    assert cells == [str(int(c)) for c in counts]


def test_kernels_are_listed_most_time_first_with_folded_names(
    trace_dir: Path, cache_dir: Path
) -> None:
    records = _json(trace_dir, cache_dir)["gpu_kernel_breakdown"]
    expected = sorted(records, key=lambda r: -r["sum (us)"])
    lines = _section(_text(trace_dir, cache_dir, width=300, rows=0), "gpu_kernel_breakdown")
    sums = [float(v) for v in _column(lines, "sum (us)")]
    assert sums == sorted(sums, reverse=True)
    assert _column(lines, "name") == [fold_name(r["name"]) for r in expected]


def test_fold_name_keeps_what_tells_kernels_apart() -> None:
    name = (
        "void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<float>, "
        "at::detail::Array<char*, 1> >(int, at::native::FillFunctor<float>, "
        "at::detail::Array<char*, 1>)"
    )
    assert fold_name(name) == "vectorized_elementwise_kernel<4, FillFunctor<…>, Array<…> >"
    assert fold_name("ncclKernel_AllReduce_RING_LL_Sum_float(ncclDevComm*, ncclWork*)") == (
        "ncclKernel_AllReduce_RING_LL_Sum_float"
    )
    assert fold_name("Memcpy HtoD (Pageable -> Device)") == "Memcpy HtoD (Pageable -> Device)"
    assert fold_name("aten::linear") == "aten::linear"
