"""Render every screen of hta-tui on the built-in demo trace to an SVG in screenshots/.

    python screenshots/make_screenshots.py            # all screens, dark theme
    python screenshots/make_screenshots.py --theme hta-light --size 100x30

Rerun it whenever a screen changes; README.md shows the results. The demo is generated with a
fixed seed and load times are hidden, so the pictures only change when the UI does.
"""

from __future__ import annotations

import argparse
import asyncio
import tempfile
from pathlib import Path

from hta_tui.app.app import HtaApp
from hta_tui.app.screens.registry import DIFF, SCREENS
from hta_tui.cli import DEMO_MEMORY
from hta_tui.synth import MemoryOptions, write_trace, write_trace_dir
from hta_tui.synth.sync_story import make_sync_story
from hta_tui.trace.cache import Cache

HERE = Path(__file__).resolve().parent


async def settle(app: HtaApp, pilot, timeout: float = 60.0) -> None:
    """Until loading, the overview and the current screen's computation are done."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while loop.time() < deadline:
        await pilot.pause(0.1)
        busy = any(not w.is_finished for w in app.workers if w.group == "load")
        screen_ready = getattr(app.screen, "shows_current", True)
        if app.settled and not busy and screen_ready:
            await pilot.pause(0.2)
            return
    raise TimeoutError(f"{type(app.screen).__name__} did not settle")


def shot_name(entry) -> str:
    """`2K-kernels`: the view's section digit and letter, then its title."""
    slug = entry.title.lower().replace(" ", "-").replace("/", "-").replace("&", "and")
    return f"{entry.section}{entry.key}-{slug}"


#: Screens the demo has nothing for: shot on the backward-sync story instead.
STORY_MODES = ("syncs", "modules")


async def shoot_story(out_dir: Path, theme: str, suffix: str, size: tuple[int, int]) -> list[Path]:
    story = Path(tempfile.mkdtemp(prefix="hta-tui-story-")) / "story"
    story.mkdir()
    write_trace(make_sync_story(steps=3), story / "rank-0.json")
    app = HtaApp(
        story, cache=Cache(enabled=False), watch=False, theme=theme, timings=False, ascii=False
    )
    written = []
    async with app.run_test(size=size) as pilot:
        await settle(app, pilot)
        for entry in SCREENS:
            if entry.mode not in STORY_MODES:
                continue
            await pilot.press(entry.key)
            await settle(app, pilot)
            path = out_dir / f"{shot_name(entry)}{suffix}.svg"
            app.save_screenshot(str(path))
            written.append(path)
    return written


async def shoot(trace_dir: Path, out_dir: Path, theme: str, size: tuple[int, int]) -> list[Path]:
    # the overview with its findings whatever $HTA_TUI_FINDINGS says; Z the Findings view
    app = HtaApp(
        trace_dir,
        cache=Cache(enabled=False),
        watch=False,
        theme=theme,
        timings=False,
        ascii=False,
        findings=True,
    )
    written = []
    suffix = "" if theme == "hta-dark" else f"-{theme.removeprefix('hta-')}"
    async with app.run_test(size=size) as pilot:
        await settle(app, pilot)
        for entry in SCREENS:
            if entry.mode in STORY_MODES:
                continue
            await pilot.press(entry.key)
            await settle(app, pilot)
            if entry.mode == "timeline":  # zoomed into a step, a kernel selected
                await pilot.press(*["down"] * 8, *["w"] * 5, "right_square_bracket")
                await pilot.pause(0.3)
            path = out_dir / f"{shot_name(entry)}{suffix}.svg"
            app.save_screenshot(str(path))
            written.append(path)
        await pilot.press("1")
        await pilot.press("question_mark")
        await pilot.pause(0.3)
        path = out_dir / f"help{suffix}.svg"
        app.save_screenshot(str(path))
        written.append(path)
    written += await shoot_story(out_dir, theme, suffix, size)
    # the diff screen: rank 0 against the demo's slow rank 1
    app = HtaApp(
        trace_dir,
        cache=Cache(enabled=False),
        watch=False,
        theme=theme,
        timings=False,
        ascii=False,
        compare=trace_dir,
        control_rank=0,
        test_rank=1,
    )
    async with app.run_test(size=size) as pilot:
        await settle(app, pilot)
        path = out_dir / f"{shot_name(DIFF)}{suffix}.svg"
        app.save_screenshot(str(path))
        written.append(path)
    return written


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--theme", default="hta-dark")
    ap.add_argument("--size", default="100x30", help="terminal COLSxROWS")
    ap.add_argument("--out", type=Path, default=HERE)
    args = ap.parse_args()
    cols, rows = (int(v) for v in args.size.split("x"))
    with tempfile.TemporaryDirectory(prefix="hta-tui-shots-") as tmp:
        demo = Path(tmp) / "demo"
        write_trace_dir(demo, ranks=4, steps=6, seed=0, memory=MemoryOptions(**DEMO_MEMORY))
        for path in asyncio.run(shoot(demo, args.out, args.theme, (cols, rows))):
            print(path.relative_to(HERE.parent) if path.is_relative_to(HERE.parent) else path)


if __name__ == "__main__":
    main()
