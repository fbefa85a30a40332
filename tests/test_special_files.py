"""Only regular files are read (issue 16): a FIFO, a symbolic link to /dev/zero, a socket and a
0-byte file beside a good rank each get a reason; the good rank loads; nothing waits on them.

Before, `report` never returned on such a folder (a FIFO never ends, /dev/zero is endless).
The subprocess timeout below is a hang guard at the issue's bound, not a speed measurement.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import orjson
import pytest

from hta_tui.cli import main
from hta_tui.trace.cache import Cache
from hta_tui.trace.discover import discover, not_regular
from hta_tui.trace.limits import Limits
from hta_tui.trace.load import load_files
from hta_tui.trace.parse import TraceFileError, read_bytes
from tests.test_app_support import make_screen_app, rank_trace, settle, write_rank

pytestmark = pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="needs FIFOs and sockets")

REASONS = {
    "rank-9.json": "not a regular file (a FIFO)",
    "rank-5.json": "not a regular file (a character device)",
    "rank-7.json": "not a regular file (a socket)",
    "rank-6.json": "not a regular file (a FIFO)",  # a link to the FIFO
}


@pytest.fixture
def special_folder(tmp_path: Path) -> Iterator[Path]:
    root = tmp_path / "t"
    write_rank(root, 0, gz=False, world=1)
    os.mkfifo(root / "rank-9.json")
    (root / "rank-5.json").symlink_to("/dev/zero")
    (root / "rank-6.json").symlink_to(root / "rank-9.json")
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.bind(str(root / "rank-7.json"))
    (root / "rank-3.json").write_bytes(b"")
    (root / "rank-4.json").symlink_to(root / "gone.json")  # a link to nothing
    try:
        yield root
    finally:
        sock.close()


def test_not_regular_names_the_kind(special_folder: Path) -> None:
    for name, reason in REASONS.items():
        assert not_regular(os.stat(special_folder / name).st_mode) == reason
    assert not_regular(os.stat(special_folder / "rank-0.trace.json").st_mode) is None
    for name in REASONS:
        with pytest.raises(TraceFileError, match="not a regular file"):
            read_bytes(special_folder / name)


def test_load_gives_each_special_file_a_reason(special_folder: Path, tmp_path: Path) -> None:
    files = discover(special_folder)
    results = {r.file.path.name: r for r in load_files(files, Cache(tmp_path / "c"), workers=1)}
    assert results["rank-0.trace.json"].status == "loaded"
    for name in REASONS:  # the kind of file may follow ("(a FIFO)"), see test_not_regular...
        assert results[name].status == "not_trace"
        assert results[name].error.startswith("not a regular file")
    assert (results["rank-3.json"].status, results["rank-3.json"].error) == (
        "incomplete",
        "empty file",
    )
    assert (results["rank-4.json"].status, results["rank-4.json"].error) == (
        "not_trace",
        "a symbolic link to nothing",
    )


def test_report_returns_with_the_good_rank(special_folder: Path, tmp_path: Path) -> None:
    env = {**os.environ, "HTA_TUI_CACHE": str(tmp_path / "cache")}
    out = subprocess.run(
        [sys.executable, "-m", "hta_tui", "report", str(special_folder), "--json"],
        capture_output=True,
        timeout=60,  # a hang guard (a FIFO read would block), not a speed check
        env=env,
        check=False,
    )
    assert out.returncode == 0, out.stderr.decode()
    assert b"Traceback" not in out.stderr
    doc = orjson.loads(out.stdout)
    files = {f["path"]: f for f in doc["files"]}
    assert files["rank-0.trace.json"]["status"] == "loaded"
    for name in REASONS:
        assert files[name]["status"] == "not_trace"
        assert files[name]["error"].startswith("not a regular file")
    assert files["rank-3.json"]["status"] == "incomplete"
    # the good rank's numbers, from the trace as written: its GPU time (kernels and copies,
    # one after another on one stream) before the last ProfilerStep, which HTA leaves out
    events = rank_trace(0, world=1)["traceEvents"]
    last = max(e["ts"] for e in events if e["name"].startswith("ProfilerStep#"))
    kernels = [e for e in events if e.get("cat") in ("kernel", "gpu_memcpy") and e["ts"] < last]
    (row,) = doc["temporal_breakdown"]
    assert row["rank"] == 0 and row["compute_time(us)"] + row["non_compute_time(us)"] == sum(
        e["dur"] for e in kernels
    )


async def test_app_lists_each_special_file(special_folder: Path, tmp_path: Path) -> None:
    app = make_screen_app(special_folder, tmp_path)
    async with app.run_test(size=(100, 30)) as pilot:
        await settle(pilot)
        entries = {e.path.name: e for e in app.trace_set.entries.values()}
        assert entries["rank-0.trace.json"].status == "loaded"
        for name in REASONS:
            assert entries[name].error.startswith("not a regular file")
        assert (entries["rank-3.json"].status, entries["rank-3.json"].error) == (
            "incomplete",
            "empty file",
        )
        assert entries["rank-4.json"].error == "a symbolic link to nothing"
        table = app.screen.query_one("#files")
        shown = " ".join(str(c) for row in range(table.row_count) for c in table.get_row_at(row))
        assert shown.count("not a regular file") == len(REASONS)
        assert "empty file" in shown and "a symbolic link to nothing" in shown


def test_report_limits_a_huge_file_by_its_size(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A regular file far over the byte limit (sparse: 3 GB that cost no disk) beside a good
    rank: `--max-file-mb` gives it its reason and the good rank loads. (In this process: no
    file here can block a read, as a FIFO would; `python -m hta_tui` is run above.)"""
    root = tmp_path / "t"
    write_rank(root, 0, gz=False, world=1)
    with (root / "rank-1.json").open("wb") as f:
        f.write(b'{"traceEvents": [')
        f.truncate(3 * 10**9)
    monkeypatch.setenv("HTA_TUI_CACHE", str(tmp_path / "cache"))
    # the flag sets the limit in the environment (for the parser workers): undone after
    monkeypatch.setenv("HTA_TUI_MAX_FILE_MB", "1")
    capsys.readouterr()
    assert main(["report", str(root), "--json", "--max-file-mb", "1"]) == 0
    files = {f["path"]: f for f in orjson.loads(capsys.readouterr().out)["files"]}
    assert files["rank-0.trace.json"]["status"] == "loaded"
    assert files["rank-1.json"]["error"] == "larger than the 1 MB limit (HTA_TUI_MAX_FILE_MB)"


def test_a_file_that_grows_while_read_stops_at_the_limit(tmp_path: Path) -> None:
    """A writer that never stops appending: the read takes what the file held when it was
    opened, at most the limit, and the load goes on."""
    import threading

    root = tmp_path / "t"
    write_rank(root, 0, gz=False, world=1)
    growing = root / "rank-1.json"
    growing.write_bytes(b'{"traceEvents": [' + b" " * 2_000_000)
    stop = threading.Event()

    def append() -> None:
        with growing.open("ab") as f:
            while not stop.is_set():
                f.write(b" " * 65536)

    writer = threading.Thread(target=append, daemon=True)
    writer.start()
    try:
        results = {
            r.file.path.name: r
            for r in load_files(
                discover(root), Cache(tmp_path / "c"), workers=1, limits=Limits(max_bytes=10**6)
            )
        }
    finally:
        stop.set()
        writer.join()
    assert results["rank-0.trace.json"].status == "loaded"
    assert results["rank-1.json"].error == "larger than the 1 MB limit (HTA_TUI_MAX_FILE_MB)"


@pytest.mark.parametrize("head", [b'{"traceEvents": [', b"\x1f\x8b\x08\x00"])
def test_a_file_over_the_limit_on_disk_is_refused_unread(tmp_path: Path, head: bytes) -> None:
    """A sparse 200 MB file (plain or gzip-headed) under a 50 MB limit: refused by its size
    before any of it is read, so it costs no memory (it used to read limit + 1 bytes)."""
    import tracemalloc

    big = tmp_path / "rank-1.json"
    with big.open("wb") as f:
        f.write(head)
        f.truncate(200 * 10**6)
    tracemalloc.start()
    try:
        with pytest.raises(TraceFileError, match="larger than the 50 MB limit"):
            read_bytes(big, max_bytes=50 * 10**6)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 10**6, f"{peak:,} bytes allocated to refuse it"
