"""hta-tui against the TensorBoard profiler plugin (torch-tb-profiler 0.4.3) on the same files:
each side's load + compute of the plugin's views (Overview step breakdown, GPU metrics, Kernel
and Operator views) from a cold start, in its own subprocess.

The plugin runs exactly its loader's steps per file (`RunProfileData.parse`, then
`RunGenerator.generate_run_profile`), one process per file, as many at once as there are cores
(its loader starts one process per file). It needs a venv with the plugin and pandas < 3:

    python3 -m venv /work/.tbvenv
    /work/.tbvenv/bin/pip install /tmp/dl/torch_tb_profiler-0.4.3-py3-none-any.whl "pandas<3"
    python bench/bench_tb_plugin.py [--ranks 8 --mb 100] [--tb-python /work/.tbvenv/bin/python]

hta-tui opens the folder cold (every file parsed, into a fresh cache) and runs the same views,
then again warm (from that cache); the plugin has no cache of its own. Results go to
bench/TB_PLUGIN.md.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
TB_PYTHON = os.environ.get("TB_PYTHON", "/work/.tbvenv/bin/python")
VIEWS = [
    "step_time_breakdown",
    "gpu_metrics",
    "gpu_metric_series",
    "kernel_view",
    "kernel_view_by_op",
    "operator_stats",
]


def _plugin_one(path: str) -> float:
    from torch_tb_profiler.profiler.data import RunProfileData
    from torch_tb_profiler.profiler.run_generator import RunGenerator

    t0 = time.perf_counter()
    with tempfile.TemporaryDirectory() as cache:
        data = RunProfileData.parse("worker", "default", path, cache)
        RunGenerator("worker", "default", data).generate_run_profile()
    return time.perf_counter() - t0


def _plugin(folder: Path) -> dict:
    from concurrent.futures import ProcessPoolExecutor

    files = [str(p) for p in sorted(folder.glob("*.json*"))]
    t0 = time.perf_counter()
    with ProcessPoolExecutor(max_workers=os.cpu_count()) as pool:
        per_file = list(pool.map(_plugin_one, files))
    return {"wall_s": time.perf_counter() - t0, "per_file_s": per_file}


def _ours(folder: Path) -> dict:
    from hta_tui.analysis import catalog
    from hta_tui.trace.cache import Cache
    from hta_tui.trace.model import open_set

    with tempfile.TemporaryDirectory() as root:
        t0 = time.perf_counter()
        ts = open_set(folder, Cache(root))  # cold: every file parsed (and cached)
        loaded = time.perf_counter() - t0
        catalog.run(ts.frames(), VIEWS)
        cold = time.perf_counter() - t0
        t0 = time.perf_counter()
        catalog.run(open_set(folder, Cache(root)).frames(), VIEWS)  # warm: an open from cache
        warm = time.perf_counter() - t0
    return {"wall_s": cold, "load_s": loaded, "warm_s": warm}


def run(args: list[str], python: str = sys.executable) -> dict:
    from bench_analyses import run as run_side

    return run_side(args, python, script=Path(__file__).resolve())


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--ranks", type=int, default=8)
    ap.add_argument("--mb", type=float, default=100.0)
    ap.add_argument("--folder", type=Path, help="a trace folder instead of synthetic data")
    ap.add_argument("--tb-python", default=TB_PYTHON)
    ap.add_argument("--out", type=Path, default=HERE / "TB_PLUGIN.md")
    ap.add_argument("--side", help=argparse.SUPPRESS)
    from trace_sets import add_set_arg

    add_set_arg(ap)
    args = ap.parse_args()
    args.folder = args.folder or args.trace_set
    if args.side:
        side = _plugin if args.side == "plugin" else _ours
        print(json.dumps(side(args.folder)))
        return

    from bench_open import ensure_traces

    folder = args.folder or HERE / "out" / f"{args.ranks}x{args.mb:g}MB"
    if args.folder is None:
        ensure_traces(folder, args.ranks, args.mb)
    ours = run(["--side", "ours", "--folder", str(folder)])
    plugin = run(["--side", "plugin", "--folder", str(folder)], python=args.tb_python)
    shown = folder.relative_to(HERE.parent) if folder.is_relative_to(HERE.parent) else folder
    lines = [
        "# hta-tui against the TensorBoard profiler plugin",
        "",
        f"Command: `python bench/bench_tb_plugin.py {' '.join(sys.argv[1:])}`  ",
        f"Data: `{shown}`;"
        f" {os.cpu_count()} cores; {time.strftime('%Y-%m-%d')}. Load + the plugin's views "
        f"({', '.join(VIEWS)}); hta-tui cold (every file parsed) and warm (from its cache), "
        "the plugin as its loader runs (it has no cache).",
        "",
        "| side | wall s |",
        "|---|---:|",
        f"| hta-tui, cold (parse {ours.get('load_s', float('nan')):.2f} s) | "
        f"{ours.get('wall_s', float('nan')):.2f} |",
        f"| hta-tui, warm (cache) | {ours.get('warm_s', float('nan')):.2f} |",
    ]
    if "error" in plugin:
        lines.append(f"| torch-tb-profiler 0.4.3 | failed: {plugin['error']} |")
    else:
        files = ", ".join(f"{t:.1f}" for t in plugin["per_file_s"])
        lines.append(f"| torch-tb-profiler 0.4.3 (per file: {files}) | {plugin['wall_s']:.1f} |")
        ratio = plugin["wall_s"] / ours["wall_s"]
        warm = plugin["wall_s"] / ours["warm_s"]
        lines += [
            "",
            f"Plugin / hta-tui: **{ratio:.0f}x** cold, {warm:.0f}x warm (target >= 20x).",
        ]
    args.out.write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
