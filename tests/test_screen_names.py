"""Kernel names where width is tight (issue 17, point 6): at 80x24 the kernels screen shows
short names (template arguments folded) first, so rows do not become identical prefixes; `n`
shows full names; the row's full name stays in the frame for the detail screen and exports."""

from __future__ import annotations

from pathlib import Path

import pytest

from hta_tui.analysis.names import fold_name
from hta_tui.app.app import HtaApp
from hta_tui.app.widgets.frame_table import FrameTable, elide
from hta_tui.synth import write_trace_dir
from hta_tui.trace.cache import Cache
from tests.test_app_support import app_idle as screen_ready
from tests.test_app_support import wait_patiently as wait_until


@pytest.fixture(scope="module")
def traces(tmp_path_factory: pytest.TempPathFactory) -> Path:
    d = tmp_path_factory.mktemp("names") / "traces"
    write_trace_dir(d, ranks=2, steps=3, seed=7)
    return d


def _drawn(table: FrameTable, column: int) -> list[str]:
    return [table.row_texts(i)[column] for i in range(table.row_count)]


async def test_short_names_first_and_distinct_at_80_columns(traces: Path, tmp_path: Path) -> None:
    app = HtaApp(traces, cache=Cache(tmp_path / "c"), watch=False)
    async with app.run_test(size=(80, 24)) as pilot:
        await wait_until(pilot, lambda: app.settled)
        await pilot.press("K", "o")  # every kernel
        await wait_until(pilot, lambda: screen_ready(app) and not app.screen.params.get("fold"))
        table = app.screen.query_one("#kernel-table", FrameTable)
        full = table.view_frame["name"].to_list()
        assert any(len(n) > 80 for n in full)  # names that cannot fit
        assert str(table.view_columns[0].label).strip() == "kernel"
        drawn = _drawn(table, 0)
        assert all(len(t) <= 80 - 42 for t in drawn)
        # as many distinct names on screen as there are distinct kernels (issue 24, point
        # 14: names that fold alike are folded less, the cut keeps where they differ)
        assert len(set(drawn)) == len(set(full)) > len({fold_name(n, 0) for n in full})
        assert len(set(drawn)) > 1
        # the row's full name is kept (drill-down, export)
        assert table.selected_row()["name"] == full[0]
        # n: full names, no short column
        await pilot.press("n")
        await wait_until(pilot, lambda: screen_ready(app) and app.screen.params.get("full_names"))
        assert "kernel" not in table.frame.columns
        labels = [c.strip() for c in map(str, (c.label for c in table.view_columns))]
        assert labels[-3] == "name"
        assert full[0] in _drawn(table, labels.index("name"))


def test_fold_name_levels() -> None:
    gemm = "void cutlass::Kernel<cutlass_80_tensorop_s1688gemm_64x64_16x6_nn_align4>(Params)"
    assert fold_name(gemm, 0) == "Kernel<cutlass_80_tensorop_s1688gemm_64x64_16x6_nn_align4>"
    vec = "void at::native::vectorized_elementwise_kernel<4, at::native::Foo<float> >(int)"
    assert fold_name(vec, 0) == "vectorized_elementwise_kernel<…>"
    assert fold_name(vec) == "vectorized_elementwise_kernel<4, Foo<…> >"


async def test_wide_terminals_keep_the_first_template_arguments(
    traces: Path, tmp_path: Path
) -> None:
    app = HtaApp(traces, cache=Cache(tmp_path / "c"), watch=False)
    async with app.run_test(size=(160, 48)) as pilot:
        await wait_until(pilot, lambda: app.settled)
        await pilot.press("K", "o")
        await wait_until(pilot, lambda: screen_ready(app) and not app.screen.params.get("fold"))
        table = app.screen.query_one("#kernel-table", FrameTable)
        room = min(100, 160 - 42)  # the screen's cap on a name's width
        want = [
            elide(fold_name(n, 1) if len(fold_name(n, 1)) <= room else fold_name(n, 0), room)
            for n in table.view_frame["name"].to_list()
        ]
        assert _drawn(table, 0) == want
        assert any("<" in w and "…" not in w.split("<", 1)[1][:1] for w in want)
