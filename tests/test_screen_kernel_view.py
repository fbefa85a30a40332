"""The Kernels view's TensorBoard additions (2 K): tensor cores, mean blocks per SM and mean
est. achieved occupancy per kernel, and `v`, per kernel + launching op + launch properties;
each equal to the kernel-view analysis on the same frames; snapshots."""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path
from typing import Any

import polars as pl
import pytest

from hta_tui.analysis import kernel_owners, kernel_view
from hta_tui.app.screens import kernel_columns
from hta_tui.app.screens.kernels import KernelsScreen
from hta_tui.app.widgets.frame_table import FrameTable
from hta_tui.synth import write_trace_dir
from tests.app_walk import Walk, snapshot_steps, walk_app
from tests.test_app_support import (
    make_screen_app,
    open_view,
    screen_shows_current,
    settle,
    wait_until,
)
from tests.test_screen_kernels import snapshot_root

SIZE = (80, 24)


async def open_kernels(pilot: Any) -> KernelsScreen:
    return await open_view(pilot, "K", KernelsScreen)


async def test_columns_and_grouping(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    root = tmp_path / "traces"
    write_trace_dir(root, ranks=2, steps=3, seed=0)
    app = make_screen_app(root, tmp_path)
    # the kernels' backends (each launch nested in its host ranges, every rank) held back:
    # the view's numbers are drawn without them, the backends filled in once they land
    gate, asked = threading.Event(), threading.Event()
    real = kernel_owners.backend_by_name

    def held(ranks: Any) -> pl.DataFrame:
        asked.set()
        gate.wait(60)
        return real(ranks)

    monkeypatch.setattr(kernel_owners, "backend_by_name", held)
    async with app.run_test(size=SIZE) as pilot:
        try:
            await settle(pilot)
            await pilot.press("K")
            await wait_until(pilot, lambda: isinstance(app.screen, KernelsScreen), 30)
            screen = app.screen
            table = screen.query_one("#kernel-table", FrameTable)
            await wait_until(pilot, lambda: screen.result is not None, 60, "the numbers")
            shown = table.frame
            assert shown.height and shown["backend"].null_count() == shown.height
            assert screen.shows_numbers and not screen.shows_current and not gate.is_set()
            await wait_until(pilot, asked.is_set, 30, "the backends asked for")
        finally:
            gate.set()
        await wait_until(pilot, lambda: screen_shows_current(app, screen), 60)
        frames = app.trace_set.frames()
        filled = screen.query_one("#kernel-table", FrameTable).frame
        backends = real(frames).filter(pl.col("name").is_in(filled["name"].implode()))
        assert (
            backends.height
            and filled.join(backends, on="name")
            .select((pl.col("backend") == pl.col("backend_right")).all())
            .item()
        )
        assert filled.drop("backend").equals(shown.drop("backend"))
        view = kernel_view.job_kernel_table(frames).select(
            "name", "tc_used", "mean_blocks_per_sm", "mean_est_achieved_occupancy_pct"
        )
        table = screen.query_one("#kernel-table", FrameTable).frame
        cols = table.columns
        assert cols[cols.index("mean us") + 1 : cols.index("mean us") + 4] == [
            "tc", "blocks/SM", "occupancy %"
        ]  # fmt: skip
        # every kernel row has the plugin's figures; memcpy / memset rows (HTA's MEMORY
        # type, not kernels to the plugin) and the folded "others" have none
        kernel_rows = table.filter((pl.col("name") != "others") & (pl.col("type") != "MEMORY"))
        named = kernel_rows.join(view, on="name")
        assert named.height == kernel_rows.height > 0
        rest = table.filter((pl.col("name") == "others") | (pl.col("type") == "MEMORY"))
        assert rest.height > 0 and rest["tc"].null_count() == rest.height
        assert named["tc"].to_list() == named["tc_used"].to_list()
        assert named["blocks/SM"].to_list() == named["mean_blocks_per_sm"].to_list()
        assert named["occupancy %"].to_list() == named["mean_est_achieved_occupancy_pct"].to_list()
        # the generator's CUTLASS sm80 GEMMs run on tensor cores, its elementwise kernels not
        tc = dict(zip(named["name"].to_list(), named["tc"].to_list(), strict=True))
        assert any(v for n, v in tc.items() if "cutlass" in n or "xmma" in n)
        assert not any(v for n, v in tc.items() if "elementwise" in n)
        await pilot.press("v")
        await wait_until(
            pilot, lambda: screen_shows_current(app, screen) and screen.result["by_op"]
        )
        by_op = screen.query_one("#kernel-table", FrameTable).frame
        want = kernel_columns.by_operator(kernel_view.job_kernel_table(frames, by_operator=True))
        assert by_op.drop("kernel", "kernel (wider)").equals(want)
        kernels = sum(ev.filter(pl.col("cat") == "kernel").height for ev in frames.values())
        assert int(by_op["count"].sum()) == kernels
        assert "whole trace" in screen.scope_text
        # enter still drills down to the kernel, by its full name
        first = by_op.row(0, named=True)["name"]
        await pilot.press("enter")
        await wait_until(pilot, lambda: getattr(app, "current_mode", "") == "detail")
        assert app.selected_kernel == first


def _run_before(keys: tuple[str, ...]):
    async def run_before(pilot: Any) -> None:
        screen = await open_kernels(pilot)
        for key in keys:
            await pilot.press(key)
        await wait_until(pilot, lambda: screen_shows_current(pilot.app, screen))
        await pilot.pause()

    return run_before


async def _light(pilot: Any) -> None:
    pilot.app.theme = "hta-light"
    screen = pilot.app.screen
    await wait_until(pilot, lambda: screen_shows_current(pilot.app, screen))
    await pilot.pause()


@pytest.fixture(scope="module")
def snapshots(tmp_path_factory: pytest.TempPathFactory) -> Walk:
    """One app (dark) for both themes' snapshots: the view by operator, then restyled."""
    tmp_path = tmp_path_factory.mktemp("snapshots")
    app = make_screen_app(snapshot_root(tmp_path), tmp_path, theme="hta-dark", ascii=False)
    steps = snapshot_steps({"hta-dark": _run_before(("v",)), "hta-light": _light})
    return asyncio.run(walk_app(app, steps, size=SIZE))


@pytest.mark.parametrize("theme", ["hta-dark", "hta-light"])
def test_snapshot_by_operator(snap_svg, snapshots: Walk, theme: str) -> None:
    assert snap_svg(snapshots.check(theme)["svg"])
