"""Critical path of one step of a 100 MB rank: hta-tui beside traceinsight (HTA 0.6.1).

    python bench/bench_critical_path.py --folder DIR [--traceinsight PYTHON]

DIR holds one rank (e.g. made by `python -m hta_tui.synth --ranks 1 --target-mb 100`).
The frames come from the parser cache (parsing is bench_open's business); the time is the
path of the first ProfilerStep: clipping, graph, longest path and breakdown. With
`--traceinsight` (a Python that has traceinsight installed, outside this project) its
`critical_path_analysis` on the same step is timed too, after its own parse.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

HTA_SNIPPET = """
import sys, time, json
from hta.trace_analysis import TraceAnalysis
ta = TraceAnalysis(trace_dir=sys.argv[1])
rank = next(iter(ta.t.traces))
t = time.perf_counter()
cp, ok = ta.critical_path_analysis(rank=rank, annotation="ProfilerStep", instance_id=0)
br = cp.get_critical_path_breakdown()
sec = time.perf_counter() - t
print(json.dumps({"seconds": sec, "ok": bool(ok), "length": float(br.duration.sum())}))
"""


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--folder")
    ap.add_argument("--traceinsight", help="a Python with traceinsight installed")
    ap.add_argument("--repeat", type=int, default=3)
    from trace_sets import add_set_arg

    add_set_arg(ap)
    args = ap.parse_args()
    args.folder = args.folder or (str(args.trace_set) if args.trace_set else None)
    if args.folder is None:
        ap.error("--folder or --set is required")

    from hta_tui.analysis.critical_path import path as cp
    from hta_tui.api import TraceAnalysis

    ta = TraceAnalysis(args.folder)
    rank = ta.ranks[0]
    events = ta.events(rank)
    best = best_cpu = float("inf")
    for _ in range(args.repeat):
        t = time.perf_counter()
        c = time.process_time()
        ev = cp.prepared(events, hta_compat=False)
        window = cp.windows(ev, "ProfilerStep", 0)
        assert window is not None
        rp = cp.rank_path(ev, rank, window)
        cp.breakdown(rp)
        best = min(best, time.perf_counter() - t)
        best_cpu = min(best_cpu, time.process_time() - c)
    size = sum(f.stat().st_size for f in Path(args.folder).iterdir()) / 1e6
    out = {
        "file_mb": round(size, 1),
        "events": events.height,
        "step_nodes": 2 * rp.graph.nodes.height,
        "step_edges": int(rp.graph.src.size),
        "hta_tui_s": round(best, 3),
        "hta_tui_cpu_s": round(best_cpu, 3),  # CPU time: honest on a shared machine
        "path_us": rp.length_ns / 1000,
    }
    if args.traceinsight:
        res = subprocess.run(
            [args.traceinsight, "-c", HTA_SNIPPET, args.folder],
            capture_output=True,
            text=True,
            check=False,
        )
        lines = [ln for ln in res.stdout.splitlines() if ln.startswith("{")]
        if lines:
            hta = json.loads(lines[-1])
            out["traceinsight_s"] = round(hta["seconds"], 2)
            out["traceinsight_path_us"] = hta["length"]
        else:
            out["traceinsight_error"] = res.stderr.strip().splitlines()[-1:] or "no output"
    json.dump(out, sys.stdout, indent=1)
    print()


if __name__ == "__main__":
    main()
