"""The report on a Dask cluster beside the process pool (issue 30): wall time with 1, 2 and 4
worker processes, the client's peak memory, and what each rank costs (read, sent back).

    python bench/bench_dask.py --small 1024                    # 1,024 small generated ranks
    python bench/bench_dask.py --big 64 --big-mb 100           # 64 ranks scaled from a real trace
    python bench/bench_dask.py --big 64 --big-mb 20 --workers 1,2 --only kernel_view,...
    python bench/bench_dask.py --set /tmp/x/resnet18_64x100MB --only all   # a set built already

Sets are written under /tmp/hta-bench-dask (never in the repo): `--small N` ranks of
`synth.small_job` (2 steps of 2 ops), `--big N` ranks of `--big-mb` MB each made by
../shared/tools/scale_trace.py from a real GPU + NCCL trace (tracelens_mi300_ddp_resnet18).
For each back-end (`pool`: today's default; `local:N`: a LocalCluster of N worker
processes) the report runs twice in a fresh process with an empty cache of its own: cold
(parse and analyse) and warm (the kept results read back). The client's peak memory is its
own VmHWM (the workers' are theirs); CPU is user + sys of the client and every process it
waited for (its pool or local cluster's workers), so a loaded machine inflates the wall
time but not it. `--only` (default: rank-wise analyses of the whole trace; `all`: every
analysis of the report, none of which reads a rank's frames on the client since issue 30's
reductions) is passed to `report --only`. `--set DIR` measures a folder built already
(e.g. by scale_trace.py --gzip). Prints a Markdown table; `--out FILE` appends it.
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
#: where sets and caches go ($HTA_BENCH_DASK_OUT, else /tmp/hta-bench-dask)
OUT = Path(os.environ.get("HTA_BENCH_DASK_OUT", "/tmp/hta-bench-dask"))
#: ../shared beside the repo, or $HTA_TUI_SHARED (as the tests)
SHARED = Path(os.environ.get("HTA_TUI_SHARED", REPO.parent / "shared"))
SCALE = SHARED / "tools" / "scale_trace.py"
SOURCE = SHARED / "traces" / "tracelens_mi300_ddp_resnet18"
#: Rank-wise analyses of the whole trace (their scope reads no step): the client holds only
#: each rank's tables.
ONLY = "kernel_view,kernel_attribution,operator_stats,memory_stats,module_stats"

#: Runs the CLI and prints the process's own peak memory (VmHWM, kB) to stderr at exit.
CLIENT = """
import atexit, sys
def hwm():
    for line in open("/proc/self/status"):
        if line.startswith("VmHWM"):
            print("CLIENT-PEAK-KB", line.split()[1], file=sys.stderr)
atexit.register(hwm)
from hta_tui.cli import main
sys.exit(main(sys.argv[1:]))
"""


def small_set(n: int) -> Path:
    folder = OUT / f"small-{n}"
    if folder.is_dir() and sum(1 for _ in folder.iterdir()) == n:
        return folder
    from hta_tui.synth.small_job import Dialect, JobShape, write_job

    shutil.rmtree(folder, ignore_errors=True)
    write_job(folder, Dialect(), JobShape(ranks=n, steps=2, ops_per_step=2))
    return folder


def big_set(n: int, mb: float) -> Path:
    folder = OUT / f"big-{n}x{mb:g}MB"
    if folder.is_dir() and sum(1 for p in folder.iterdir() if ".json" in p.name) == n:
        return folder
    (source,) = [p for p in SOURCE.iterdir() if ".json" in p.name]
    shutil.rmtree(folder, ignore_errors=True)
    cmd = [sys.executable, str(SCALE), str(source), "--out", str(folder), "--ranks", str(n)]
    subprocess.run([*cmd, "--target-mb", str(mb)], check=True, stdout=subprocess.DEVNULL)
    return folder


def _children_cpu() -> float:
    used = resource.getrusage(resource.RUSAGE_CHILDREN)
    return used.ru_utime + used.ru_stime


def run(folder: Path, backend: str, cache: Path, only: str) -> tuple[float, float, float, int]:
    """(wall seconds, CPU seconds, client peak MB, exit code) of one `report --json` in a
    fresh process."""
    cmd = [sys.executable, "-c", CLIENT, "report", str(folder), "--json"]
    if only != "all":
        cmd += ["--only", only]
    if backend != "pool":
        cmd += ["--dask", backend]
    env = {**os.environ, "HTA_TUI_CACHE": str(cache), "PYTHONPATH": str(REPO)}
    t, cpu = time.perf_counter(), _children_cpu()
    done = subprocess.run(
        cmd, env=env, cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True
    )
    wall, cpu = time.perf_counter() - t, _children_cpu() - cpu
    peak = [int(line.split()[1]) for line in done.stderr.splitlines() if "CLIENT-PEAK-KB" in line]
    return wall, cpu, (peak[0] / 1024 if peak else float("nan")), done.returncode


def per_rank_bytes(cache: Path, folder: Path) -> tuple[float, float]:
    """(MB of trace read, kB of results kept) per rank, averaged."""
    files = [p for p in folder.iterdir() if ".json" in p.name]
    read = sum(p.stat().st_size for p in files) / len(files) / 1e6
    kept = sum(p.stat().st_size for p in cache.rglob("results/*.arrow")) / len(files) / 1e3
    return read, kept


def measure(label: str, folder: Path, backends: list[str], only: str) -> list[str]:
    rows = []
    for backend in backends:
        cache = OUT / "cache" / f"{folder.name}-{backend.replace(':', '')}"
        shutil.rmtree(cache, ignore_errors=True)
        load = os.getloadavg()[0]
        cold, cpu_cold, peak_cold, rc = run(folder, backend, cache, only)
        warm, cpu_warm, peak_warm, rc2 = run(folder, backend, cache, only)
        read, kept = per_rank_bytes(cache, folder)
        # every rank's results kept, the job's answers not: the client reads the ranks'
        # tables and summaries and reduces them (what a cluster's client does per report)
        for jobs in list(cache.glob("**/jobs")):
            shutil.rmtree(jobs, ignore_errors=True)
        reduce, cpu_reduce, peak_reduce, _ = run(folder, backend, cache, only)
        shutil.rmtree(cache, ignore_errors=True)
        ok = "" if rc == rc2 == 0 else f" (exit {rc}, {rc2})"
        rows.append(
            f"| {label} | {backend}{ok} | {cold:.1f} | {cpu_cold:.1f} | {warm:.1f} | "
            f"{cpu_warm:.1f} | {reduce:.1f} | {cpu_reduce:.1f} | {peak_cold:.0f} | "
            f"{peak_warm:.0f} | {peak_reduce:.0f} | {read:.2f} | {kept:.1f} | {load:.0f} |"
        )
        print(rows[-1], flush=True)
    return rows


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--small", type=int, default=0, help="ranks of the small generated set")
    p.add_argument("--big", type=int, default=0, help="ranks of the set scaled from a real trace")
    p.add_argument("--big-mb", type=float, default=100.0, help="MB of JSON per big rank")
    p.add_argument("--workers", default="1,2,4", help="Dask worker processes to try")
    p.add_argument("--no-pool", action="store_true", help="leave the process pool out")
    p.add_argument("--only", default=ONLY, help="analyses (report --only; all: every one)")
    p.add_argument("--set", type=Path, help="measure this folder of rank files (built already)")
    p.add_argument("--out", type=Path, help="append the Markdown table to this file")
    args = p.parse_args()
    backends = ([] if args.no_pool else ["pool"]) + [
        f"local:{n}" for n in args.workers.split(",") if n
    ]
    when = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    head = [
        f"`report --json --only {args.only}`, {when}, "
        f"load average {os.getloadavg()[0]:.0f} on {os.cpu_count()} cores",
        "",
        "| set | back-end | cold wall (s) | cold CPU (s) | warm wall (s) | warm CPU (s) "
        "| reduce wall (s) | reduce CPU (s) | client peak cold (MB) | client peak warm (MB) "
        "| client peak reduce (MB) | read per rank (MB) | kept per rank (kB) | load at start |",
        "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    print("\n".join(head), flush=True)
    rows = []
    if args.small:
        rows += measure(f"{args.small} small ranks", small_set(args.small), backends, args.only)
    if args.set:
        n = sum(1 for p in args.set.iterdir() if ".json" in p.name)
        rows += measure(f"{n} ranks of {args.set.name}", args.set, backends, args.only)
    if args.big:
        folder = big_set(args.big, args.big_mb)
        rows += measure(f"{args.big} x {args.big_mb:g} MB", folder, backends, args.only)
    if args.out:
        with args.out.open("a") as f:
            f.write("\n".join([*head, *rows]) + "\n")


if __name__ == "__main__":
    main()
