"""Launch statistics with the name of the work each launch enqueued, for drilling down.

`launch.cuda_kernel_launch_stats` gives one row per launch call (correlation, cpu_duration,
gpu_duration, launch_delay, ...) but not which kernel it launched. `launch_table` puts every
rank's rows in one frame and adds, through the correlation:
- `kernel`: the name of the first GPU op (by start, then file order) of the launch's
  correlation - for a graph launch (`gpu_ops` > 1) the first op of the graph;
- `ts`: when the launch call started (int ns, the file's clock; the earliest launch call of
  that correlation where a trace has several).
The statistics columns are exactly `cuda_kernel_launch_stats`'s (default mode).
"""

from __future__ import annotations

from collections.abc import Mapping

import polars as pl

from hta_tui.analysis.hta_view import hta_view
from hta_tui.analysis.launch import COLUMNS, cuda_kernel_launch_stats
from hta_tui.trace.schema import LAUNCH_KINDS

TABLE_COLUMNS: dict[str, pl.DataType] = {
    "rank": pl.Int64(),
    "kernel": pl.String(),
    **COLUMNS,
    "ts": pl.Int64(),
}


def launch_table(
    ranks: Mapping[int, pl.DataFrame],
    *,
    runtime_cutoff: float = 50,
    launch_delay_cutoff: float = 100,
    include_memory_events: bool = True,
) -> pl.DataFrame:
    """`cuda_kernel_launch_stats` of every rank in one frame with `rank`, `kernel` and `ts`
    (see the module docstring). Rows by rank, then in each rank's launch order. Empty (with
    the columns) when nothing was launched."""
    stats = cuda_kernel_launch_stats(
        ranks,
        runtime_cutoff=runtime_cutoff,
        launch_delay_cutoff=launch_delay_cutoff,
        include_memory_events=include_memory_events,
    )
    views = hta_view(ranks, columns=())
    kinds = ("kernel", "memcpy", "memset") if include_memory_events else ("kernel",)
    frames = []
    for rank, rows in stats.items():
        if rows.is_empty():
            continue
        view = views[rank].filter(pl.col("correlation").is_not_null())
        names = (
            view.filter(pl.col("gpu") & pl.col("kind").is_in(kinds))
            .sort(["start", "idx"])
            .group_by("correlation", maintain_order=True)
            .agg(pl.col("name").first().alias("kernel"))
        )
        starts = (
            view.filter(pl.col("kind").is_in(LAUNCH_KINDS))
            .group_by("correlation")
            .agg(pl.col("start").min().alias("ts"))
        )
        frames.append(
            rows.join(names, on="correlation", how="left", maintain_order="left")
            .join(starts, on="correlation", how="left", maintain_order="left")
            .with_columns(pl.lit(rank, pl.Int64).alias("rank"))
            .select(list(TABLE_COLUMNS))
            .cast(TABLE_COLUMNS)
        )
    if not frames:
        return pl.DataFrame(schema=TABLE_COLUMNS)
    return pl.concat(frames)
