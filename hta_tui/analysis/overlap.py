"""Communication/computation overlap: how much NCCL time is hidden behind compute.

HTA's `get_comm_comp_overlap`: per rank, the length of (union of COMMUNICATION kernels) ∩
(union of COMPUTATION kernels) over the length of the communication union, in percent.
"""

from __future__ import annotations

from collections.abc import Mapping

import polars as pl

from hta_tui.analysis.temporal import gpu_unions

COLUMNS: dict[str, pl.DataType] = {"rank": pl.Int64(), "comp_comm_overlap_pctg": pl.Float64()}


def comm_comp_overlap(
    ranks: Mapping[int, pl.DataFrame], *, hta_compat: bool = False
) -> pl.DataFrame:
    """rank, comp_comm_overlap_pctg (rounded to 2 decimals like HTA), one row per rank.

    Unlike the temporal breakdown, HTA answers for every rank here: a rank without
    communication kernels gets a null percentage (HTA's 0/0 NaN), not a missing row.
    """
    rows = []
    for rank, comm, comm_comp, comp in (
        gpu_unions(ranks, hta_compat=hta_compat)
        .select("rank", "comm", "comm_comp", "comp")
        .iter_rows()
    ):
        pctg = None
        if comm != 0:  # |comm ∩ comp| = |comm| + |comp| - |comm ∪ comp|
            pctg = round(100 * (comm + comp - comm_comp) / comm, 2)
        rows.append((rank, pctg))
    return pl.DataFrame(rows, schema=COLUMNS, orient="row")
