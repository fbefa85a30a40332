"""The layers import only the ones below them: the analysis core never pulls in a UI.

Every module of hta_tui/ has a layer (a new folder must be given one here), every import is
read from the source with relative imports resolved and `from pkg import module` counted as
that module, lazy imports inside functions included, and nothing below the app imports
another module that imports it back.
"""

from __future__ import annotations

import ast
import functools
import subprocess
import sys
from pathlib import Path

PKG = Path(__file__).resolve().parents[1] / "hta_tui"

#: Lowest first; a module may import its own layer and those below. `hta_tui.synth` (the
#: synthetic trace generator) stands apart: it writes trace files and imports none of these.
LAYERS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("base", ("hta_tui.printable", "hta_tui.logfile", "hta_tui.synth")),
    ("trace", ("hta_tui.trace",)),
    ("analysis", ("hta_tui.analysis",)),
    ("executors", ("hta_tui.exec",)),
    ("session", ("hta_tui.session",)),
    (
        "headless front ends",
        (
            "hta_tui.api",
            "hta_tui.api_critical_path",
            "hta_tui.api_kernels",
            "hta_tui.api_memory",
            "hta_tui.api_syncs",
            "hta_tui.check",
            "hta_tui.report",
            "hta_tui.report_json",
            "hta_tui.report_text",
        ),
    ),
    ("app", ("hta_tui.app", "hta_tui.themes")),
    ("command line", ("hta_tui.cli", "hta_tui.__main__", "hta_tui")),
)
UI = ("textual", "rich", "textual_plotext", "plotext")


def module_name(path: Path) -> str:
    parts = list(path.relative_to(PKG.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


MODULES = {module_name(p): p for p in PKG.rglob("*.py")}


def layer(module: str) -> int:
    """The layer of a module: the longest matching prefix wins (`hta_tui` is the last)."""
    best, depth = -1, -1
    for i, (_, prefixes) in enumerate(LAYERS):
        for prefix in prefixes:
            if (module == prefix or module.startswith(prefix + ".")) and len(prefix) > depth:
                best, depth = i, len(prefix)
    return best


def _run_time_nodes(tree: ast.AST) -> list[ast.AST]:
    """Every node but those under `if TYPE_CHECKING:` (imported for type hints only)."""
    out: list[ast.AST] = []
    todo = [tree]
    while todo:
        node = todo.pop()
        out.append(node)
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            todo.extend(node.orelse)
            continue
        todo.extend(ast.iter_child_nodes(node))
    return out


def _lazy_import(node: ast.AST) -> bool:
    return (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Name)
        and node.func.id == "lazy_module"
        and len(node.args) == 1
        and isinstance(node.args[0], ast.Constant)
        and isinstance(node.args[0].value, str)
    )


@functools.cache
def imported_modules(path: Path) -> frozenset[str]:
    """Every module `path` imports at run time, anywhere in it: relative imports made
    absolute, `from package import name` as the module `package.name` where there is
    one, and the modules it imports when first used (`analysis.lazy.lazy_module`)."""
    me = module_name(path)
    package = me if path.name == "__init__.py" else me.rpartition(".")[0]
    names: set[str] = set()
    for node in _run_time_nodes(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names.update(a.name for a in node.names)
        elif _lazy_import(node):  # `lazy_module("hta_tui.analysis.x")`: imported when used
            names.add(node.args[0].value)  # type: ignore[attr-defined]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - (node.level - 1)]
                source = ".".join(base + ([node.module] if node.module else []))
            else:
                source = node.module or ""
            for alias in node.names:
                sub = f"{source}.{alias.name}"
                names.add(sub if sub in MODULES else source)
    return frozenset(names)


def test_resolves_relative_imports_and_submodules() -> None:
    """The reader itself: `from . import x` and `from pkg import module` are modules."""
    probe = PKG / "analysis" / "registry.py"
    assert "hta_tui.analysis.temporal" in imported_modules(probe)
    tree = "from . import temporal\nfrom .critical_path import tables\nfrom ..trace import model\n"
    fake = PKG / "analysis" / "_probe_for_test.py"
    try:
        fake.write_text(tree)
        MODULES[module_name(fake)] = fake
        got = imported_modules(fake)
    finally:
        fake.unlink()
        MODULES.pop(module_name(fake), None)
    assert {
        "hta_tui.analysis.temporal",
        "hta_tui.analysis.critical_path.tables",
        "hta_tui.trace.model",
    } <= got


def test_every_module_has_a_layer() -> None:
    assert not [m for m in MODULES if layer(m) < 0]


def test_layer_order() -> None:
    """Each module imports only its own layer and those below: trace/ no analysis or front
    end, analysis/ no session or front end, session/ no front end, the report and the API
    no app."""
    bad = []
    for module, path in sorted(MODULES.items()):
        mine = layer(module)
        for other in imported_modules(path):
            if other.split(".")[0] != "hta_tui":
                continue
            if layer(other) > mine:
                bad.append(f"{module} ({LAYERS[mine][0]}) imports {other}")
    assert not bad, "\n".join(bad)


def test_no_ui_below_the_app() -> None:
    app = layer("hta_tui.app")
    bad = [
        f"{module} imports {other}"
        for module, path in sorted(MODULES.items())
        if layer(module) < app
        for other in imported_modules(path)
        if other.split(".")[0] in UI
    ]
    assert not bad, "\n".join(bad)


def test_no_import_cycles_below_the_app() -> None:
    """No module below the app imports one that imports it back (lazily or not): a cycle
    is two modules that are one."""
    app = layer("hta_tui.app")
    below = {m for m in MODULES if layer(m) < app}
    graph = {m: {o for o in imported_modules(MODULES[m]) if o in below and o != m} for m in below}
    cycles = [c for c in strongly_connected(graph) if len(c) > 1]
    assert not cycles, cycles


def strongly_connected(graph: dict[str, set[str]]) -> list[list[str]]:
    """Tarjan's components, iteratively."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    out: list[list[str]] = []
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph[child]))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    top = stack.pop()
                    on_stack.discard(top)
                    component.append(top)
                    if top == node:
                        break
                out.append(sorted(component))
    return out


def test_cycle_finder_finds_a_cycle() -> None:
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert [c for c in strongly_connected(graph) if len(c) > 1] == [["a", "b", "c"]]


def test_core_imports_no_ui() -> None:
    """At run time too: loading, watching, the analyses, the report and the API bring in no
    UI module."""
    modules = ["hta_tui.trace.model", "hta_tui.trace.watch", "hta_tui.analysis.overview"]
    modules += ["hta_tui.analysis.registry", "hta_tui.report", "hta_tui.api"]
    if "hta_tui.session" in MODULES:
        modules.append("hta_tui.session")
    code = (
        f"import sys, {', '.join(modules)};"
        "bad = sorted(m for m in sys.modules if m.split('.')[0] in ('textual', 'rich', "
        "'textual_plotext', 'plotext') or m.startswith('hta_tui.app'));"
        "print(','.join(bad))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == ""
