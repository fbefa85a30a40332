"""The GPU metrics view (1 H): its table equals the GPU-metrics analysis and the files'
deviceProperties on the same data, the chart draws the highlighted GPU's four series, a
CPU-only trace says there is no GPU; snapshots."""

from __future__ import annotations

import asyncio
import gzip
import json
from pathlib import Path
from typing import Any

import pytest
from textual.widgets import Static

from hta_tui.analysis import gpu_metric_series, gpu_metrics
from hta_tui.app.screens.gpu_metrics import HEADERS, GpuMetricsScreen
from hta_tui.app.widgets.frame_table import FrameTable
from hta_tui.app.widgets.plot import SafePlot
from hta_tui.synth import write_trace_dir
from tests.app_walk import Walk, snapshot_steps, walk_app
from tests.test_app_support import (
    make_screen_app,
    open_view,
    wait_until,
    write_cpu_ranks,
)

SIZE = (80, 24)


async def open_gpu(pilot: Any) -> GpuMetricsScreen:
    return await open_view(pilot, "V", GpuMetricsScreen)


def text_of(screen: Any, selector: str) -> str:
    return str(screen.query_one(selector, Static).render())


async def test_metrics_devices_and_chart(tmp_path: Path) -> None:
    root = tmp_path / "traces"
    files = sorted(write_trace_dir(root, ranks=2, steps=3, seed=0))
    written = [json.loads(_text(f))["deviceProperties"] for f in files]
    app = make_screen_app(root, tmp_path)
    async with app.run_test(size=SIZE) as pilot:
        screen = await open_gpu(pilot)
        frames = app.trace_set.frames()
        want = gpu_metrics.gpu_metrics(frames)
        table = screen.query_one("#gpu-table", FrameTable).frame
        assert table.height == want.height == 2
        for metric in ("gpu_utilization_pct", "est_sm_efficiency_pct",
                       "est_achieved_occupancy_pct", "tc_kernel_pct"):  # fmt: skip
            assert table[HEADERS[metric]].to_list() == want[metric].to_list()
        # each row's GPU as the generator described it in the rank's deviceProperties
        for row in table.iter_rows(named=True):
            props = next(p for p in written[row["rank"]] if p["id"] == row["gpu"])
            assert row["name"] == props["name"] and row["SMs"] == props["numSms"]
            assert row["cc"] == f"{props['computeMajor']}.{props['computeMinor']}"
        first = table.row(0, named=True)
        summary = text_of(screen, "#gpu-summary")
        assert summary.startswith(f"r{first['rank']} GPU {first['gpu']}: {first['name']}")
        assert f"{first['SMs']} SMs" in summary
        # the chart: the highlighted GPU's four series, drawn
        series = gpu_metric_series.metric_series(frames)
        assert screen.result["series"].equals(series)
        chart = screen.query_one("#gpu-chart", SafePlot)
        assert "GPU utilization" in chart.picture.plain
        assert text_of(screen, "#gpu-chart-note").startswith(f"r{first['rank']} GPU")
        # the cursor picks the GPU the summary and the chart describe
        await pilot.press("down")
        await wait_until(pilot, lambda: screen.charts_pending == 0)
        second = table.row(1, named=True)
        assert text_of(screen, "#gpu-summary").startswith(f"r{second['rank']} GPU {second['gpu']}")
        assert text_of(screen, "#gpu-chart-note").startswith(f"r{second['rank']} GPU")


def _text(path: Path) -> str:
    data = path.read_bytes()
    return (gzip.decompress(data) if path.name.endswith(".gz") else data).decode()


async def test_cpu_only_trace_says_there_is_no_gpu(tmp_path: Path) -> None:
    root = write_cpu_ranks(tmp_path / "traces", ranks=1)
    app = make_screen_app(root, tmp_path)
    async with app.run_test(size=SIZE) as pilot:
        screen = await open_gpu(pilot)
        assert text_of(screen, "#gpu-summary").startswith("No GPU")
        assert not screen.query_one("#gpu-table", FrameTable).display
        assert not screen.query_one("#gpu-chart", SafePlot).display


async def _light(pilot: Any) -> None:
    pilot.app.theme = "hta-light"
    screen = pilot.app.screen
    await wait_until(pilot, lambda: screen.shows_current)


@pytest.fixture(scope="module")
def snapshots(tmp_path_factory: pytest.TempPathFactory) -> Walk:
    """One app (dark) for both themes' snapshots: the view, then the same restyled."""
    tmp_path = tmp_path_factory.mktemp("snapshots")
    root = tmp_path / "traces"
    write_trace_dir(root, ranks=2, steps=3, seed=0)
    app = make_screen_app(root, tmp_path, theme="hta-dark")
    steps = snapshot_steps({"hta-dark": open_gpu, "hta-light": _light})
    return asyncio.run(walk_app(app, steps, size=SIZE))


@pytest.mark.parametrize("theme", ["hta-dark", "hta-light"])
def test_snapshot(snap_svg, snapshots: Walk, theme: str) -> None:
    assert snap_svg(snapshots.check(theme)["svg"])


def test_the_table_comes_before_the_charts_series(tmp_path: Path, monkeypatch: Any) -> None:
    """Issue 27: the view's table does not wait for the chart's series (every rank's kernels
    cut into the plugin's buckets: five times the table's CPU on 8 x 100 MB); they come
    after it (`LATER`), the same series."""
    from hta_tui.analysis import registry
    from hta_tui.session import open_session
    from hta_tui.trace.cache import Cache

    root = tmp_path / "traces"
    write_trace_dir(root, ranks=2, steps=2, seed=0)
    ts = open_session(root, Cache(tmp_path / "cache")).trace_set
    frames = ts.frames()
    asked: list[str] = []
    real = registry.table
    monkeypatch.setattr(
        registry, "table", lambda f, name, *a, **k: asked.append(name) or real(f, name, *a, **k)
    )
    screen = GpuMetricsScreen.__new__(GpuMetricsScreen)  # its compute, no app
    result = screen.compute_on(ts, frames, {})
    assert "gpu_metric_series" not in asked and result["series"] is None
    assert result["table"].height == 2 and GpuMetricsScreen.LATER
    later = screen.compute_later(ts, frames, {}, result)
    assert later.equals(gpu_metric_series.metric_series(frames)) and not later.is_empty()
