"""Issue 31 point 4: all-gathers and reduce-scatters per process group and stream, how much
of each computation hides per step and layer, and a flag where they serialise on one
stream; on a generated FSDP trace whose overlap is known and on a real NCCL trace."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import polars as pl
import pytest

from hta_tui.analysis.collective_streams import collective_streams, collectives_hidden
from hta_tui.synth import fsdp
from hta_tui.synth.files import write_trace
from hta_tui.trace.parse import parse_bytes, read_bytes
from tests.shared_sets import parsed


def _events(tmp_path: Path, **kw: object) -> pl.DataFrame:
    path = write_trace(fsdp.make_fsdp(**kw), tmp_path / "fsdp.json")  # type: ignore[arg-type]
    return parse_bytes(read_bytes(path)).frames["events"]


@pytest.mark.parametrize("separate", [False, True])
def test_fsdp_collectives_hidden_per_step_and_layer(tmp_path: Path, separate: bool) -> None:
    """Layer 0's all-gather runs before any compute and the last backward reduce-scatter
    after it: those are exposed; every other one runs under the neighbour layer's GEMM."""
    events = _events(tmp_path, steps=2, layers=3, separate_streams=separate)
    table = collectives_hidden({0: events})
    assert set(table["pg"]) == {fsdp.PG}
    rs_stream = fsdp.RS_STREAM_SEPARATE if separate else fsdp.AG_STREAM
    streams = dict(table.select("kind", "stream").unique().rows())
    assert streams == {"all_gather": fsdp.AG_STREAM, "reduce_scatter": rs_stream}
    assert table.height == 2 * 2 * 3  # kinds x steps x layers
    assert (table["calls"] == 1).all()
    for kind, layer, exposed in table.select("kind", "module", "exposed (us)").iter_rows():
        full = fsdp.AG_US if kind == "all_gather" else fsdp.RS_US
        assert exposed == (full if layer == "Layer_0" else 0.0), (kind, layer)
    assert set(table["step"]) == {1, 2}
    per_kind = table.group_by("kind").agg(pl.col("hidden (us)").sum())
    assert dict(per_kind.rows()) == {
        "all_gather": 2 * 2 * fsdp.AG_US,  # layers 1, 2 of both steps
        "reduce_scatter": 2 * 2 * fsdp.RS_US,
    }


def test_serialised_all_gather_and_reduce_scatter_are_flagged(tmp_path: Path) -> None:
    one = collective_streams({0: _events(tmp_path, separate_streams=False)})
    assert one.select("stream", "kinds", "serialised").rows() == [
        (fsdp.AG_STREAM, "all_gather, reduce_scatter", True)
    ]
    assert (
        one["verdict"]
        .item()
        .startswith(f"all-gathers and reduce-scatters serialise on stream {fsdp.AG_STREAM}")
    )
    two = collective_streams({0: _events(tmp_path, separate_streams=True)})
    assert not two["serialised"].any()
    assert two["stream"].to_list() == [fsdp.AG_STREAM, fsdp.RS_STREAM_SEPARATE]


@pytest.mark.shared
def test_real_nccl_kernels_by_process_group_and_stream(shared: Path) -> None:
    """tracelens_b200_eager_nccl: every NCCL kernel is in the table once, under the process
    group and stream its args and event say (raw JSON)."""
    (path,) = (shared / "traces" / "tracelens_b200_eager_nccl").iterdir()
    with gzip.open(path) as f:
        raw = json.load(f)["traceEvents"]
    nccl = [e for e in raw if e.get("cat") == "kernel" and e["name"].startswith("nccl")]
    assert nccl
    table = collectives_hidden({0: parsed(path).frames["events"]})
    assert table["calls"].sum() == len(nccl)
    assert table["time (us)"].sum() == pytest.approx(sum(e["dur"] for e in nccl))
    want = {(str(e["args"]["Process Group Name"]), e["args"]["stream"]) for e in nccl}
    assert set(table.select("pg", "stream").rows()) == want


def test_api_methods(tmp_path: Path) -> None:
    """The TraceAnalysis methods give the analyses' tables."""
    from hta_tui.api import TraceAnalysis
    from hta_tui.synth.graph_replay import make_graph_replay

    roots = {}
    for name, trace in (("fsdp", fsdp.make_fsdp()), ("graph", make_graph_replay(inside_op=False))):
        roots[name] = tmp_path / name
        roots[name].mkdir()
        write_trace(trace, roots[name] / "rank-0.json")
    ta = TraceAnalysis(roots["fsdp"], cache=False)
    assert ta.get_collective_streams()["serialised"].to_list() == [True]
    assert ta.get_collectives_hidden()["calls"].sum() == 12
    ta = TraceAnalysis(roots["graph"], cache=False)
    attribution = ta.get_kernel_attribution()
    assert attribution["no_operator_pct"].round(1).to_list() == [99.7]
    assert ta.get_kernel_owners(0)["graph"].sum() == 24
    assert set(ta.get_unattributed_kernels()["launch"]) == {"cudaGraphLaunch"}
    assert "Triton" in set(ta.get_kernel_backends()["backend"])
