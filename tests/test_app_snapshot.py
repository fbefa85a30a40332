"""SVG snapshots of the screens at 80x24, on fixed data.

Deterministic by construction: the traces come from the tests' own fixed generator (not
`hta_tui.synth`, so tuning the demo data never moves these pictures), the watcher is off, load
times are hidden (`timings=False`), paths are shown relative to the trace folder (whose name is
fixed), and the snapshot is taken once every load and overview computation has finished.
Update with `pytest tests/test_app_snapshot.py --snapshot-update` and look at the SVGs under
tests/__snapshots__/ before committing them.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from hta_tui.app.app import HtaApp
from hta_tui.trace.cache import Cache
from tests.app_walk import Walk, snapshot_steps, walk_app
from tests.test_app_support import settle, write_rank

SIZE = (80, 24)


def demo_app(tmp_path: Path, *, ascii: bool = False, findings: bool = False) -> HtaApp:
    """Four ranks named as PyTorch names them (long: the names get elided) and a broken file."""
    root = tmp_path / "traces"
    for rank in range(4):
        name = f"gpu-node-{rank // 2}_{1234 + rank}.1719853884000.pt.trace.json.gz"
        write_rank(root, rank, name=name, world=4)
    (root / "rank-4.trace.json").write_bytes(b'{"traceEvents": [oops')
    return HtaApp(
        root,
        cache=Cache(tmp_path / "cache"),
        watch=False,
        timings=False,
        ascii=ascii,
        findings=findings,
    )


async def _settled(pilot) -> None:
    await settle(pilot)


async def _help(pilot) -> None:
    await pilot.press("question_mark")
    await pilot.pause()


def _theme(name: str):
    async def run_before(pilot) -> None:
        pilot.app.theme = name
        await pilot.pause()

    return run_before


#: One app (the default theme), in turn: the overview, `?` over it (closed after its picture:
#: `app_walk.run_scenarios`), then the overview in the other themes (a theme restyles the
#: screen shown: the same picture as an app started in it).
SHARED_APP = {
    "overview": _settled,
    "help": _help,
    "light": _theme("hta-light"),
    "contrast": _theme("hta-contrast"),
}


async def _temporal_filled(pilot, seen: dict) -> None:
    """The overview's temporal table filled again, looked at before the table is next idle
    (where a DataTable measures its auto-width columns): each column as wide as its cells."""
    from textual.widgets import DataTable

    screen = pilot.app.screen
    screen._show_temporal()
    table = screen.query_one("#temporal-table", DataTable)
    pad = 2 * table.cell_padding
    seen["widths"] = [c.get_render_width(table) - pad for c in table.ordered_columns]
    rows = [cells for _, cells, _ in screen.data.temporal]
    seen["cells"] = [max(len(cells[i]) for cells in rows) for i in range(len(rows[0]))]


@pytest.fixture(scope="module")
def shared_app(tmp_path_factory: pytest.TempPathFactory) -> Walk:
    app = demo_app(tmp_path_factory.mktemp("shared-app"))
    steps = {**snapshot_steps(SHARED_APP), "temporal": _temporal_filled}
    return asyncio.run(walk_app(app, steps, size=SIZE))


def test_overview(snap_svg, shared_app: Walk) -> None:
    """Four loaded ranks and a broken file: its reason under its name, temporal bars."""
    assert snap_svg(shared_app.check("overview")["svg"])


def test_overview_findings(snap_compare, tmp_path: Path) -> None:
    """Issue 28: the overview opens with the findings, worst first by time at stake, above
    the step time (the other overview snapshots leave them off: they cost every rule's
    analyses)."""
    app = demo_app(tmp_path, findings=True)
    assert snap_compare(app, terminal_size=SIZE, run_before=_settled)


def test_overview_ascii(snap_compare, tmp_path: Path) -> None:
    """The ASCII fallback of the bar chart (no UTF-8 locale)."""
    assert snap_compare(demo_app(tmp_path, ascii=True), terminal_size=SIZE, run_before=_settled)


def test_help(snap_svg, shared_app: Walk) -> None:
    """`?` over the overview: every key of the screen."""
    assert snap_svg(shared_app.check("help")["svg"])


def test_overview_light(snap_svg, shared_app: Walk) -> None:
    """The light theme."""
    assert snap_svg(shared_app.check("light")["svg"])


def test_overview_contrast(snap_svg, shared_app: Walk) -> None:
    """The high-contrast theme."""
    assert snap_svg(shared_app.check("contrast")["svg"])


def test_overview_spans(snap_compare, tmp_path: Path) -> None:
    """Issue 24.1 and 25.6: rank 0's two spans (one worker, `trainer`: the newest shown and
    marked, the older listed) and a stray file saying rank 0, listed as a conflict."""
    from tests.test_span_identity import write_stray

    root = tmp_path / "traces"
    for steps, stamp in ((3, "1795489276434075715"), (4, "1795489276924276875")):
        write_rank(root, 0, name=f"trainer.{stamp}.pt.trace.json.gz", world=2, steps=steps)
    write_rank(root, 1, name="trainer1.1795489276924276875.pt.trace.json.gz", world=2)
    write_stray(root)
    app = HtaApp(root, cache=Cache(tmp_path / "cache"), watch=False, timings=False)
    assert snap_compare(app, terminal_size=SIZE, run_before=_settled)


def test_temporal_columns_fit_at_once(shared_app: Walk) -> None:
    """The temporal table's columns are as wide as their cells from the moment it is
    filled, not from its next idle moment (a snapshot taken on a busy machine before then
    cut the idle column's `%` off)."""
    seen = shared_app.check("temporal")
    assert len(seen["widths"]) == len(seen["cells"]) == 5
    assert all(w >= c for w, c in zip(seen["widths"], seen["cells"], strict=True))
    assert seen["widths"][3] == seen["cells"][3] == len("23.4%")
