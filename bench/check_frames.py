"""Frames before and after a parser change, column by column: a speed-up must not move a value.

    python bench/check_frames.py dump OUT PATH...     # every trace under PATHs -> OUT/
    python bench/check_frames.py compare OLD NEW      # every frame, every column, equal?

`dump` writes each file's frames (and its metadata, dropped-event counts and error) with the
current code; `compare` reports any file, frame, column, dtype or value that differs. Run
`dump` on main's code and on the change's, over ../shared/traces and the bench data.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
from pathlib import Path

import polars as pl


def _name(path: Path) -> str:
    return hashlib.sha1(str(path.resolve()).encode()).hexdigest()[:16]


def dump(out: Path, roots: list[Path]) -> None:
    from hta_tui.trace.discover import discover
    from hta_tui.trace.parse import TraceFileError, parse_file

    out.mkdir(parents=True, exist_ok=True)
    index = {}
    for root in roots:
        for tf in discover(root):
            key = _name(tf.path)
            try:
                parsed = parse_file(tf.path)
            except TraceFileError as exc:
                index[key] = {"path": str(tf.path), "error": str(exc)}
                continue
            meta = {k: v for k, v in parsed.meta.items() if k not in ("parser_version", "path")}
            index[key] = {"path": str(tf.path), "meta": meta}
            for name, frame in parsed.frames.items():
                frame.write_parquet(out / f"{key}.{name}.parquet")
            print(tf.path, {n: f.height for n, f in parsed.frames.items()}, file=sys.stderr)
    (out / "index.json").write_text(json.dumps(index, indent=1, default=str, sort_keys=True))


def compare(old: Path, new: Path) -> int:
    a = json.loads((old / "index.json").read_text())
    b = json.loads((new / "index.json").read_text())
    problems = [f"only in {old}: {a[k]['path']}" for k in a.keys() - b.keys()]
    problems += [f"only in {new}: {b[k]['path']}" for k in b.keys() - a.keys()]
    frames = 0
    for key in sorted(a.keys() & b.keys()):
        path = a[key]["path"]
        if a[key] != b[key]:
            problems.append(f"{path}: metadata or error differs")
        for f in sorted(old.glob(f"{key}.*.parquet")):
            g = new / f.name
            if not g.exists():
                problems.append(f"{path}: {f.name} missing after")
                continue
            x, y = pl.read_parquet(f), pl.read_parquet(g)
            frames += 1
            if x.schema != y.schema:
                problems.append(f"{path} {f.name}: schema {x.schema} != {y.schema}")
                continue
            if x.height != y.height:
                problems.append(f"{path} {f.name}: {x.height} rows != {y.height}")
                continue
            for col in x.columns:
                if not x[col].equals(y[col], check_names=True):
                    problems.append(f"{path} {f.name}: column {col} differs")
    print("\n".join(problems))
    print(
        f"{len(a.keys() & b.keys())} files in both, {frames} frames compared, "
        f"{len(problems)} differences"
    )
    return 1 if problems else 0


def main() -> None:
    ap = argparse.ArgumentParser()
    sub = ap.add_subparsers(dest="cmd", required=True)
    d = sub.add_parser("dump")
    d.add_argument("out", type=Path)
    d.add_argument("paths", type=Path, nargs="+")
    c = sub.add_parser("compare")
    c.add_argument("old", type=Path)
    c.add_argument("new", type=Path)
    args = ap.parse_args()
    if args.cmd == "dump":
        dump(args.out, args.paths)
    else:
        sys.exit(compare(args.old, args.new))


if __name__ == "__main__":
    main()
