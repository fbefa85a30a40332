"""Analysis benchmark: every analysis on a loaded trace set, hta-tui against HTA 0.5.

    python bench/bench_analyses.py                   # 8 ranks x 100 MB (from bench_open)
    python bench/bench_analyses.py --ranks 2 --mb 5  # quick
    python bench/bench_analyses.py --folder /work/shared/traces/trace_diff/control
    python bench/bench_analyses.py --set /tmp/realsets/vit_memory_8x100MB --no-hta  # real-shaped

Also times `report --json` (every analysis) and `report --only` the four memory tables, warm,
each in a process of its own (wall and peak RSS), against the floor (gunzip + orjson.loads
of the same files, `trace_sets.floor`), measured in the same run.

Both sides are timed on data already loaded (HTA's load is reported apart, and bench_open
compares opening). Each side runs in its own subprocess; results go to bench/ANALYSES.md.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
HTA_PYTHON = os.environ.get("HTA_PYTHON", "/work/.htavenv/bin/python")

# (our catalog name, HTA call) - the same work on both sides
HTA_CALLS: dict[str, str] = {
    "temporal_breakdown": "ta.get_temporal_breakdown(visualize=False)",
    "idle_time_breakdown": "ta.get_idle_time_breakdown(ranks=RANKS, visualize=False,"
    " show_idle_interval_stats=True)",
    "gpu_kernel_breakdown": "ta.get_gpu_kernel_breakdown(visualize=False)",
    "kernel_duration_stats": None,
    "comm_comp_overlap": "ta.get_comm_comp_overlap(visualize=False)",
    "queue_length_summary": "ta.get_queue_length_summary(ranks=RANKS)",
    "memory_bw_summary": "ta.get_memory_bw_summary(ranks=RANKS)",
    "cuda_kernel_launch_stats": "ta.get_cuda_kernel_launch_stats(ranks=RANKS, visualize=False)",
    "frequent_cuda_kernel_sequences": "ta.get_frequent_cuda_kernel_sequences("
    "operator_name=OP, output_dir=OUT, rank=RANKS[0])",
    "aten_op_kernels_and_delay": "ta.get_aten_op_kernels_and_delay(ranks=RANKS)",
    "profiler_steps": "ta.get_profiler_steps()",
    "potential_stragglers": "ta.get_potential_stragglers()",
    "user_annotation_breakdown": "ta.get_gpu_user_annotation_breakdown(visualize=False)",
    "syncs": None,  # HTA has no sync finder
    "module_stats": None,  # nor a module view (the TensorBoard plugin's)
}


def _ours(folder: Path, cache: Path) -> dict:
    import polars as pl

    from hta_tui.analysis import catalog
    from hta_tui.trace.cache import Cache
    from hta_tui.trace.model import open_set

    t0 = time.perf_counter()
    ts = open_set(folder, Cache(cache))
    fresh = ts.frames()
    load = time.perf_counter() - t0
    # "together" first, as `report` and the API run it: one load, then catalog.run in a process
    # that has run nothing else (timed after the per-analysis loop below, it paid for the
    # loop's leftovers: its cached views and a grown heap, +0.4 s on 8 x 100 MB)
    t, c = time.perf_counter(), time.process_time()
    catalog.run(fresh, frames=ts.frames)
    together, together_cpu = time.perf_counter() - t, time.process_time() - c
    del fresh
    # one at a time, on fresh frames (no shared views left over from the run above)
    ts = open_set(folder, Cache(cache))
    ranks = ts.frames()
    times: dict[str, float] = {}
    cpu: dict[str, float] = {}
    with pl.Config(engine_affinity=catalog.ENGINE):  # as catalog.run
        for analysis in catalog.ANALYSES:
            if not analysis.default:
                continue
            t, c = time.perf_counter(), time.process_time()
            analysis.run(ranks, catalog.Options(), **{f: ts.frames(f) for f in analysis.frames})
            times[analysis.name] = time.perf_counter() - t
            cpu[analysis.name] = time.process_time() - c
    return {
        "load_s": load,
        "times": times,
        "cpu": cpu,
        "together_s": together,
        "together_cpu_s": together_cpu,
    }


def _hta(folder: Path, op: str, out_dir: Path) -> dict:
    import tempfile  # noqa: F401

    from hta.trace_analysis import TraceAnalysis

    t0 = time.perf_counter()
    ta = TraceAnalysis(trace_dir=str(folder))
    load = time.perf_counter() - t0
    env = {"ta": ta, "RANKS": sorted(ta.t.traces), "OP": op, "OUT": str(out_dir)}
    times: dict[str, float] = {}
    errors: dict[str, str] = {}
    for name, call in HTA_CALLS.items():
        if call is None:
            continue
        t = time.perf_counter()
        try:
            eval(call, env)
            times[name] = time.perf_counter() - t
        except Exception as exc:  # HTA fails on some inputs (pandas 3, legacy traces)
            errors[name] = f"{type(exc).__name__}: {str(exc)[:80]}"
    return {"load_s": load, "times": times, "errors": errors}


#: The memory view's tables: issue 27's `--only` target (<= 1 s over the load).
MEMORY_ONLY = "memory_curve,memory_events,memory_stats,memory_peak"


def forget_results(cache: Path) -> None:
    """Keep the parsed frames, drop every analysis result kept beside them and every whole
    answer (`results/`, `jobs/`): the next report is "frames warm, results cold"."""
    import shutil

    from hta_tui.exec.rank_work import RESULTS_DIR
    from hta_tui.exec.split import JOBS_DIR
    from hta_tui.trace.cache import Cache

    root = Cache(cache).root
    for folder in [*root.glob(f"*/*/{RESULTS_DIR}"), root / JOBS_DIR]:
        shutil.rmtree(folder, ignore_errors=True)


def _tree_run(cmd: list[str], env: dict[str, str]) -> dict | None:
    """Run `cmd`, sampling its process tree every 50 ms (psutil): CPU of every process in
    it (the report's pool workers are not its waited children, so /usr/bin/time misses
    them), the report process's peak RSS and the tree's (summed). None without psutil."""
    try:
        import psutil
    except ImportError:
        return None
    t = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env)
    top = psutil.Process(proc.pid)
    cpu: dict[int, float] = {}
    peak = tree_peak = 0
    while proc.poll() is None:
        try:
            procs = [top, *top.children(recursive=True)]
        except psutil.Error:
            procs = [top]
        total = 0
        for p in procs:
            try:
                times, rss = p.cpu_times(), p.memory_info().rss
            except psutil.Error:
                continue
            cpu[p.pid] = times.user + times.system
            total += rss
            if p.pid == proc.pid:
                peak = max(peak, rss)
        tree_peak = max(tree_peak, total)
        time.sleep(0.05)
    wall = time.perf_counter() - t
    stderr = proc.stderr.read().decode(errors="replace") if proc.stderr else ""
    if proc.returncode != 0:
        return {"error": (stderr.strip().splitlines() or ["failed"])[-1][:200]}
    return {
        "wall_s": wall,
        "cpu_s": sum(cpu.values()),
        "peak_mb": peak / 2**20,
        "tree_peak_mb": tree_peak / 2**20,
    }


def _report(folder: Path, cache: Path, only: str | None, results: str = "warm") -> dict:
    """`hta_tui report --json` (`cache` holds the frames) in a process of its own: wall, CPU
    and peak RSS of the process and of its workers (`_tree_run`; else /usr/bin/time's, the
    process's own and its children's largest). `results="cold"`: the kept results are
    dropped first (frames warm, results cold); "warm": the last run's are read back."""
    if results == "cold":
        forget_results(cache)
    cmd = [sys.executable, "-m", "hta_tui", "report", "--json", str(folder)]
    if only:
        cmd[4:4] = ["--only", only]
    env = {**os.environ, "PYTHONPATH": str(HERE.parent), "HTA_TUI_CACHE": str(cache)}
    tree = _tree_run(cmd, env)
    if tree is not None:
        return tree
    timer = Path("/usr/bin/time")
    if timer.exists():
        cmd = [str(timer), "-f", "__peak_kb %M %U %S", *cmd]
    t = time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, check=False)
    wall = time.perf_counter() - t
    if proc.returncode != 0:
        return {"error": (proc.stderr.strip().splitlines() or ["failed"])[-1][:200]}
    timed = [ln.split()[1:] for ln in proc.stderr.splitlines() if ln.startswith("__peak_kb")]
    if not timed:
        return {"wall_s": wall, "peak_mb": float("nan"), "cpu_s": float("nan")}
    kb, user, system = timed[-1]
    return {"wall_s": wall, "peak_mb": int(kb) / 1024, "cpu_s": float(user) + float(system)}


def _report_lines(floor: dict, runs: dict[str, dict], load_s: float) -> list[str]:
    """The report rows: each against the floor measured in the same run."""
    fw = floor.get("wall_s", float("nan"))
    fc = floor.get("cpu_s", float("nan"))

    def row(what: str, r: dict, target: str) -> str:
        if "error" in r:
            return f"| {what} | failed: {r['error']} | | | | | {target} |"
        w, c = r["wall_s"], r["cpu_s"]
        tree = f" ({r['tree_peak_mb']:.0f} with its workers)" if "tree_peak_mb" in r else ""
        return (
            f"| {what} | {w:.2f} | {w / fw:.2f}x | {c:.2f} | {c / fc:.2f}x "
            f"| {r['peak_mb']:.0f}{tree} | {target} |"
        )

    return [
        "",
        "| measurement (each a process of its own) | wall s | x floor | CPU s | CPU x floor's "
        "| peak RSS MB | target |",
        "|---|---:|---:|---:|---:|---:|---|",
        f"| floor: gunzip + orjson.loads of the same files | {fw:.2f} | 1.00x | {fc:.2f} "
        f"| 1.00x | {floor.get('peak_mb', float('nan')):.0f} | |",
        row(
            "`report --json`, every analysis: frames warm, results cold",
            runs["every-cold"],
            "<= 3 s, <= 1 GB",
        ),
        row("`report --json`, every analysis: results warm", runs["every-warm"], ""),
        row(
            f"`report --json --only {MEMORY_ONLY}`: frames warm, results cold",
            runs["memory-cold"],
            "<= 1 s over the load",
        ),
        row(f"`report --json --only {MEMORY_ONLY}`: results warm", runs["memory-warm"], ""),
        f"| loading the frames alone (warm, in the bench's process) | {load_s:.2f} "
        f"| {load_s / fw:.2f}x | | | | |",
        "",
        "CPU time (user + system, every thread of the report and of its pool workers) is the "
        "steadier figure on a shared machine: wall time there counts the time the process "
        "waited for a core. Peak RSS: the report process's (with its workers', summed).",
    ]


def _shown(folder: Path) -> Path:
    root = HERE.parent
    return folder.relative_to(root) if folder.is_relative_to(root) else folder


def run(args: list[str], python: str = sys.executable, script: Path | None = None) -> dict:
    """One side in its own process (`script` --side ...): its last line of output, as JSON."""
    env = {**os.environ, "PYTHONPATH": str(HERE.parent)}
    proc = subprocess.run(
        [python, str(script or Path(__file__).resolve()), *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=7200,
        check=False,
    )
    if proc.returncode != 0:
        return {"error": (proc.stderr.strip().splitlines() or ["failed"])[-1][:200]}
    return json.loads(proc.stdout.strip().splitlines()[-1])


def main() -> None:
    from trace_sets import add_append_arg, add_set_arg, chosen, floor, label, write

    ap = argparse.ArgumentParser()
    ap.add_argument("--ranks", type=int, default=8)
    ap.add_argument("--mb", type=float, default=100.0)
    ap.add_argument("--folder", type=Path, help="a trace folder instead of synthetic data")
    ap.add_argument("--op", default="aten::linear", help="operator for frequent sequences")
    ap.add_argument("--no-hta", action="store_true")
    ap.add_argument("--out", type=Path, default=HERE / "ANALYSES.md")
    ap.add_argument("--side", help=argparse.SUPPRESS)
    ap.add_argument("--cache", type=Path, help="a cache folder to reuse (default: a new one)")
    ap.add_argument("--no-report", action="store_true", help="skip the report runs")
    add_set_arg(ap)
    add_append_arg(ap)
    args = ap.parse_args()
    if args.side == "ours":
        print(json.dumps(_ours(args.folder, args.cache)))
        return
    if args.side == "hta":
        print(json.dumps(_hta(args.folder, args.op, args.cache)))
        return

    import tempfile

    from bench_open import ensure_traces

    folder = args.folder or HERE / "out" / f"{args.ranks}x{args.mb:g}MB"
    if args.folder is None:
        folder = chosen(args, folder, lambda: ensure_traces(folder, args.ranks, args.mb))
    cache = args.cache or Path(tempfile.mkdtemp(prefix="hta-tui-bench-"))
    run(["--side", "ours", "--folder", str(folder), "--cache", str(cache)])  # fill the cache
    ours = run(["--side", "ours", "--folder", str(folder), "--cache", str(cache)])
    reports: list[str] = []
    if not args.no_report:
        floor_run = floor(folder)
        # the files' overview rows are kept in the cache by the first report (the bench's
        # own loads above do not make them): one small report first, so both runs are warm
        _report(folder, cache, "profiler_steps")
        runs = {
            "memory-cold": _report(folder, cache, MEMORY_ONLY, "cold"),
            "memory-warm": _report(folder, cache, MEMORY_ONLY, "warm"),
            "every-cold": _report(folder, cache, None, "cold"),
            "every-warm": _report(folder, cache, None, "warm"),
        }
        reports = _report_lines(floor_run, runs, ours.get("load_s", float("nan")))
    hta = None
    if not args.no_hta and Path(HTA_PYTHON).exists():
        hta = run(
            ["--side", "hta", "--folder", str(folder), "--op", args.op, "--cache", str(cache)],
            python=HTA_PYTHON,
        )
    lines = [
        "# Benchmark results: analyses on a loaded trace set",
        "",
        f"Command: `python bench/bench_analyses.py {' '.join(sys.argv[1:])}`  ",
        f"Data: `{_shown(folder)}` ({label(folder)}); {os.cpu_count()} cores; "
        f"{time.strftime('%Y-%m-%d %H:%M')} UTC, load average at its end "
        f"{os.getloadavg()[0]:.1f}.",
        "",
        "| analysis | hta-tui s | CPU s | HTA 0.5 s | HTA / hta-tui |",
        "|---|---:|---:|---:|---:|",
    ]
    our_times = ours.get("times", {})
    hta_times = (hta or {}).get("times", {})
    hta_errors = (hta or {}).get("errors", {})
    matched_ours = matched_hta = 0.0
    for name, t in our_times.items():
        h = hta_times.get(name)
        if h is not None:
            matched_ours += t
            matched_hta += h
        cell = f"{h:.2f}" if h is not None else hta_errors.get(name, "no such call")
        ratio = f"{h / t:.0f}x" if h is not None and t > 0 else ""
        c = ours.get("cpu", {}).get(name, float("nan"))
        lines.append(f"| {name} | {t:.3f} | {c:.3f} | {cell} | {ratio} |")
    total = sum(our_times.values())
    total_cpu = sum(ours.get("cpu", {}).values())
    lines += [
        "",
        f"All analyses together (`catalog.run`, what `report` and the API run, two at a time, "
        f"see analysis/scheduling.py): **{ours.get('together_s', float('nan')):.2f} s** "
        f"(target <= 3 s; CPU {ours.get('together_cpu_s', float('nan')):.2f} s, all threads); "
        f"one after another, as timed above: {total:.2f} s (CPU {total_cpu:.2f} s).",
    ]
    if matched_ours:
        lines.append(
            f"Where both answered: hta-tui {matched_ours:.2f} s, HTA {matched_hta:.1f} s: "
            f"**{matched_hta / matched_ours:.0f}x** (target >= 20x)."
        )
    if hta is not None and "load_s" in hta:
        lines.append(
            f"Loading (not in the above): HTA {hta['load_s']:.1f} s, hta-tui warm "
            f"{ours.get('load_s', float('nan')):.2f} s."
        )
    lines += reports
    if hta is None:
        lines.append("HTA 0.5 not run (set HTA_PYTHON to a python with HTA 0.5 installed).")
    elif "error" in hta:
        lines.append(f"HTA failed: {hta['error']}")
    write(args.out, lines, append=args.append)
    print("\n".join(lines))


if __name__ == "__main__":
    sys.path.insert(0, str(HERE))
    main()
