"""Hostile input, round three (issue 25): files anyone can drop into a shared profiling folder,
built from traces as an attacker would, each beside a good rank. Each breaks a promise of the
README on the code before the issue: the per-file limits, "bad files never stop the others",
"bad values cost only their event". Sizes are small; what grew (work, rows, the path a file
takes) is counted, never timed.
"""

from __future__ import annotations

import gzip
import io
import os
import subprocess
import sys
import time
import warnings
from pathlib import Path

import orjson
import polars as pl
import pytest

from hta_tui.analysis import catalog
from hta_tui.analysis.gpu_metric_series import metric_series
from hta_tui.report import run_report
from hta_tui.synth import hostile_files as hf
from hta_tui.trace import load as load_mod
from hta_tui.trace.cache import Cache
from hta_tui.trace.discover import discover
from hta_tui.trace.limits import Limits
from hta_tui.trace.load import load_files
from hta_tui.trace.parse import parse_bytes, read_bytes
from tests.test_app_support import make_screen_app, settle, wait_until

GOOD = "rank-0.json"


def write_good(root: Path) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    (root / GOOD).write_bytes(orjson.dumps(hf.good_trace(0)))
    return root / GOOD


def report_json(root: Path, cache: Cache | None = None, **kw) -> tuple[int, dict]:
    out = io.StringIO()
    code = run_report(root, as_json=True, cache=cache or Cache(enabled=False), out=out, **kw)
    return code, orjson.loads(out.getvalue()) if out.getvalue() else {}


@pytest.fixture(scope="module")
def good_alone(tmp_path_factory: pytest.TempPathFactory) -> dict:
    """The good rank's report rows, on its own."""
    root = write_good(tmp_path_factory.mktemp("good"))
    code, doc = report_json(root.parent, only=["temporal_breakdown", "gpu_kernel_breakdown"])
    assert code == 0
    return doc


def good_rows(doc: dict, key: str) -> list[dict]:
    return [r for r in doc[key] if r.get("rank") == 0]


def same_good_rows(doc: dict, alone: dict, key: str = "temporal_breakdown") -> None:
    """The good rank's rows as on its own (to float rounding: sums run over other ranks)."""
    got, want = good_rows(doc, key), good_rows(alone, key)
    assert want and len(got) == len(want)
    for row, expected in zip(got, want, strict=True):
        assert row == pytest.approx(expected, rel=1e-12)


# -- 1. the per-file limits hold for every file -------------------------------------------------


def test_a_small_gzip_of_much_json_goes_through_the_limited_pool(tmp_path: Path, monkeypatch):
    """Small on disk, large after gunzip: decided by its JSON, it is parsed by a worker under
    the time limit (before, every file under 2 MB on disk was parsed inline, unlimited)."""
    monkeypatch.setattr(load_mod, "INLINE_BYTES", 200_000)
    root = tmp_path / "t"
    write_good(root)  # 200 KB of JSON, under the (lowered) bound: inline
    (root / "expanding.json.gz").write_bytes(hf.expanding_gzip(0.6))
    assert (root / "expanding.json.gz").stat().st_size < 20_000
    inline: list[str] = []
    parse_here = load_mod._parse_and_store

    def spy(tf, *a, **kw):  # the parent's calls only: workers import their own module
        inline.append(tf.path.name)
        return parse_here(tf, *a, **kw)

    monkeypatch.setattr(load_mod, "_parse_and_store", spy)
    results = {r.file.path.name: r for r in load_files(discover(root), Cache(enabled=False))}
    assert {n: r.status for n, r in results.items()} == {
        GOOD: "loaded",
        "expanding.json.gz": "loaded",
    }
    assert inline == [GOOD]
    assert results["expanding.json.gz"].meta["n_events"] > 5_000


def test_a_file_parsed_inline_has_the_time_limit(tmp_path: Path, monkeypatch) -> None:
    """A small file whose parse does not end (here made slow on purpose) is stopped at the
    limit with its reason, on the report's thread too; the good rank loads."""
    root = tmp_path / "t"
    write_good(root)
    (root / "slow.json").write_bytes(orjson.dumps(hf.good_trace(1)))
    real = load_mod.parse_file

    def slow(path, limits=None):
        if Path(path).name == "slow.json":
            for _ in range(300):  # 15 s unless stopped (the limit: 1 s of waiting)
                time.sleep(0.05)
        return real(path, limits)

    monkeypatch.setattr(load_mod, "parse_file", slow)
    results = {
        r.file.path.name: r
        for r in load_files(discover(root), Cache(enabled=False), limits=Limits(timeout_s=1))
    }
    assert results[GOOD].status == "loaded"
    assert (results["slow.json"].status, results["slow.json"].error) == (
        "error",
        "took longer than 1 s (HTA_TUI_FILE_TIMEOUT)",
    )


def test_a_small_file_loaded_off_the_main_thread_goes_to_the_pool(
    tmp_path: Path, monkeypatch
) -> None:
    """The app's session loads on its own threads, where no alarm can stop a parse: there a
    small file is parsed in the pool too, under the time limit, never inline."""
    import threading

    root = tmp_path / "t"
    write_good(root)
    inline: list[str] = []
    real = load_mod._inline

    def spy(tf, *a, **kw):
        inline.append(tf.path.name)
        return real(tf, *a, **kw)

    monkeypatch.setattr(load_mod, "_inline", spy)
    statuses: list[str] = []

    def load() -> None:
        statuses.extend(r.status for r in load_files(discover(root), Cache(enabled=False)))

    thread = threading.Thread(target=load)
    thread.start()
    thread.join(120)
    assert statuses == ["loaded"]
    assert inline == []
    load()  # the main thread may parse it here, under its alarm
    assert inline == [GOOD]


def test_gzip_members_inflate_in_work_linear_in_the_file(monkeypatch) -> None:
    """3,000 empty gzip members after a trace: the bytes handed to the inflater stay within a
    small multiple of the file (each member was given the whole rest: quadratic, 59 s for
    4 MB of them)."""
    import zlib

    from isal import isal_zlib

    data = hf.gzip_members(hf.good_trace(1), 3_000)
    fed = [0]

    def counting(module):
        real = module.decompressobj

        class Counting:
            def __init__(self, *a, **kw):
                self._d = real(*a, **kw)

            def decompress(self, piece, *a):
                fed[0] += len(piece)
                return self._d.decompress(piece, *a)

            def __getattr__(self, name):
                return getattr(self._d, name)

        return Counting

    for module in (isal_zlib, zlib):  # every inflater the file may be handed to
        monkeypatch.setattr(module, "decompressobj", counting(module))
    path = Path(os.environ.get("TMPDIR", "/tmp")) / f"members-{os.getpid()}.json.gz"
    path.write_bytes(data)
    try:
        out = read_bytes(path, 10**9)
    finally:
        path.unlink()
    assert out == gzip.decompress(gzip.compress(orjson.dumps(hf.good_trace(1))))
    assert fed[0] <= 2 * len(data) + 1100 * 3_000, f"{fed[0]:,} bytes fed for {len(data):,}"


# -- 2. numbers no integer holds ------------------------------------------------------------


def test_a_step_number_beyond_any_integer_costs_its_event(tmp_path: Path, good_alone) -> None:
    root = tmp_path / "t"
    write_good(root)
    (root / "huge-step.json").write_bytes(orjson.dumps(hf.huge_step(hf.good_trace(1))))
    code, doc = report_json(root, only=["temporal_breakdown", "profiler_steps", "collectives"])
    assert code == 0  # the step tables failed the whole report
    same_good_rows(doc, good_alone)
    assert {r["rank"] for r in doc["temporal_breakdown"]} == {0, 1}
    files = {f["path"]: f for f in doc["files"]}
    assert files["huge-step.json"]["status"] == "loaded"
    assert files["huge-step.json"]["dropped_events"] == {"ProfilerStep number out of range": 1}


def test_a_rank_beyond_any_integer_in_a_file_name_is_no_rank(tmp_path: Path, good_alone):
    """`rank99999999999999999999999.json` (no distributedInfo): its name gives no rank, so
    it gets the next free one as a file without a rank in its name does; the good rank and
    its numbers stay."""
    root = tmp_path / "t"
    write_good(root)
    trace = hf.good_trace(1)
    trace.pop("distributedInfo")
    (root / f"rank{hf.HUGE_DIGITS}.json").write_bytes(orjson.dumps(trace))
    code, doc = report_json(root, only=["temporal_breakdown"])
    assert code == 0
    files = {f["path"]: f for f in doc["files"]}
    assert (files[GOOD]["rank"], files[f"rank{hf.HUGE_DIGITS}.json"]["rank"]) == (0, 1)
    assert files[f"rank{hf.HUGE_DIGITS}.json"]["status"] == "loaded"
    same_good_rows(doc, good_alone)


# -- 3. ids shared by thousands of events -----------------------------------------------------


def test_shared_ids_keep_joins_bounded_and_are_counted() -> None:
    """300 operators, launches and kernels sharing one correlation and one External id: no
    table grows as their square (the queue's time series had 2 x 300 x 300 rows: every
    launch joined with every kernel), the one launch that keeps the id has the kernels (one
    launch-stats row, as a graph launch), and the file's data quality line says why."""
    n = 300
    parsed = parse_bytes(orjson.dumps(hf.shared_ids(n)))
    frames = {3: parsed.frames["events"]}
    tables = catalog.run(frames, [a.name for a in catalog.ANALYSES], catalog.Options())
    assert all(df.height <= 4 * n for df in tables.values()), {
        k: df.height for k, df in tables.items() if df.height > 4 * n
    }
    assert tables["queue_length_time_series"].height == 2 * n
    assert tables["cuda_kernel_launch_stats"].height == 1
    assert parsed.meta["dropped_events"] == {
        "correlation id of an earlier launch (id ignored)": n - 1,
        "External id of an earlier operator (id ignored)": n - 1,
    }


# -- 5. one rank's metadata stays its own -----------------------------------------------------


def test_a_bad_device_field_costs_only_its_field(tmp_path: Path) -> None:
    root = tmp_path / "t"
    write_good(root)
    bad = hf.good_trace(1)
    for device in bad["deviceProperties"]:
        device["numSms"] = "many"
    (root / "bad-device.json").write_bytes(orjson.dumps(bad))
    code, doc = report_json(root, only=["gpu_devices"])
    assert code == 0
    sms = {r["rank"]: r["sm_count"] for r in doc["gpu_devices"]}
    assert sms[0] == hf.good_trace(0)["deviceProperties"][0]["numSms"]  # not "108"
    assert isinstance(sms[0], int) and sms[1] is None
    files = {f["path"]: f for f in doc["files"]}
    n = len(bad["deviceProperties"])
    want = {"deviceProperties: numSms is not a count": n}
    assert files["bad-device.json"]["dropped_events"] == want


# -- 4. an unwritable cache -----------------------------------------------------------------


def _mount_tmpfs(where: Path, options: str) -> None:
    where.mkdir()
    done = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", options, "tmpfs", str(where)],
        capture_output=True,
        check=False,
    )
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here ({done.stderr.decode().strip()[:80]})")


@pytest.fixture(params=["a file", "read-only", "full"])
def unwritable_cache(request, tmp_path: Path):
    """A cache path that is a file; a read-only directory (a read-only tmpfs as root, whom
    permissions do not stop; else a directory without write permission); a full small
    filesystem (a 64 KB tmpfs: mounting needs root, else the case is skipped)."""
    where = tmp_path / "cache"
    kind = request.param
    mounted = False
    if kind == "a file":
        where.write_text("not a folder")
    elif kind == "read-only" and os.geteuid() != 0:
        where.mkdir()
        where.chmod(0o500)
    else:
        if os.geteuid() != 0:
            pytest.skip("a tmpfs needs root to mount")
        _mount_tmpfs(where, "ro,size=64k" if kind == "read-only" else "size=64k")
        mounted = True
    try:
        yield where, kind
    finally:
        if mounted:
            subprocess.run(["umount", "-l", str(where)], check=False)
        elif where.is_dir():
            where.chmod(0o700)


def notes(capsys: pytest.CaptureFixture) -> list[str]:
    """The notices the report printed (stderr)."""
    return [line for line in capsys.readouterr().err.splitlines() if "note:" in line]


def test_an_unwritable_cache_loads_every_trace_uncached(
    unwritable_cache, tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    """Every trace loads, as without a cache, and one notice says why (each used to be an
    `error` although it parsed)."""
    where, kind = unwritable_cache
    root = tmp_path / "t"
    write_good(root)
    (root / "rank-1.json.gz").write_bytes(gzip.compress(orjson.dumps(hf.good_trace(1))))
    (root / "rank-2.json.gz").write_bytes(gzip.compress(orjson.dumps(hf.good_trace(2))))
    clean_code, clean = report_json(root, only=["temporal_breakdown"])
    assert notes(capsys) == []
    code, doc = report_json(root, Cache(where), only=["temporal_breakdown"])
    assert (code, doc) == (clean_code, clean)
    assert {f["status"] for f in doc["files"]} == {"loaded"}
    (notice,) = notes(capsys)
    assert "cannot be written" in notice and "traces load uncached" in notice, kind


def test_a_cache_entry_of_the_wrong_types_is_damage(
    tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    """A meta.json whose values have the wrong types is a damaged entry: discarded, the
    trace parsed again, a notice; never a crash."""
    root = tmp_path / "t"
    write_good(root)
    cache = Cache(tmp_path / "cache")
    clean = report_json(root, only=["temporal_breakdown"])
    assert report_json(root, cache, only=["temporal_breakdown"]) == clean
    (meta_path,) = cache.root.glob("*/*/meta.json")
    for field, value in [("step_names", 5), ("n_events", "many"), ("dropped_events", [1])]:
        meta = orjson.loads(meta_path.read_bytes())
        meta[field] = value
        meta_path.write_bytes(orjson.dumps(meta))
        assert report_json(root, cache, only=["temporal_breakdown"]) == clean, field
        (notice,) = notes(capsys)
        assert "rank-0.json: cache entry damaged (meta.json: Expected" in notice, field
        assert orjson.loads(meta_path.read_bytes())[field] != value  # written again, whole


# -- 7. silent and noisy edges --------------------------------------------------------------


def test_link_loops_and_links_to_folders_are_listed_with_a_reason(tmp_path: Path) -> None:
    root = tmp_path / "t"
    write_good(root)
    (root / "folder").mkdir()
    (root / "loop.json").symlink_to("loop.json")
    (root / "a.json").symlink_to("b.json")
    (root / "b.json").symlink_to("a.json")
    (root / "dir.json").symlink_to("folder")
    results = {r.file.path.name: r for r in load_files(discover(root), Cache(enabled=False))}
    assert {n: (r.status, r.error) for n, r in results.items()} == {
        GOOD: ("loaded", None),
        "loop.json": ("not_trace", "a loop of symbolic links"),
        "a.json": ("not_trace", "a loop of symbolic links"),
        "b.json": ("not_trace", "a loop of symbolic links"),
        "dir.json": ("not_trace", "not a regular file (a folder)"),
    }


def test_an_occupancy_no_gpu_can_have_warns_nothing() -> None:
    """numpy's overflow warning went to stderr (reserved for one-line errors); an occupancy
    of 1e308 % is left out of the chart like a missing one."""
    trace = hf.good_trace(0)
    kernels = [e for e in trace["traceEvents"] if e.get("cat") == "kernel"]
    for e in kernels[:3]:
        e["args"]["est. achieved occupancy %"] = 1e308
    events = parse_bytes(orjson.dumps(trace)).frames["events"]
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        series = metric_series({0: events})
    assert series["occupancy_pct"].drop_nulls().max() <= 100


# -- acceptance: every hostile file beside a good rank ----------------------------------------


@pytest.fixture(scope="module")
def hostile_folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("hostile") / "t"
    hf.write_hostile_folder(root, expand_mb=3, members=2_000, shared=300)
    (root / "loop.json").symlink_to("loop.json")
    return root


#: What each hostile file gets, beside the good rank, with a 2 MB limit per file.
EXPECTED = {
    # over the byte limit, and read in pieces of it (`stream`)
    "expanding.json.gz": ("loaded", None, {}),
    "members.json.gz": ("loaded", None, {}),
    "shared-ids.json": (
        "loaded",
        None,
        {
            "correlation id of an earlier launch (id ignored)": 299,
            "External id of an earlier operator (id ignored)": 299,
        },
    ),
    "huge-step.json": ("loaded", None, {"ProfilerStep number out of range": 1}),
    f"rank{hf.HUGE_DIGITS}.json": ("loaded", None, {}),
    "bad-device.json": ("loaded", None, {"deviceProperties: numSms is not a count": 1}),
    "loop.json": ("not_trace", "a loop of symbolic links", {}),
}


def test_report_on_every_hostile_file_beside_a_good_rank(
    hostile_folder: Path, good_alone: dict, tmp_path: Path
) -> None:
    env = {**os.environ, "HTA_TUI_CACHE": str(tmp_path / "cache")}
    args = ["report", str(hostile_folder), "--json", "--max-file-mb", "2", "--file-timeout", "20"]
    done = subprocess.run(
        [sys.executable, "-m", "hta_tui", *args, "--only", "temporal_breakdown"],
        capture_output=True,
        env=env,
        timeout=120,  # a hang guard, not a measurement
        check=False,
    )
    assert done.returncode == 0, done.stderr.decode()
    assert done.stderr == b""  # no traceback, no warning
    doc = orjson.loads(done.stdout)
    files = {f["path"]: (f["status"], f["error"], f["dropped_events"]) for f in doc["files"]}
    assert files == {GOOD: ("loaded", None, {}), **EXPECTED}
    same_good_rows(doc, good_alone)


async def test_app_lists_every_hostile_file_with_its_reason(
    hostile_folder: Path, tmp_path: Path, monkeypatch
) -> None:
    monkeypatch.setenv("HTA_TUI_MAX_FILE_MB", "2")
    app = make_screen_app(hostile_folder, tmp_path)
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot, timeout=60)
        entries = {e.path.name: e for e in app.trace_set.entries.values()}
        for name, (status, error, dropped) in EXPECTED.items():
            assert (entries[name].status, entries[name].error) == (status, error), name
            assert entries[name].meta.get("dropped_events", {}) == dropped, name
        assert entries[GOOD].status == "loaded"
        table = app.screen.query_one("#files")
        shown = " ".join(str(c) for row in range(table.row_count) for c in table.get_row_at(row))
        assert "a loop of symbolic links" in shown
        assert app.trace_set.ranks()[:1] == [0]
        assert pl.Series(app.trace_set.ranks()).max() < 2**31


async def test_app_loads_every_trace_with_an_unwritable_cache(tmp_path: Path) -> None:
    """A cache path that is a file: every rank loads in the app, and one toast says why."""
    from hta_tui.app.app import HtaApp

    root = tmp_path / "t"
    write_good(root)
    (root / "rank-1.json").write_bytes(orjson.dumps(hf.good_trace(1)))
    where = tmp_path / "cache"
    where.write_text("not a folder")
    app = HtaApp(root, cache=Cache(where), watch=False, timings=False)
    app.export_dir = tmp_path / "exports"
    async with app.run_test(size=(100, 30), notifications=True) as pilot:
        await settle(pilot)
        assert {e.status for e in app.trace_set.entries.values()} == {"loaded"}
        assert app.trace_set.ranks() == [0, 1]
        await wait_until(
            pilot,
            lambda: any("cannot be written" in n.message for n in app._notifications),
            what="the notice",
        )
        toasts = [n for n in app._notifications if "cannot be written" in n.message]
        assert len(toasts) == 1


def test_a_long_chain_of_same_named_operators_folds_in_few_passes() -> None:
    """20,000 nested `aten::add`, each the only child of the one above (563 MB of one event
    repeated is such a file): one fold to the top, found in a few passes over the nodes
    (one link a pass took 50 s on 60,000 of them), counted by the lines run."""
    from hta_tui.analysis.op_tree import same_name_merges

    n = 20_000
    nodes = pl.DataFrame(
        {
            "pos": pl.Series(range(n), dtype=pl.UInt32),
            "parent": pl.Series([None, *range(n - 1)], dtype=pl.UInt32),
            "name": ["aten::add"] * n,
            "op_type": [True] * n,
        }
    )
    lines = [0]

    def count(frame, event, arg):
        if frame.f_code.co_name == "same_name_merges" and event == "line":
            lines[0] += 1
        return count

    sys.settrace(
        lambda frame, event, arg: count if frame.f_code.co_name == "same_name_merges" else None
    )
    try:
        merges = same_name_merges(nodes, node="pos", mergeable="op_type")
    finally:
        sys.settrace(None)
    assert merges["merged"].to_list() == [False] + [True] * (n - 1)
    assert set(merges["top"].to_list()) == {0}
    assert lines[0] < 200, f"{lines[0]:,} lines run"
