"""Where a benchmark's traces come from, in one place: the synthetic generator (the default)
or a real-shaped set (`--set DIR`).

A real-shaped set is a real public trace repeated in time and written as N ranks by
../shared/tools/scale_trace.py; `bench/make_real_sets.sh` builds two of them into /tmp/realsets
(never into the repository): 8 ranks x ~100 MB from tracelens_mi300_ddp_resnet18 (GPU, NCCL,
python frames, no ProfilerStep) and from pytorch_cpu_vit_memory (memory events, stacks,
modules, autograd flows, 54 steps). The generator writes layouts and shapes of its own; the
real ones cost differently (issue 27), so every figure should be measured on both.

    python bench/bench_analyses.py --set /tmp/realsets/vit_memory_8x100MB

`floor(folder)`: the floor the issue's ratios are taken against, gunzip + orjson.loads of the
same files, measured in a process of its own (wall, CPU, peak RSS), so a bench measures it in
the same run as what it compares with it.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
#: Where bench/make_real_sets.sh writes its sets.
REAL_SETS = Path("/tmp/realsets")


def add_set_arg(ap: argparse.ArgumentParser) -> None:
    """`--set DIR`: run on this trace folder (a real-shaped set) instead of generated data."""
    ap.add_argument(
        "--set",
        dest="trace_set",
        type=Path,
        metavar="DIR",
        help="a real-shaped trace set (bench/make_real_sets.sh; e.g. "
        f"{REAL_SETS}/vit_memory_8x100MB) instead of the generator's traces",
    )


def write(out: Path, lines: list[str], *, append: bool) -> None:
    """A bench's Markdown: the whole file, or (`--append`) one more section at its end, its
    title one level down (a real-shaped set's figures beside the generator's)."""
    text = "\n".join(lines) + "\n"
    if append and out.exists():
        text = out.read_text() + "\n" + text.replace("# ", "## ", 1)
    out.write_text(text)


def add_append_arg(ap: argparse.ArgumentParser) -> None:
    ap.add_argument("--append", action="store_true", help="add a section to --out")


def trace_files(folder: Path) -> list[Path]:
    """The trace files of a folder (what the app opens: `*.json`, `*.json.gz`)."""
    return sorted(p for p in folder.glob("*.json*") if p.is_file())


def chosen(args: argparse.Namespace, generated: Path, make: object = None) -> Path:
    """The set given with `--set`, else `generated` (made by `make()` when given)."""
    given: Path | None = getattr(args, "trace_set", None)
    if given is not None:
        if not trace_files(given):
            raise SystemExit(f"--set {given}: no trace files (run bench/make_real_sets.sh)")
        return given
    if callable(make):
        make()
    return generated


def label(folder: Path) -> str:
    """`8 x 104 MB (real-shaped, tracelens_mi300_ddp_resnet18)` or `8 files (generated)`."""
    files = trace_files(folder)
    info = folder / "scale_info.txt"
    if info.exists():
        try:
            source = Path(json.loads(info.read_text())["input"]).parent.name
        except (ValueError, KeyError, TypeError):
            source = "scale_trace.py"
        return f"{len(files)} files, real-shaped from {source} ({folder})"
    return f"{len(files)} files, generated ({folder})"


def _floor_body(folder: Path) -> dict:
    import gzip
    import resource

    import orjson

    t, c = time.perf_counter(), time.process_time()
    n = 0
    for f in trace_files(folder):
        raw = f.read_bytes()
        data = gzip.decompress(raw) if raw[:2] == b"\x1f\x8b" else raw
        doc = orjson.loads(data)
        n += len(doc["traceEvents"])
        del doc, data, raw
    return {
        "wall_s": time.perf_counter() - t,
        "cpu_s": time.process_time() - c,
        "peak_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
        "events": n,
    }


def floor(folder: Path) -> dict:
    """gunzip + orjson.loads of every file of `folder`, in a process of its own."""
    proc = subprocess.run(
        [sys.executable, str(Path(__file__).resolve()), "--floor", str(folder)],
        capture_output=True,
        text=True,
        check=False,
    )
    if proc.returncode != 0:
        return {"error": (proc.stderr.strip().splitlines() or ["failed"])[-1][:200]}
    return json.loads(proc.stdout.strip().splitlines()[-1])


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("--floor", type=Path, required=True)
    print(json.dumps(_floor_body(ap.parse_args().floor)))
