"""A damaged cache entry is parsed again (issue 16): every file of an entry (meta.json, each
frame, a derived summary), damaged each way a disk, a quota or a killed writer damages it
(truncated, garbage of the same length, missing, zero bytes), gives the numbers of a parse
without cache, a notice, and no traceback. Two processes storing one entry at once leave a
whole entry."""

from __future__ import annotations

import io
import multiprocessing as mp
import os
import random
import shutil
from pathlib import Path

import orjson
import polars as pl
import pytest
from polars.testing import assert_frame_equal

from hta_tui.analysis import step_overview
from hta_tui.exec.split import JOBS_DIR
from hta_tui.report import run_report
from hta_tui.synth import write_trace_dir
from hta_tui.synth.memory import MemoryOptions
from hta_tui.trace.cache import FILES_KEY, META_FILE, Cache, read_frame, take_notices
from hta_tui.trace.checked import _MARK, _TRAILER, crc32, read_checked, write_checked
from hta_tui.trace.discover import discover
from hta_tui.trace.model import RankData, open_set
from hta_tui.trace.parse import parse_file
from hta_tui.trace.schema import FRAME_SCHEMAS
from tests.test_app_support import make_screen_app, settle, wait_until


def truncated(path: Path) -> None:
    path.write_bytes(path.read_bytes()[: path.stat().st_size // 2])


def garbage(path: Path) -> None:
    """Random bytes in the middle, the length unchanged (what a size check cannot see)."""
    data = bytearray(path.read_bytes())
    mid = len(data) // 2
    data[mid - 8 : mid + 8] = random.Random(0).randbytes(16)
    path.write_bytes(bytes(data))


def missing(path: Path) -> None:
    path.unlink()


def zero_bytes(path: Path) -> None:
    path.write_bytes(b"")


DAMAGE = {"truncated": truncated, "garbage": garbage, "missing": missing, "zero": zero_bytes}
#: The summaries kept in an entry's `derived/` folder, by the start of their file names: the
#: overview's row (the report's and the app's parser worker) and the step breakdown (the
#: app's parser worker).
DERIVED = ("derived/overview-", "derived/step-breakdown-")
#: A rank-wise analysis's tables kept in the entry's `results/` folder (hta_tui/exec): one
#: file per analysis, all of one kind, damaged here in one of them (these small ranks run
#: in one batch, its tables kept beside the first rank's frames: `rank_work.batch_tables`).
RESULTS = "results/"
RESULT = "results/batch-idle_time_breakdown-"
#: every file of an entry: meta.json, each frame the parser writes, each derived summary
#: (`test_entry_files_are_all_damaged_here` fails when an entry gains a kind of file)
FILES = [META_FILE, *(f"{name}.parquet" for name in FRAME_SCHEMAS), *DERIVED, RESULT]


@pytest.fixture(scope="module")
def trace_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Two ranks with GPU memory events (the memory frame has rows)."""
    root = tmp_path_factory.mktemp("damage") / "traces"
    write_trace_dir(root, ranks=2, steps=3, seed=3, kernels_per_step=30, memory=MemoryOptions())
    return root


@pytest.fixture(scope="module")
def clean(trace_dir: Path) -> dict:
    """The report of a parse without cache."""
    out = io.StringIO()
    assert run_report(trace_dir, as_json=True, no_cache=True, out=out) == 0
    return orjson.loads(out.getvalue())


def report(trace_dir: Path, cache: Cache) -> dict:
    out = io.StringIO()
    assert run_report(trace_dir, as_json=True, cache=cache, out=out) == 0
    return orjson.loads(out.getvalue())


@pytest.fixture(scope="module")
def clean_steps(trace_dir: Path) -> pl.DataFrame:
    """The step breakdown (a derived summary) of a parse without cache."""
    return step_overview.step_table(open_set(trace_dir, Cache(enabled=False)))


@pytest.fixture(scope="module")
def clean_frames(trace_dir: Path) -> dict[Path, dict[str, pl.DataFrame]]:
    """Each file's frames as a parse without cache gives them (parsed once for the module)."""
    return {path: parse_file(path).frames for path in sorted(trace_dir.iterdir())}


def warm(trace_dir: Path, cache: Cache) -> dict:
    """The report, which writes every entry, and the app's step breakdown summaries."""
    doc = report(trace_dir, cache)
    step_overview.step_table(open_set(trace_dir, cache))
    return doc


@pytest.fixture(scope="module")
def warmed(trace_dir: Path, clean: dict, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A cache the report and the app's step breakdown have written (once for the module:
    each test damages its own copy)."""
    root = tmp_path_factory.mktemp("warmed") / "cache"
    assert warm(trace_dir, Cache(root)) == clean  # the cache is written
    return root


def entry_file(cache: Cache, trace: Path, name: str) -> Path:
    (tf,) = [tf for tf in discover(trace.parent) if tf.path == trace]
    entry = cache.entry_dir(tf)
    if name.startswith("derived/"):
        (path,) = (entry / "derived").glob(f"{name.removeprefix('derived/')}*.parquet")
        return path
    if name.startswith(RESULTS):
        (path,) = (entry / "results").glob(f"{name.removeprefix(RESULTS)}*.arrow")
        return path
    return entry / name


def test_entry_files_are_all_damaged_here(trace_dir: Path, warmed: Path) -> None:
    """FILES names every file an entry holds after the report and the app have used it (the
    module's warmed cache, read only here: it was warmed once more for this test alone)."""
    cache = Cache(warmed)
    trace = sorted(trace_dir.iterdir())[0]
    entry = entry_file(cache, trace, META_FILE).parent
    on_disk = sorted(p.relative_to(entry).as_posix() for p in entry.rglob("*") if p.is_file())
    covered = sorted(entry_file(cache, trace, name).relative_to(entry).as_posix() for name in FILES)
    results = [f for f in on_disk if f.startswith(RESULTS)]  # one kind, one file per analysis
    assert [f for f in on_disk if f not in results] == [f for f in covered if f not in results]
    assert len(results) > 1 and all(f.endswith(".arrow") for f in results)
    assert parse_file(trace).frames["memory"].height > 0  # every frame has rows to damage


@pytest.mark.heavy
@pytest.mark.parametrize("kind", DAMAGE)
@pytest.mark.parametrize("name", FILES)
def test_damaged_entry_gives_the_clean_numbers(
    trace_dir: Path,
    clean: dict,
    clean_steps: pl.DataFrame,
    clean_frames: dict[Path, dict[str, pl.DataFrame]],
    warmed: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture,
    name: str,
    kind: str,
) -> None:
    cache = Cache(shutil.copytree(warmed, tmp_path / "cache"))
    capsys.readouterr()
    trace = sorted(trace_dir.iterdir())[0]
    DAMAGE[kind](entry_file(cache, trace, name))
    if name.startswith(RESULTS):  # the whole answers kept per job would hide it
        shutil.rmtree(cache.root / JOBS_DIR)
    assert report(trace_dir, cache) == clean
    err = capsys.readouterr().err
    assert "Traceback" not in err
    # every frame as a parse without cache gives it (frames the report did not need are
    # checked when they are first read, here)
    ts = open_set(trace_dir, cache)
    for entry in ts.entries.values():
        assert entry.data is not None
        for frame, want in clean_frames[entry.path].items():
            assert_frame_equal(entry.data.frame(frame), want)
    assert_frame_equal(step_overview.step_table(ts), clean_steps)
    notices = [n for n in take_notices() if n.startswith(f"{trace.name}: cache entry damaged")]
    if not name.startswith(("derived/", RESULTS)):  # a damaged summary is computed again
        assert f"hta-tui: note: {trace.name}: cache entry damaged" in err or notices
    assert report(trace_dir, cache) == clean  # and the entry written again is whole
    assert "damaged" not in capsys.readouterr().err


def test_entry_lists_its_frame_files_with_their_sizes(trace_dir: Path, tmp_path: Path) -> None:
    """Generic over the frames: whatever the parser produces is listed and checked."""
    cache = Cache(tmp_path / "cache")
    ts = open_set(trace_dir, cache)
    entry = next(iter(ts.loaded().values())).entry
    meta = orjson.loads((entry / META_FILE).read_bytes())
    frames = parse_file(trace_dir / sorted(os.listdir(trace_dir))[0]).frames
    assert set(meta[FILES_KEY]) == {f"{n}.parquet" for n in frames}
    for name, size in meta[FILES_KEY].items():
        assert (entry / name).stat().st_size == size


def _store_one(args: tuple[str, str]) -> bool:
    trace, root = args
    (tf,) = discover(trace)
    cache = Cache(root)
    cache.store(tf, parse_file(tf.path))
    return True


def test_concurrent_writers_leave_a_whole_entry(trace_dir: Path, tmp_path: Path) -> None:
    """Eight stores of one entry from two processes at once: one whole entry stays, every
    frame as the parser gives it, and no temporary folder."""
    trace = sorted(trace_dir.iterdir())[0]
    root = tmp_path / "cache"
    with mp.get_context("forkserver").Pool(2) as pool:
        assert all(pool.map(_store_one, [(str(trace), str(root))] * 8))
    (tf,) = discover(trace)
    cache = Cache(root)
    assert cache.lookup(tf) is not None
    assert take_notices() == []
    entries = [p for p in cache.root.glob("??/*")]
    assert [p.name for p in entries] == [cache.entry_dir(tf).name]  # no temporary left
    for frame, want in parse_file(trace).frames.items():
        assert_frame_equal(read_frame(cache.entry_dir(tf), frame), want)


async def test_app_parses_a_damaged_entry_again(trace_dir: Path, tmp_path: Path) -> None:
    cache_dir = tmp_path / "cache"
    open_set(trace_dir, Cache(cache_dir))  # a warm cache
    trace = sorted(trace_dir.iterdir())[0]
    garbage(entry_file(Cache(cache_dir), trace, "events.parquet"))
    app = make_screen_app(trace_dir, tmp_path)
    # every notice given (one shown while the frames are read ahead of the first view may
    # have timed out by the time a loaded machine shows the kernels)
    given: list[str] = []
    shown = app.notify
    app.notify = lambda message, **kw: given.append(message) or shown(message, **kw)  # type: ignore[method-assign]
    async with app.run_test(size=(100, 30), notifications=True) as pilot:
        await settle(pilot)
        await pilot.press("K")  # the kernels screen reads the events, if nothing read them
        await wait_until(
            pilot, lambda: any("cache entry damaged" in m for m in given), what="the notice"
        )
        assert all(e.status == "loaded" for e in app.trace_set.entries.values())


def _tiny_rank(folder: Path) -> Path:
    """A rank of a few CPU ops: no flows, threads or memory (three empty frames)."""
    folder.mkdir(parents=True, exist_ok=True)
    ops = [
        {"ph": "X", "cat": "cpu_op", "name": f"aten::op{i}", "pid": 1, "tid": 1}
        | {"ts": 10 * i, "dur": 5}
        for i in range(3)
    ]
    path = folder / "rank-0.pt.trace.json"
    path.write_bytes(orjson.dumps({"traceEvents": ops}))
    return path


def test_an_empty_frame_gets_no_file_and_reads_back_as_parsed(tmp_path: Path) -> None:
    """A frame with no rows and its own schema is not written (issue 26): the meta lists no
    file for it, and it reads back, schema and rows, as parsed, from the meta alone."""
    trace = _tiny_rank(tmp_path / "traces")
    parsed = parse_file(trace).frames
    empty = {n for n, f in parsed.items() if f.is_empty()}
    assert empty and "events" not in empty
    data = next(iter(open_set(trace.parent, Cache(tmp_path / "cache")).loaded().values()))
    listed = set(data.meta[FILES_KEY])
    assert listed == {f"{n}.parquet" for n in parsed if n not in empty}
    assert {p.name for p in data.entry.glob("*.parquet")} == listed
    for name, want in parsed.items():
        assert_frame_equal(read_frame(data.entry, name), want)
        assert_frame_equal(data.frame(name), want)
    # the meta alone answers for an empty frame: an entry gone from the disk is not looked at
    gone = RankData(tmp_path / "nowhere", data.meta)
    for name in empty:
        assert_frame_equal(gone.frame(name), parsed[name])
    assert take_notices() == []


def test_an_old_entry_listing_every_frame_file_still_reads(tmp_path: Path) -> None:
    """An entry written before issue 26 has a file for every frame, empty ones too."""
    trace = _tiny_rank(tmp_path / "traces")
    parsed = parse_file(trace)
    (tf,) = discover(trace)
    cache = Cache(tmp_path / "cache")
    entry = cache.entry_dir(tf)
    entry.mkdir(parents=True)
    parsed.meta[FILES_KEY] = {
        f"{n}.parquet": write_checked(f, entry / f"{n}.parquet") for n, f in parsed.frames.items()
    }
    (entry / META_FILE).write_bytes(orjson.dumps(parsed.meta, default=str))
    meta = cache.lookup(tf)
    assert meta is not None and len(meta[FILES_KEY]) == len(FRAME_SCHEMAS)
    (entry / "flows.parquet").unlink()  # listed, so still found missing: parsed again
    data = RankData(entry, meta)
    for name, want in parsed.frames.items():
        assert_frame_equal(data.frame(name), want)
    assert any("flows.parquet is missing" in n for n in take_notices())


def test_a_frame_reads_back_as_one_chunk_and_an_old_file_of_row_groups_as_before(
    tmp_path: Path,
) -> None:
    """Written as one row group (polars' default cut 200k rows in two: two chunks a column,
    copied by every `to_numpy`); a file of several row groups, as older caches hold, reads
    the same rows."""
    frame = pl.DataFrame({"ts": pl.int_range(200_000, eager=True), "name": ["a", "bc"] * 100_000})
    write_checked(frame, tmp_path / "new.parquet")
    got = read_checked(tmp_path / "new.parquet")
    assert got.n_chunks("all") == [1, 1]
    assert_frame_equal(got, frame)
    old = io.BytesIO()
    frame.write_parquet(old, compression="lz4", statistics=False, row_group_size=50_000)
    body = old.getvalue()
    (tmp_path / "old.parquet").write_bytes(body + _TRAILER.pack(len(body), crc32(body), _MARK))
    got = read_checked(tmp_path / "old.parquet")
    assert got.n_chunks() > 1
    assert_frame_equal(got, frame)
