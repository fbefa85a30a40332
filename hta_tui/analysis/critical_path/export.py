"""A copy of a rank's trace with its critical path overlaid, to open in Perfetto (HTA's
`overlay_critical_path_analysis`): events on the path get `args.critical = 1`, and each
dependency, launch-delay and sync edge of the path becomes a flow arrow (cat
"critical_path", args: weight in us, type). Written where the caller says, never inside the
trace's folder; `only_critical` keeps only the path's events (and annotations), as HTA's
`only_show_critical_events`."""

from __future__ import annotations

import gzip
from pathlib import Path

import numpy as np
import orjson
import polars as pl

from hta_tui.analysis.critical_path import graph as g
from hta_tui.analysis.critical_path.path import RankPath
from hta_tui.trace.parse import read_bytes

#: HTA's DEFAULT_EDGE_TYPES_IN_VIZ.
FLOW_TYPES = (g.DEP, g.LAUNCH, g.SYNC)


def _check_target(src: Path, out: Path) -> None:
    src_r, out_r = src.resolve(), out.resolve()
    if out_r == src_r or out_r.is_relative_to(src_r.parent):
        raise ValueError(f"refusing to write {out} inside the trace folder {src_r.parent}")


def overlay(
    src_trace_path: str | Path,
    rp: RankPath,
    out_path: str | Path,
    *,
    only_critical: bool = False,
) -> Path:
    """Write the overlaid trace (gzipped when `out_path` ends with .gz); returns its path."""
    src, out = Path(src_trace_path), Path(out_path)
    _check_target(src, out)
    doc = orjson.loads(read_bytes(src))
    raw = doc.get("traceEvents", []) if isinstance(doc, dict) else []
    nodes = rp.graph.nodes
    idx = _positions(raw, nodes)
    path = rp.path
    on_path = set()
    for end in (rp.graph.src[path], rp.graph.dst[path]):
        on_path.update(idx[end // 2].tolist())
    on_path.discard(-1)
    for i in on_path:
        if 0 <= i < len(raw) and isinstance(raw[i], dict):
            args = raw[i].get("args")
            if not isinstance(args, dict):
                args = raw[i]["args"] = {}
            args["critical"] = 1
    flows = []
    keep = np.isin(rp.graph.type[path], FLOW_TYPES)
    for n, e in enumerate(path[keep].tolist()):
        for end, ph in ((int(rp.graph.src[e]), "s"), (int(rp.graph.dst[e]), "f")):
            i = int(idx[end // 2])  # -1: not found, the flow gets pid/tid 0
            ev = raw[i] if 0 <= i < len(raw) and isinstance(raw[i], dict) else {}
            ts = float(ev.get("ts", 0) or 0)
            if end % 2:
                ts += float(ev.get("dur", 0) or 0)
            flow = {
                "ph": ph,
                "id": n,
                "pid": ev.get("pid", 0),
                "tid": ev.get("tid", 0),
                "ts": ts,
                "cat": "critical_path",
                "name": "critical_path",
                "args": {
                    "weight": float(rp.graph.weight[e]) / 1000,
                    "critical": True,
                    "type": g.EDGE_TYPES[int(rp.graph.type[e])],
                },
            }
            if ph == "f":
                flow["bp"] = "e"
            flows.append(flow)
    if only_critical:
        raw = [
            ev
            for ev in raw
            if not isinstance(ev, dict)
            or ev.get("ph") != "X"
            or ev.get("cat") in ("user_annotation", "python_function")
            or (isinstance(ev.get("args"), dict) and ev["args"].get("critical") == 1)
        ]
    raw = raw + flows
    if isinstance(doc, dict):
        doc["traceEvents"] = raw
    else:
        doc = {"traceEvents": raw}
    data = orjson.dumps(doc)
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(out.name + ".tmp")
    tmp.write_bytes(gzip.compress(data, compresslevel=6) if out.name.endswith(".gz") else data)
    tmp.replace(out)
    return out


def _positions(raw: list, nodes: pl.DataFrame) -> np.ndarray:
    """Each node event's position in traceEvents (-1 when not found). An event's `idx` is
    its rank among the file's complete ("X") events; where the parser dropped one (a bad
    value), the later ones are found by name and nearest start instead."""
    complete = [i for i, e in enumerate(raw) if isinstance(e, dict) and e.get("ph") == "X"]
    names = nodes["name"].to_list()
    starts = nodes["start"].to_list()
    out = np.full(len(names), -1, dtype=np.int64)
    by_name: dict[str, list[int]] | None = None
    for k, i in enumerate(nodes["idx"].to_list()):
        if i < len(complete) and raw[complete[i]].get("name") == names[k]:
            out[k] = complete[i]
            continue
        if by_name is None:
            by_name = {}
            for p in complete:
                by_name.setdefault(str(raw[p].get("name")), []).append(p)
        cands = by_name.get(names[k], [])
        if cands:
            ts_us = starts[k] / 1000
            out[k] = min(cands, key=lambda p: abs(float(raw[p].get("ts", 0) or 0) - ts_us))
    return out


def critical_events(rp: RankPath) -> pl.DataFrame:
    """The trace idx of every event on the path (the timeline marks these)."""
    idx = rp.graph.nodes["idx"].to_numpy().astype(np.int64)
    ends = np.concatenate([rp.graph.src[rp.path], rp.graph.dst[rp.path]]) // 2
    return pl.DataFrame({"idx": np.unique(idx[ends])})
