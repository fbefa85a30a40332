"""Names from a trace folder are data (issue 16): kernel, operator, annotation, thread, folder and
file names holding every C0 and C1 control, OSC 0/8/52 and CSI sequences, bidi overrides and
markup (`hta_tui.synth.hostile`) never reach the terminal as control, and are shown as escapes.

The app runs with a driver that records every byte Textual writes to the terminal (here: the
diff; every other view, tab, picker, the help and a notice are visited by the one walk over
every view, tests/test_every_view.py, on these names). Textual's own sequences (cursor moves,
colours, the pointer shape) are told apart by their grammar; nothing else may hold an escape,
a control or a bidi character.
"""

from __future__ import annotations

import io
import re
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import orjson
import polars as pl
import pytest
from rich.text import Span, Text
from textual.drivers.headless_driver import HeadlessDriver
from textual.widgets import TabbedContent

from hta_tui.analysis import catalog
from hta_tui.app.app import HtaApp
from hta_tui.app.control_filter import ControlFilter
from hta_tui.app.safe_text import escaped, safe_cell, safe_label
from hta_tui.app.screens.registry import DIFF
from hta_tui.app.widgets.frame_table import FrameTable
from hta_tui.printable import (
    UNPRINTABLE,
    json_printable,
    printable,
    printable_expr,
    printable_frame,
)
from hta_tui.report import run_report
from hta_tui.synth.hostile import (
    BIDI,
    CONTROLS,
    FOLDER_PAYLOAD,
    MARKUP,
    PAYLOAD,
    TITLE,
    write_hostile_dir,
)
from hta_tui.trace.cache import Cache
from tests.test_app_support import settle, wait_until

SIZE = (100, 30)
#: what a name looks like on screen: its tag, the title sequence and markup, as written (a
#: name cut to fit its column keeps its first 31 characters)
SHOWN = "evil\\x1b]0;PWNED\\x07[b]M"
BAD = re.compile("[" + "".join(re.escape(chr(c)) for c in UNPRINTABLE) + "]")
#: Textual's own output: cursor moves and colours (CSI ... H / m), the pointer shape (OSC 22)
TEXTUAL_OWN = re.compile(r"\x1b\[[0-9;]*[Hm]|\x1b\]22;[a-z-]+\x07")


def assert_clean(output: str) -> None:
    """No control, bidi or separator character besides Textual's own sequences and its line
    breaks; in particular no OSC (title, link, clipboard), no clear-screen, no C1."""
    rest = TEXTUAL_OWN.sub("", output).replace("\n", "")
    found = sorted({f"U+{ord(c):04X}" for c in BAD.findall(rest)})
    assert not found, f"raw control characters reached the terminal: {found}"


def hostile_folder(out: Path, payload: str = PAYLOAD) -> Path:
    """Two hostile ranks and the hostile sync story; the root is the hostile folder itself (its
    name is in the status bar)."""
    first, *_ = write_hostile_dir(out, ranks=2, steps=3, payload=payload)
    root = out / FOLDER_PAYLOAD
    # a second span of rank 0: enter on a file then gives a notice naming it
    (root / f"{BIDI}{CONTROLS[1:]}rank-0.span2.json.gz").write_bytes(first.read_bytes())
    # a file that fails to load: its reason sits under its (hostile) name
    (root / f"{BIDI}{CONTROLS[1:]}broken.json").write_bytes(b'{"traceEvents": [oops')
    return root


@pytest.fixture(scope="module")
def hostile_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return hostile_folder(tmp_path_factory.mktemp("hostile"))


@pytest.fixture(scope="module")
def reports_cache(tmp_path_factory: pytest.TempPathFactory) -> Cache:
    """One cache for the reports below: the folder parsed once, each table made once (what a
    report keeps is what the next one writes, as on a second run)."""
    return Cache(tmp_path_factory.mktemp("reports-cache"))


# -- the one place ------------------------------------------------------------------------------
def test_printable_escapes_every_control_visibly() -> None:
    assert printable("evil\x1b]0;PWNED\x07") == "evil\\x1b]0;PWNED\\x07"
    assert printable("a\tb\nc\rd") == "a\\tb\\nc\\rd"
    assert printable("\x9b2J") == "\\x9b2J"  # 8-bit CSI
    assert printable("abc\u202edcba") == "abc\\u202edcba"  # right-to-left override
    assert printable("\x7f\x00") == "\\x7f\\x00"
    assert not BAD.search(printable(PAYLOAD))
    for code in UNPRINTABLE:
        assert printable(chr(code)) != chr(code)
    # ordinary names, markup-like C++ and non-ASCII text are left alone
    for name in ("void at::native::k<float>[2]", "naïve ✓ 漢字", "[lambda(int)#1]", ""):
        assert printable(name) == name
    assert printable(3) == "3"


def test_printable_expr_equals_printable() -> None:
    names = [PAYLOAD, "plain", "", None, MARKUP, BIDI, CONTROLS]
    got = pl.Series(names, dtype=pl.String).to_frame("n").select(printable_expr(pl.col("n")))
    assert got["n"].to_list() == [None if n is None else printable(n) for n in names]


def test_printable_frame_names_and_numbers() -> None:
    df = pl.DataFrame({f"k{TITLE}": [PAYLOAD], "n": [-1.5]})
    out = printable_frame(df)
    assert out.columns == [printable(f"k{TITLE}"), "n"]
    assert out.row(0) == (printable(PAYLOAD), -1.5)


def test_json_printable_is_the_same_json() -> None:
    doc = orjson.dumps({"name": PAYLOAD}).decode()
    safe = json_printable(doc)
    assert orjson.loads(safe) == {"name": PAYLOAD}
    assert not BAD.search(safe)


def test_safe_cell_never_markup() -> None:
    cell = safe_cell(f"{MARKUP}{TITLE}")
    assert isinstance(cell, Text) and cell.plain == printable(f"{MARKUP}{TITLE}")
    assert isinstance(safe_label(":fire:"), Text)  # a header: never markup or emoji codes
    assert safe_cell("1,234.5") == "1,234.5"  # plain strings stay (the fast path)
    styled = Text.assemble(("a\x1bb", "bold"), "\nc")
    out = escaped(styled)
    assert out.plain == "a\\x1bb\nc"  # our own line break stays one
    assert out.spans == [Span(0, 6, "bold")]  # "a\\x1bb": six characters


async def test_cells_too_long_for_the_fast_path_stay_text() -> None:
    """A cell cut to its column goes through DataTable's own drawing, which reads strings as
    markup with emoji codes: PlainCells hands it over as Text."""
    from textual.app import App, ComposeResult

    from hta_tui.app.widgets.plain_cells import PlainCells

    class One(App):
        def compose(self) -> ComposeResult:
            yield PlainCells()

        def on_mount(self) -> None:
            table = self.query_one(PlainCells)
            table.add_column(":fire: [b]h[/b]", width=12, key="c")
            table.add_row(":fire: at::native::k<float>", key="r")

    app = One()
    async with app.run_test(size=(40, 5)) as pilot:
        await pilot.pause()
        shown = screen_text(app)
    assert ":fire: at::n" in shown and ":fire: [b]h" in shown
    assert "🔥" not in shown


async def test_screen_titles_are_text() -> None:
    """A title may name spans and files: TextLine shows a string as written."""
    from textual.app import App, ComposeResult

    from hta_tui.app.widgets.text_line import TextLine

    class One(App):
        def compose(self) -> ComposeResult:
            yield TextLine(f"a{MARKUP}", id="t")

    app = One()
    async with app.run_test(size=(80, 3)) as pilot:
        await pilot.pause()
        first = screen_text(app)
        app.query_one("#t", TextLine).update(f"b{TITLE}{MARKUP}")
        await pilot.pause()
        second = screen_text(app)
    assert f"a{MARKUP}" in first
    assert f"b{printable(TITLE)}{MARKUP}" in second


def test_chart_labels_are_printable() -> None:
    """plotext's picture is read back as ANSI: a label's escape sequence would become a style
    or a link. The figure a screen draws on writes labels and titles as printable text."""
    from textual_plotext.plot import Plot

    from hta_tui.app.widgets.plot import PrintableFigure

    plot = Plot()
    figure = PrintableFigure(plot)
    figure.bar([f"k{TITLE}", f"{MARKUP}"], [1, 2])
    figure.title(f"t{TITLE}\u202e")
    figure.plotsize(100, 20)
    picture = Text.from_ansi(plot.build())
    assert printable(f"t{TITLE}\u202e") in picture.plain
    assert printable(f"k{TITLE}") in picture.plain or MARKUP in picture.plain  # (ticks thin)
    assert not BAD.search(picture.plain.replace("\n", ""))
    assert not any(span.style and "link" in str(span.style) for span in picture.spans)


def test_icicle_labels_are_escaped_and_keep_their_width() -> None:
    """A module name is escaped before it is cut to its block: every line stays `width`."""
    from hta_tui.app.widgets.icicle import icicle_lines

    name = f"m{TITLE}\nx"
    tree = pl.DataFrame({"path": [name, f"{name}/c"], "depth": [0, 1], "value": [10.0, 5.0]})
    lines = icicle_lines(tree, 40)
    assert [len(line) for line in lines] == [40, 40]
    assert not any(BAD.search(line) for line in lines)
    assert lines[0] == ("│" + printable(name)).ljust(40)  # "│m\\x1b]0;PWNED\\x07\\nx", blanks
    assert lines[1].startswith("│c")


def test_control_filter_drops_what_slipped_through() -> None:
    from rich.segment import Segment
    from textual.color import Color

    segs = [Segment("ok\x1b]0;x\x07", None), Segment("\u202eyes", None)]
    out = ControlFilter().apply(segs, Color(0, 0, 0))
    assert "".join(s.text for s in out) == "ok]0;xyes"


# -- the text report ----------------------------------------------------------------------------
def test_report_text_shows_names_as_escapes(hostile_root: Path, reports_cache: Cache) -> None:
    out = io.StringIO()
    assert run_report(hostile_root, cache=reports_cache, out=out) == 0
    text = out.getvalue()
    assert not BAD.search(text.replace("\n", ""))
    assert SHOWN in text  # kernel and operator names
    assert "\\u202e" in text  # the file names' bidi override, as an escape
    assert "PWNED" in text


def _sections(text: str) -> dict[str, str]:
    """The text report's tables by their `# name` heading."""
    parts = re.split(r"^# (\S+)\n", text, flags=re.M)
    return dict(zip(parts[1::2], parts[2::2], strict=True))


def _holds_payload(value: object) -> bool:
    if isinstance(value, str):
        return f"evil{TITLE}" in value
    if isinstance(value, dict):
        return any(_holds_payload(v) for v in value.values())
    if isinstance(value, list):
        return any(_holds_payload(v) for v in value)
    return False


@pytest.mark.heavy
def test_report_text_of_every_key(hostile_root: Path, reports_cache: Cache) -> None:
    """Every analysis and table `--only` knows, in one text report: no control reaches the
    output, and every table whose JSON holds a name from the traces shows it escaped."""
    keys = [a.name for a in catalog.ANALYSES] + list(catalog.TABLE_OWNER)
    cache = reports_cache
    out, doc = io.StringIO(), io.StringIO()
    assert run_report(hostile_root, only=keys, cache=cache, out=out, width=400, rows=0) == 0
    assert run_report(hostile_root, only=keys, as_json=True, cache=cache, out=doc) == 0
    text, records = out.getvalue(), orjson.loads(doc.getvalue())
    assert not BAD.search(text.replace("\n", ""))
    sections = _sections(text)
    assert set(keys) <= set(sections), sorted(set(keys) - set(sections))
    named = [k for k in keys if _holds_payload(records[k])]
    # the views' names: kernels, operators, annotations, modules, call sites, memory events'
    # operators, process groups, GPUs
    for key in ("gpu_kernel_breakdown", "operator_stats", "module_stats", "syncs"):
        assert key in named, key
    for key in ("memory_events", "collectives", "gpu_devices", "user_annotation_breakdown"):
        assert key in named, key
    hidden = [k for k in named if "evil\\x1b]0;PWN" not in sections[k]]
    assert not hidden, f"tables that lost the escaped name: {hidden}"


def test_report_json_keeps_names_exact(hostile_root: Path, reports_cache: Cache) -> None:
    out = io.StringIO()
    assert run_report(hostile_root, as_json=True, cache=reports_cache, out=out) == 0
    assert not BAD.search(out.getvalue().replace("\n", ""))
    doc = orjson.loads(out.getvalue())
    names = {r["name"] for r in doc["gpu_kernel_breakdown"]}
    assert any(n.startswith(PAYLOAD) for n in names)  # the data itself is untouched
    assert all(f["path"].startswith(BIDI) for f in doc["files"])


def test_compare_report_shows_names_as_escapes(hostile_root: Path, reports_cache: Cache) -> None:
    from hta_tui.report import run_compare_report

    shown = {}
    for as_json in (False, True):
        out = io.StringIO()
        # a pinned width: the name column's share of it (not the runner's terminal) decides
        # how much of a name is shown
        code = run_compare_report(
            hostile_root,
            hostile_root,
            as_json=as_json,
            cache=reports_cache,
            out=out,
            width=200,
        )
        assert code == 0
        shown[as_json] = out.getvalue()
        assert not BAD.search(shown[as_json].replace("\n", ""))
    assert SHOWN in shown[False]
    rows = orjson.loads(shown[True])["compare_traces"]
    assert any(r["name"].startswith(PAYLOAD) for r in rows)  # JSON: the names exact


# -- the app ------------------------------------------------------------------------------------
class RecordingDriver(HeadlessDriver):
    """Headless, but Textual renders as for a terminal and every byte is kept."""

    written: list[str]

    @property
    def is_headless(self) -> bool:
        return False

    def write(self, data: str) -> None:
        type(self).written.append(data)

    def flush(self) -> None:
        pass


def screen_text(app: HtaApp) -> str:
    return "\n".join(strip.text for strip in app.screen._compositor.render_strips())


async def visit(pilot: Any, seen: dict[str, str], name: str) -> None:
    """The screen as shown now, after its tables and charts are drawn."""
    app = pilot.app
    screen = app.screen
    if hasattr(screen, "shows_current"):
        await wait_until(pilot, lambda: screen.shows_current, 30, name)
    await pilot.pause()
    seen[name] = screen_text(app)


async def visit_tabs(
    pilot: Any, seen: dict[str, str], name: str, then: Callable[[], Awaitable[None]] | None = None
) -> None:
    """The screen and each of its tabs as shown; `then` runs after each."""
    await visit(pilot, seen, name)
    if then:
        await then()
    for tabs in pilot.app.screen.query(TabbedContent):
        for pane in tabs.query("TabPane"):
            tabs.active = str(pane.id)
            await pilot.pause()
            await visit(pilot, seen, f"{name}/{pane.id}")
            if then:
                await then()


def recording_app(root: Path, tmp_path: Path, **kw: Any) -> tuple[HtaApp, list[str]]:
    driver = type("Recording", (RecordingDriver,), {"written": []})
    app = HtaApp(root, cache=Cache(tmp_path / "cache"), watch=False, timings=False, **kw)
    app.driver_class = driver
    app.export_dir = tmp_path / "exports"
    return app, driver.written


@pytest.mark.heavy
async def test_diff_shows_hostile_names_as_text(hostile_root: Path, tmp_path: Path) -> None:
    app, written = recording_app(hostile_root, tmp_path, compare=hostile_root)
    seen: dict[str, str] = {}
    async with app.run_test(headless=False, size=SIZE) as pilot:
        await settle(pilot, timeout=30)
        await pilot.press(DIFF.key)
        await visit(pilot, seen, "diff")
        table = app.screen.query_one("#diff-table", FrameTable)
        names = table.view_frame["name"].to_list()
        table.focus()
        table.move_cursor(row=next(i for i, n in enumerate(names) if n.startswith(PAYLOAD)))
        await pilot.press("enter")
        # the detail computes in a worker: wait for its table (a loaded machine is slow)
        await wait_until(
            pilot, lambda: "Diff detail" in screen_text(app) and SHOWN in screen_text(app), 30
        )
        seen["diff detail"] = screen_text(app)
    assert_clean("".join(written))
    assert SHOWN in seen["diff"]
    assert SHOWN in seen["diff detail"]
    assert f"control: {printable(FOLDER_PAYLOAD)[:24]}" in seen["diff"]  # the sides' folders
