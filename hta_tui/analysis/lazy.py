"""A module imported when it is first used, not when its importer is.

The registry names every analysis's module; a process that runs none of them (a report
whose every answer is kept, `--list`) then imports none of them, nor what they import
(numpy). The import happens at the first attribute read, through `importlib`, one such first
import at a time (two threads each importing a module that imports the other would
otherwise meet importlib's deadlock guard and see a half-made module); attributes set on
the stand-in (a test's monkeypatch) are set on the module.
"""

from __future__ import annotations

import importlib
import sys
import threading
from types import ModuleType
from typing import Any

_FIRST = threading.RLock()


class LazyModule:
    """Stands for a module until used: every attribute read, set or deleted is the
    module's, imported at the first of them."""

    __slots__ = ("_name",)

    def __init__(self, name: str) -> None:
        object.__setattr__(self, "_name", name)

    def _module(self) -> ModuleType:
        name = object.__getattribute__(self, "_name")
        module = sys.modules.get(name)
        if module is None or getattr(module.__spec__, "_initializing", False):  # (or half made)
            with _FIRST:
                module = importlib.import_module(name)
        return module

    def __getattr__(self, attr: str) -> Any:
        return getattr(self._module(), attr)

    def __setattr__(self, attr: str, value: Any) -> None:
        setattr(self._module(), attr, value)

    def __delattr__(self, attr: str) -> None:
        delattr(self._module(), attr)

    def __repr__(self) -> str:
        return f"<lazy module {object.__getattribute__(self, '_name')!r}>"


def lazy_module(name: str) -> Any:
    """The module `name` if imported already, else a `LazyModule` standing for it."""
    return sys.modules.get(name) or LazyModule(name)
