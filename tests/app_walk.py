"""One app run over several test scenarios (no tests here).

A Textual app run costs about a second of CPU to start and settle, and each view it first
visits costs about half as much again: tests that each started their own app on the same trace
to check one thing now share one run. A module-scoped fixture drives the app through each
scenario in turn (`run_scenarios`); a scenario makes the old test's asserts as it goes (or
records what it saw), and what it raised is kept under its name, so each test still passes or
fails on its own (`walk.check(name)` or `walk[name]`), with the failing line in its message.
"""

from __future__ import annotations

import contextlib
import traceback
from collections.abc import Awaitable, Callable, Mapping, Sequence
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

    __getitem__ = check


async def back_to_a_view(pilot: Any) -> None:
    """Close every dialog over the current view, so the next scenario can press its keys."""
    app = pilot.app
    while len(app.screen_stack) > 1:
        app.pop_screen()
        await pilot.pause()
    if app.focused is not None and app.focused.__class__.__name__ == "Input":
        await pilot.press("escape")
    await pilot.pause()


async def run_scenarios(
    pilot: Any,
    walk: Walk,
    scenarios: Mapping[str, Scenario] | Sequence[tuple[str, Scenario]],
) -> None:
    """Each scenario in turn on the one app; a failure is recorded and the walk goes on."""
    steps = list(scenarios.items()) if isinstance(scenarios, Mapping) else list(scenarios)
    for name, scenario in steps:
        if not pilot.app.is_running:  # the app is gone: the rest cannot run
            walk.errors[name] = "not run: the app had stopped after an earlier scenario"
            continue
        seen = walk.seen[name] = {}
        try:
            await scenario(pilot, seen)
        except pytest.skip.Exception as skip:
            walk.skips[name] = str(skip.msg)
        except Exception:  # kept for that scenario's test
            walk.errors[name] = traceback.format_exc(limit=-3)
        # a dialog left open (by a failure, or a broken close key) is not the next one's
        with contextlib.suppress(Exception):
            await back_to_a_view(pilot)


async def walk_app(
    app: Any,
    scenarios: Mapping[str, Scenario] | Sequence[tuple[str, Scenario]],
    *,
    first: Callable[[Any], Awaitable[None]] | None = None,
    **run_test: Any,
) -> Walk:
    """`app` run once (`run_test(**run_test)`) over `scenarios` in turn: what each saw.
    `first`: awaited with the pilot before them (e.g. until the app has settled)."""
    walk = Walk()
    async with app.run_test(**run_test) as pilot:
        if first is not None:
            await first(pilot)
        await run_scenarios(pilot, walk, scenarios)
    return walk


async def screenshot(pilot: Any) -> str:
    """The app as `snap_compare` takes it once its `run_before` is done (the same waits, the
    same export): a snapshot from an app run shared with other tests (`snap_svg` compares)."""
    app = pilot.app
    await pilot.pause()
    await pilot.wait_for_scheduled_animations()
    await pilot.pause()
    await pilot.pause()
    await pilot.wait_for_scheduled_animations()
    return app.export_screenshot(title=app.title, simplify=True)


def snapshot_steps(
    steps: Mapping[str, Callable[[Any], Awaitable[None]]],
) -> dict[str, Scenario]:
    """Scenarios that each run a snapshot's `run_before`, in turn on one app, then take the
    screenshot (`seen["svg"]`): several snapshots of one app's views for one app run (each
    view shown as a new app would show it: their order is the tests' to choose)."""

    def step(run_before: Callable[[Any], Awaitable[None]]) -> Scenario:
        async def scenario(pilot: Any, seen: dict[str, Any]) -> None:
            await run_before(pilot)
            seen["svg"] = await screenshot(pilot)

        return scenario

    return {name: step(run_before) for name, run_before in steps.items()}
