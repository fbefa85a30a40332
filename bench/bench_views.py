"""The new views' cost on a large set: the step breakdown the app now computes per file in
the parser worker (so the overview answers "where does my step time go" with no frame read),
and each new view's computation on the loaded frames.

    python bench/bench_views.py                       # /work/bench_data/8x100MB
    python bench/bench_views.py --data DIR --pairs 2

Cold opens alternate between the report's `after_parse` (overview only) and the app's (overview
+ step breakdown), each into a fresh cache, so the ratio is measured on the same machine state.
Views: wall time of each `compute` on the warm set, and as a ratio to the Step time view's.
Prints a Markdown table; absolute times on a shared machine are noise, the ratios less so.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from hta_tui.analysis import overview, step_overview
from hta_tui.app.screens.base import Params
from hta_tui.app.screens.gpu_metrics import GpuMetricsScreen
from hta_tui.app.screens.kernels import KernelsScreen
from hta_tui.app.screens.operators import OperatorsScreen
from hta_tui.app.screens.step_time import StepTimeScreen
from hta_tui.trace.cache import Cache
from hta_tui.trace.model import open_set

DATA = Path("/work/bench_data/8x100MB")


def _timed(fn: Callable[[], Any]) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def cold_pairs(data: Path, pairs: int) -> list[tuple[float, float]]:
    out = []
    for _ in range(pairs):
        times = []
        for after in (overview.precompute, step_overview.precompute):
            with tempfile.TemporaryDirectory() as d:
                times.append(
                    _timed(lambda a=after, d=d: open_set(data, Cache(Path(d)), after_parse=a))
                )
        out.append((times[0], times[1]))
    return out


def view_times(data: Path) -> dict[str, float]:
    with tempfile.TemporaryDirectory() as d:
        cache = Cache(Path(d))
        ts = open_set(data, cache, after_parse=step_overview.precompute)
        frames = ts.frames()
        for f in frames.values():  # read every frame first: the views' own cost only
            f.height  # noqa: B018
        gpu = GpuMetricsScreen.__new__(GpuMetricsScreen)
        return {
            "overview step lines, warm (per-file memos)": _timed(
                lambda: step_overview.step_table(open_set(data, Cache(Path(d))))
            ),
            "Step time (1 B), for scale": _timed(lambda: StepTimeScreen.compute(frames, Params())),
            "GPU metrics (1 H)": _timed(lambda: gpu.compute_on(ts, frames, Params())),
            "Operators (5 R)": _timed(lambda: OperatorsScreen.compute(frames, Params())),
            "Kernels (2 K), per kernel": _timed(
                lambda: KernelsScreen.compute(frames, Params(extra={"fold": True}))
            ),
            "Kernels (2 K), v: per kernel + op": _timed(
                lambda: KernelsScreen.compute(frames, Params(extra={"by_op": True}))
            ),
        }


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--data", type=Path, default=DATA)
    ap.add_argument("--pairs", type=int, default=2)
    from trace_sets import add_set_arg

    add_set_arg(ap)
    args = ap.parse_args()
    args.data = args.trace_set or args.data
    pairs = cold_pairs(args.data, args.pairs)
    ratios = [b / a for a, b in pairs]
    print(f"## New views on {args.data.name}\n")
    print("Cold open, overview only / overview + step breakdown (s): " + ", ".join(
        f"{a:.2f} / {b:.2f}" for a, b in pairs))  # fmt: skip
    print(f"\nApp cold open / report cold open, median: **{statistics.median(ratios):.2f}**\n")
    times = view_times(args.data)
    scale = times["Step time (1 B), for scale"]
    print("| computation | s | x Step time |\n|---|---|---|")
    for name, t in times.items():
        print(f"| {name} | {t:.2f} | {t / scale:.2f} |")


if __name__ == "__main__":
    main()
