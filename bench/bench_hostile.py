"""Hostile files at the sizes that broke the loader (issue 25), beside a good rank:

    python bench/bench_hostile.py                 # full sizes, writes bench/HOSTILE.md
    python bench/bench_hostile.py --expand-mb 50 --members 20000 --shared 1000  # quick

A 1.9 MB gzip holding 563 MB of JSON, a gzip of 200,000 empty members (4 MB), 4,000
operators, launches and kernels sharing one id, a step number and a file name no integer
holds, a GPU whose `numSms` is text, a loop of symbolic links and a link to a folder. One
`report --json` over the folder (fresh cache, `--file-timeout`): its exit status, wall time
against the per-file limit + 10 s, the peak memory of the report and its parser workers
(sampled, as bench_open.py does), each file's status and reason, and whether the good rank's
numbers equal those of a report on it alone. Files go to bench/out/hostile (ignored by git).
"""

from __future__ import annotations

import argparse
import os
import platform
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import orjson

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
sys.path.insert(0, str(HERE))

from bench_open import _tree_rss_mb  # noqa: E402

from hta_tui.synth.hostile_files import write_hostile_folder  # noqa: E402

TABLES = "temporal_breakdown,gpu_kernel_breakdown,idle_time_breakdown"


def report(folder: Path, timeout_s: float) -> dict:
    """One `report --json` in a fresh process and cache: exit, wall, peak tree MB, output."""
    with tempfile.TemporaryDirectory() as cache:
        env = {**os.environ, "HTA_TUI_CACHE": cache, "PYTHONPATH": str(HERE.parent)}
        cmd = [sys.executable, "-m", "hta_tui", "report", str(folder), "--json",
               "--file-timeout", str(timeout_s), "--only", TABLES]  # fmt: skip
        t0 = time.perf_counter()
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
        peak = [0.0]
        stop = threading.Event()

        def sample() -> None:
            while not stop.is_set():
                peak[0] = max(peak[0], _tree_rss_mb(proc.pid))
                stop.wait(0.02)

        sampler = threading.Thread(target=sample, daemon=True)
        sampler.start()
        out, err = proc.communicate()
        wall = time.perf_counter() - t0
        stop.set()
        sampler.join()
    doc = orjson.loads(out) if out.strip() else {}
    return {"code": proc.returncode, "wall": wall, "peak_mb": peak[0], "doc": doc, "err": err}


def good_rows(doc: dict) -> dict:
    return {k: [r for r in doc.get(k, []) if r.get("rank") == 0] for k in TABLES.split(",")}


def close(a: object, b: object) -> bool:
    """Equal, floats to 1e-9 relative (sums over more ranks round differently)."""
    if isinstance(a, float) and isinstance(b, float):
        return abs(a - b) <= 1e-9 * max(abs(a), abs(b), 1.0)
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(close(a[k], b[k]) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(close(x, y) for x, y in zip(a, b, strict=True))
    return a == b


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, default=HERE / "out" / "hostile")
    ap.add_argument("--expand-mb", type=float, default=563)
    ap.add_argument("--members", type=int, default=200_000)
    ap.add_argument("--shared", type=int, default=4_000)
    ap.add_argument("--timeout", type=float, default=5.0)
    ap.add_argument("--md", type=Path, default=HERE / "HOSTILE.md")
    args = ap.parse_args()
    folder = args.out / "all"
    alone = args.out / "alone"
    for d in (folder, alone):
        if d.exists():
            for p in d.iterdir():
                p.unlink() if p.is_symlink() or p.is_file() else None
    paths = write_hostile_folder(
        folder, expand_mb=args.expand_mb, members=args.members, shared=args.shared
    )
    (folder / "folder").mkdir(exist_ok=True)
    (folder / "loop.json").symlink_to("loop.json")
    (folder / "link-to-folder.json").symlink_to("folder")
    alone.mkdir(parents=True, exist_ok=True)
    (alone / "rank-0.json").write_bytes(paths["rank-0.json"].read_bytes())

    base = report(alone, args.timeout)
    run = report(folder, args.timeout)
    same = close(good_rows(run["doc"]), good_rows(base["doc"]))
    bound = args.timeout + 10
    lines = [
        "# Hostile files beside a good rank (issue 25)",
        "",
        f"Command: `python bench/bench_hostile.py --expand-mb {args.expand_mb:g} "
        f"--members {args.members} --shared {args.shared} --timeout {args.timeout:g}`  ",
        f"Machine: {platform.machine()}, {os.cpu_count()} cores, Python "
        f"{platform.python_version()}; {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}",
        "",
        "| file | on disk | status | reason / data quality |",
        "|---|---:|---|---|",
    ]
    for f in run["doc"].get("files", []):
        p = folder / f["path"]
        size = p.lstat().st_size if p.is_symlink() else p.stat().st_size
        why = f["error"] or "; ".join(f"{k}: {v:,}" for k, v in f["dropped_events"].items())
        lines.append(f"| `{f['path']}` | {size / 1e6:.2f} MB | {f['status']} | {why} |")
    lines += [
        "",
        "| measurement | value | target |",
        "|---|---:|---|",
        f"| exit status | {run['code']} | 0 |",
        f"| wall time (s) | {run['wall']:.1f} | <= {bound:g} (per-file limit + 10 s) |",
        f"| peak memory, report and workers (MB) | {run['peak_mb']:.0f} | < 1,000 |",
        f"| good rank's numbers as on its own | {'same' if same else 'DIFFERENT'} | same |",
        f"| stderr | {run['err'].decode(errors='replace').strip() or '(empty)'} | notices only |",
        f"| good rank alone: wall (s), peak (MB) | {base['wall']:.1f}, {base['peak_mb']:.0f} | |",
    ]
    text = "\n".join(lines) + "\n"
    args.md.write_text(text)
    print(text)


if __name__ == "__main__":
    main()
