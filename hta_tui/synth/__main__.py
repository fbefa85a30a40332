"""`python -m hta_tui.synth OUT_DIR`: write synthetic traces from the command line."""

from __future__ import annotations

import argparse
import sys
import time

from hta_tui.synth.files import write_trace_dir


def _main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        prog="python -m hta_tui.synth", description="Write synthetic multi-rank Kineto traces."
    )
    p.add_argument("out_dir")
    p.add_argument("--ranks", type=int, default=4)
    p.add_argument("--steps", type=int, default=4)
    p.add_argument("--target-mb", type=float, default=None, help="uncompressed MB per rank file")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--slow-rank", type=int, default=1, help="straggler rank; -1 for none")
    p.add_argument("--kernels-per-step", type=int, default=60)
    p.add_argument("--no-gzip", action="store_true", help="write plain .json")
    p.add_argument("--nccl-style", choices=("mixed", "new", "legacy"), default="mixed")
    p.add_argument(
        "--lean", action="store_true", help="only the args the analyses read: more events per MB"
    )
    p.add_argument("--workers", type=int, default=1, help="ranks written in parallel")
    a = p.parse_args(argv)
    t0 = time.perf_counter()
    paths = write_trace_dir(
        a.out_dir,
        ranks=a.ranks,
        steps=a.steps,
        target_mb=a.target_mb,
        seed=a.seed,
        slow_rank=None if a.slow_rank < 0 else a.slow_rank,
        gzip_files=not a.no_gzip,
        kernels_per_step=a.kernels_per_step,
        nccl_style=a.nccl_style,
        workers=a.workers,
        lean=a.lean,
    )
    for path in paths:
        print(path)
    print(f"{len(paths)} files in {time.perf_counter() - t0:.1f} s", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(_main())
