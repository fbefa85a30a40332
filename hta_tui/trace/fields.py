"""One field of every struct in a list, read as fast as CPython allows.

In a list comprehension, CPython 3.11+ reads a struct's field with an instruction
specialised for slots: twice as fast as `list(map(operator.attrgetter(name), xs))`, which
looks the name up on every call (measured on the parser's structs). The parser reads a dozen
fields of every event, so each field gets its own comprehension, compiled once.
"""

from __future__ import annotations

import functools
import keyword
from collections.abc import Callable, Iterable
from typing import Any


@functools.cache
def reader(name: str) -> Callable[[Iterable[Any]], list[Any]]:
    """`[x.<name> for x in xs]` as a function (`name`: a field of the parser's structs)."""
    if not name.isidentifier() or keyword.iskeyword(name):
        raise ValueError(f"not a field name: {name!r}")
    scope: dict[str, Any] = {}
    exec(f"def read(xs):\n    return [x.{name} for x in xs]\n", scope)
    return scope["read"]
