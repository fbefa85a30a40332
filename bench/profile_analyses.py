"""Time every default analysis of the catalog on a loaded trace set, in catalog order.

Usage: python bench/profile_analyses.py CACHE_DIR [TRACE_DIR]

Prints each analysis's wall time, its CPU time (all threads: steadier than wall time on a
busy machine) and how much of it went to building HTA views (`hta_view`); the first analysis
also pays the one-time view build that the others share.
"""

import sys
import time
from pathlib import Path

from hta_tui.analysis import catalog, hta_view
from hta_tui.trace.cache import Cache
from hta_tui.trace.model import open_set

if __name__ == "__main__":
    cache = sys.argv[1]
    traces = sys.argv[2] if len(sys.argv) > 2 else str(Path(__file__).parent / "out" / "8x100MB")
    trace_set = open_set(traces, Cache(cache))
    ranks = trace_set.frames()
    orig = hta_view.hta_view
    calls = []

    def wrapped(*a, **k):
        t = time.perf_counter()
        r = orig(*a, **k)
        calls.append((time.perf_counter() - t, k.get("columns")))
        return r

    for mod in list(sys.modules.values()):
        name = getattr(mod, "__name__", "")
        if name.startswith("hta_tui.analysis") and getattr(mod, "hta_view", None) is orig:
            mod.hta_view = wrapped
    t, c = time.perf_counter(), time.process_time()
    for a in catalog.ANALYSES:
        if not a.default:
            continue
        n0 = len(calls)
        t0, c0 = time.perf_counter(), time.process_time()
        a.run(ranks, catalog.Options(), **{f: trace_set.frames(f) for f in a.frames})
        wall, cpu = time.perf_counter() - t0, time.process_time() - c0
        views = sum(v[0] for v in calls[n0:])
        print(f"{a.name:32} {wall:.2f}s  cpu {cpu:.2f}s  views {views:.2f}s x{len(calls) - n0}")
    wall, cpu = time.perf_counter() - t, time.process_time() - c
    print(f"total {wall:.2f}s  cpu {cpu:.2f}s  views {sum(v[0] for v in calls):.2f}s")
