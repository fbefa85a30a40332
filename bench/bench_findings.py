"""Findings benchmark: the rules on a loaded trace set cost no more than the analyses they read.

    python bench/bench_findings.py                       # /tmp/realsets/*_8x100MB, else --synth
    python bench/bench_findings.py --folder /tmp/realsets/resnet18_8x100MB
    python bench/bench_findings.py --synth --ranks 8 --mb 100        # the generator's job

Timings on data already parsed (each on frames opened afresh, so no view a run before built
is reused): opening the parsed set; the tables the rules read, made through the registry
(each analysis set up once); findings from scratch (those tables and the rules: what
`check` and `api.findings` do after opening); `check` itself (`run_check`: opening, rules,
verdict); and the rules alone on tables already made (what `report` adds after its run).
CPU is user + sys of this process and its children. Results go to bench/FINDINGS.md.
"""

from __future__ import annotations

import argparse
import os
import resource
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))  # this checkout's hta_tui, not an installed one
REAL_SETS = Path("/tmp/realsets")


def _open(folder: Path, cache: Path) -> Any:
    from hta_tui.trace.cache import Cache
    from hta_tui.trace.model import open_set

    return open_set(folder, Cache(cache))


def cpu() -> float:
    """User + sys CPU seconds of this process and its (waited-for) children."""
    me, kids = (
        resource.getrusage(resource.RUSAGE_SELF),
        resource.getrusage(resource.RUSAGE_CHILDREN),
    )
    return me.ru_utime + me.ru_stime + kids.ru_utime + kids.ru_stime


def measure(folder: Path, cache: Path, repeat: int = 2) -> dict[str, float | int | str]:
    import polars as pl

    from hta_tui.analysis import findings, registry
    from hta_tui.check import run_check
    from hta_tui.trace.cache import Cache

    _open(folder, cache)  # parsed once, stored: every timing below opens the stored frames
    needed = findings.needed_tables()

    def timed(work: Callable[..., Any]) -> tuple[Any, float, float]:
        ts = _open(folder, cache)
        ranks, meta = ts.frames(), registry.trace_meta(ts)
        t, c = time.perf_counter(), cpu()
        with pl.Config(engine_affinity=registry.ENGINE):
            out = work(ranks, ts.frames, meta)
        return out, time.perf_counter() - t, cpu() - c

    def opened() -> tuple[float, float]:
        t, c = time.perf_counter(), cpu()
        ts = _open(folder, cache)
        ts.frames()
        return time.perf_counter() - t, cpu() - c

    def checked() -> tuple[Any, float, float]:
        t, c = time.perf_counter(), cpu()
        result = run_check(folder, cache=Cache(cache))
        return result, time.perf_counter() - t, cpu() - c

    best: dict[str, tuple[float, float]] = {}

    def keep(key: str, s: float, c: float) -> None:
        old = best.get(key, (float("inf"), float("inf")))
        best[key] = (min(old[0], s), min(old[1], c))

    for _ in range(repeat):  # alternating, the least of each: the host's load varies
        keep("open", *opened())
        tables, s, c = timed(lambda r, f, m: registry.tables(r, needed, frames=f, meta=m))
        keep("read", s, c)
        found, s, c = timed(lambda r, f, m: registry.findings_tables(r, frames=f, meta=m))
        keep("findings", s, c)
        result, s, c = checked()
        keep("check", s, c)
    ts = _open(folder, cache)
    ranks, meta = ts.frames(), registry.trace_meta(ts)
    t, c = time.perf_counter(), cpu()
    registry.findings_tables(ranks, frames=ts.frames, meta=meta, made=tables)
    rules_s, rules_cpu = time.perf_counter() - t, cpu() - c
    sizes = sum(p.stat().st_size for p in folder.rglob("*") if p.is_file())
    fired = found["findings"].filter(pl.col("severity").is_in(["fail", "warn"]))["id"].to_list()
    return {
        "folder": str(folder),
        "ranks": len(ts.loaded()),
        "disk_mb": round(sizes / 1e6, 1),
        "tables": len(needed),
        **{f"{k}_s": v[0] for k, v in best.items()},
        **{f"{k}_cpu": v[1] for k, v in best.items()},
        "check_code": result.code,
        "rules_s": rules_s,
        "rules_cpu": rules_cpu,
        "fired": ", ".join(fired) or "none",
    }


def _synth(ranks: int, mb: float, out: Path) -> Path:
    from hta_tui.synth import write_trace_dir

    write_trace_dir(out, ranks=ranks, target_mb=mb)
    return out


def _table(rows: list[dict]) -> str:
    head = (
        "| set | ranks | on disk (MB) | tables read | open (s, cpu) | analyses read (s, cpu) "
        "| findings from scratch (s, cpu) | findings / analyses (cpu) | check (s, cpu) "
        "| rules on made tables (s, cpu) | fire |\n"
        "|---|---|---|---|---|---|---|---|---|---|---|\n"
    )
    body = "".join(
        f"| {Path(r['folder']).name} | {r['ranks']} | {r['disk_mb']} | {r['tables']} "
        f"| {r['open_s']:.2f} ({r['open_cpu']:.2f}) "
        f"| {r['read_s']:.2f} ({r['read_cpu']:.2f}) | {r['findings_s']:.2f} "
        f"({r['findings_cpu']:.2f}) | {r['findings_cpu'] / r['read_cpu']:.2f} "
        f"| {r['check_s']:.2f} ({r['check_cpu']:.2f}), exit {r['check_code']} "
        f"| {r['rules_s']:.3f} ({r['rules_cpu']:.3f}) | {r['fired']} |\n"
        for r in rows
    )
    load = os.getloadavg()
    return head + body + f"\nLoad average at the end: {load[0]:.1f} {load[1]:.1f} {load[2]:.1f}.\n"


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--folder", type=Path, action="append", help="a trace folder (repeatable)")
    ap.add_argument("--synth", action="store_true", help="the generator's job instead")
    ap.add_argument("--ranks", type=int, default=8)
    ap.add_argument("--mb", type=float, default=100.0)
    ap.add_argument("--out", type=Path, default=HERE / "FINDINGS.md")
    ap.add_argument("--repeat", type=int, default=2)
    ap.add_argument("--cache", type=Path, help="keep the parsed frames here (else a temp dir)")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        caches = args.cache or Path(tmp)
        folders = args.folder or sorted(
            p for p in REAL_SETS.glob("*_8x100MB") if (p / "rank0.json.gz").exists()
        )
        if args.synth or not folders:  # no real set built: the generator's job
            folders = [_synth(args.ranks, args.mb, Path(tmp) / "synth")]
        rows = [measure(f, caches / f"cache-{f.name}", args.repeat) for i, f in enumerate(folders)]
    text = _table(rows)
    print(text)
    if args.out:
        intro = args.out.read_text().split("## Results", 1)[0] if args.out.exists() else ""
        args.out.write_text((intro or "# Findings\n\n") + "## Results\n\n" + text)


if __name__ == "__main__":
    main()
