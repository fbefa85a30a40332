"""One app run for several tests (no tests here): each test's steps are a scenario, run in
turn on the same app by a module-scoped fixture; what a scenario saw goes into its record,
and a scenario that raises is recorded with its message (the next one still runs while the
app does). Each test then reads its own scenario: `walk["name"]` fails with that message.

An app run costs ~0.5 s of CPU to start and settle and ~0.45 s per view it first lays out:
tests that opened the same view on the same trace share one run instead."""

from __future__ import annotations

import contextlib
import traceback
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import pytest

#: a scenario: the pilot and the dict to record what it saw into
Scenario = Callable[[Any, dict[str, Any]], Awaitable[None]]


@dataclass
class Walk:
    """What each scenario of one app run saw, and the error of each that failed."""

    seen: dict[str, dict[str, Any]] = field(default_factory=dict)
    errors: dict[str, str] = field(default_factory=dict)

    def __getitem__(self, name: str) -> dict[str, Any]:
        """The scenario's record; the test fails with the scenario's own error if it raised."""
        if name in self.errors:
            pytest.fail(f"scenario {name!r} failed in the shared app run:\n{self.errors[name]}")
        if name not in self.seen:
            pytest.fail(f"scenario {name!r} did not run")
        return self.seen[name]


async def back_to_base(pilot: Any) -> None:
    """Close any dialog left open, so the next scenario starts on a view."""
    app = pilot.app
    while len(app.screen_stack) > 1:
        app.pop_screen()
        await pilot.pause()


async def run_scenarios(pilot: Any, walk: Walk, scenarios: Sequence[tuple[str, Scenario]]) -> None:
    """Each scenario in turn; one that raises is recorded and the next one runs."""
    app = pilot.app
    for name, step in scenarios:
        if not app.is_running:
            walk.errors[name] = "not run: the app had stopped"
            continue
        seen = walk.seen[name] = {}
        try:
            await step(pilot, seen)
        except Exception as exc:  # the scenario's test fails with it, the others go on
            walk.errors[name] = "".join(traceback.format_exception(exc))
        # a dialog left open (by a failure, or a broken close key) is not the next one's
        with contextlib.suppress(Exception):  # the app is gone: the rest say so
            await back_to_base(pilot)
