"""Parse speed on a metadata-heavy trace (issue 27): tens of thousands of processes and threads
named in `ph: "M"` events, and Kineto's log arrays after the events, against orjson.loads.

    python bench/bench_metadata.py --data /tmp/metadata-heavy   # builds it there once (never
                                                                # inside the repo); appends to
                                                                # bench/LAYOUTS.md
    python bench/bench_metadata.py --data DIR --code TREE       # another checkout's parser
    python bench/bench_metadata.py --data DIR --pairs TREE      # in one process: TREE's parse
                                                                # and this one's, alternated

The trace is built from a shared one (../shared/traces/tracelens_mi300_ddp_resnet18, repeated
in time to ~60 MB by ../shared/tools/scale_trace.py, in Kineto's own layout) with, as in a real
MTIA trace of 87 MB: 310k metadata events naming 62k processes and threads (process_name,
process_labels, process_sort_index for each process; thread_name, thread_sort_index for each
thread) among the events, and log arrays of 8 MB of strings after them (before traceName).
The measurement is `bench_layouts`' (parse_bytes and orjson.loads of the same bytes, in pairs,
polars on one thread). Target: parse / loads <= 0.4.
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import bench_layouts  # noqa: E402

SHARED = Path(os.environ.get("HTA_TUI_SHARED", HERE.parent.parent / "shared"))
SOURCE = SHARED / "traces" / "tracelens_mi300_ddp_resnet18" / "mi300_ddp_resnet18_train.json.gz"
PROCESSES = 31_000  # each with one thread: 62k named
COPIES = 2  # every metadata event written twice, as in the real trace (310k events)


def _metadata(kind: str) -> bytes:
    """Kineto's metadata events, one per line: processes (name, labels, sort index) before
    the other events, threads (name, sort index) after them."""
    out = []
    for _ in range(COPIES):
        for p in range(PROCESSES):
            pid, tid = 100_000 + p, 1_000_000 + p
            m = f'  {{"name": "%s", "ph": "M", "ts": 0, "pid": {pid}, "tid": %d, "args": {{%s}}}}'
            if kind == "process":
                out.append(m % ("process_name", 0, f'"name": "mtia_device_{p}"'))
                out.append(m % ("process_labels", 0, f'"labels": "MTIA {p} / group {p % 64}"'))
                out.append(m % ("process_sort_index", 0, f'"sort_index": {pid}'))
            else:
                out.append(m % ("thread_name", tid, f'"name": "stream {tid} (queue {p % 8})"'))
                out.append(m % ("thread_sort_index", tid, f'"sort_index": {tid}'))
    return ",\n".join(out).encode()


def n_metadata() -> int:
    return COPIES * PROCESSES * 5


def _log_arrays(mb: float) -> bytes:
    """Arrays of log lines (with brackets in them, as Kineto's have), after the events."""
    line = '"[kineto] 2024-05-01 10:00:00 activity buffer [%d] flushed: %d records"'
    n = int(mb * 1e6 / 2 / 70)
    body = ",\n    ".join(line % (i, i * 7) for i in range(n))
    return f'  "deviceLogs": [\n    {body}\n  ],\n  "warningLogs": [\n    {body}\n  ]'.encode()


def build(folder: Path, mb: float = 60.0, log_mb: float = 8.0) -> Path:
    """The metadata-heavy trace in `folder` (reused when there)."""
    out = folder / "metadata_heavy.json"
    if out.exists():
        return out
    folder.mkdir(parents=True, exist_ok=True)
    base = folder / "base"
    tool = SHARED / "tools" / "scale_trace.py"
    cmd = [sys.executable, str(tool), str(SOURCE), "--out", str(base), "--ranks", "1"]
    subprocess.run([*cmd, "--target-mb", str(mb)], check=True, capture_output=True)
    text = next(base.glob("*.json")).read_bytes()
    # scale_trace writes the events last: '"traceEvents": [' ... '}\n  ]\n}'
    opening = text.index(b'"traceEvents": [') + len(b'"traceEvents": [')
    closing = text.rindex(b"]")
    last = text.rindex(b"}", 0, closing) + 1
    doc = b"".join(
        (
            text[:opening],
            b"\n",
            _metadata("process"),
            b",\n",
            text[opening:last],
            b",\n",
            _metadata("thread"),
            b"\n  ],\n",
            _log_arrays(log_mb),
            b',\n  "traceName": "metadata_heavy.json",',
            b'\n  "baseTimeNanoseconds": 1700000000000000000\n}\n',
        )
    )
    out.write_bytes(doc)
    for f in base.iterdir():
        f.unlink()
    base.rmdir()
    return out


def _renamed(tree: Path, folder: Path) -> str:
    """`tree`'s hta_tui copied into `folder` as the package `hta_tui_before` (its imports
    rewritten), so both parsers can be imported in one process."""
    import re
    import shutil

    dest = folder / "hta_tui_before"
    shutil.copytree(tree / "hta_tui", dest, ignore=shutil.ignore_patterns("__pycache__"))
    for path in dest.rglob("*.py"):
        path.write_text(re.sub(r"\bhta_tui\b", "hta_tui_before", path.read_text()))
    return str(folder)


def run_pairs(path: Path, tree: Path, repeat: int) -> None:
    """Process CPU time of `tree`'s parse_bytes and this checkout's, alternated in one
    process (polars on one thread, the order swapped every pair), with orjson.loads of the
    same bytes each time: a loaded machine's drift cancels in the ratio after / before."""
    import gc
    import tempfile

    os.environ["POLARS_MAX_THREADS"] = "1"  # (before polars is imported)
    import orjson

    with tempfile.TemporaryDirectory(prefix="hta-before-") as folder:
        sys.path.insert(0, _renamed(tree, Path(folder)))
        sys.path.insert(0, str(HERE.parent))
        from hta_tui_before.trace.parse import parse_bytes as before  # type: ignore[import-not-found]

        from hta_tui.trace.parse import parse_bytes as after

        data = path.read_bytes()

        def cpu(fn) -> float:  # type: ignore[no-untyped-def]
            gc.collect()
            start = time.process_time()
            fn(data)
            return time.process_time() - start

        rows = []
        for i in range(repeat):
            loads = cpu(orjson.loads)
            if i % 2:
                b, a = cpu(before), cpu(after)
            else:
                a, b = cpu(after), cpu(before)
            rows.append((b, a, loads))
            print(
                f"before {b:.2f} s, after {a:.2f} s, loads {loads:.2f} s: after / before "
                f"{a / b:.2f}, before / loads {b / loads:.2f}, after / loads {a / loads:.2f}"
            )
    med = statistics.median
    print(
        f"median of {repeat} pairs: after / before {med(a / b for b, a, _ in rows):.2f}, "
        f"before / loads {med(b / lo for b, _, lo in rows):.2f}, after / loads "
        f"{med(a / lo for _, a, lo in rows):.2f}; load average {os.getloadavg()[0]:.1f}"
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data", type=Path, required=True)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--code", type=Path, help="the hta_tui of another checkout")
    ap.add_argument("--pairs", type=Path, help="a checkout to compare in one process")
    ap.add_argument("--out", type=Path, default=HERE / "LAYOUTS.md")
    args = ap.parse_args()
    path = build(args.data)
    if args.pairs is not None:
        run_pairs(path, args.pairs, args.repeat)
        return
    r = bench_layouts.run_layout(path, args.repeat, args.code)
    if "error" in r:
        raise SystemExit(r["error"])
    pairs = [p / lo for p, lo in zip(r["parses"], r["loads"], strict=True)]
    cpu = [p / lo for p, lo in zip(r["parses_cpu"], r["loads_cpu"], strict=True)]
    when = time.strftime("%Y-%m-%d %H:%M", time.gmtime())
    text = (
        f"\n## A metadata-heavy trace\n\n"
        f"Command: `python bench/bench_metadata.py --data {args.data} --repeat {args.repeat}`  \n"
        f"Machine: {platform.machine()}, {os.cpu_count()} cores, Python "
        f"{platform.python_version()}; {when} UTC\n\n"
        f"{path.name}: {r['mb']:.0f} MB of JSON, {r['events']:,} events, of them "
        f"{n_metadata():,} metadata events naming {2 * PROCESSES:,} processes and threads; "
        f"8 MB of log "
        f"arrays after the events. orjson.loads {statistics.median(r['loads']):.2f} s, parse "
        f"{statistics.median(r['parses']):.2f} s.\n\n"
        f"Parse / orjson.loads, median of {args.repeat} pairs: **{statistics.median(pairs):.2f}** "
        f"in wall time, {statistics.median(cpu):.2f} in CPU time (target <= 0.4). Each pair: "
        + ", ".join(f"{x:.2f}" for x in pairs)
        + ".\n"
    )
    print(text)
    with args.out.open("a") as f:
        f.write(text)


if __name__ == "__main__":
    main()
