"""GPU metrics (key `V`): the TensorBoard plugin's GPU summary, per rank and device.

Each row is one GPU a rank ran kernels on: GPU utilization, est. SM efficiency, est. achieved
occupancy and the share of kernel time on tensor cores (analysis/gpu_metrics.py, over the
steps the plugin keeps), then what the file's `deviceProperties` say about that GPU. The line
above names the highlighted GPU; the chart below draws its four metrics over time, on the
plugin's counter buckets (analysis/gpu_metric_series.py). A CPU-only trace says there is no
GPU instead.
"""

from __future__ import annotations

from typing import Any

import polars as pl
from textual import on
from textual.app import ComposeResult
from textual.widgets import Static

from hta_tui.analysis import gpu_metric_series, gpu_metrics, registry
from hta_tui.app.access import hta_app
from hta_tui.app.screens.base import AnalysisScreen, Params
from hta_tui.app.screens.plugin_steps import describe_plugin_steps
from hta_tui.app.screens.timelines import X_LABEL, line_colours
from hta_tui.app.widgets.frame_table import FrameTable, RankSummary
from hta_tui.app.widgets.plot import SafePlot
from hta_tui.app.widgets.text_line import TextBlock
from hta_tui.printable import printable
from hta_tui.trace.model import TraceSet

#: analysis column -> header short enough for 80 columns
HEADERS: dict[str, str] = {
    "rank": "rank",
    "device": "gpu",
    "gpu_utilization_pct": "util %",
    "est_sm_efficiency_pct": "SM eff %",
    "est_achieved_occupancy_pct": "occupancy %",
    "tc_kernel_pct": "tensor core %",
    "tc_kernel_pct_plugin_list": "tc % 2021 list",
    "name": "name",
    "memory_gb": "memory GB",
    "compute_capability": "cc",
    "sm_count": "SMs",
    "max_threads_per_sm": "threads/SM",
    "regs_per_sm": "regs/SM",
    "shared_memory_per_sm": "shmem/SM",
}


def metrics_table(
    frames: dict[int, pl.DataFrame], metas: dict[int, dict[str, Any]], *, tb_compat: bool = False
) -> pl.DataFrame:
    """The four metrics per rank and GPU, with the GPU's deviceProperties beside them."""
    got = registry.tables(
        frames,
        ["gpu_metrics", "gpu_devices"],
        registry.Options(tb_compat=tb_compat),
        meta=metas,
    )
    metrics, devices = got["gpu_metrics"], got["gpu_devices"]
    if metrics.is_empty():
        return metrics
    if not devices.is_empty():
        metrics = metrics.join(devices, on=["rank", "device"], how="left")
    keep = [c for c in HEADERS if c in metrics.columns]
    return metrics.select(keep).rename({c: HEADERS[c] for c in keep})


class GpuMetricsScreen(AnalysisScreen):
    TITLE = "GPU metrics"
    ANALYSES = ("gpu_metrics", "gpu_devices", "gpu_metric_series")
    STEPS = "as the TensorBoard plugin"  # which steps: steps_text
    PLUGIN_WHY = "tensor cores of every kernel, modern list"

    def steps_text(self, frames: dict[int, pl.DataFrame], every: bool) -> str:
        return describe_plugin_steps(frames)

    def compose_body(self) -> ComposeResult:
        yield TextBlock("", id="gpu-summary", classes="summary")
        yield FrameTable(
            id="gpu-table",
            key_column="gpu",
            export_name="gpu_metrics",
            ranks=RankSummary(worst="util %", descending=False),  # the idlest GPUs first
        )
        yield TextBlock("", id="gpu-chart-note", classes="plot-note")
        yield SafePlot(id="gpu-chart")

    def on_mount(self) -> None:
        super().on_mount()
        self.app.theme_changed_signal.subscribe(self, lambda _theme: self._draw())

    def compute_on(
        self, ts: TraceSet, frames: dict[int, pl.DataFrame], params: Params
    ) -> dict[str, Any]:
        metas = {r: d.meta for r, d in ts.loaded().items() if r in frames}
        kernels = sum(
            int(d.meta.get("n_kernels") or 0) for r, d in ts.loaded().items() if r in frames
        )
        tb_compat = bool(params.get("tb_compat", False))
        return {
            "kernels": kernels,
            "table": metrics_table(frames, metas, tb_compat=tb_compat),
            "series": None,  # `compute_later`
            "offsets": bucket_offsets(frames, ts.origin_ns),
        }

    #: The chart's series come after the table: every rank's kernels cut into the plugin's
    #: buckets cost about five times the table (3.2 against 0.7 s of CPU on 8 x 100 MB).
    LATER = True

    def compute_later(
        self, ts: TraceSet, frames: dict[int, pl.DataFrame], params: Params, result: Any
    ) -> pl.DataFrame:
        tb_compat = bool(params.get("tb_compat", False))
        return registry.table(frames, "gpu_metric_series", registry.Options(tb_compat=tb_compat))

    def show_later(self, result: dict[str, Any], later: pl.DataFrame) -> None:
        self.result = {**result, "series": later}
        self.draw_later(self._draw)

    def show(self, result: dict[str, Any]) -> None:
        table = self.query_one("#gpu-table", FrameTable)
        table.show_frame(result["table"])
        gpu = not result["table"].is_empty()
        table.display = gpu
        self.query_one("#gpu-chart").display = gpu
        self._describe()
        self.draw_later(self._draw)
        if self.focused is None and gpu:
            self.call_after_refresh(table.focus)

    def chosen(self) -> dict[str, Any] | None:
        """The highlighted GPU's row (the first until the cursor moves)."""
        return self.query_one("#gpu-table", FrameTable).selected_row()

    @on(FrameTable.RowHighlighted, "#gpu-table")
    def _highlighted(self, event: FrameTable.RowHighlighted) -> None:
        self._describe()
        self._draw()

    def _describe(self) -> None:
        self.query_one("#gpu-summary", Static).update(summary(self.result, self.chosen()))

    def _draw(self) -> None:
        result, row = self.result, self.chosen()
        note = self.query_one("#gpu-chart-note", Static)
        if not self.is_mounted or result is None or row is None:
            note.update("")
            return
        rank, device = row["rank"], row["gpu"]
        if result["series"] is None:
            note.update(f"r{rank} GPU {device} over time: the chart is being made…")
            return
        series: pl.DataFrame = result["series"].filter(
            (pl.col("rank") == rank) & (pl.col("device") == device)
        )
        chart = self.query_one("#gpu-chart", SafePlot)
        plt = chart.plt
        plt.clear_figure()
        plt.clear_data()
        if series.is_empty():
            note.update(f"r{rank} GPU {device}: too short a trace for the plugin's buckets.")
            return
        # from the trace's start, as the timeline (the plugin counts from the rank's own)
        offset = (result.get("offsets") or {}).get(rank, 0.0)
        x = ((series["since_start (us)"] + offset) / 1000).to_list()
        colours = line_colours(self.app)
        marker = "*" if hta_app(self).ascii else "braille"
        for i, (col, label) in enumerate(gpu_metric_series.SERIES.items()):
            values = series[col]
            # a bucket without kernels has no occupancy or tensor-core share: drawn as 0
            plt.plot(
                x,
                values.fill_null(0.0).to_list(),
                label=label,
                color=colours[i % len(colours)],
                marker=marker,
            )
        plt.ylim(0, 100)
        plt.xlabel(X_LABEL)
        size = x[1] - x[0] if len(x) > 1 else 0.0
        note.update(
            f"r{rank} GPU {device} over time, % per {size:g} ms bucket; the cursor picks a GPU"
        )


def bucket_offsets(frames: dict[int, pl.DataFrame], origin_ns: int | None) -> dict[int, float]:
    """rank -> us from the trace's start (`TraceSet.origin_ns`) to the rank's first bucket of
    the plugin's (its `since_start` origin): the chart's x axis is the timeline's."""
    out = {}
    for rank, events in frames.items():
        grid = gpu_metrics.trace_buckets(events)
        if grid is not None and origin_ns is not None:
            out[rank] = (grid[0] - origin_ns) / 1000
    return out


def summary(result: dict[str, Any] | None, row: dict[str, Any] | None) -> str:
    """The highlighted GPU in one line (deviceProperties), or why there is none."""
    if result is None:
        return ""
    if result["table"].is_empty():
        if not result.get("kernels"):
            return "No GPU: these ranks ran no GPU kernel (a CPU-only trace)."
        return "No GPU metrics: these ranks' kernels carry no device id (`args.device`)."
    if row is None:
        return ""
    name = printable(row.get("name") or "no deviceProperties")  # one line, whatever it holds
    parts = [f"r{row['rank']} GPU {row['gpu']}: {name}"]
    if row.get("memory GB") is not None:
        parts.append(f"{row['memory GB']:g} GB")
    if row.get("cc") is not None:
        parts.append(f"cc {row['cc']}")
    if row.get("SMs") is not None:
        parts.append(f"{row['SMs']} SMs")
    if row.get("threads/SM") is not None:
        parts.append(f"{row['threads/SM']} threads/SM")
    return " · ".join(parts)
