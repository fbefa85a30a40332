"""Helpers for the app tests (no tests here): small deterministic traces, and waiting on the app
by polling a condition (never a fixed sleep)."""

from __future__ import annotations

import asyncio
import gzip
import threading
from pathlib import Path
from typing import Any

import orjson

from hta_tui.app.app import HtaApp
from hta_tui.trace.cache import Cache

T0 = 1_700_000_000_000_000  # us


def rank_trace(rank: int, *, steps: int = 3, world: int = 4, gpu: bool = True) -> dict[str, Any]:
    """A small PyTorch 2.x trace: per step a GEMM, an NCCL all-reduce and a memcpy on stream 7,
    with idle gaps that grow with the rank (so every rank's bar differs)."""
    cpu = {"pid": 100, "tid": 100}
    ev: list[dict[str, Any]] = [
        {"ph": "M", "name": "thread_name", **cpu, "ts": T0, "args": {"name": "python"}},
    ]
    step_len = 1000
    corr = 1
    for s in range(steps):
        t = T0 + s * step_len
        ev.append(
            {
                "ph": "X",
                "cat": "user_annotation",
                "name": f"ProfilerStep#{s + 1}",
                **cpu,
                "ts": t,
                "dur": step_len - 10,
                "args": {"External id": 1000 + s},
            }
        )
        if not gpu:
            ev.append(
                {
                    "ph": "X",
                    "cat": "cpu_op",
                    "name": "aten::add",
                    **cpu,
                    "ts": t + 5,
                    "dur": 50,
                    "args": {"External id": 2000 + s},
                }
            )
            continue
        gemm = 400 - 60 * rank
        kernels = [
            ("ampere_sgemm_128x64_tn", "kernel", 20, gemm),
            ("ncclKernel_AllReduce_RING_LL_Sum_float", "kernel", 30 + gemm, 200),
            ("Memcpy DtoH (Device -> Pinned)", "gpu_memcpy", 250 + gemm, 40),
        ]
        for i, (name, cat, offset, dur) in enumerate(kernels):
            ev.append(
                {
                    "ph": "X",
                    "cat": "cuda_runtime",
                    "name": "cudaLaunchKernel",
                    **cpu,
                    "ts": t + 2 + i,
                    "dur": 1,
                    "args": {"External id": 2000 + s, "correlation": corr},
                }
            )
            ev.append(
                {
                    "ph": "X",
                    "cat": cat,
                    "name": name,
                    "pid": 0,
                    "tid": 7,
                    "ts": t + offset,
                    "dur": dur,
                    "args": {"device": 0, "stream": 7, "correlation": corr},
                }
            )
            corr += 1
    return {
        "schemaVersion": 1,
        "deviceProperties": [{"id": 0, "name": "NVIDIA A100-SXM4-80GB"}],
        "distributedInfo": {"backend": "nccl", "rank": rank, "world_size": world},
        "traceEvents": ev,
    }


def trace_bytes(rank: int, **kw: Any) -> bytes:
    return orjson.dumps(rank_trace(rank, **kw))


def write_rank(folder: Path, rank: int, *, gz: bool = True, name: str = "", **kw: Any) -> Path:
    """`rank-N.trace.json[.gz]` (or `name`) in `folder`, byte-identical run to run."""
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / (name or f"rank-{rank}.trace.json{'.gz' if gz else ''}")
    data = trace_bytes(rank, **kw)
    # mtime=0 keeps the gzip bytes identical run to run
    path.write_bytes(gzip.compress(data, mtime=0) if path.name.endswith(".gz") else data)
    return path


def write_ranks(folder: Path, ranks: int = 3, **kw: Any) -> list[Path]:
    return [write_rank(folder, r, world=ranks, **kw) for r in range(ranks)]


def listing(folder: Path) -> dict[str, tuple[int, int]]:
    """Every file under `folder` with size and mtime: to check the app wrote nothing there."""
    return {
        str(p.relative_to(folder)): (p.stat().st_size, p.stat().st_mtime_ns)
        for p in sorted(folder.rglob("*"))
    }


async def wait_until(pilot: Any, predicate: Any, timeout: float = 15.0, what: str = "") -> None:
    """Poll `predicate()` until true; fail after `timeout` seconds, or when the app stopped.
    The polls only sleep (20 ms): the app runs meanwhile (its messages, workers, repaints);
    `pilot.pause()` at each poll would post to every widget of the screen and repaint it, about
    a quarter of a core at fifty polls a second. Once true, one pause lets the screen take
    what it was sent (a dialog just pushed composes its widgets), and the predicate must
    still hold."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while not predicate():
        while not predicate():
            if loop.time() > deadline:
                raise AssertionError(f"timed out waiting for {what or predicate}")
            if not pilot.app.is_running:
                raise AssertionError(f"the app stopped while waiting for {what or predicate}")
            await asyncio.sleep(0.02)
        await pilot.pause(0.02)


async def wait_patiently(pilot: Any, predicate: Any, timeout: float = 60.0, what: str = "") -> None:
    """`wait_until`, letting the app run a moment first (its first moments can look settled
    before the folder is even listed), with a minute's patience (several screens' workers
    on a busy machine)."""
    await pilot.pause(0.05)
    await wait_until(pilot, predicate, timeout, what)


def screen_shows_current(app: HtaApp, screen: Any) -> bool:
    """An analysis screen shows the numbers of the current trace set and its parameters, whole
    (`AnalysisScreen.shows_current`)."""
    return bool(getattr(screen, "shows_current", False))


async def settle(pilot: Any, timeout: float = 60.0) -> None:
    """Until the app has loaded everything and shows an up-to-date overview."""
    await wait_until(pilot, lambda: pilot.app.settled, timeout, "the app to settle")
    await pilot.pause()


def make_screen_app(root: Path, tmp_path: Path, **kw: Any) -> HtaApp:
    """The app on `root` for screen tests: its own cache and export folder under `tmp_path`,
    no watcher and no load times (unless the test asks)."""
    kw.setdefault("watch", False)
    kw.setdefault("timings", False)
    app = HtaApp(root, cache=Cache(tmp_path / "cache"), **kw)
    app.export_dir = tmp_path / "exports"
    return app


def base_screen(app: HtaApp) -> Any:
    """The current mode's screen, under any dialog."""
    return app.screen_stack[0]


async def wait_view(pilot: Any, cls: type, timeout: float = 15.0) -> Any:
    """Until the mode's screen is a `cls` showing current numbers; that screen."""
    app = pilot.app

    def ready() -> bool:
        s = base_screen(app)
        return isinstance(s, cls) and screen_shows_current(app, s)

    await wait_until(pilot, ready, timeout, cls.__name__)
    await pilot.pause()
    return base_screen(app)


async def press_view(pilot: Any, key: str, cls: type, timeout: float = 15.0) -> Any:
    """Press a view's key; the view once it shows current numbers."""
    await pilot.press(key)
    return await wait_view(pilot, cls, timeout)


async def open_view(pilot: Any, key: str, cls: type, timeout: float = 60.0) -> Any:
    """Press a view's key once the app has settled; the view once it shows current numbers."""
    await settle(pilot)
    return await press_view(pilot, key, cls, timeout)


def app_idle(app: HtaApp) -> bool:
    """Settled, no screen or load worker running, the screen's numbers and charts drawn."""
    busy = any(w.group in ("screen", "load", "reload") and not w.is_finished for w in app.workers)
    return (
        app.settled
        and not busy
        and getattr(app.screen, "result", True) is not None
        and getattr(app.screen, "charts_pending", 0) == 0
    )


class PilotHelpers:
    """The Pilot helpers, handed to a test as the `ui` fixture (conftest.py): waiting on the
    app by polling a condition (never a fixed sleep), settling, opening a view, and the app
    for a test, with its own cache and export folder under the test's tmp_path."""

    wait_until = staticmethod(wait_until)
    wait_patiently = staticmethod(wait_patiently)
    settle = staticmethod(settle)
    open_view = staticmethod(open_view)
    press_view = staticmethod(press_view)
    wait_view = staticmethod(wait_view)
    base_screen = staticmethod(base_screen)
    app_idle = staticmethod(app_idle)
    shows_current = staticmethod(screen_shows_current)

    def __init__(self, tmp_path: Path) -> None:
        self.tmp_path = tmp_path

    def app(self, root: Path, **kw: Any) -> HtaApp:
        """`make_screen_app` on `root`, under this test's tmp_path."""
        return make_screen_app(root, self.tmp_path, **kw)


def write_cpu_ranks(root: Path, ranks: int = 2) -> Path:
    """`rank_trace(gpu=False)` for each rank: 3 steps of 990 us, one 50 us aten::add each."""
    root.mkdir(parents=True, exist_ok=True)
    for rank in range(ranks):
        (root / f"rank-{rank}.json").write_bytes(orjson.dumps(rank_trace(rank, gpu=False)))
    return root


def synth_job(factory: Any, seed: int) -> tuple[Path, Path]:
    """A generated 2-rank, 3-step job and a cache folder for it (module fixtures' job)."""
    from hta_tui.synth import write_trace_dir

    d = factory.mktemp("synth")
    write_trace_dir(d, ranks=2, steps=3, seed=seed)
    return d, factory.mktemp("cache")


def hold_loads(monkeypatch: Any, held_back: Path | None = None) -> threading.Event:
    """The app's session loads `held_back` (every file when None) only once the returned gate
    is set, the others first: a file listed and not loaded yet, as a slow one is. Set the
    gate when done (the held load waits at most 30 s)."""
    from hta_tui.session import live as live_module
    from hta_tui.trace import load as trace_load

    gate = threading.Event()

    def held(files: Any, cache: Any, **kw: Any) -> Any:
        for tf in sorted(files, key=lambda t: held_back in (None, t.path)):  # the others first
            if held_back in (None, tf.path):
                gate.wait(30)  # the file "takes long": listed, not loaded
            yield from trace_load.load_files([tf], cache, **kw)

    monkeypatch.setattr(live_module, "load_files", held)
    return gate
