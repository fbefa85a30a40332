"""CPU of a view's work until its numbers, as its worker runs it, in a process of its own.

    PYTHONPATH=. python bench/view_cpu.py /tmp/realsets/resnet18_8x100MB K,E,R [--read-ahead]
        [--lines=N]

Opens the folder (its cache warm or not: the open is not counted), then for each view key
in turn: its `frames_for` (reading the ranks' frames, for the first view) and its compute
(the view's numbers), then, for a view that shows parts after them (`LATER`), its
`compute_later`. The first view reads the ranks' frames; the later ones reuse what the
earlier ones built, as in the app. `--read-ahead`: the frames are read first, and HTA's
view of each rank made, as the app does while the overview is shown (`app/read_ahead.py`),
and that is not counted either.
A view computed by the app itself (the overview, the findings) is reported as such. The
timeline's numbers are the ranks whose rows fill its lines (`TimelineScreen.FIRST_ROWS`
without an app, about the view's at 120 x 40; `--lines N` to set them), its later part the
other ranks' rows.
CPU of the whole process (polars' threads included); wall is left out: on the shared
machine it measures the load. Run a checkout against another with PYTHONPATH, alternating
(issue 27, bench/KEYS.md).
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
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    folder, keys = Path(args[0]), args[1].split(",")
    ts = open_session(folder, cache=Cache()).trace_set
    if "--read-ahead" in sys.argv:
        from hta_tui.app.read_ahead import read_ahead

        read_ahead(ts)
    by_key = {e.key: e for e in SCREENS}
    lines = [a.split("=", 1)[1] for a in sys.argv[1:] if a.startswith("--lines=")]
    if lines:
        from hta_tui.app.screens.timeline import TimelineScreen

        TimelineScreen.FIRST_ROWS = int(lines[0])
    out = []
    for key in keys:
        cls = by_key[key].load()
        if not hasattr(cls, "compute_on"):
            out.append(f"{key} {cls.__name__}: computed by the app, not a view's worker")
            continue
        screen = cls()
        params = screen.params
        c = cpu()
        frames = cls.frames_for(ts, params)
        read = cpu() - c
        try:
            result = screen.compute_on(ts, frames, params)
        except Exception as exc:  # the findings read the app's kept answers
            out.append(f"{key} {cls.__name__}: needs the app ({type(exc).__name__})")
            continue
        numbers = cpu() - c
        c = cpu()
        if getattr(cls, "LATER", False):
            screen.compute_later(ts, frames, params, result)
        pending = getattr(result, "pending", ())  # the timeline's ranks made later
        made = f", ranks {len(frames) - len(pending)} of {len(frames)} first" if pending else ""
        out.append(
            f"{key} {cls.__name__}: numbers {numbers:.2f} s (frames {read:.2f}{made}),"
            f" later {cpu() - c:.2f} s"
        )
    print("; ".join(out))


if __name__ == "__main__":
    main()
