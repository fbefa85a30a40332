"""`--lean` (synth/lean.py): the same events with only the args the analyses read, so a file
of a given size holds more events (issue 15's 2 GB rank of ~10 M events). Expected values come
from the default trace of the same arguments."""

from __future__ import annotations

import gzip
from pathlib import Path

import orjson
from polars.testing import assert_frame_equal

from hta_tui.analysis import queue, temporal
from hta_tui.synth import write_trace_dir
from hta_tui.synth.__main__ import _main as synth_main
from hta_tui.synth.lean import KEPT_ARGS
from hta_tui.trace.cache import Cache
from hta_tui.trace.model import open_set


def _events(path: Path) -> list[dict]:
    return orjson.loads(gzip.decompress(path.read_bytes()))["traceEvents"]


def test_lean_keeps_every_event_and_only_the_kept_args(tmp_path: Path) -> None:
    [full] = write_trace_dir(tmp_path / "full", ranks=1, steps=2, seed=3, slow_rank=None)
    [lean] = write_trace_dir(tmp_path / "lean", ranks=1, steps=2, seed=3, slow_rank=None, lean=True)
    a, b = _events(full), _events(lean)
    assert len(a) == len(b)
    keys = ("ph", "cat", "name", "pid", "tid", "ts", "dur", "id")
    assert [tuple(e.get(k) for k in keys) for e in a] == [tuple(e.get(k) for k in keys) for e in b]
    for e, f in zip(a, b, strict=True):
        kept = f.get("args", {})
        assert set(kept) <= KEPT_ARGS
        assert all(e["args"][k] == v for k, v in kept.items())
        if e.get("cat") in ("kernel", "cuda_runtime", "gpu_memcpy"):
            assert kept.get("correlation") == e["args"].get("correlation")
    assert len(gzip.decompress(lean.read_bytes())) < 0.8 * len(gzip.decompress(full.read_bytes()))


def test_lean_gives_the_same_analyses(tmp_path: Path) -> None:
    write_trace_dir(tmp_path / "full", ranks=2, steps=2, seed=1)
    write_trace_dir(tmp_path / "lean", ranks=2, steps=2, seed=1, lean=True)
    full = open_set(tmp_path / "full", Cache(tmp_path / "c1")).frames()
    lean = open_set(tmp_path / "lean", Cache(tmp_path / "c2")).frames()
    assert_frame_equal(temporal.temporal_breakdown(full), temporal.temporal_breakdown(lean))
    assert_frame_equal(queue.queue_length_series(full), queue.queue_length_series(lean))


def test_lean_cli_sizes_the_file_and_holds_more_events_per_mb(tmp_path: Path) -> None:
    counts = {}
    for name, arg in (("full", []), ("lean", ["--lean"])):
        out = tmp_path / name
        assert synth_main([str(out), "--ranks", "1", "--target-mb", "2", "--no-gzip", *arg]) == 0
        [path] = list(out.iterdir())
        size = path.stat().st_size
        assert abs(size - 2e6) <= 0.1 * 2e6, size
        events = orjson.loads(path.read_bytes())["traceEvents"]
        counts[name] = sum(e.get("ph") == "X" for e in events) / size
    assert counts["lean"] > 1.3 * counts["full"]
