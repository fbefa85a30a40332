"""hta-tui against the TensorBoard profiler plugin (torch-tb-profiler 0.4.3) on the same files:
each side's load + compute of the plugin's views (Overview step breakdown, GPU metrics, Kernel
and Operator views) from a cold start, in its own subprocess.

The plugin runs exactly its loader's steps per file (`RunProfileData.parse`, then
`RunGenerator.generate_run_profile`), one process per file, as many at once as there are cores
(its loader starts one process per file). It needs a venv with the plugin and pandas < 3:

    python3 -m venv /work/.tbvenv
    /work/.tbvenv/bin/pip install /tmp/dl/torch_tb_profiler-0.4.3-py3-none-any.whl "pandas<3"
    python bench/bench_tb_plugin.py [--ranks 8 --mb 100] [--tb-python /work/.tbvenv/bin/python]

hta-tui opens the folder without a cache (parse included) and runs the same views. Results go
to bench/TB_PLUGIN.md.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
TB_PYTHON = os.environ.get("TB_PYTHON", "/work/.tbvenv/bin/python")
VIEWS = ["step_time_breakdown", "gpu_metrics", "kernel_view", "operator_stats"]


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

    t0 = time.perf_counter()
    ts = open_set(folder, Cache(enabled=False))
    loaded = time.perf_counter() - t0
    catalog.run(ts.frames(), VIEWS)
    return {"wall_s": time.perf_counter() - t0, "load_s": loaded}


def run(args: list[str], python: str = sys.executable) -> dict:
    proc = subprocess.run(
        [python, str(Path(__file__).resolve()), *args],
        capture_output=True,
        text=True,
        timeout=7200,
        check=False,
        env={**os.environ, "PYTHONPATH": str(HERE.parent)},
    )
    if proc.returncode != 0:
        return {"error": (proc.stderr.strip().splitlines() or ["failed"])[-1][:200]}
    return json.loads(proc.stdout.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--ranks", type=int, default=8)
    ap.add_argument("--mb", type=float, default=100.0)
    ap.add_argument("--folder", type=Path, help="a trace folder instead of synthetic data")
    ap.add_argument("--tb-python", default=TB_PYTHON)
    ap.add_argument("--out", type=Path, default=HERE / "TB_PLUGIN.md")
    ap.add_argument("--side", help=argparse.SUPPRESS)
    args = ap.parse_args()
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
        f" {os.cpu_count()} cores; {time.strftime('%Y-%m-%d')}. Both sides from a cold start "
        "(no cache), load + the plugin's views "
        f"({', '.join(VIEWS)}).",
        "",
        "| side | wall s |",
        "|---|---:|",
        f"| hta-tui (parse {ours.get('load_s', float('nan')):.2f} s) | "
        f"{ours.get('wall_s', float('nan')):.2f} |",
    ]
    if "error" in plugin:
        lines.append(f"| torch-tb-profiler 0.4.3 | failed: {plugin['error']} |")
    else:
        files = ", ".join(f"{t:.1f}" for t in plugin["per_file_s"])
        lines.append(f"| torch-tb-profiler 0.4.3 (per file: {files}) | {plugin['wall_s']:.1f} |")
        ratio = plugin["wall_s"] / ours["wall_s"]
        lines += ["", f"Plugin / hta-tui: **{ratio:.0f}x** (target >= 20x)."]
    args.out.write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
