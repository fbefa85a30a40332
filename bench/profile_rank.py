"""CPU of each rank-wise analysis on one rank, as a report's pool worker runs them.

Usage: POLARS_MAX_THREADS=1 python bench/profile_rank.py TRACE_DIR [RANK] [CACHE_DIR]

The worker's way (`registry.rank_parts`, one analysis after another, single-threaded polars
as `trace/pool.py` sets it): each figure is what that analysis adds, after the ones before it
built what they share (`analysis/shared.py`, `hta_view.job_cached`). CPU time of the process,
steadier than wall time on a loaded machine; no profiler attached (cProfile's per-call cost
inflates the analyses that loop in Python several times over).

Then the per-rank intermediates the analyses share (`job_cached`): how often each was asked
for, how often built (a build costs more than a millisecond; a kept one microseconds) and the
CPU of its builds, including what they build inside them. A name built more than once on one
rank is work the analyses do not share.
"""

import sys
import threading
import time
from collections import Counter

from hta_tui.analysis import hta_view, registry
from hta_tui.exec import split
from hta_tui.trace.cache import Cache
from hta_tui.trace.model import RankData, open_set

#: a `job_cached` call that took longer than this built its table (a kept one takes microseconds)
BUILT_S = 0.001


def _shared_builds() -> tuple[Counter[str], Counter[str], Counter[str]]:
    """asked, built and build CPU (s) per `job_cached` name, from a profile hook on its code
    (the analyses import the function by name, so patching the module would miss them)."""
    asked: Counter[str] = Counter()
    built: Counter[str] = Counter()
    cpu: Counter[str] = Counter()
    started: dict[int, float] = {}
    code = hta_view.job_cached.__code__

    def hook(frame, event, arg):  # type: ignore[no-untyped-def]
        if frame.f_code is not code:
            return
        if event == "call":
            started[id(frame)] = time.process_time()
        elif event == "return" and id(frame) in started:
            spent = time.process_time() - started.pop(id(frame))
            name = str(frame.f_locals.get("name"))
            asked[name] += 1
            if spent > BUILT_S:
                built[name] += 1
                cpu[name] += spent

    sys.setprofile(hook)
    threading.setprofile(hook)
    return asked, built, cpu


if __name__ == "__main__":
    traces = sys.argv[1]
    rank = int(sys.argv[2]) if len(sys.argv) > 2 else 0
    cache = Cache(sys.argv[3]) if len(sys.argv) > 3 else Cache()
    # every analysis's module imported first, as a report's pool workers have them (the
    # registry imports a module at its first use: that would count under the first analysis)
    registry.import_modules()
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

    # the same analyses again on frames read afresh (nothing kept), counting shared builds
    data = RankData(picked.entry, picked.meta)
    events = data.events
    asked, built, spent = _shared_builds()
    try:
        registry.rank_parts(
            {rank: events},
            names,
            registry.Options(),
            threads=1,
            frames=lambda f: {rank: data.frame(f)},
            meta={rank: picked.meta},
        )
    finally:
        sys.setprofile(None)
        threading.setprofile(None)  # type: ignore[arg-type]
    print(f"\n{'shared intermediate (job_cached)':36} {'asked':>5} {'built':>5} {'CPU s':>6}")
    for name in sorted(asked, key=lambda n: -spent[n]):
        print(f"{name:36} {asked[name]:5d} {built[name]:5d} {spent[name]:6.3f}")
