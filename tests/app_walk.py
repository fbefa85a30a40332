"""One app run over several test scenarios (no tests here).

A Textual app run costs about a second of CPU to start and settle, and each view it first
visits costs about half as much again: tests that each started their own app on the same trace
to check one thing now share one run. A module-scoped fixture drives the app through each
scenario in turn (`run_scenarios`); a scenario makes the old test's asserts as it goes, and
what it raised is kept under its name, so each test still passes or fails on its own
(`Walk.check`), with the failing line in its message.
"""

from __future__ import annotations

import traceback
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

import pytest

Scenario = Callable[[Any, dict[str, Any]], Awaitable[None]]


@dataclass
class Walk:
    """What each scenario recorded, and what it raised (the traceback's text) or skipped."""

    seen: dict[str, dict[str, Any]] = field(default_factory=dict)
    errors: dict[str, str] = field(default_factory=dict)
    skips: dict[str, str] = field(default_factory=dict)

    def check(self, name: str) -> dict[str, Any]:
        """The scenario's record; fails (or skips) the calling test as the scenario did."""
        if name in self.errors:
            pytest.fail(f"scenario {name!r} failed in the shared app run:\n{self.errors[name]}")
        if name in self.skips:
            pytest.skip(self.skips[name])
        if name not in self.seen:
            pytest.fail(f"scenario {name!r} did not run (an earlier one broke the app)")
        return self.seen[name]


async def back_to_a_view(pilot: Any) -> None:
    """Close every dialog over the current view, so the next scenario can press its keys."""
    app = pilot.app
    while len(app.screen_stack) > 1:
        app.pop_screen()
        await pilot.pause()
    if app.focused is not None and app.focused.__class__.__name__ == "Input":
        await pilot.press("escape")
    await pilot.pause()


async def run_scenarios(pilot: Any, walk: Walk, scenarios: dict[str, Scenario]) -> None:
    """Each scenario in turn on the one app; a failure is recorded and the walk goes on."""
    for name, scenario in scenarios.items():
        seen = walk.seen[name] = {}
        try:
            await scenario(pilot, seen)
        except pytest.skip.Exception as skip:
            walk.skips[name] = str(skip.msg)
        except Exception:  # kept for that scenario's test
            walk.errors[name] = traceback.format_exc(limit=-3)
            if pilot.app.return_code is not None:  # the app is gone: the rest cannot run
                for later in list(scenarios)[list(scenarios).index(name) + 1 :]:
                    walk.errors[later] = f"not run: the app exited after {name!r} failed"
                return
        await back_to_a_view(pilot)
