"""The kernels' launching operator (`kernel_view._launchers`), joined on the owner's
position and named after, answers as the name-carrying join it replaced, on a generated rank
with repeated correlations (a second call of a correlation in another operator, one outside
every operator), unnamed operators, and in both modes."""

from __future__ import annotations

import polars as pl
import pytest

from hta_tui.analysis import kernel_view, op_tree, tb_roles
from hta_tui.synth.small_job import Dialect, JobShape, trace_bytes
from hta_tui.trace.parse import parse_bytes


def _reference(events: pl.DataFrame, *, tb_compat: bool) -> pl.DataFrame:
    """The previous `_launchers`: each call's owner name carried through the join."""
    nodes, links = op_tree.build(events, tb_compat=tb_compat)
    named = links.select("correlation", nodes["name"].gather(links["pos"]).alias("name"))
    runtimes = events.filter(
        tb_roles.runtime_rows(tb_compat=tb_compat) & pl.col("correlation").is_not_null()
    ).select("correlation", "external_id")
    linked = runtimes.join(named, on="correlation", how="left")
    outside = pl.col("external_id").fill_null(0) == 0 if tb_compat else pl.col("name").is_null()
    operator = pl.when(outside).then(pl.lit(kernel_view.ROOT)).otherwise("name")
    return linked.select("correlation", operator.alias("operator")).unique(
        "correlation", keep="first", maintain_order=True
    )


@pytest.mark.parametrize("tb_compat", [False, True])
def test_launchers_as_the_name_join(tb_compat: bool) -> None:
    events = parse_bytes(trace_bytes(Dialect(), JobShape(ranks=1, steps=2), 0)).frames["events"]
    rt = tb_roles.runtime_rows(tb_compat=False)
    # External ids for the plugin's rule: the operators numbered 1.. by start, a call
    # pointing at one of them (every seventh 0: CallTreeRoot's)
    op = pl.col("kind") == "cpu_op"
    ext = pl.col("correlation") % op.sum() + 1
    events = events.with_columns(
        pl.when(op)
        .then(pl.col("ts").rank("ordinal").over(op).cast(pl.Int64))
        .when(rt)
        .then(pl.when(pl.col("correlation") % 7 == 0).then(0).otherwise(ext))
        .otherwise("external_id")
        .alias("external_id")
    )
    calls = events.filter(rt & pl.col("correlation").is_not_null())
    ops = events.filter(op).sort("ts")
    # every third call again, inside the last operator; every fifth again after everything
    inner = calls.gather_every(3).with_columns(
        pl.lit(ops["ts"][-1]).alias("ts"), pl.lit(0, pl.Int64).alias("dur")
    )
    late = calls.gather_every(5).with_columns(pl.col("ts") + 10**12)
    unnamed = pl.when(pl.col("kind") == "cpu_op").then(
        pl.when(pl.col("ts").rank("ordinal") % 4 == 0).then(None).otherwise("name")
    )
    events = pl.concat([events, inner, late]).with_columns(
        unnamed.otherwise("name").alias("name"),
        pl.when(rt).then(pl.lit("Runtime")).otherwise("cat").alias("cat"),  # the plugin's rule
    )
    want = _reference(events, tb_compat=tb_compat)
    got = kernel_view._launchers(events, tb_compat=tb_compat)
    assert got.equals(want)
    assert want["operator"].n_unique() > 3 and (want["operator"] == kernel_view.ROOT).any()
