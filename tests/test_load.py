"""Discovery, cache, parallel load and the trace set, on generated and bad files."""

from __future__ import annotations

import gzip
import os
import subprocess
import sys
from pathlib import Path

import pytest

from hta_tui.trace import load as load_mod
from hta_tui.trace import parse as parse_mod
from hta_tui.trace.cache import Cache
from hta_tui.trace.discover import discover, rank_from_name, span_from_name
from hta_tui.trace.load import load_files
from hta_tui.trace.model import TraceSet, open_set
from tests import dialects


def snapshot(folder: Path) -> dict[str, tuple[int, int]]:
    return {
        str(p.relative_to(folder)): (p.stat().st_size, p.stat().st_mtime_ns)
        for p in folder.rglob("*")
    }


@pytest.mark.parametrize(
    ("name", "rank"),
    [
        ("rank-3.json", 3),
        ("rank_12.pt.trace.json.gz", 12),
        ("rank7.json", 7),
        ("worker3.1623143089861.pt.trace.json", 3),
        ("host_worker_5.json", 5),
        ("trace.json", None),
        ("frank3.json", None),
    ],
)
def test_rank_from_name(name: str, rank: int | None) -> None:
    assert rank_from_name(name) == rank


def test_span_from_name() -> None:
    assert span_from_name("worker0.1623143089861.pt.trace.json") == "1623143089861"
    assert span_from_name("rank-34.Jul_15_10_52_41.1074.pt.trace.json.gz") == "Jul_15_10_52_41.1074"


def test_discover_picks_trace_candidates(tmp_path: Path) -> None:
    for name in ["a.json", "b.json.gz", "c.pt.trace.json", "m.raw.gz", "notes.txt", ".hidden.json"]:
        (tmp_path / name).write_bytes(b"{}")
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "d.json").write_bytes(b"{}")
    names = [tf.path.relative_to(tmp_path).as_posix() for tf in discover(tmp_path)]
    assert names == ["a.json", "b.json.gz", "c.pt.trace.json", "m.raw.gz", "sub/d.json"]
    single = discover(tmp_path / "a.json")
    assert [tf.path.name for tf in single] == ["a.json"]


def test_bad_files_never_stop_the_others(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    d = tmp_path / "traces"
    dialects.write(dialects.current(rank=0), d / "rank-0.json.gz")
    dialects.write(dialects.current(rank=1), d / "rank-1.json")
    whole = gzip.compress(orjson_bytes(dialects.current(rank=2)))
    (d / "rank-2.json.gz").write_bytes(whole[: len(whole) // 2])  # truncated gz
    (d / "rank-3.json").write_bytes(orjson_bytes(dialects.current(rank=3))[:200])  # half-written
    (d / "empty.json").write_bytes(b"")
    (d / "binary.json").write_bytes(bytes(range(256)))  # starts with NUL: not JSON
    (d / "other.json").write_bytes(b'{"config": {"lr": 0.1}}')
    (d / "et.json").write_bytes(b'{"schema": "1.0.1", "pid": 1, "nodes": [{"id": 1}]}')
    (d / "locked.json").write_bytes(orjson_bytes(dialects.current(rank=9)))
    real_read = parse_mod.read_bytes

    def read_bytes(path: str | Path, max_bytes: int | None = None) -> bytes:
        if Path(path).name == "locked.json":  # root ignores chmod, so deny it here
            raise PermissionError(13, "Permission denied", str(path))
        return real_read(path, max_bytes)

    monkeypatch.setattr(parse_mod, "read_bytes", read_bytes)
    before = snapshot(d)
    ts = open_set(d, Cache(tmp_path / "cache"))
    status = {e.path.name: (e.status, e.error) for e in ts.entries.values()}
    assert status["rank-0.json.gz"] == ("loaded", None)
    assert status["rank-1.json"] == ("loaded", None)
    assert status["rank-2.json.gz"][0] == "incomplete" and "gzip" in status["rank-2.json.gz"][1]
    assert status["rank-3.json"][0] == "incomplete"
    assert status["empty.json"] == ("incomplete", "empty file")
    assert status["binary.json"][0] == "not_trace"
    assert status["other.json"] == ("not_trace", "not a Kineto trace: no traceEvents")
    assert status["et.json"] == ("not_trace", "not a Kineto trace: PyTorch execution trace")
    assert status["locked.json"] == ("error", "permission denied")
    assert all(err is None or "\n" not in err for _, err in status.values())
    assert ts.ranks() == [0, 1, 2, 3]  # broken rank files keep their place, by name
    assert sorted(ts.loaded()) == [0, 1]
    assert snapshot(d) == before  # nothing written beside the traces


def orjson_bytes(trace: dict) -> bytes:
    import orjson

    return orjson.dumps(trace)


def test_cache_hit_miss_and_invalidation(tmp_path: Path) -> None:
    d = tmp_path / "traces"
    path = dialects.write(dialects.current(rank=0), d / "rank-0.json")
    cache = Cache(tmp_path / "cache")
    first = list(load_files(discover(d), cache))
    assert [r.cached for r in first] == [False] and first[0].ok
    entry = first[0].entry
    assert entry is not None and entry.is_relative_to(tmp_path / "cache")
    second = list(load_files(discover(d), cache))
    assert [r.cached for r in second] == [True]
    assert second[0].meta["n_events"] == first[0].meta["n_events"]
    # the file changes: same path, new content and mtime -> miss, new numbers
    trace = dialects.current(rank=0)
    trace["traceEvents"] = trace["traceEvents"][:3]
    dialects.write(trace, path)
    os.utime(path, ns=(1, 1))
    third = list(load_files(discover(d), cache))
    assert [r.cached for r in third] == [False]
    assert third[0].meta["n_events"] == 3
    assert [r.cached for r in load_files(discover(d), cache)] == [True]


def test_no_cache_leaves_nothing_behind(tmp_path: Path) -> None:
    d = tmp_path / "traces"
    dialects.write(dialects.current(rank=0), d / "rank-0.json")
    cache = Cache(enabled=False)
    results = list(load_files(discover(d), cache))
    assert results[0].ok and not results[0].cached
    again = list(load_files(discover(d), cache))
    assert not again[0].cached  # never read back
    assert cache.root.exists() and not str(cache.root).startswith(str(d))


def test_process_pool_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    d = tmp_path / "traces"
    for r in range(4):
        dialects.write(dialects.current(rank=r), d / f"rank-{r}.json")
    (d / "rank-9.json").write_bytes(b"{ not json")
    monkeypatch.setattr(load_mod, "INLINE_BYTES", 0)  # force the pool even for small files
    results = list(load_files(discover(d), Cache(tmp_path / "cache"), workers=2))
    assert sorted((r.file.path.name, r.status) for r in results) == [
        ("rank-0.json", "loaded"),
        ("rank-1.json", "loaded"),
        ("rank-2.json", "loaded"),
        ("rank-3.json", "loaded"),
        ("rank-9.json", "error"),
    ]
    assert {r.meta["rank_in_file"] for r in results if r.ok} == {0, 1, 2, 3}


def test_spans_duplicates_and_unranked_files(tmp_path: Path) -> None:
    d = tmp_path / "traces"
    old = dialects.write(dialects.current(rank=0), d / "worker0.1000.pt.trace.json")
    new = dialects.write(dialects.current(rank=0), d / "worker0.2000.pt.trace.json")
    os.utime(old, ns=(10**18, 10**18))
    os.utime(new, ns=(2 * 10**18, 2 * 10**18))
    dialects.write(dialects.triton_driver(), d / "a_no_rank.json")
    dialects.write(dialects.cpu_only(rank=1), d / "zz.json")
    ts = open_set(d, Cache(tmp_path / "cache"))
    assert ts.ranks() == [0, 1, 2]
    assert [e.path.name for e in ts.spans(0)] == [new.name, old.name]
    assert ts.selected(0).path == new  # newest span shown
    ts.select_span(0, old)
    assert ts.selected(0).path == old
    unranked = ts.entries[d / "a_no_rank.json"]
    assert (unranked.rank, unranked.rank_source) == (2, "order")
    assert ts.entries[d / "zz.json"].rank_source == "distributedInfo"
    assert ts.origin_ns is not None


def test_trace_set_changes(tmp_path: Path) -> None:
    d = tmp_path / "traces"
    path = dialects.write(dialects.current(rank=4), d / "x.json")
    ts = TraceSet(d)
    (tf,) = discover(d)
    ts.add_pending(tf)
    g = ts.generation
    assert ts.entries[path].status == "pending" and ts.loaded() == {}
    (result,) = load_files([tf], Cache(tmp_path / "cache"))
    ts.apply(result)
    assert ts.generation > g and list(ts.loaded()) == [4]
    assert ts.frames()[4].height == result.meta["n_events"]
    ts.remove(path)
    assert ts.entries == {} and ts.ranks() == []


WORKER_THREADS = """
import multiprocessing as mp, os
from concurrent.futures import ProcessPoolExecutor
import polars as pl
from hta_tui.trace.pool import _start_forkserver
_start_forkserver()
with ProcessPoolExecutor(2, mp_context=mp.get_context("forkserver")) as pool:
    sizes = {pool.submit(pl.thread_pool_size).result() for _ in range(4)}
    conf = pool.submit(os.getenv, "_RJEM_MALLOC_CONF").result()
print(sorted(sizes), "POLARS_MAX_THREADS" in os.environ)
print(conf.split(",")[-1], "narenas" in os.environ["_RJEM_MALLOC_CONF"])
"""


def test_parser_workers_run_polars_single_threaded(tmp_path: Path) -> None:
    """One worker per core already: polars threads in each would fight over the cores; and
    their allocator with one arena (`pool.WORKER_ARENAS`). The settings reach the workers
    only, not this process's environment (a fresh interpreter: the forkserver starts once
    per process)."""
    env = {k: v for k, v in os.environ.items() if k != "POLARS_MAX_THREADS"}
    out = subprocess.run(
        [sys.executable, "-c", WORKER_THREADS],
        capture_output=True,
        text=True,
        env=env,
        cwd=tmp_path,
        check=False,
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["[1]", "False", "narenas:1", "False"]


UNGUARDED_SCRIPT = """
from hta_tui.trace import load
from hta_tui.trace.cache import Cache
from hta_tui.trace.model import open_set
load.INLINE_BYTES = 0  # every file through the process pool
ts = open_set(TRACES, Cache(CACHE), workers=2)
print("loaded", len(ts.loaded()))
"""


def run_script_on_two_ranks(tmp_path: Path, body: str) -> subprocess.CompletedProcess:
    """`body` as a script file in a fresh interpreter (so no multiprocessing helper runs yet),
    with TRACES (a folder of two ranks) and CACHE defined."""
    d = tmp_path / "traces"
    for r in range(2):
        dialects.write(dialects.current(rank=r), d / f"rank-{r}.json")
    script = tmp_path / "script.py"
    script.write_text(f"TRACES = {str(d)!r}\nCACHE = {str(tmp_path / 'cache')!r}\n" + body)
    out = subprocess.run(
        [sys.executable, str(script)], capture_output=True, text=True, check=False, timeout=120
    )
    assert out.returncode == 0, out.stderr
    return out


def test_pool_works_from_a_script_without_main_guard(tmp_path: Path) -> None:
    """Users call the API from two-line scripts with no `if __name__ == "__main__":`; the
    workers must not run the script again (forkserver children import `__main__`)."""
    out = run_script_on_two_ranks(tmp_path, UNGUARDED_SCRIPT)
    assert out.stdout.split() == ["loaded", "2"]
    assert "Traceback" not in out.stderr


WHERE_WORKERS_IMPORT = """
import multiprocessing as mp
from concurrent.futures import ProcessPoolExecutor
import hta_tui.trace.load
from hta_tui.trace.pool import prepare_pool

def where():
    import hta_tui.trace.load as load
    return load.__file__

if __name__ == "__main__":
    prepare_pool()
    with ProcessPoolExecutor(1, mp_context=mp.get_context("forkserver")) as pool:
        print(pool.submit(where).result() == hta_tui.trace.load.__file__)
"""


@pytest.mark.skipif(sys.version_info < (3, 11), reason="PYTHONSAFEPATH is 3.11+")
def test_workers_import_the_parents_package_not_one_in_the_working_directory(
    tmp_path: Path,
) -> None:
    """Run inside another checkout, the forkserver (a `-c` process, the working directory
    first on its path) imported that checkout's parser for every worker."""
    decoy = tmp_path / "hta_tui" / "trace"
    decoy.mkdir(parents=True)
    (tmp_path / "hta_tui" / "__init__.py").write_text("")
    (decoy / "__init__.py").write_text("")
    (decoy / "load.py").write_text("DECOY = True\n")
    script = tmp_path / "script" / "where.py"
    script.parent.mkdir()
    script.write_text(WHERE_WORKERS_IMPORT)
    out = subprocess.run(
        [sys.executable, str(script)],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        check=False,
        timeout=120,
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["True"]


def _age(entry: Path, seconds_ago: float) -> None:
    import time as _time

    t = _time.time() - seconds_ago
    os.utime(entry / "meta.json", (t, t))


def test_cache_prune_keeps_recent_entries_and_drops_the_least_recently_used(
    tmp_path: Path,
) -> None:
    import time as _time

    from hta_tui.exec.split import job_path

    d = tmp_path / "traces"
    for r in range(3):
        dialects.write(dialects.current(rank=r), d / f"rank-{r}.json")
    cache = Cache(tmp_path / "cache")
    files = sorted(discover(d), key=lambda tf: tf.path.name)
    assert all(r.ok for r in load_files(files, cache))
    entries = [cache.entry_dir(tf) for tf in files]
    _age(entries[0], 3 * 3600)
    _age(entries[1], 2 * 3600)
    stale_version = cache.root.parent / "v0" / "ab" / "old"
    stale_version.mkdir(parents=True)
    (stale_version / "events.parquet").write_bytes(b"x" * 1000)
    dead_tmp = entries[0].parent / ".tmp-dead"
    dead_tmp.mkdir()
    os.utime(dead_tmp, (0, 0))
    # the report's whole answers (exec/split.py's `job_path`): one old, one new, one left
    # half-written by a writer that died
    old_job, new_job = (job_path(cache.root, k * 40) for k in "ab")
    dead_job = old_job.with_name(f".{old_job.name}.123.456")
    for kept, age in ((old_job, 4 * 3600), (new_job, 0), (dead_job, 4 * 3600)):
        kept.parent.mkdir(parents=True, exist_ok=True)
        kept.write_bytes(b"x" * 100)
        os.utime(kept, (_time.time() - age, _time.time() - age))

    assert cache.prune(max_bytes=10**12) >= 1100  # under the limit: only what is unusable
    assert not stale_version.exists() and not dead_tmp.exists() and not dead_job.exists()
    assert all(e.exists() for e in entries) and old_job.exists()

    cache.prune(max_bytes=1)  # over: oldest first, but never what was used in the last hour
    assert [e.exists() for e in entries] == [False, False, True]
    assert not old_job.exists() and new_job.exists()
    assert cache.lookup(files[0]) is None and cache.lookup(files[2]) is not None


def test_lookup_marks_an_entry_used(tmp_path: Path) -> None:
    d = tmp_path / "traces"
    dialects.write(dialects.current(), d / "rank-0.json")
    cache = Cache(tmp_path / "cache")
    (tf,) = discover(d)
    list(load_files([tf], cache))
    _age(cache.entry_dir(tf), 3 * 3600)
    assert cache.lookup(tf) is not None
    import time as _time

    assert _time.time() - (cache.entry_dir(tf) / "meta.json").stat().st_mtime < 60


def test_loading_prunes_to_the_configured_size(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    d = tmp_path / "traces"
    dialects.write(dialects.current(rank=0), d / "rank-0.json")
    cache = Cache(tmp_path / "cache")
    (old,) = discover(d)
    list(load_files([old], cache))
    _age(cache.entry_dir(old), 5 * 3600)
    dialects.write(dialects.current(rank=1), d / "rank-1.json")
    monkeypatch.setenv("HTA_TUI_CACHE_MAX_GB", "0")
    new = [tf for tf in discover(d) if tf.path.name == "rank-1.json"]
    assert [r.ok for r in load_files(new, cache)] == [True]
    assert not cache.entry_dir(old).exists()
    assert cache.entry_dir(new[0]).exists()


APP_POOL_SCRIPT = """
import asyncio
from pathlib import Path
from hta_tui.app.app import HtaApp
from hta_tui.trace import load
from hta_tui.trace.cache import Cache
load.INLINE_BYTES = 0  # big files: through the process pool

async def main():
    app = HtaApp(Path(TRACES), cache=Cache(Path(CACHE)), watch=False)
    async with app.run_test() as pilot:
        for _ in range(1200):
            await pilot.pause(0.05)
            if app.settled and app.trace_set.entries:
                break
        print(sorted(e.status for e in app.trace_set.entries.values()))
        print([e.error for e in app.trace_set.entries.values() if e.error])

asyncio.run(main())
"""


def test_the_app_loads_through_the_process_pool(tmp_path: Path) -> None:
    """A running Textual app replaces sys.stderr with an object whose fileno() is -1, which
    multiprocessing hands to its helper processes: every file big enough for the pool failed
    with "bad value(s) in fds_to_keep"."""
    out = run_script_on_two_ranks(tmp_path, APP_POOL_SCRIPT)
    assert out.stdout.splitlines()[:2] == ["['loaded', 'loaded']", "[]"]


def test_small_files_go_to_the_pool_several_to_a_task(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A pool task per small file cost more than its parse: small files go a chunk to a
    task, each with its own result (a bad one its own reason), the same numbers as alone."""
    from concurrent.futures import ProcessPoolExecutor

    from hta_tui.synth.small_job import Dialect, JobShape, write_job

    d = tmp_path / "traces"
    write_job(d, Dialect(), JobShape(ranks=8, steps=1, ops_per_step=2))
    (d / "rank-9.pt.trace.json").write_bytes(b"{ not json")
    alone = {r.file.path.name: r for r in load_files(discover(d), Cache(tmp_path / "c1"))}
    submits: list[int] = []

    class Counted(ProcessPoolExecutor):
        def submit(self, fn, /, *args, **kw):  # type: ignore[no-untyped-def]
            submits.append(1)
            return super().submit(fn, *args, **kw)

    monkeypatch.setattr(load_mod, "ProcessPoolExecutor", Counted)
    monkeypatch.setattr(load_mod, "INLINE_BYTES", 0)  # every file to the pool
    monkeypatch.setattr(load_mod, "CHUNKS_PER_WORKER", 1, raising=False)
    cache = Cache(tmp_path / "c2")
    pooled = {r.file.path.name: r for r in load_files(discover(d), cache, workers=2)}
    assert 0 < len(submits) <= 3  # 9 files: chunks of 4 for two workers, not 9 tasks
    assert sorted(pooled) == sorted(alone) and len(pooled) == 9
    assert pooled["rank-9.pt.trace.json"].status == "error"
    assert "\n" not in (pooled["rank-9.pt.trace.json"].error or "\n")
    for name, r in alone.items():
        assert (pooled[name].status, pooled[name].error) == (r.status, r.error), name
        if r.ok:
            assert pooled[name].meta["n_events"] == r.meta["n_events"] > 0
            assert pooled[name].meta["rank_in_file"] == r.meta["rank_in_file"]
    # each file its own entry: a second load is all cache hits
    assert all(r.cached for r in load_files(discover(d), cache) if r.ok)
