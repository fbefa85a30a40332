"""In which order, and on which thread, `registry.run` runs the analyses.

Analyses that start from HTA's shared per-rank views (`hta_view`) wait for the first of them,
which builds those views (run together, each would build them again). The others (syncs,
distributed, memory, modules, the TensorBoard views) need no such views: they run beside it
from the start, so the second core is not idle while the views are built. Among the ready
ones the longest (`cost`) goes first, so no long analysis is left to run alone at the end.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from typing import Protocol, TypeVar


class Task(Protocol):
    @property
    def name(self) -> str: ...

    @property
    def cost(self) -> float: ...

    @property
    def views(self) -> bool: ...


T = TypeVar("T", bound=Task)
R = TypeVar("R")


def run_all(tasks: Sequence[T], call: Callable[[T], R], threads: int) -> dict[str, R]:
    """`call` of every task, `threads` at a time (one after another in the given order with
    fewer than two threads or tasks), by task name. The first error is raised once every task
    has run."""
    if threads < 2 or len(tasks) < 2:
        return {t.name: call(t) for t in tasks}
    builder = next((t for t in tasks if t.views), None)
    pending = sorted((t for t in tasks if t is not builder), key=lambda t: -t.cost)
    if builder is not None:
        pending.insert(0, builder)
    results: dict[str, R] = {}
    errors: list[BaseException] = []
    state = threading.Condition()
    built = builder is None

    def take() -> T | None:
        with state:
            while pending:
                for t in pending:
                    if built or not t.views or t is builder:
                        pending.remove(t)
                        return t
                state.wait()
            return None

    def work() -> None:
        nonlocal built
        while (task := take()) is not None:
            try:
                results[task.name] = call(task)
            except BaseException as exc:  # raised in the caller's thread below
                errors.append(exc)
            finally:
                if task is builder:
                    with state:
                        built = True
                        state.notify_all()

    workers = [
        threading.Thread(target=work, name=f"analysis-{i}", daemon=True) for i in range(threads)
    ]
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    if errors:
        raise errors[0]
    return results
