"""No file can take down a load: bad values are dropped and counted, any exception of one file
becomes its one-line reason (traceback to the --log file), a file over the byte or time limit
is given up, and the other files load with their exact numbers."""

from __future__ import annotations

import io
import os
import signal
import socket
import time
from contextlib import redirect_stderr, redirect_stdout
from decimal import Decimal
from pathlib import Path
from typing import Any

import orjson
import polars as pl
import pytest

from hta_tui.cli import main
from hta_tui.trace import load as load_mod
from hta_tui.trace import parse as parse_mod
from hta_tui.trace.cache import Cache
from hta_tui.trace.discover import describe
from hta_tui.trace.limits import Limits
from hta_tui.trace.load import LoadResult, load_files
from hta_tui.trace.model import open_set
from hta_tui.trace.parse import TraceFileError, parse_bytes, read_bytes
from tests import dialects


def run_cli(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with redirect_stdout(out), redirect_stderr(err):
        rc = main(list(argv))
    return rc, out.getvalue(), err.getvalue()


def nan_folder(root: Path) -> dict[str, Any]:
    """Issue 10's folder: one good rank, one file whose only kernel has ts "NaN", dur -5."""
    good = dialects.current(rank=0)
    dialects.write(good, root / "rank-0.json")
    bad = {
        "distributedInfo": {"rank": 1},
        "traceEvents": [
            {"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": 7, "ts": "NaN", "dur": -5}
        ],
    }
    dialects.write(bad, root / "rank-1.json")
    return good


def test_the_nan_folder_loads_its_good_rank(tmp_path: Path) -> None:
    good = nan_folder(tmp_path / "t")
    rc, out, err = run_cli("report", str(tmp_path / "t"), "--json", "--no-cache")
    assert rc == 0 and "Traceback" not in out + err
    doc = orjson.loads(out)
    files = {f["path"]: f for f in doc["files"]}
    assert files["rank-0.json"]["status"] == "loaded"
    assert files["rank-1.json"]["status"] == "error"
    assert files["rank-1.json"]["error"] == "no usable event: ts is not a number in 1 event"
    # the good rank's numbers: its kernel and memcpy as written in the file
    gpu = [e for e in good["traceEvents"] if e.get("cat") in ("kernel", "gpu_memcpy")]
    (row,) = doc["temporal_breakdown"]
    assert row["rank"] == 0
    assert row["kernel_time(us)"] == max(e["ts"] + e["dur"] for e in gpu) - min(
        e["ts"] for e in gpu
    )


BAD_EVENTS: list[tuple[Any, str | None]] = [
    ({"ph": "X", "cat": "kernel", "name": "a", "ts": "NaN", "dur": 1}, "ts is not a number"),
    ({"ph": "X", "cat": "kernel", "name": "b", "ts": "Infinity", "dur": 1}, "ts is not a number"),
    ({"ph": "X", "cat": "kernel", "name": "c", "ts": [1], "dur": 1}, "ts is not a number"),
    ({"ph": "X", "cat": "kernel", "name": "d", "ts": 1e300, "dur": 1}, "ts out of range"),
    ({"ph": "X", "cat": "kernel", "name": "e", "ts": None, "dur": 1}, "no ts"),
    ({"ph": "X", "cat": "kernel", "name": "f", "dur": 1}, "no ts"),
    ({"ph": "X", "cat": "kernel", "name": "g", "ts": 5, "dur": -5}, "dur is negative"),
    ({"ph": "X", "cat": "kernel", "name": "h", "ts": 5, "dur": 1e17}, "dur over a day"),
    ({"ph": "X", "cat": "kernel", "name": "i", "ts": 5, "dur": "long"}, "dur is not a number"),
    ({"cat": "kernel", "name": "j", "ts": 5, "dur": 1}, "no ph"),
    ({"ph": "Q", "cat": "kernel", "name": "k", "ts": 5, "dur": 1}, "unknown ph"),
    (17, "not an object"),
    ("an event", "not an object"),
    ([1, 2], "not an object"),
    # repaired, not dropped: ids as text, a name that is an object, a missing dur
    ({"ph": "X", "cat": "kernel", "name": {"x": 1}, "pid": "0", "tid": 7, "ts": 9}, None),
]


@pytest.mark.parametrize("position", ["first chunk", "later chunk"])
def test_bad_values_are_dropped_and_counted(position: str, monkeypatch, tmp_path: Path) -> None:
    if position == "later chunk":
        monkeypatch.setattr(parse_mod, "CHUNK_BYTES", 200)
    trace = dialects.current()
    good = list(trace["traceEvents"])
    trace["traceEvents"] = good + [ev for ev, _ in BAD_EVENTS]
    parsed = parse_bytes(orjson.dumps(trace))
    expected: dict[str, int] = {}
    for _, why in BAD_EVENTS:
        if why:
            expected[why] = expected.get(why, 0) + 1
    assert parsed.meta["dropped_events"] == expected
    events = parsed.frames["events"]
    complete = [e for e in good if e.get("ph") == "X"]
    assert events.height == len(complete) + 1  # the repaired one
    assert events["idx"].to_list() == list(range(events.height))
    assert events["ts"].to_list()[: len(complete)] == [
        int(Decimal(repr(e["ts"])) * 1000)
        for e in complete  # the digits written
    ]
    repaired = events.row(-1, named=True)
    assert (repaired["pid"], repaired["dur"], repaired["ts"]) == (0, 0, 9000)


def test_duplicate_keys_keep_one_value() -> None:
    doc = (
        b'{"traceEvents": [{"ph": "X", "cat": "kernel", "name": "k", "ts": 1, "ts": 2,'
        b' "dur": 3, "pid": 0, "tid": 7, "args": {"stream": 7}}]}'
    )
    events = parse_bytes(doc).frames["events"]
    assert events.height == 1 and events["ts"][0] in (1000, 2000)


def test_timestamps_keep_every_digit() -> None:
    """At epoch-microsecond scale a float64 keeps only quarter microseconds; the digits of
    the JSON number are kept instead (ns exact)."""
    stamps = ["1719853884123456.789", "1719853884123456.001", "1719853884123457.5", "17.25"]
    events = ",".join(
        f'{{"ph": "X", "cat": "kernel", "name": "k", "ts": {t}, "dur": 0.001, "pid": 0}}'
        for t in stamps
    )
    frame = parse_bytes(f'{{"traceEvents": [{events}]}}'.encode()).frames["events"]
    expected = [int(t.split(".")[0]) * 1000 + int(t.split(".")[1].ljust(3, "0")) for t in stamps]
    assert frame["ts"].to_list() == expected
    assert frame["dur"].to_list() == [1] * 4
    assert float(stamps[0]) * 1000 != expected[0]  # what a float64 would have given


def test_an_unexpected_exception_is_the_files_reason_and_its_traceback_goes_to_the_log(
    tmp_path: Path, monkeypatch
) -> None:
    root = tmp_path / "t"
    good = dialects.current(rank=0)
    dialects.write(good, root / "rank-0.json")
    dialects.write(dialects.current(rank=1), root / "rank-1.json")
    real = parse_mod._parse_owned

    def boom(holder: list[bytes]) -> Any:
        if b'"rank":1' in holder[0] or b'"rank": 1' in holder[0]:
            raise KeyError("a bug in the parser")
        return real(holder)

    monkeypatch.setattr(parse_mod, "_parse_owned", boom)
    log = tmp_path / "debug.log"
    rc, out, err = run_cli("report", str(root), "--json", "--no-cache", "--log", str(log))
    assert rc == 0
    assert "Traceback" not in out + err
    files = {f["path"]: f for f in orjson.loads(out)["files"]}
    assert files["rank-0.json"]["status"] == "loaded"
    assert files["rank-1.json"]["status"] == "error"
    assert files["rank-1.json"]["error"] == "internal error, KeyError: 'a bug in the parser'"
    text = log.read_text()
    assert "Traceback" in text and "rank-1.json" in text and "a bug in the parser" in text


def test_the_log_file_can_come_from_the_environment(tmp_path: Path, monkeypatch) -> None:
    import logging

    root = tmp_path / "t"
    (root).mkdir()
    (root / "rank-0.json").write_bytes(b'{"traceEvents": [oops')
    log = tmp_path / "env.log"
    monkeypatch.setenv("HTA_TUI_LOG", str(log))
    logger = logging.getLogger("hta_tui")
    handlers = list(logger.handlers)
    try:
        rc, out, err = run_cli("report", str(root), "--no-cache")
    finally:
        for h in logger.handlers[len(handlers) :]:
            h.close()
        logger.handlers[:] = handlers
    assert rc == 1 and "Traceback" not in out + err
    assert "rank-0.json" in log.read_text() and "invalid JSON" in log.read_text()


def test_files_that_never_end_are_not_read(tmp_path: Path) -> None:
    root = tmp_path / "t"
    dialects.write(dialects.current(rank=0), root / "rank-0.json")
    os.mkfifo(root / "rank-9.json")
    (root / "rank-5.json").symlink_to("/dev/zero")
    sock = socket.socket(socket.AF_UNIX)
    sock.bind(str(root / "rank-6.json"))
    try:
        t0 = time.monotonic()
        ts = open_set(root, Cache(tmp_path / "c"))
        assert time.monotonic() - t0 < 60  # a hang would never return at all
    finally:
        sock.close()
    status = {e.path.name: (e.status, e.error) for e in ts.entries.values()}
    assert status["rank-0.json"] == ("loaded", None)
    for name in ("rank-9.json", "rank-5.json", "rank-6.json"):
        status_, error = status.get(name, ("not_trace", "not a regular file (unlisted)"))
        assert status_ == "not_trace" and error.startswith("not a regular file"), name


def test_byte_limit_holds_for_plain_and_gzip_files(tmp_path: Path) -> None:
    import gzip

    data = orjson.dumps(dialects.current())
    plain = tmp_path / "a.json"
    plain.write_bytes(data)
    bomb = tmp_path / "b.json.gz"
    bomb.write_bytes(gzip.compress(data + b" " * 10_000_000))  # whitespace: valid, huge
    assert read_bytes(plain, len(data)) == data
    for path in (plain, bomb):
        with pytest.raises(TraceFileError, match="limit"):
            read_bytes(path, len(data) - 1)
    two = tmp_path / "c.json.gz"
    two.write_bytes(gzip.compress(data[:100]) + gzip.compress(data[100:]))  # two members
    assert read_bytes(two, len(data)) == data


def _sleepy(entry: Path, meta: dict, frames: dict) -> None:
    """after_parse for the time-limit tests: sleeps for rank 1 only; with SIGALRM blocked
    when the file says so (stuck where the worker's own alarm cannot reach)."""
    if meta.get("rank_in_file") != 1:
        return
    if meta.get("trace_name") == "stuck":
        signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGALRM})
    time.sleep(60)


def _time_folder(root: Path, name: str) -> None:
    for rank in (0, 1, 2):
        trace = dialects.current(rank=rank)
        trace["traceName"] = name
        dialects.write(trace, root / f"rank-{rank}.json")


#: The time limit of a file in these tests (s): the slow file waits it out (and the stuck one
#: it and the watchdog's grace), so each test costs it in idle time; the good files take a
#: few milliseconds of it (5 s cost the suite 9 s of waiting for the same outcomes).
TIME_LIMIT_S = 2


@pytest.mark.heavy
@pytest.mark.parametrize("name", ["slow", "stuck", "slow in a chunk"])
def test_a_file_over_the_time_limit_is_given_up(name: str, tmp_path: Path, monkeypatch) -> None:
    """`slow`: the worker's alarm stops it; `stuck`: the alarm is blocked, the parent's
    watchdog kills the pool and the other files are parsed in a new one; `slow in a chunk`:
    the three small files in one task, the alarm stops the slow one only."""
    root = tmp_path / "t"
    _time_folder(root, name.split()[0])
    monkeypatch.setattr(load_mod, "INLINE_BYTES", 0)  # every file goes to the pool
    monkeypatch.setattr(load_mod, "WATCHDOG_GRACE_S", 1.0)
    workers = 2
    if name == "slow in a chunk":
        monkeypatch.setattr(load_mod, "CHUNKS_PER_WORKER", 1, raising=False)
        workers = 1
    submits: list[int] = []

    class Counted(load_mod.ProcessPoolExecutor):  # type: ignore[name-defined]
        def submit(self, fn, /, *args, **kw):  # type: ignore[no-untyped-def]
            submits.append(1)
            return super().submit(fn, *args, **kw)

    monkeypatch.setattr(load_mod, "ProcessPoolExecutor", Counted)
    files = (
        sorted(describe(p) for p in root.iterdir())
        if False
        else [describe(root / f"rank-{r}.json") for r in (0, 1, 2)]
    )
    t0 = time.monotonic()
    results = list(
        load_files(
            files, Cache(tmp_path / "c"), workers=workers, after_parse=_sleepy,
            limits=Limits(timeout_s=TIME_LIMIT_S),
        )
    )  # fmt: skip
    assert time.monotonic() - t0 < 40
    status = {r.file.path.name: (r.status, r.error) for r in results}
    assert status["rank-1.json"] == (
        "error",
        f"took longer than {TIME_LIMIT_S} s (HTA_TUI_FILE_TIMEOUT)",
    )
    assert status["rank-0.json"][0] == status["rank-2.json"][0] == "loaded"
    assert len(results) == 3
    if name == "slow in a chunk":
        assert submits == [1]  # one task for the three files


def test_the_file_list_says_what_was_dropped(tmp_path: Path) -> None:
    from hta_tui.analysis.overview import file_table
    from hta_tui.app.format import file_rows

    trace = dialects.current(rank=0)
    trace["traceEvents"] += [ev for ev, _ in BAD_EVENTS[:2]] + [17]
    dialects.write(trace, tmp_path / "t" / "rank-0.json")
    ts = open_set(tmp_path / "t", Cache(tmp_path / "c"))
    files = file_table(ts)
    assert files["dropped_events"].to_list() == [
        [{"reason": "ts is not a number", "count": 2}, {"reason": "not an object", "count": 1}]
    ]
    (row,) = file_rows(files, watching=False)
    assert row.status == "loaded" and row.problem
    assert row.reason == "dropped ts is not a number in 2 events; not an object in 1 event"
    _, out, _ = run_cli("report", str(tmp_path / "t"), "--json", "--no-cache")
    assert orjson.loads(out)["files"][0]["dropped_events"] == {
        "ts is not a number": 2,
        "not an object": 1,
    }
    _, out, _ = run_cli("report", str(tmp_path / "t"), "--no-cache", "--only", "temporal_breakdown")
    assert "ts is not a number in 2" in out


def test_a_result_error_is_logged_once_per_file(tmp_path: Path, caplog) -> None:
    (tmp_path / "t").mkdir()
    (tmp_path / "t" / "x.json").write_bytes(b"{")
    with caplog.at_level("INFO", logger="hta_tui"):
        results = list(load_files([describe(tmp_path / "t" / "x.json")], Cache(tmp_path / "c")))
    assert [r.status for r in results] == ["incomplete"]
    assert sum("x.json" in r.getMessage() for r in caplog.records) == 1


def test_loadresult_detail_is_not_shown(tmp_path: Path) -> None:
    """The traceback rides along for the log only: the model keeps the one-line reason."""
    from hta_tui.trace.model import TraceSet

    tf_path = tmp_path / "a.json"
    tf_path.write_bytes(b"{}")
    ts = TraceSet(tmp_path)
    entry = ts.apply(
        LoadResult(describe(tf_path), "error", error="internal error, X", detail="Traceback ...")
    )
    assert entry.error == "internal error, X"
    assert pl.DataFrame({"e": [entry.error]})["e"][0].count("\n") == 0
