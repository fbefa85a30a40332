"""Short names never make two rows look the same (issue 24, point 14): folding and cutting
keep what tells two names apart, in the app's tables and in the text report, and the text
report's column groups repeat the name column."""

from __future__ import annotations

from pathlib import Path

import polars as pl
import pytest

from hta_tui.analysis.names import fold_names
from hta_tui.analysis.operator_stacks import python_stacks
from hta_tui.app.widgets.frame_table import column_cells
from hta_tui.report_text import table_lines
from tests.shared_sets import parsed

H100 = "tracelens_h100_bert_memory"
MI300 = "tracelens_mi300_ddp_resnet18"

#: Two Tensile GEMMs of one MI300 run that differ only in their macro tile.
TENSILE = [
    "Cijk_Ailk_Bljk_BBS_BH_Bias_HA_S_SAV_UserArgs_MT256x128x64_MI16x16x1_SN_LDSB1_AFC1_AFEM1"
    "_AFEM1_ASEM1_CLR1_CADS0_DTLA0_DTLB0_DTVA0_DTVB0_EPS0_FDSI0_GRPM1_GRVWA8_WS64_WG32_8_1",
    "Cijk_Ailk_Bljk_BBS_BH_Bias_HA_S_SAV_UserArgs_MT128x224x64_MI16x16x1_SN_LDSB1_AFC1_AFEM1"
    "_AFEM1_ASEM1_CLR1_CADS0_DTLA0_DTLB0_DTVA0_DTVB0_EPS0_FDSI0_GRPM1_GRVWA8_WS64_WG32_8_1",
]


def _kernel_names(path: Path) -> pl.Series:
    ev = parsed(path).frames["events"]
    return ev.filter(pl.col("kind") == "kernel")["name"].cast(pl.String).unique().sort()


@pytest.mark.parametrize("width", [24, 40, 64])
def test_cut_keeps_the_tile_that_tells_two_gemms_apart(width: int) -> None:
    cells = column_cells(pl.Series("kernel", TENSILE), max_text=width)
    assert len(set(cells)) == 2
    assert all(len(c) <= width for c in cells)
    assert "MT256x128x64" in cells[0] and "MT128x224x64" in cells[1]


def test_report_table_keeps_the_tile_and_repeats_the_name() -> None:
    df = pl.DataFrame(
        {"rank": [0, 0], "name": TENSILE, **{f"metric_{i} (us)": [1.5, 2.5] for i in range(8)}}
    )
    lines = table_lines(df, 100)
    rows = [ln for ln in lines if ln.startswith("|    0 ")]
    assert len(rows) > 2  # several column groups
    for group in [rows[i : i + 2] for i in range(0, len(rows), 2)]:
        assert "MT256x128x64" in group[0] and "MT128x224x64" in group[1]
    headers = [ln for ln in lines if ln.startswith("| rank")]
    assert all("| name " in h for h in headers)


@pytest.mark.shared
@pytest.mark.parametrize("case", [H100, MI300])
def test_folded_kernel_names_stay_distinct(shared: Path, case: str) -> None:
    (path,) = sorted((shared / "traces" / case).glob("*.json*"))
    names = _kernel_names(path)
    for keep in (0, 1):
        folded = fold_names(names, keep=keep)
        assert folded.n_unique() == names.n_unique(), keep
        assert (folded.str.len_chars() <= names.str.len_chars()).all()
    # a name no other folds like keeps its shortest form
    assert "reduce_kernel<…>" in fold_names(names, keep=0).to_list() or case == MI300


@pytest.mark.shared
def test_operator_call_stacks_stay_distinct_when_cut(shared: Path) -> None:
    (path,) = sorted((shared / "traces" / H100).glob("*.json*"))
    stacks = python_stacks({0: parsed(path).frames["events"]}, "aten::linear")
    full = stacks["call stack"]
    assert full.n_unique() >= 5 and (full.str.len_chars() > 300).all()
    for width in (40, 64):
        cells = column_cells(full, max_text=width)
        assert len(set(cells)) == full.n_unique()
        assert all(len(c) <= width for c in cells)
        # the frame that tells them apart is shown: modeling_bert.py(<line>)
        assert all("modeling_bert.py(" in c for c in cells)


@pytest.mark.shared
def test_report_kernel_tables_repeat_the_name_in_every_group(shared: Path) -> None:
    from hta_tui.api import TraceAnalysis

    ta = TraceAnalysis(str(shared / "traces" / H100))
    for df in (ta.get_kernel_view(), ta.get_kernel_duration_stats()):
        lines = table_lines(df, 120)
        headers = [ln for ln in lines if ln.startswith("| rank")]
        assert len(headers) > 1
        assert all("| name " in h for h in headers), headers
