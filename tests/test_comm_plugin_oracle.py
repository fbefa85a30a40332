"""The TensorBoard plugin's Distributed view, against what the plugin served
(../shared/oracle-tb/<case>/All/<span>/distributed_*.json), within 0.1%."""

from __future__ import annotations

import json
import math
from pathlib import Path

import polars as pl
import pytest

from hta_tui.analysis import comm_plugin, comm_topology
from hta_tui.trace.model import TraceSet
from tests.conftest import SHARED
from tests.shared_sets import trace_set

ORACLE = SHARED / "oracle-tb"


def _cases() -> list[str]:
    """Cases with a Distributed view whose every worker has one span (the plugin's view is
    per span; ours shows a rank's newest)."""
    if not ORACLE.is_dir():
        return []
    out = []
    for all_dir in sorted(ORACLE.rglob("All")):
        case = all_dir.parent
        meta = json.loads((case / "meta.json").read_text())
        spans = meta.get("spans_by_worker", {})
        if all(len(v) == 1 for v in spans.values()) and any(all_dir.glob("*/distributed_*")):
            out.append(str(case.relative_to(ORACLE)))
    return out


def _load(case: str) -> tuple[TraceSet, dict[str, int], Path]:
    ts = trace_set(SHARED / "traces" / case)
    meta = json.loads((ORACLE / case / "meta.json").read_text())
    by_name = {e.path.name: e.rank for e in ts.files().values()}
    workers = {f["worker"]: by_name[f["source"]] for f in meta["files"] if f["source"] in by_name}
    (span,) = (ORACLE / case / "All").iterdir()
    return ts, workers, span


def _close(ours: float | None, theirs: float, *, rounded: bool = False) -> bool:
    if ours is None:
        return False
    if rounded:  # the plugin's round() / int() of a mean: one unit either way
        return abs(ours - theirs) <= 1
    return math.isclose(ours, theirs, rel_tol=1e-3, abs_tol=0.01)


@pytest.mark.shared
@pytest.mark.parametrize("case", _cases())
def test_overlap(case: str) -> None:
    ts, workers, span = _load(case)
    served = json.loads((span / "distributed_overlap.json").read_text())["data"]
    ours = comm_plugin.overlap(ts.frames())
    cols = ["computation", "overlapping", "communication", "other"]
    checked = 0
    for step, per_worker in served.items():
        for worker, values in per_worker.items():
            row = ours.filter((pl.col("rank") == workers[worker]) & (pl.col("step") == step))
            assert row.height == 1, (case, step, worker)
            for col, want in zip(cols, values, strict=True):
                got = row[col].item()
                assert _close(got, want, rounded=step == "all"), (
                    case,
                    step,
                    worker,
                    col,
                    got,
                    want,
                )
                checked += 1
    assert checked > 0


def _step_key(step: str) -> str | None:
    return None if step == "null" else step


@pytest.mark.shared
@pytest.mark.parametrize("case", _cases())
def test_waittime(case: str) -> None:
    ts, workers, span = _load(case)
    served = json.loads((span / "distributed_waittime.json").read_text())["data"]
    ours = comm_plugin.waittime(ts.frames())
    for step, per_worker in served.items():
        for worker, (transfer, sync) in per_worker.items():
            key = _step_key(step)
            step_is = pl.col("step").is_null() if key is None else pl.col("step") == key
            row = ours.filter((pl.col("rank") == workers[worker]) & step_is)
            assert row.height == 1, (case, step, worker)
            rounded = step == "all"
            assert _close(row["transfer"].item(), transfer, rounded=rounded), (case, step, worker)
            assert _close(row["synchronizing"].item(), sync, rounded=rounded), (case, step, worker)


@pytest.mark.shared
@pytest.mark.parametrize("case", _cases())
def test_comm_ops(case: str) -> None:
    ts, workers, span = _load(case)
    served = json.loads((span / "distributed_commops.json").read_text())["data"]
    ours = comm_plugin.comm_ops(ts.frames())
    cols = [
        "calls",
        "total_size",
        "avg_size",
        "total_latency",
        "avg_latency",
        "transfer",
        "avg_transfer",
    ]
    for worker, table in served.items():
        for name, *values in table["rows"]:
            row = ours.filter((pl.col("rank") == workers[worker]) & (pl.col("name") == name))
            assert row.height == 1, (case, worker, name)
            for col, want in zip(cols, values, strict=True):
                got = row[col].item()
                assert _close(got, want, rounded=col.startswith("avg")), (case, worker, col)


@pytest.mark.shared
@pytest.mark.parametrize("case", _cases())
def test_gpu_info(case: str) -> None:
    """Node / process / GPU of every rank, as the plugin's `distributed_gpuinfo` names them."""
    ts, workers, span = _load(case)
    served = json.loads((span / "distributed_gpuinfo.json").read_text())
    ours = comm_topology.tables(ts)["distributed_hierarchy"]
    if served is None:  # no deviceProperties: we still list the ranks, without GPU names
        assert ours["gpu_name"].null_count() == ours.height
        return
    rows = 0
    for node, processes in served["data"].items():
        for process, gpus in processes.items():
            for gpu, info in gpus.items():
                row = ours.filter(
                    (pl.col("node") == node) & (pl.col("gpu") == int(gpu.removeprefix("GPU")))
                ).row(0, named=True)
                if node not in workers:
                    # a worker name without `_<n>` is the node itself, and the plugin numbers
                    # its processes 0, 1, ...; we give the rank's pid, on purpose
                    assert row["process"] == process.removeprefix("Process ")
                assert row["gpu_name"] == info["Name"]
                assert f"{row['memory_gb']} GB" == info["Memory"]
                assert row["compute_capability"] == info["Compute Capability"]
                rows += 1
    assert rows == ours.height
