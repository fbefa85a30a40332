"""The Kernels view's TensorBoard columns (key `K`): tensor cores used, mean blocks per SM and
mean est. achieved occupancy beside HTA's statistics, each kernel's backend (cuBLAS, Triton,
MIOpen...: analysis/kernel_backend.py), and the plugin's second grouping, per
kernel + launching operator + launch properties (`v`).

Both come from analysis/kernel_view.py over every kernel of the ranks shown (the plugin's
Kernel view reads the whole trace); the per-kernel columns join HTA's table by name, so the
folded "others" row has none.
"""

from __future__ import annotations

import polars as pl

#: kernel_view column -> header
HEADERS: dict[str, str] = {
    "tc_used": "tc",
    "mean_blocks_per_sm": "blocks/SM",
    "mean_est_achieved_occupancy_pct": "occupancy %",
}
#: the by-operator table's columns, in the order shown (after the kernel's name)
BY_OP: dict[str, str] = {
    "operator": "operator",
    "total (us)": "sum us",
    "calls": "count",
    "mean (us)": "mean us",
    **HEADERS,
    "grid": "grid",
    "block": "block",
    "registers": "regs",
    "shared_memory": "shmem",
    "max (us)": "max us",
    "min (us)": "min us",
    "op_tc_eligible": "op tc eligible",
    "tc_used_plugin_list": "tc 2021 list",
    "name": "name",
}


#: No kernel's backend known yet (the Kernels view shows its numbers before them).
NO_BACKENDS = pl.DataFrame(schema={"name": pl.String, "backend": pl.String})


def with_kernel_view(
    table: pl.DataFrame, view: pl.DataFrame, backends: pl.DataFrame
) -> pl.DataFrame:
    """HTA's per-kernel table with the plugin's three columns after `mean us` (`view`: the
    registry's `kernel_view_job`) and each kernel's backend (`kernel_backend_by_name`)."""
    if table.is_empty():
        return table.with_columns(
            pl.lit(None, pl.Boolean).alias("tc"),
            pl.lit(None, pl.Float64).alias("blocks/SM"),
            pl.lit(None, pl.Float64).alias("occupancy %"),
            pl.lit(None, pl.String).alias("backend"),
        )
    extra = view.select("name", *HEADERS).rename(HEADERS) if not view.is_empty() else None
    if extra is None:
        extra = pl.DataFrame(
            schema={"name": pl.String, "tc": pl.Boolean, "blocks/SM": pl.Float64,
                    "occupancy %": pl.Float64}
        )  # fmt: skip
    joined = table.join(extra, on="name", how="left", maintain_order="left")
    joined = joined.join(backends, on="name", how="left", maintain_order="left")
    cols = table.columns
    at = cols.index("mean us") + 1 if "mean us" in cols else len(cols)
    return joined.select(*cols[:at], *HEADERS.values(), "backend", *cols[at:])


def by_operator(view: pl.DataFrame) -> pl.DataFrame:
    """Per kernel + launching operator + grid, block, registers, shared memory (`view`: the
    registry's `kernel_view_job_by_op`)."""
    if view.is_empty():
        return pl.DataFrame(schema={h: pl.String for h in BY_OP.values()})
    return view.select(*BY_OP).rename(BY_OP)
