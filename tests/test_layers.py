"""The layers import only the ones before them: the analysis core never pulls in a UI."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

PKG = Path(__file__).resolve().parents[1] / "hta_tui"


def test_core_imports_no_ui() -> None:
    code = (
        "import sys, hta_tui.trace.model, hta_tui.trace.watch, hta_tui.analysis.overview, "
        "hta_tui.report;"
        "bad = sorted(m for m in sys.modules if m.split('.')[0] in ('textual', 'rich', "
        "'textual_plotext', 'plotext') or m.startswith('hta_tui.app'));"
        "print(','.join(bad))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == ""


def imported_modules(path: Path) -> set[str]:
    tree = ast.parse(path.read_text())
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            names.add(node.module)
    return names


def test_layer_order() -> None:
    """trace/ imports no analysis or front end; analysis/ imports no front end."""
    for path in (PKG / "trace").rglob("*.py"):
        bad = {
            m
            for m in imported_modules(path)
            if m.startswith(
                ("hta_tui.analysis", "hta_tui.app", "hta_tui.report", "hta_tui.cli", "hta_tui.api")
            )
        }
        assert not bad, (path, bad)
    for path in (PKG / "analysis").rglob("*.py"):
        bad = {
            m
            for m in imported_modules(path)
            if m.startswith(
                ("hta_tui.app", "hta_tui.report", "hta_tui.cli", "hta_tui.api", "textual", "rich")
            )
        }
        assert not bad, (path, bad)
