"""Run HTA 0.5 on one trace folder and write its answers as small JSON files.

Run with HTA's own interpreter, never the project's (HTA is a reference, not a dependency):

    /work/.htavenv/bin/python tools/hta_reference.py TRACE_DIR OUT_DIR

The files have the format of ../shared/oracle (README there): one frame per file,
`{"index_names", "index", "columns", "dtypes", "shape", "data"}`, NaN as null, and
`profiler_steps.json` with the steps and iterations per rank. This script imports nothing
from hta_tui, so it shows HTA's view alone. It made tests/data/hta/*.
"""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path
from typing import Any


def _plain(v: Any) -> Any:
    if hasattr(v, "item"):
        v = v.item()
    if isinstance(v, float) and math.isnan(v):
        return None
    if isinstance(v, tuple):
        return [_plain(x) for x in v]
    return v


def frame_doc(df: Any) -> dict[str, Any] | None:
    if df is None:
        return None
    return {
        "index_names": list(df.index.names),
        "index": [_plain(i) for i in df.index],
        "columns": [_plain(c) for c in df.columns],
        "dtypes": [str(t) for t in df.dtypes],
        "shape": list(df.shape),
        "data": [[_plain(v) for v in row] for row in df.itertuples(index=False)],
    }


def write(out: Path, name: str, df: Any) -> None:
    (out / name).write_text(json.dumps(frame_doc(df), indent=None) + "\n")


def main(trace_dir: str, out_dir: str) -> None:
    import pandas as pd
    from hta.trace_analysis import TraceAnalysis

    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    ta = TraceAnalysis(trace_dir=trace_dir)
    ranks = sorted(ta.t.traces)
    meta: dict[str, Any] = {"ranks": ranks, "errors": {}}

    def attempt(name: str, fn: Any) -> None:
        try:
            fn()
        except Exception as exc:  # HTA raises where a rank has no GPU data: note it
            meta["errors"][name] = f"{type(exc).__name__}: {exc}"

    attempt(
        "temporal_breakdown",
        lambda: write(out, "temporal_breakdown.json", ta.get_temporal_breakdown(visualize=False)),
    )

    def idle() -> None:
        got, stats = ta.get_idle_time_breakdown(
            ranks=ranks, visualize=False, show_idle_interval_stats=True
        )
        write(out, "idle_time_breakdown.json", got)
        write(out, "idle_interval_stats.json", stats)

    attempt("idle_time_breakdown", idle)

    def kernels(suffix: str, **kw: Any) -> None:
        types, per_kernel = ta.get_gpu_kernel_breakdown(visualize=False, **kw)
        write(out, f"gpu_kernel_breakdown{suffix}.kernel_type.json", types)
        write(out, f"gpu_kernel_breakdown{suffix}.kernels.json", per_kernel)

    attempt("gpu_kernel_breakdown", lambda: kernels(""))
    attempt(
        "gpu_kernel_breakdown_all", lambda: kernels("_all", duration_ratio=1.0, num_kernels=10**9)
    )

    def duration_stats() -> None:
        rows = []
        for rank in ranks:
            df = ta.t.get_trace(rank)
            gpu = df[df["stream"].ne(-1)].copy()
            sym = ta.t.symbol_table.sym_table
            gpu["name"] = gpu["name"].map(sym.__getitem__)
            gpu["cat"] = gpu["cat"].map(sym.__getitem__)
            g = gpu.groupby(["name", "cat"])["dur"]
            stats = g.agg(["count", "sum", "mean", "std", "min", "median", "max"]).reset_index()
            stats.insert(0, "rank", rank)
            rows.append(stats)
        table = pd.concat(rows, ignore_index=True) if rows else pd.DataFrame()
        write(out, "kernel_duration_stats.json", table)

    attempt("kernel_duration_stats", duration_stats)
    attempt(
        "comm_comp_overlap",
        lambda: write(out, "comm_comp_overlap.json", ta.get_comm_comp_overlap(visualize=False)),
    )
    attempt(
        "queue_length_summary",
        lambda: write(out, "queue_length_summary.json", ta.get_queue_length_summary(ranks)),
    )
    attempt(
        "memory_bw_summary",
        lambda: write(out, "memory_bw_summary.json", ta.get_memory_bw_summary(ranks)),
    )

    def counters() -> None:
        queues = ta.get_queue_length_time_series(ranks)
        for rank, df in queues.items():
            write(out, f"queue_length_time_series.rank{rank}.json", df)
        for rank, df in ta.get_memory_bw_time_series(ranks).items():
            write(out, f"memory_bw_time_series.rank{rank}.json", df)
        # a short queue (2), so that a small trace fills it
        blocked = ta.get_time_spent_blocked_on_full_queue(queues, max_queue_length=2)
        write(out, "time_spent_blocked_on_full_queue.json", blocked)

    attempt("counters", counters)

    def launches() -> None:
        for rank, df in ta.get_cuda_kernel_launch_stats(ranks, visualize=False).items():
            write(out, f"cuda_kernel_launch_stats.rank{rank}.json", df)

    attempt("cuda_kernel_launch_stats", launches)

    def annotations(file: str, gpu: bool) -> None:
        table = ta.get_gpu_user_annotation_breakdown(
            use_gpu_annotation=gpu, visualize=False, duration_ratio=1.0, num_kernels=10**9
        )
        write(out, file, table)

    attempt(
        "user_annotation_breakdown", lambda: annotations("user_annotation_breakdown.json", False)
    )
    attempt(
        "gpu_user_annotation_breakdown",
        lambda: annotations("gpu_user_annotation_breakdown.json", True),
    )

    def aten_ops() -> None:
        for rank, df in ta.get_aten_op_kernels_and_delay(ranks).items():
            write(out, f"aten_op_kernels_and_delay.rank{rank}.json", df)
        for rank in ranks[1:]:  # asked for alone: HTA's list of launches is never reset
            (df,) = ta.get_aten_op_kernels_and_delay([rank]).values()
            write(out, f"aten_op_kernels_and_delay.only_rank{rank}.json", df)

    attempt("aten_op_kernels_and_delay", aten_ops)

    def sequences() -> None:
        import tempfile

        params = {"operator_name": "ProfilerStep", "rank": ranks[0], "min_pattern_len": 3}
        params["top_k"] = 5
        with tempfile.TemporaryDirectory() as tmp:
            table = ta.get_frequent_cuda_kernel_sequences(output_dir=tmp, visualize=False, **params)
        write(out, "frequent_cuda_kernel_sequences.json", table)
        doc = {"params": params}
        (out / "frequent_cuda_kernel_sequences.params.json").write_text(json.dumps(doc) + "\n")

    attempt("frequent_cuda_kernel_sequences", sequences)

    def steps() -> None:
        from hta.analyzers.straggler import extract_iteration_info

        info = extract_iteration_info(ta.t).reset_index()
        doc = {
            "profiler_steps": ta.get_profiler_steps(),
            "iterations_per_rank": {str(r): ta.t.get_iterations(r) for r in ranks},
            "iterations": info[["rank", "iter", "ts", "dur", "end"]].to_dict("records"),
        }
        (out / "profiler_steps.json").write_text(json.dumps(_plain_tree(doc)) + "\n")

    attempt("profiler_steps", steps)

    def stragglers() -> None:
        doc = {"potential_stragglers": ta.get_potential_stragglers(visualize=False)}
        (out / "potential_stragglers.json").write_text(json.dumps(_plain_tree(doc)) + "\n")

    attempt("potential_stragglers", stragglers)
    (out / "meta.json").write_text(json.dumps(meta, indent=1) + "\n")


def _plain_tree(v: Any) -> Any:
    if isinstance(v, dict):
        return {k: _plain_tree(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [_plain_tree(x) for x in v]
    return _plain(v)


if __name__ == "__main__":
    main(*sys.argv[1:3])
