"""A screen whose analysis raises says so (title and a notice) instead of loading forever, and
the rest of the app keeps working."""

from __future__ import annotations

from pathlib import Path

import pytest
from textual.widgets import Static

from hta_tui.app.app import HtaApp
from hta_tui.app.screens.kernels import KernelsScreen
from hta_tui.synth import write_trace_dir
from hta_tui.trace.cache import Cache
from tests.test_app_support import app_idle as screen_ready
from tests.test_app_support import wait_patiently as wait_until


@pytest.fixture(scope="module")
def traces(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("fail")
    write_trace_dir(out, ranks=2, steps=3, seed=5)
    return out


async def test_a_failing_screen_says_why_and_the_app_goes_on(
    traces: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def broken(frames: object, params: object) -> None:
        raise ValueError("column 'dur' not found\nsecond line")

    monkeypatch.setattr(KernelsScreen, "compute", staticmethod(broken))
    app = HtaApp(traces, cache=Cache(tmp_path / "c"), watch=False)
    notices: list[str] = []
    original = app.notify
    monkeypatch.setattr(app, "notify", lambda m, **kw: (notices.append(str(m)), original(m, **kw)))
    async with app.run_test(size=(100, 30)) as pilot:
        await wait_until(pilot, lambda: app.settled)
        await app.switch_mode("kernels")

        def title() -> str:
            return str(app.screen.query_one("#screen-title", Static).render())

        await wait_until(pilot, lambda: "failed" in title())
        assert "ValueError: column 'dur' not found" in title()
        assert "second line" not in title()
        assert app.screen.query_one("#body").loading is False
        assert any("Kernels failed: ValueError" in n for n in notices)
        await app.switch_mode("idle")  # another screen still computes and shows its numbers
        await wait_until(pilot, lambda: screen_ready(app))
        assert app.screen.result is not None
