"""Where each rank runs (node, process, GPU) and which process groups the job has.

Kineto writes no host name. The node and process come from the file name by the TensorBoard
plugin's rule (`<node>_<process>` before the span digits: `worker3_step_12` is node
`worker3_step`, process 12), else the node is the file's worker name and the process the
rank's CPU pid. GPUs are the devices the rank's kernels, copies and sets ran on, described by
the trace's deviceProperties. Process groups come from `distributedInfo.pg_config`.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import polars as pl

from hta_tui.trace.model import TraceSet

#: The plugin's worker name: the file name without `[.<digits>].pt.trace.json[.gz]`.
_WORKER = re.compile(r"^(.*?)(\.\d+)?(\.pt\.trace)?\.json(\.gz)?$")
#: The plugin's node / process split of a worker name.
_NODE_PROCESS = re.compile(r"^(.*)_(\d+)")

HIERARCHY_COLUMNS: dict[str, pl.DataType] = {
    "rank": pl.Int64(),
    "node": pl.String(),
    "process": pl.String(),
    "gpu": pl.Int64(),
    "gpu_name": pl.String(),
    "memory_gb": pl.Float64(),
    "compute_capability": pl.String(),
    "backend": pl.String(),
    "world_size": pl.Int64(),
}

GROUP_COLUMNS: dict[str, pl.DataType] = {
    "pg_name": pl.String(),
    "pg_desc": pl.String(),
    "backend": pl.String(),
    "size": pl.Int64(),
    "ranks": pl.String(),
    "seen_by": pl.List(pl.Int64()),  # the ranks whose trace lists the group
}


def worker_name(path: str | Path) -> str:
    name = Path(path).name
    match = _WORKER.match(name)
    return match.group(1) if match else name


def _gpus(ev: pl.DataFrame) -> list[int]:
    gpu = ev.lazy().filter(pl.col("kind").is_in(["kernel", "memcpy", "memset"]))
    ids = gpu.select(pl.coalesce("device", "pid").drop_nulls().unique().sort()).collect()
    return [int(i) for i in ids.to_series()]  # (one query: a Series' drop_nulls is another)


def _cpu_pid(ev: pl.DataFrame) -> int | None:
    """The most frequent pid of the rank's CPU ops (the smallest of a tie): counted in numpy,
    one query a rank (a Series' drop_nulls, mode and sort were three more)."""
    cpu = ev.lazy().filter((pl.col("kind") == "cpu_op") & pl.col("pid").is_not_null())
    pids = cpu.select("pid").collect()["pid"].to_numpy()
    if not pids.size:
        return None
    import numpy as np  # (here: as steps.py, numpy is left out of the report's client)

    values, counts = np.unique(pids, return_counts=True)
    return int(values[counts == counts.max()].min())


def _at_once(
    ranks: Mapping[int, pl.DataFrame],
) -> tuple[dict[int, int | None], dict[int, list[int]]]:
    """Inside a batch of small ranks (`per_rank.batching`), every rank's `_cpu_pid` and
    `_gpus` in two queries over the batch's events (two queries a rank alone: most of a
    tiny rank's distributed part); ({}, {}) otherwise, or when they cannot be made."""
    from hta_tui.analysis.per_rank import batching, ranks_events

    if len(ranks) < 2 or not batching():
        return {}, {}
    try:
        ev = ranks_events(ranks).lazy()
        cpu = ev.filter((pl.col("kind") == "cpu_op") & pl.col("pid").is_not_null())
        counted = cpu.group_by("rank", "pid").agg(pl.len().alias("n"))
        mode = counted.sort(["rank", "n", "pid"], descending=[False, True, False])
        pids = dict(mode.group_by("rank").agg(pl.col("pid").first()).collect().rows())
        gpu = ev.filter(pl.col("kind").is_in(["kernel", "memcpy", "memset"]))
        ids = gpu.select("rank", pl.coalesce("device", "pid").alias("gpu")).drop_nulls("gpu")
        found = ids.group_by("rank").agg(pl.col("gpu").unique().sort()).collect()
    except pl.exceptions.PolarsError:  # (each rank alone, as before)
        return {}, {}
    gpus = {int(r): [int(i) for i in g] for r, g in found.rows()}
    return (
        {int(r): pids.get(r) for r in ranks},
        {int(r): gpus.get(r, []) for r in ranks},
    )


def _gpu_info(props: list[Any], gpu: int) -> dict[str, Any]:
    prop = props[gpu] if 0 <= gpu < len(props) and isinstance(props[gpu], dict) else {}
    mem = prop.get("totalGlobalMem")
    major, minor = prop.get("computeMajor"), prop.get("computeMinor")
    return {
        "gpu_name": prop.get("name"),
        "memory_gb": round(float(mem) / 1024**3, 2) if isinstance(mem, int | float) else None,
        "compute_capability": f"{major}.{minor}" if major is not None else None,
    }


def hierarchy(files: Mapping[int, tuple[str, dict[str, Any], pl.DataFrame]]) -> pl.DataFrame:
    """One row per rank and GPU it used (one row with null GPU for a CPU rank); `files` maps
    a rank to its file path, its parse metadata and its events."""
    rows = []
    pids, gpus = _at_once({rank: ev for rank, (_, _, ev) in files.items()})
    for rank, (path, meta, ev) in sorted(files.items()):
        worker = worker_name(path)
        split = _NODE_PROCESS.match(worker)
        node = split.group(1) if split else worker
        process = split.group(2) if split else str(pids[rank] if rank in pids else _cpu_pid(ev))
        dist = meta.get("distributed_info") or {}
        props = meta.get("device_properties") or []
        for gpu in (gpus[rank] if rank in gpus else _gpus(ev)) or [None]:
            info = _gpu_info(props, gpu) if gpu is not None else {}
            rows.append(
                {
                    "rank": rank,
                    "node": node,
                    "process": process,
                    "gpu": gpu,
                    **info,
                    "backend": dist.get("backend"),
                    "world_size": dist.get("world_size"),
                }
            )
    return pl.DataFrame(rows, schema=HIERARCHY_COLUMNS)


def process_groups(metas: Mapping[int, dict[str, Any]]) -> pl.DataFrame:
    """Every process group of `distributedInfo.pg_config`, with the ranks that list it."""
    return process_groups_of(process_group_rows(metas))


#: `process_group_rows`: one row per rank and process group its file lists.
GROUP_ROW_COLUMNS: dict[str, pl.DataType] = {
    "pg_name": pl.String(),
    "pg_desc": pl.String(),
    "backend": pl.String(),
    "size": pl.Int64(),
    "ranks": pl.String(),
    "rank": pl.Int64(),
}


def process_group_rows(metas: Mapping[int, dict[str, Any]]) -> pl.DataFrame:
    """The process groups each rank's file lists (what a rank sends for `process_groups`)."""
    rows = []
    for rank, meta in metas.items():
        dist = meta.get("distributed_info") or {}
        for pg in dist.get("pg_config") or ():
            if not isinstance(pg, dict):
                continue
            rows.append(
                {
                    "pg_name": str(pg.get("pg_name")),
                    "pg_desc": _text(pg.get("pg_desc")),
                    "backend": _text(pg.get("backend_config")),
                    "size": pg.get("pg_size") if isinstance(pg.get("pg_size"), int) else None,
                    "ranks": str(pg.get("ranks")),
                    "rank": rank,
                }
            )
    return pl.DataFrame(rows, schema=GROUP_ROW_COLUMNS)


def _text(value: Any) -> str | None:
    return None if value is None else str(value)


def process_groups_of(rows: pl.DataFrame) -> pl.DataFrame:
    """`process_groups` from `process_group_rows` of every rank (groups in first-listed order)."""
    if rows.is_empty():
        return pl.DataFrame(schema=GROUP_COLUMNS)
    keys = ["pg_name", "pg_desc", "backend", "size", "ranks"]
    return (
        rows.group_by(keys, maintain_order=True)
        .agg(pl.col("rank").sort().alias("seen_by"))
        .cast(GROUP_COLUMNS)  # type: ignore[arg-type]
    )


def tables(ts: TraceSet) -> dict[str, pl.DataFrame]:
    """`distributed_hierarchy` and `process_groups` of the loaded ranks: from each file's
    metadata (the registry's analyses get it as `meta`)."""
    loaded = ts.loaded()
    files = {}
    for rank, data in loaded.items():
        entry = ts.selected(rank)
        files[rank] = (str(entry.path) if entry else "", data.meta, data.events)
    return {
        "distributed_hierarchy": hierarchy(files),
        "process_groups": process_groups({r: d.meta for r, d in loaded.items()}),
    }
