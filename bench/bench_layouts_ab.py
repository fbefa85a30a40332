"""Parse / orjson.loads per layout for two trees of hta_tui, measured alternately in one run,
so a change's gain is read on a loaded machine (each pair of the two sees the same load).

    python bench/bench_layouts_ab.py --baseline /path/to/other/tree --data bench/out/layouts-100MB

`--baseline`: a checkout of the repository to compare with (for example
`git worktree add /tmp/base main`). Prints a Markdown table; writes nothing.
"""

from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from bench_layouts import run_layout  # noqa: E402


def _ratios(runs: list[dict]) -> tuple[float, float]:
    """Median parse / loads over the runs, wall and CPU."""
    wall = [p / lo for r in runs for p, lo in zip(r["parses"], r["loads"], strict=True)]
    cpu = [p / lo for r in runs for p, lo in zip(r["parses_cpu"], r["loads_cpu"], strict=True)]
    return statistics.median(wall), statistics.median(cpu)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--baseline", type=Path, required=True, help="the tree to compare with")
    ap.add_argument("--data", type=Path, required=True, help="rank-N.<layout>.json.gz files")
    ap.add_argument("--repeat", type=int, default=3, help="alternations per layout")
    args = ap.parse_args()
    trees = {"baseline": args.baseline.resolve(), "this tree": HERE.parent}
    print(f"baseline: {trees['baseline']}; this tree: {trees['this tree']}\n")
    print("| layout | baseline wall | baseline CPU | this tree wall | this tree CPU |")
    print("|---|---:|---:|---:|---:|")
    for path in sorted(args.data.glob("*.json.gz")):
        runs: dict[str, list[dict]] = {name: [] for name in trees}
        for _ in range(args.repeat):
            for name, src in trees.items():
                runs[name].append(run_layout(path, 1, src))
        failed = [r["error"] for rs in runs.values() for r in rs if "error" in r]
        if failed:
            print(f"| {path.name.split('.')[1]} | failed: {failed[0]} | | | |")
            continue
        (bw, bc), (tw, tc) = (_ratios(runs[name]) for name in trees)
        print(f"| {path.name.split('.')[1]} | {bw:.2f} | {bc:.2f} | {tw:.2f} | {tc:.2f} |")


if __name__ == "__main__":
    main()
