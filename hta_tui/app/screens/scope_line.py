"""The parts of a screen's scope line that name ranks and spans: which span of a rank the
numbers come from, and for a view that shows one rank at a time, which rank and why that one
(the steps part is `analysis.scope`'s, or the screen's own)."""

from __future__ import annotations

from textual.binding import Binding

from hta_tui.trace.model import TraceSet

#: `H` on every screen that follows HTA's steps (the overview's temporal breakdown too)
EVERY_STEP_BINDING = Binding(
    "H",
    "every_step",
    "All steps",
    show=False,
    tooltip="Include the last ProfilerStep, which HTA leaves out (it may be cut short)",
)


def span_scope(ts: TraceSet, ranks: list[int]) -> str:
    """Which span the ranks show, when a rank has several (the file list picks another), and
    how many files of another process say the same rank (the file list says why)."""
    multi = [r for r in ranks if len(ts.spans(r)) > 1 or ts.conflicts(r)]
    if not multi:
        return ""
    parts = []
    for r in multi[:2]:
        spans, chosen = ts.spans(r), ts.selected(r)
        at = next((i for i, e in enumerate(spans) if chosen and e.path == chosen.path), 0)
        part = f"r{r} span {len(spans) - at}/{len(spans)}" if len(spans) > 1 else f"r{r}"
        conflicts = len(ts.conflicts(r))
        if conflicts:
            part += f" ({conflicts} conflicting file{'s' if conflicts > 1 else ''})"
        parts.append(part)
    return ", ".join(parts) + (" …" if len(multi) > 2 else "")


def one_rank(rank: int | None, picked: int | None, loaded: int, which: str = "first") -> str:
    """`rank` shown of `loaded` ranks; `picked` the one chosen with `r` (None: all), which
    the view may not have (no memory events there): then it says so."""
    if rank is None:
        return "no rank loaded"
    if picked is not None and picked != rank:
        return f"rank {rank} ({which}; rank {picked} has none)"
    if picked is None and loaded > 1:
        return f"rank {rank} ({which} of {loaded}; r picks)"
    return f"rank {rank}"
