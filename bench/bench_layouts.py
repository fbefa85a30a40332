"""Parse speed in every layout real trace files come in, against orjson.loads of the same bytes,
and the cold open of a folder mixing them, against the floor (gunzip + orjson.loads).

    python bench/bench_layouts.py              # 6 layouts x ~100 MB, writes bench/LAYOUTS.md
    python bench/bench_layouts.py --mb 10      # a quick run
    python bench/bench_layouts.py --data DIR   # files made by an earlier run (never written)
    python bench/bench_layouts.py --code TREE  # the hta_tui of another checkout

Layouts (`hta_tui.synth.layouts`): Kineto's (log arrays with "]" in their lines, then
traceName and baseTimeNanoseconds, after the events), events first (deviceProperties, an
array of objects, after them), events last, compact, pretty-printed, pretty with CRLF. Each
file is one synthetic rank (`hta_tui.synth`), relaid out. Every measurement runs in a fresh
subprocess; parse and orjson.loads alternate in pairs on the same bytes, and the ratio is
the median of the pairs' ratios (this VM's speed drifts).
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import bench_open  # noqa: E402  (the floor / cold open runner, shared)


def _measure_layout(path: Path, repeat: int) -> dict:
    """In a subprocess: orjson.loads and parse_bytes of the same bytes, `repeat` pairs."""
    import orjson

    from hta_tui.trace.parse import parse_bytes, read_bytes

    data = read_bytes(path)
    out: dict = {"mb": len(data) / 1e6}
    for key in ("loads", "parses", "loads_cpu", "parses_cpu"):
        out[key] = []
    for _ in range(repeat):
        t0, c0 = time.perf_counter(), time.process_time()
        doc = orjson.loads(data)
        out["loads"].append(time.perf_counter() - t0)
        out["loads_cpu"].append(time.process_time() - c0)
        out["events"] = len(doc["traceEvents"])
        del doc
        gc.collect()
        t0, c0 = time.perf_counter(), time.process_time()
        parsed = parse_bytes(data)
        out["parses"].append(time.perf_counter() - t0)
        out["parses_cpu"].append(time.process_time() - c0)
        out["rows"] = parsed.frames["events"].height
        del parsed
        gc.collect()
    return out


def run_layout(path: Path, repeat: int, src: Path | None = None) -> dict:
    """`_measure_layout` in a fresh process, with the hta_tui of the tree `src` (default:
    `bench_open.CODE`, which --code sets)."""
    cmd = [sys.executable, __file__, "--measure-layout", str(path), "--repeat", str(repeat)]
    # polars on one thread, as in the parser workers of a real open: CPU time then compares
    # the work of two single-threaded decoders, which this shared VM's load does not change
    env = {**os.environ, "PYTHONPATH": str(src or bench_open.CODE), "POLARS_MAX_THREADS": "1"}
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, check=False)
    if proc.returncode != 0:
        return {"error": (proc.stderr.strip().splitlines() or ["failed"])[-1][:200]}
    return json.loads(proc.stdout.strip().splitlines()[-1])


def ensure_layouts(folder: Path, mb: float) -> list[Path]:
    """One synthetic rank per layout, gzipped like a profiler writes them (reused)."""
    from hta_tui.synth import write_trace_dir
    from hta_tui.synth.files import _open_out
    from hta_tui.synth.layouts import LAYOUTS, relayout

    want = f"{mb} {','.join(LAYOUTS)}"
    if bench_open.reusable(folder, want):
        return sorted(folder.glob("*.json.gz"))
    t0 = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="hta-tui-layouts-") as tmp:
        plain = write_trace_dir(
            tmp, ranks=len(LAYOUTS), target_mb=mb, seed=0, gzip_files=False, workers=2
        )
        for rank, (src, layout) in enumerate(zip(plain, LAYOUTS, strict=True)):
            data = relayout(src.read_bytes(), layout)
            src.unlink()
            with _open_out(folder / f"rank-{rank}.{layout}.json.gz") as f:
                f.write(data)
            del data
    print(f"generated {len(LAYOUTS)} layouts in {time.perf_counter() - t0:.0f} s", file=sys.stderr)
    (folder / ".params").write_text(want)
    return sorted(folder.glob("*.json.gz"))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--mb", type=float, default=100.0, help="uncompressed JSON per file")
    ap.add_argument("--repeat", type=int, default=3, help="pairs per measurement")
    ap.add_argument("--out", type=Path, default=HERE / "LAYOUTS.md")
    bench_open.add_source_args(
        ap, "an existing folder of layout files (rank-N.LAYOUT.json.gz), not generated ones"
    )
    ap.add_argument("--measure-layout", type=Path, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.measure_layout:
        print(json.dumps(_measure_layout(args.measure_layout, args.repeat)))
        return
    if args.code is not None:
        bench_open.CODE = args.code.resolve()

    if args.data is not None:
        folder = args.data.resolve()
        files = sorted(folder.glob("*.json.gz"))
    else:
        folder = HERE / "out" / f"layouts-{args.mb:g}MB"
        files = ensure_layouts(folder, args.mb)
    lines = [
        "# Benchmark results: trace layouts",
        "",
        f"Command: `python bench/bench_layouts.py --mb {args.mb:g} --repeat {args.repeat}"
        + (f" --data {args.data}" if args.data is not None else "")
        + "`  ",
        f"Machine: {platform.machine()}, {os.cpu_count()} cores, Python "
        f"{platform.python_version()}; {time.strftime('%Y-%m-%d %H:%M')}  ",
        f"Data: {len(files)} synthetic ranks (`hta_tui.synth`), each in one layout "
        "(`hta_tui.synth.layouts`).",
        "",
        "Parse (`parse_bytes`: decode, normalise, every frame) over `orjson.loads` of the same "
        "bytes, in one process with polars on one thread (as in the parser workers), median "
        f"of {args.repeat} back-to-back pairs; wall time and CPU time (the work done, which "
        "other processes on this shared 2-core VM do not inflate). Target: every layout <= 0.5.",
        "",
        "| layout | MB of JSON | events | orjson.loads s | parse s | parse / loads, wall "
        "| parse / loads, CPU |",
        "|---|---:|---:|---:|---:|---:|---:|",
    ]
    worst = worst_cpu = 0.0
    for path in files:
        layout = path.name.split(".")[1]
        r = run_layout(path, args.repeat)
        if "error" in r:
            lines.append(f"| {layout} | failed: {r['error']} | | | | |")
            continue
        ratio = statistics.median(p / lo for p, lo in zip(r["parses"], r["loads"], strict=True))
        cpu = statistics.median(
            p / lo for p, lo in zip(r["parses_cpu"], r["loads_cpu"], strict=True)
        )
        worst, worst_cpu = max(worst, ratio), max(worst_cpu, cpu)
        lines.append(
            f"| {layout} | {r['mb']:.0f} | {r['events']:,} | {statistics.median(r['loads']):.2f}"
            f" | {statistics.median(r['parses']):.2f} | **{ratio:.2f}** | {cpu:.2f} |"
        )
    lines += [
        "",
        f"Worst layout: **{worst:.2f}** x orjson.loads in wall time, {worst_cpu:.2f} in CPU time.",
        "",
    ]

    floors, colds = [], []
    for _ in range(args.repeat):
        cache = Path(tempfile.mkdtemp(prefix="hta-tui-bench-cache-"))
        try:
            floors.append(bench_open.run("floor", folder))
            colds.append(bench_open.run("open", folder, cache))
        finally:
            shutil.rmtree(cache, ignore_errors=True)
    paired = [
        c["wall_s"] / f["wall_s"]
        for c, f in zip(colds, floors, strict=True)
        if "wall_s" in c and "wall_s" in f
    ]
    gz_mb = sum(f.stat().st_size for f in files) / 1e6
    each = ", ".join(
        f"{c['wall_s']:.2f}/{f['wall_s']:.2f} = {c['wall_s'] / f['wall_s']:.2f}"
        for c, f in zip(colds, floors, strict=True)
        if "wall_s" in c and "wall_s" in f
    )
    failed = [c["error"] for c in colds + floors if "error" in c]
    lines += [
        "## Cold open of the mixed folder",
        "",
        f"All {len(files)} files in one folder ({gz_mb:.0f} MB gzipped): `open_set` with the "
        "parser pool, cache writes and per-file summaries (what `report` and the app do) "
        "against the floor (gunzip + `orjson.loads` of every file, one process), in pairs.",
        "",
        f"Cold open / floor, median of {len(paired)} pairs: "
        f"**{statistics.median(paired):.2f}** (target <= 0.4). Each pair (s): {each}."
        if paired
        else f"Cold open failed: {failed[:1]}",
    ]
    loaded = [c.get("loaded") for c in colds if "loaded" in c]
    if loaded:
        lines += ["", f"Files loaded in each cold open: {loaded} of {len(files)}."]
    args.out.write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
