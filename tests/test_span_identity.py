"""Spans are not ranks (issue 24.1), and a stray file does not replace a rank (issue 25.6).

`tensorboard_trace_handler` names files `{worker}.{timestamp}.pt.trace.json[.gz]`: two files of
one worker are two spans of one process, shown as one rank (its newest span, by the name's
timestamp). A file of another process that says the same rank is a conflict: listed with its
reason, the rank keeps the real file's numbers, and the user may pick it instead.
"""

from __future__ import annotations

import gzip
import io
import os
import shutil
from pathlib import Path

import orjson
import pytest

from hta_tui.report import build_report, run_report
from hta_tui.trace.cache import Cache
from hta_tui.trace.model import open_set
from hta_tui.trace.parse import parse_file
from tests.test_app_support import rank_trace, write_rank

VIT = "pytorch_cpu_vit_memory"
OLD_TS, NEW_TS = "1795489276434075715", "1795489276924276875"


def copy_vit_spans(shared: Path, folder: Path, worker: str) -> tuple[Path, Path]:
    """The case's two spans under `worker`'s names; the older one gets the newer mtime, so
    only the names' timestamps tell which span is the newest."""
    folder.mkdir(parents=True)
    out = []
    for ts in (OLD_TS, NEW_TS):
        src = shared / "traces" / VIT / f"worker0.{ts}.pt.trace.json.gz"
        out.append(Path(shutil.copyfile(src, folder / f"{worker}.{ts}.pt.trace.json.gz")))
    old, new = out
    os.utime(old, ns=(2 * 10**18, 2 * 10**18))
    os.utime(new, ns=(10**18, 10**18))
    return old, new


@pytest.mark.shared
@pytest.mark.parametrize("worker", ["trainer", "gpubox_4242"])
def test_two_spans_of_one_worker_are_one_rank_newest_shown(
    shared: Path, tmp_path: Path, worker: str
) -> None:
    old, new = copy_vit_spans(shared, tmp_path / "t", worker)
    cache = Cache(tmp_path / "cache")
    ts = open_set(tmp_path / "t", cache)
    assert ts.ranks() == [0]  # not one rank per file
    assert [e.path for e in ts.spans(0)] == [new, old]  # by the name's timestamp, not mtime
    assert ts.selected(0).path == new and ts.conflicts(0) == []
    info = ts.span_of(0)
    assert (info.worker, info.timestamp, info.index, info.count) == (worker, NEW_TS, 2, 2)
    assert info.process.pid is not None and info.process.host == "vm"
    # the numbers are the newest span's alone, never the two averaged
    events = ts.frames()[0]
    assert events.height == parse_file(new).frames["events"].height
    doc = build_report(ts, names=["step_time_breakdown"])
    files = {f["path"]: f for f in doc["files"]}
    assert files[new.name]["shown"] and not files[old.name]["shown"]
    assert (files[new.name]["worker"], files[new.name]["timestamp"]) == (worker, NEW_TS)
    alone = build_report(open_set(new, cache), names=["step_time_breakdown"])
    assert doc["step_time_breakdown"] == alone["step_time_breakdown"]


def stray_trace(rank: int) -> dict:
    """One event, `distributedInfo.rank` = `rank`, from a process of its own."""
    event = {"ph": "X", "cat": "cpu_op", "name": "aten::empty", "pid": 4242, "tid": 4242}
    return {
        "distributedInfo": {"rank": rank, "world_size": 2},
        "traceEvents": [{**event, "ts": 1_700_000_000_000_500, "dur": 3}],
    }


def write_stray(folder: Path, rank: int = 0) -> Path:
    """A newer one-event file elsewhere in the folder that says it is `rank`."""
    path = folder / "elsewhere" / "zz_stray.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(orjson.dumps(stray_trace(rank)))
    os.utime(path, ns=(4 * 10**18, 4 * 10**18))
    return path


def test_a_stray_file_is_a_conflict_and_the_real_rank_keeps_its_numbers(tmp_path: Path) -> None:
    d = tmp_path / "t"
    real = write_rank(d, 0, world=2)
    write_rank(d, 1, world=2)
    stray = write_stray(d)
    ts = open_set(d, Cache(tmp_path / "cache"))
    assert ts.ranks() == [0, 1]
    assert ts.selected(0).path == real  # not the newer one-event file
    assert ts.frames()[0].height == parse_file(real).frames["events"].height
    assert [e.path for e in ts.conflicts(0)] == [stray] and ts.conflicts(1) == []
    reason = ts.entries[stray].conflict
    assert "\n" not in reason and "pid 4242" in reason and "rank 0" in reason
    assert "pid 100" in reason  # the process shown instead
    assert ts.span_of(0).as_json(d) == {
        "rank": 0,
        "file": real.name,
        "worker": None,  # `rank-0.trace.json.gz` is not the profiler handler's name
        "timestamp": None,
        "span": 1,
        "spans": 1,
        "pid": 100,
        "host": None,
        "conflicts": ["elsewhere/zz_stray.json"],
    }
    doc = build_report(ts, names=["temporal_breakdown"])
    files = {f["path"]: f for f in doc["files"]}
    assert files["elsewhere/zz_stray.json"]["conflict"] == reason
    assert not files["elsewhere/zz_stray.json"]["shown"] and files[real.name]["shown"]
    assert files[real.name]["conflict"] is None
    assert sorted(r["rank"] for r in doc["temporal_breakdown"]) == [0, 1]
    # the user picks the stray file: its process becomes rank 0's, the real file the conflict
    ts.select_span(0, stray)
    assert ts.selected(0).path == stray and [e.path for e in ts.conflicts(0)] == [real]
    assert ts.frames()[0].height == 1


def test_the_text_report_lists_the_conflict(tmp_path: Path) -> None:
    d = tmp_path / "t"
    write_rank(d, 0, world=2)
    write_stray(d)
    out = io.StringIO()
    assert run_report(d, cache=Cache(tmp_path / "cache"), out=out, width=300) == 0
    (files,) = [s for s in out.getvalue().split("\n# ") if s.startswith("Files in")]
    (line,) = [ln for ln in files.splitlines() if "zz_stray.json" in ln]
    assert "conflict: pid 4242 says rank 0" in line


def test_spans_of_one_process_with_silent_names_share_a_rank(tmp_path: Path) -> None:
    """No distributedInfo and names that say nothing: files of one process (host, pid,
    base time) are spans of one rank, files of another process another rank."""
    d = tmp_path / "t"
    d.mkdir()
    for name, steps, pid in (("a.json", 3, 100), ("b.json", 4, 100), ("c.json", 3, 777)):
        trace = rank_trace(0, steps=steps)
        del trace["distributedInfo"]
        for ev in trace["traceEvents"]:
            if ev["pid"] == 100:
                ev["pid"] = pid
        (d / name).write_bytes(orjson.dumps(trace))
    os.utime(d / "a.json", ns=(10**18, 10**18))
    os.utime(d / "b.json", ns=(2 * 10**18, 2 * 10**18))
    ts = open_set(d, Cache(tmp_path / "cache"))
    assert ts.ranks() == [0, 1]
    assert [e.path.name for e in ts.spans(0)] == ["b.json", "a.json"]
    assert [e.path.name for e in ts.spans(1)] == ["c.json"]


def test_a_worker_file_still_loading_joins_its_worker_rank(tmp_path: Path) -> None:
    """Before it loads, a new span of a worker already counts under the worker's rank."""
    d = tmp_path / "t"
    d.mkdir()
    trace = rank_trace(0, steps=3)
    del trace["distributedInfo"]
    done = d / "box_1.1795489276434075715.pt.trace.json.gz"
    done.write_bytes(gzip.compress(orjson.dumps(trace)))
    (d / "box_1.1795489276924276875.pt.trace.json.gz").write_bytes(b"")  # being written
    ts = open_set(d, Cache(tmp_path / "cache"))
    assert ts.ranks() == [0]
    assert len(ts.spans(0)) == 2 and ts.selected(0).path == done


def test_one_worker_name_for_two_processes_without_ranks_is_two_ranks(tmp_path: Path) -> None:
    """Files that state no rank and share a worker name but not a process (a worker name
    set by hand for every process of a job): nothing says they are one rank, so they stay
    two ranks, not a conflict."""
    d = tmp_path / "t"
    d.mkdir()
    for stamp, pid in (("1795489276434075715", 100), ("1795489276924276875", 777)):
        trace = rank_trace(0, steps=3)
        del trace["distributedInfo"]
        for ev in trace["traceEvents"]:
            if ev["pid"] == 100:
                ev["pid"] = pid
        (d / f"trainer.{stamp}.pt.trace.json").write_bytes(orjson.dumps(trace))
    ts = open_set(d, Cache(tmp_path / "cache"))
    assert ts.ranks() == [0, 1]
    assert ts.conflicts(0) == [] and ts.conflicts(1) == []


def test_a_stray_file_that_names_no_process_does_not_replace_the_rank(tmp_path: Path) -> None:
    """A newer file saying rank 0 whose events carry no usable pid cannot be shown to come
    from rank 0's process: a conflict too, not its newest span."""
    d = tmp_path / "t"
    real = write_rank(d, 0, world=2)
    trace = stray_trace(0)
    trace["traceEvents"][0]["pid"] = "Spans"  # a pid that is not a number
    stray = d / "zz_stray.json"
    stray.write_bytes(orjson.dumps(trace))
    os.utime(stray, ns=(4 * 10**18, 4 * 10**18))
    ts = open_set(d, Cache(tmp_path / "cache"))
    assert ts.selected(0).path == real and [e.path for e in ts.conflicts(0)] == [stray]
    assert ts.entries[stray].conflict.startswith("conflict: an unknown process says rank 0")
