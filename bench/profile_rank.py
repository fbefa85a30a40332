"""CPU of each rank-wise analysis on one rank, as a report's pool worker runs them.

Usage: POLARS_MAX_THREADS=1 python bench/profile_rank.py TRACE_DIR [RANK] [CACHE_DIR]

The worker's way (`registry.rank_parts`, one analysis after another, single-threaded polars
as `trace/pool.py` sets it): each figure is what that analysis adds, after the ones before it
built what they share (`analysis/shared.py`, `hta_view.job_cached`). CPU time of the process,
steadier than wall time on a loaded machine; no profiler attached (cProfile's per-call cost
inflates the analyses that loop in Python several times over).
"""

import sys
import time

from hta_tui.analysis import registry
from hta_tui.exec import split
from hta_tui.trace.cache import Cache
from hta_tui.trace.model import RankData, open_set

if __name__ == "__main__":
    traces = sys.argv[1]
    rank = int(sys.argv[2]) if len(sys.argv) > 2 else 0
    cache = Cache(sys.argv[3]) if len(sys.argv) > 3 else Cache()
    trace_set = open_set(traces, cache)
    trace_set.frames()
    picked = next(r for r in split._ranks(trace_set) if r.rank == rank)
    data = RankData(picked.entry, picked.meta)
    c = time.process_time()
    events = data.events
    print(f"{'read the events':36} {time.process_time() - c:.3f}  {events.shape}")
    names = [
        a.name
        for a in registry.ANALYSES
        if a.scope in ("rank", "reduce") and not a.inputs and a.default
    ]
    cpu: dict[str, float] = {}
    for name in names:
        c = time.process_time()
        registry.rank_parts(
            {rank: events},
            [name],
            registry.Options(),
            threads=1,
            frames=lambda f: {rank: data.frame(f)},
            meta={rank: picked.meta},
        )
        cpu[name] = time.process_time() - c
    for name, s in sorted(cpu.items(), key=lambda kv: -kv[1]):
        print(f"{name:36} {s:.3f}")
    print(f"{'total':36} {sum(cpu.values()):.3f}")
