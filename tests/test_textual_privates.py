"""No private attribute of a Textual class is read, written or overridden in hta_tui/: the
pinned Textual may rename any of them in a patch release (tables used to override
`DataTable._render_cell` and `_update_dimensions` and write `_data`).

Read from the source: for every class of hta_tui that derives from a Textual class, its
`self._x` / `super()._x` / `def _x` where a Textual class of its MRO has `_x`; and anywhere,
`obj._x` where `_x` is a name Textual defines and hta_tui never does.
"""

from __future__ import annotations

import ast
import contextlib
import importlib
import inspect
from functools import cache
from pathlib import Path

import textual

ROOT = Path(__file__).resolve().parent.parent / "hta_tui"
TEXTUAL = Path(textual.__file__).parent

#: Known uses still to remove, each with the part of the work that owns its module. A use
#: that goes away must leave this list too (the test says so).
KNOWN: dict[tuple[str, str], str] = {}


def _private(name: str) -> bool:
    return name.startswith("_") and not name.startswith("__")


def _walk(tree: ast.AST) -> list[ast.AST]:
    """Every node under `tree`, as `ast.walk` gives them but in no set order, at about half
    its cost (its generators were most of this module's 3-4 s of CPU: it walks every file of
    Textual and of hta_tui)."""
    nodes, todo = [], [tree]
    while todo:
        node = todo.pop()
        nodes.append(node)
        for name in node._fields:
            value = getattr(node, name, None)
            if isinstance(value, list):
                todo.extend(v for v in value if isinstance(v, ast.AST))
            elif isinstance(value, ast.AST):
                todo.append(value)
    return nodes


def _names_defined(tree: ast.AST, own: bool = False) -> set[str]:
    """Private names a source defines: methods, `obj._x = ...` (`own`: only `self._x`),
    class-level `_x = ...`."""
    names: set[str] = set()
    for node in _walk(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and _private(node.name):
            names.add(node.name)
        elif (
            isinstance(node, ast.Attribute)
            and isinstance(node.ctx, ast.Store)
            and _private(node.attr)
            and (not own or ast.unparse(node.value) in ("self", "cls"))
        ):
            names.add(node.attr)
        elif isinstance(node, ast.ClassDef):
            for item in node.body:
                targets = (
                    item.targets
                    if isinstance(item, ast.Assign)
                    else [item.target]
                    if isinstance(item, ast.AnnAssign)
                    else []
                )
                names |= {t.id for t in targets if isinstance(t, ast.Name) and _private(t.id)}
    return names


@cache
def _textual_names() -> frozenset[str]:
    names: set[str] = set()
    for path in TEXTUAL.rglob("*.py"):
        names |= _names_defined(ast.parse(path.read_text(encoding="utf-8")))
    return frozenset(names)


@cache
def _class_privates(cls: type) -> frozenset[str]:
    """Private names a Textual class has: in its dict, or assigned to `self` in its source."""
    names = {n for n in vars(cls) if _private(n)}
    with contextlib.suppress(OSError, TypeError, SyntaxError, IndentationError):
        names |= _names_defined(ast.parse(inspect.getsource(cls)))
    return frozenset(names)


def _textual_privates(cls: type) -> set[str]:
    names: set[str] = set()
    for base in cls.__mro__:
        if base.__module__.split(".")[0] == "textual":
            names |= _class_privates(base)
    return names


def _uses(path: Path) -> list[tuple[int, str]]:
    """(line, name) of each private Textual name `path` reads, writes or overrides."""
    rel = path.relative_to(ROOT)
    module = importlib.import_module("hta_tui." + ".".join(rel.with_suffix("").parts))
    tree = ast.parse(path.read_text(encoding="utf-8"))
    ours = _own_names()
    found: list[tuple[int, str]] = []
    in_class: set[int] = set()
    for cls_node in (n for n in _walk(tree) if isinstance(n, ast.ClassDef)):
        cls = getattr(module, cls_node.name, None)
        if not isinstance(cls, type):
            continue
        privates = _textual_privates(cls)
        for node in _walk(cls_node):
            in_class.add(id(node))
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                if node.name in privates:
                    found.append((node.lineno, node.name))
            elif isinstance(node, ast.Attribute) and node.attr in privates:
                receiver = node.value
                is_self = isinstance(receiver, ast.Name) and receiver.id in ("self", "cls")
                is_super = isinstance(receiver, ast.Call) and ast.unparse(receiver) == "super()"
                if is_self or is_super:
                    found.append((node.lineno, node.attr))
    textual_names = _textual_names()
    for node in _walk(tree):
        if not isinstance(node, ast.Attribute) or not _private(node.attr):
            continue
        receiver = node.value
        if isinstance(receiver, ast.Name) and receiver.id in ("self", "cls"):
            continue  # judged above, by the class's own MRO
        if node.attr in textual_names and node.attr not in ours:
            found.append((node.lineno, node.attr))
    return sorted(set(found))


@cache
def _own_names() -> frozenset[str]:
    names: set[str] = set()
    for path in ROOT.rglob("*.py"):
        names |= _names_defined(ast.parse(path.read_text(encoding="utf-8")), own=True)
    return frozenset(names)


def test_no_private_textual_attribute_is_used_in_hta_tui() -> None:
    uses = {}
    for path in sorted((ROOT / "app").rglob("*.py")):
        for line, name in _uses(path):
            uses.setdefault((str(path.relative_to(ROOT)), name), []).append(line)
    unknown = {k: v for k, v in uses.items() if k not in KNOWN}
    assert not unknown, f"private Textual attributes used (file, name): lines {unknown}"
    gone = set(KNOWN) - set(uses)
    assert not gone, f"no longer used: take them off KNOWN: {gone}"


def test_the_check_finds_a_private_override_and_a_private_read() -> None:
    """The check itself: DataTable's private renderer overridden, a private cache read."""
    from textual.widgets import DataTable

    assert "_render_cell" in _textual_privates(DataTable)
    assert "_update_dimensions" in _textual_privates(DataTable)
    assert "_data" in _textual_privates(DataTable)
    assert "_bindings_ready" in _textual_names()
