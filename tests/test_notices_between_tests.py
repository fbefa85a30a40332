"""Notices of damaged cache entries are process-wide: one a test leaves must not reach the
next test's module-scoped app walk (set up before the function-scoped fixture that clears
them; a toast in a walk's snapshot failed it: test_screen_timelines_launch's)."""

from __future__ import annotations

import pytest

from hta_tui.trace import cache


def test_a_test_leaves_a_notice() -> None:
    with cache._notices_lock:
        cache._notices.append("cache entry damaged: x.json (meta.json is missing)")


@pytest.fixture(scope="module")
def notices_when_a_walk_starts() -> list[str]:
    """What a module-scoped app walk set up now would show as toasts."""
    return cache.take_notices()


def test_the_next_tests_module_walk_sees_none(notices_when_a_walk_starts: list[str]) -> None:
    assert notices_when_a_walk_starts == []
