"""CPU of a view's work until its numbers, as its worker runs it, in a process of its own.

    PYTHONPATH=. python bench/view_cpu.py /tmp/realsets/resnet18_8x100MB K,E,R

Opens the folder (its cache warm or not: the open is not counted), then for each view key
in turn: its `frames_for` and its compute (the view's numbers), then, for a view that shows
parts after them (`LATER`), its `compute_later`. The first view reads the ranks' frames; the
later ones reuse what the earlier ones built, as in the app. CPU of the whole process
(polars' threads included); wall is left out: on the shared machine it measures the load.
Run a checkout against another with PYTHONPATH, alternating (issue 27, bench/KEYS.md).
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

from hta_tui.app.screens.registry import SCREENS
from hta_tui.session.live import open_session
from hta_tui.trace.cache import Cache


def cpu() -> float:
    t = os.times()
    return t.user + t.system


def main() -> None:
    folder, keys = Path(sys.argv[1]), sys.argv[2].split(",")
    ts = open_session(folder, cache=Cache()).trace_set
    by_key = {e.key: e for e in SCREENS}
    out = []
    for key in keys:
        cls = by_key[key].load()
        screen = cls()
        params = screen.params
        c = cpu()
        frames = cls.frames_for(ts, params)
        result = screen.compute_on(ts, frames, params)
        numbers = cpu() - c
        c = cpu()
        if getattr(cls, "LATER", False):
            screen.compute_later(ts, frames, params, result)
        out.append(f"{key} {cls.__name__}: numbers {numbers:.2f} s, later {cpu() - c:.2f} s")
    print("; ".join(out))


if __name__ == "__main__":
    main()
