"""The TensorBoard plugin's answers (../shared/oracle-tb) and the trace file behind each."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import polars as pl

from tests.conftest import SHARED
from tests.shared_sets import parsed

ROOT = SHARED / "oracle-tb"


def _profiles() -> dict[str, tuple[Path, Path]]:
    """ "case/worker/span" -> (oracle folder, trace file), for every file the plugin loaded."""
    out = {}
    if not ROOT.is_dir():
        return out
    for meta in sorted(ROOT.rglob("meta.json")):
        case = meta.parent
        for f in json.loads(meta.read_text())["files"]:
            folder = case / f["worker"] / str(f["span"])
            if f["load"].get("ok") and folder.is_dir():
                trace = SHARED / "traces" / case.relative_to(ROOT) / f["source"]
                out[str(folder.relative_to(ROOT))] = (folder, trace)
    return out


PROFILES = _profiles()


def profiles_with(file: str) -> list[str]:
    return [p for p, (folder, _) in PROFILES.items() if (folder / file).is_file()]


def answer(profile: str, file: str) -> Any:
    return json.loads((PROFILES[profile][0] / file).read_text())


def events(profile: str) -> pl.DataFrame:
    return parsed(PROFILES[profile][1]).frames["events"]


def parsed_meta(profile: str) -> dict[str, Any]:
    return parsed(PROFILES[profile][1]).meta


def close(got: float, want: float, rel: float = 1e-3, abs_: float = 0.01) -> bool:
    """Within 0.1 % (and a rounding slack for the plugin's rounded integers)."""
    return abs(got - want) <= rel * abs(want) + abs_
