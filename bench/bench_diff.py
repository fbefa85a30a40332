"""Trace-diff benchmark: the two ~35 MB shared traces, once loaded, hta-tui against HTA 0.5.

    python bench/bench_diff.py [--control DIR --test DIR]

Times everything the diff screen and `report --compare` compute (compare_traces for ALL, CPU
and GPU, ops_diff, the breakdowns side by side) on already-parsed frames, and HTA's
TraceDiff.compare_traces + ops_diff on the same folders. Writes bench/DIFF.md.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
SHARED = HERE.parent.parent / "shared" / "traces" / "trace_diff"
HTA_PYTHON = os.environ.get("HTA_PYTHON", "/work/.htavenv/bin/python")

HTA_CODE = """
import json, sys, time
from hta.trace_diff import TraceDiff, DeviceType
c, t = sys.argv[1], sys.argv[2]
t0 = time.perf_counter()
TraceDiff.compare_traces(c, t)
TraceDiff.compare_traces(c, t, device_type=DeviceType.CPU)
TraceDiff.compare_traces(c, t, device_type=DeviceType.GPU)
TraceDiff.ops_diff(c, t)
print(json.dumps({"seconds": time.perf_counter() - t0}))
"""


def ours(control: Path, test: Path) -> dict[str, float]:
    from hta_tui.analysis import diff
    from hta_tui.trace.parse import parse_file

    t0 = time.perf_counter()
    c = parse_file(next(p for p in control.iterdir() if p.is_file())).frames["events"]
    t = parse_file(next(p for p in test.iterdir() if p.is_file())).frames["events"]
    load = time.perf_counter() - t0
    times = {}
    for name, call in {
        "compare_traces ALL": lambda: diff.compare_traces(c, t),
        "compare_traces CPU": lambda: diff.compare_traces(c, t, device_type="CPU"),
        "compare_traces GPU": lambda: diff.compare_traces(c, t, device_type="GPU"),
        "ops_diff": lambda: diff.ops_diff(c, t),
        "breakdown_diff": lambda: diff.breakdown_diff(c, t),
    }.items():
        s = time.perf_counter()
        call()
        times[name] = time.perf_counter() - s
    return {"parse": load, **times}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--control", type=Path, default=SHARED / "control")
    ap.add_argument("--test", type=Path, default=SHARED / "test")
    ap.add_argument("--out", type=Path, default=HERE / "DIFF.md")
    from trace_sets import add_set_arg

    add_set_arg(ap)
    args = ap.parse_args()
    if args.trace_set is not None:  # a set against itself: every rank paired, nothing differs
        args.control = args.test = args.trace_set
    mine = ours(args.control, args.test)
    hta = None
    if Path(HTA_PYTHON).exists():
        proc = subprocess.run(
            [HTA_PYTHON, "-c", HTA_CODE, str(args.control), str(args.test)],
            capture_output=True,
            text=True,
            check=False,
            timeout=1800,
        )
        lines = proc.stdout.strip().splitlines()
        hta = json.loads(lines[-1]) if proc.returncode == 0 and lines else None
    diff_total = sum(v for k, v in mine.items() if k != "parse")
    same_work = sum(v for k, v in mine.items() if k.startswith(("compare", "ops")))
    out = [
        "# Benchmark results: trace diff",
        "",
        f"Command: `python bench/bench_diff.py`; {time.strftime('%Y-%m-%d')}; "
        f"control `{args.control.name}`, test `{args.test.name}` (the ~35 MB shared traces).",
        "",
        "| step | hta-tui s |",
        "|---|---:|",
        *(f"| {k} | {v:.3f} |" for k, v in mine.items()),
        "",
        f"Everything the diff screen computes, once loaded: **{diff_total:.2f} s** (target < 2 s).",
    ]
    if hta is not None:
        out.append(
            f"HTA 0.5 TraceDiff (compare_traces ALL/CPU/GPU + ops_diff, each parsing both "
            f"traces, as HTA does): {hta['seconds']:.1f} s; the same four calls in hta-tui, "
            f"parse of both traces included: {mine['parse'] + same_work:.2f} s."
        )
    args.out.write_text("\n".join(out) + "\n")
    print("\n".join(out))


if __name__ == "__main__":
    main()
