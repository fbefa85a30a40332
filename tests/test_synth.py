"""The synthetic trace generator: files, Kineto structure, GPU timing rules, sizing, determinism.

These traces stand in for real ones in the rest of the suite, so the properties the analyses
rely on (launch -> kernel links, per-stream ordering, NCCL overlap, the straggler) are checked
on the parsed frames, through the project's own parser.
"""

from __future__ import annotations

import gzip
import re
import subprocess
import sys
from pathlib import Path

import orjson
import polars as pl
import pytest

from hta_tui.synth import (
    COMPUTE_STREAM,
    NCCL_STREAM,
    make_trace,
    plan_size,
    trace_file_name,
    write_trace,
    write_trace_dir,
)
from hta_tui.synth import _main as synth_main
from hta_tui.trace.parse import ParsedTrace, parse_file

RANKS = 4
STEPS = 3
SLOW = 1
GPU_WORK = ("kernel", "memcpy", "memset")


@pytest.fixture(scope="module")
def trace_dir(tmp_path_factory: pytest.TempPathFactory) -> tuple[list[Path], list[ParsedTrace]]:
    out = tmp_path_factory.mktemp("synth")
    paths = write_trace_dir(out, ranks=RANKS, steps=STEPS, seed=7, slow_rank=SLOW)
    return paths, [parse_file(p) for p in paths]


def _events(parsed: ParsedTrace) -> pl.DataFrame:
    return parsed.frames["events"]


def _uncompressed_size(path: Path) -> int:
    size = 0
    with gzip.open(path, "rb") as f:
        while block := f.read(1 << 20):
            size += len(block)
    return size


def _is_nccl(name: pl.Expr) -> pl.Expr:
    return name.str.to_lowercase().str.contains("nccl")


# ---------------------------------------------------------------------------------------------
# files


def test_files_are_named_per_rank_and_carry_their_rank(trace_dir) -> None:
    paths, parsed = trace_dir
    assert len(paths) == RANKS
    for r, (path, pt) in enumerate(zip(paths, parsed, strict=True)):
        assert re.fullmatch(rf"rank-{r}\.[^/]+\.pt\.trace\.json\.gz", path.name), path.name
        assert path.read_bytes()[:2] == b"\x1f\x8b"
        assert pt.meta["rank_in_file"] == r
        dist = pt.meta["distributed_info"]
        assert dist["backend"] == "nccl" and dist["world_size"] == RANKS
        assert len(pt.meta["device_properties"]) == 8
        assert pt.meta["device_properties"][0]["numSms"] > 0
        assert isinstance(pt.meta["base_time_ns"], int)
        assert pt.meta["n_kernels"] > 0


def test_plain_json_when_not_gzipped(tmp_path: Path) -> None:
    paths = write_trace_dir(tmp_path, ranks=2, steps=1, gzip_files=False)
    assert [p.name.endswith(".pt.trace.json") for p in paths] == [True, True]
    assert paths[1].name == trace_file_name(1, seed=0, gzip_files=False)
    raw = orjson.loads(paths[0].read_bytes())
    assert list(raw) == [
        "schemaVersion",
        "deviceProperties",
        "cupti_version",
        "cuda_runtime_version",
        "cuda_driver_version",
        "record_shapes",
        "distributedInfo",
        "traceEvents",
        "traceName",
        "displayTimeUnit",
        "baseTimeNanoseconds",
    ]
    assert raw["distributedInfo"] | {"pg_config": None} == {
        "backend": "nccl",
        "rank": 0,
        "world_size": 2,
        "pg_count": 1,
        "pg_config": None,
        "nccl_version": raw["distributedInfo"]["nccl_version"],
    }


def test_kineto_event_dialect() -> None:
    trace = make_trace(0, world_size=2, steps=2, seed=3)
    evs = trace["traceEvents"]
    cats = {e.get("cat") for e in evs if e["ph"] == "X"}
    assert {
        "user_annotation",
        "cpu_op",
        "cuda_runtime",
        "kernel",
        "gpu_memcpy",
        "gpu_memset",
        "cuda_sync",
        "gpu_user_annotation",
        "python_function",
        "Trace",
    } <= cats
    names = {e["name"] for e in evs if "name" in e}
    assert {
        "Iteration Start: PyTorch Profiler",
        "Record Window End",
        "PyTorch Profiler (0)",
    } <= names
    meta = {(e["name"], str(e["pid"])) for e in evs if e["ph"] == "M"}
    assert ("process_labels", "0") in meta and ("thread_name", "0") in meta
    sync_kinds = {e["args"]["cuda_sync_kind"] for e in evs if e.get("cat") == "cuda_sync"}
    assert {"Stream Sync", "Event Sync", "Stream Wait Event"} <= sync_kinds
    runtime = {e["name"] for e in evs if e.get("cat") == "cuda_runtime"}
    assert {"cudaLaunchKernel", "cudaMemcpyAsync", "cudaMemsetAsync", "cudaStreamSynchronize"} <= (
        runtime
    )
    kernels = {e["name"] for e in evs if e.get("cat") == "kernel"}
    assert any(n.startswith("ncclDevKernel_AllReduce_Sum_f32_RING_LL(") for n in kernels)
    assert any(n.startswith("ncclKernel_AllReduce_RING_LL_Sum_float(") for n in kernels)
    ops = {e["name"] for e in evs if e.get("cat") == "cpu_op"}
    assert {"aten::linear", "aten::addmm", "aten::mm", "aten::add_", "aten::copy_"} <= ops
    assert "record_param_comms" in ops
    memcpy = {e["name"] for e in evs if e.get("cat") == "gpu_memcpy"}
    assert {"Memcpy HtoD (Pinned -> Device)", "Memcpy DtoD (Device -> Device)"} <= memcpy
    k = next(e for e in evs if e.get("cat") == "kernel")
    for key in (
        "External id",
        "queued",
        "device",
        "context",
        "stream",
        "correlation",
        "registers per thread",
        "shared memory",
        "blocks per SM",
        "warps per SM",
        "grid",
        "block",
        "est. achieved occupancy %",
    ):
        assert key in k["args"], key
    assert k["pid"] == 0 and k["tid"] == k["args"]["stream"]
    op = next(e for e in evs if e.get("name") == "aten::addmm")
    assert {"External id", "Record function id", "Sequence number", "Input Dims", "Input type"} <= (
        set(op["args"])
    )


def test_timestamps_are_fractional_microseconds_with_ns_precision() -> None:
    trace = make_trace(0, world_size=2, steps=1, seed=1)
    ts = [e["ts"] for e in trace["traceEvents"] if e["ph"] == "X" and e.get("cat") == "kernel"]
    assert any(t != int(t) for t in ts)
    for t in ts:
        text = repr(t)
        assert len(text.split(".")[1]) <= 3, text


# ---------------------------------------------------------------------------------------------
# GPU timing rules


def test_every_gpu_op_has_its_launch(trace_dir) -> None:
    for pt in trace_dir[1]:
        ev = _events(pt)
        gpu = ev.filter(pl.col("kind").is_in(GPU_WORK))
        rt = ev.filter(pl.col("kind") == "runtime")
        assert rt["correlation"].n_unique() == rt.height, "correlation ids must be unique"
        j = gpu.join(
            rt.select(
                "correlation",
                pl.col("ts").alias("rts"),
                pl.col("dur").alias("rdur"),
                pl.col("external_id").alias("rext"),
            ),
            on="correlation",
            how="left",
        )
        assert j["rts"].null_count() == 0
        assert (j["external_id"] == j["rext"]).all()
        assert (j["ts"] >= j["rts"]).all()
        kernels = j.filter(pl.col("kind") == "kernel")
        delay = kernels["ts"] - (kernels["rts"] + kernels["rdur"])
        assert delay.min() >= 1_000  # >= 1 us after the launch call returns
        assert kernels["device"].unique().to_list() == [pt.meta["rank_in_file"] % 8]


def test_flows_link_launch_to_kernel(trace_dir) -> None:
    ev = _events(trace_dir[1][0])
    flows = trace_dir[1][0].frames["flows"].filter(pl.col("cat") == "ac2g")
    rt = ev.filter(pl.col("kind") == "runtime")
    k = ev.filter(pl.col("kind") == "kernel")
    s = flows.filter(pl.col("ph") == "s").join(rt, left_on="id", right_on="correlation")
    f = flows.filter(pl.col("ph") == "f").join(k, left_on="id", right_on="correlation")
    assert f.height == k.height
    assert (f["ts"] == f["ts_right"]).all() and (f["tid"] == f["stream"]).all()
    assert (s["ts"] == s["ts_right"]).all() and (s["tid"] == s["tid_right"]).all()
    assert s.height >= k.height


def test_streams_never_overlap(trace_dir) -> None:
    for pt in trace_dir[1]:
        gpu = _events(pt).filter(pl.col("kind").is_in(GPU_WORK)).sort("ts")
        streams = set(gpu["stream"].unique().to_list())
        assert len(streams) >= 3 and {COMPUTE_STREAM, NCCL_STREAM} <= streams
        bad = (
            gpu.with_columns(prev_end=(pl.col("ts") + pl.col("dur")).shift(1).over("stream"))
            .filter(pl.col("ts") < pl.col("prev_end"))
            .height
        )
        assert bad == 0


def test_nccl_overlaps_compute(trace_dir) -> None:
    k = _events(trace_dir[1][0]).filter(pl.col("kind") == "kernel")
    nccl = k.filter(_is_nccl(pl.col("name")))
    comp = k.filter(~_is_nccl(pl.col("name")))
    assert (nccl["stream"] == NCCL_STREAM).all()
    assert (comp["stream"] == COMPUTE_STREAM).all()
    pairs = nccl.join(comp, how="cross").filter(
        (pl.col("ts") < pl.col("ts_right") + pl.col("dur_right"))
        & (pl.col("ts_right") < pl.col("ts") + pl.col("dur"))
    )
    assert pairs["correlation"].n_unique() >= STEPS  # at least one per step


def test_idle_time_has_every_hta_category(trace_dir) -> None:
    """HTA's rule: host wait if launched after the stream drained, else kernel wait if < 30 us."""
    ev = _events(trace_dir[1][0])
    rt = ev.filter(pl.col("kind") == "runtime").select("correlation", pl.col("ts").alias("rts"))
    k = (
        ev.filter(pl.col("kind").is_in(GPU_WORK) & (pl.col("stream") == COMPUTE_STREAM))
        .join(rt, on="correlation")
        .sort("ts")
        .with_columns(prev_end=(pl.col("ts") + pl.col("dur")).shift(1))
        .with_columns(idle=pl.col("ts") - pl.col("prev_end"))
        .filter(pl.col("idle") > 0)
    )
    cat = (
        pl.when(pl.col("rts") >= pl.col("prev_end"))
        .then(pl.lit("host_wait"))
        .when(pl.col("idle") < 30_000)
        .then(pl.lit("kernel_wait"))
        .otherwise(pl.lit("other"))
    )
    found = set(k.select(cat.alias("c"))["c"].to_list())
    assert found == {"host_wait", "kernel_wait", "other"}
    assert (k["idle"] < 30_000).any() and (k["idle"] > 1_000_000).any()


def test_short_kernels_and_launch_outliers_occur() -> None:
    ev_dicts = make_trace(0, world_size=2, steps=4, seed=11)["traceEvents"]
    kernels = [e for e in ev_dicts if e.get("cat") == "kernel"]
    assert sum(e["dur"] < 5 for e in kernels) >= 4
    launches = {e["args"]["correlation"]: e for e in ev_dicts if e.get("cat") == "cuda_runtime"}
    delays = [e["ts"] - launches[e["args"]["correlation"]]["ts"] for e in kernels]
    assert max(delays) > 100 and min(delays) < 20


def test_memcpy_bandwidth_matches_bytes_and_duration(trace_dir) -> None:
    ev = _events(trace_dir[1][0]).filter(pl.col("kind").is_in(["memcpy", "memset"]))
    assert ev.height > 0 and (ev["bytes"] > 0).all()
    expected = ev["bytes"] / ev["dur"]
    assert ((ev["bandwidth"] - expected).abs() / expected < 1e-6).all()


def test_cpu_events_nest_per_thread(trace_dir) -> None:
    ev = _events(trace_dir[1][2]).filter(
        pl.col("kind").is_in(["cpu_op", "annotation", "runtime", "python"])
    )
    threads = ev["tid"].unique().to_list()
    assert len(threads) >= 2  # main + autograd thread
    for tid in threads:
        rows = ev.filter(pl.col("tid") == tid).sort(["ts", "dur"], descending=[False, True])
        stack: list[int] = []
        for ts, dur in zip(rows["ts"].to_list(), rows["dur"].to_list(), strict=True):
            while stack and stack[-1] <= ts:
                stack.pop()
            assert not stack or ts + dur <= stack[-1], f"partial overlap on thread {tid}"
            stack.append(ts + dur)


def test_profiler_steps_and_their_content(trace_dir) -> None:
    for pt in trace_dir[1]:
        ev = _events(pt)
        steps = ev.filter(pl.col("name").str.starts_with("ProfilerStep#")).sort("ts")
        assert steps.height == STEPS
        numbers = [int(n.split("#")[1]) for n in steps["name"].to_list()]
        assert numbers == list(range(numbers[0], numbers[0] + STEPS))
        assert steps["tid"].n_unique() == 1 and steps["kind"].unique().to_list() == ["annotation"]
        first, last = steps["ts"][0], steps["ts"][-1] + steps["dur"][-1]
        ops = ev.filter(pl.col("kind").is_in(["cpu_op", "runtime"]))
        assert ops["ts"].min() >= first and (ops["ts"] + ops["dur"]).max() <= last
        for name in ("## forward ##", "## backward ##", "## optimizer ##"):
            for kind in ("annotation", "gpu_annotation"):
                n = ev.filter((pl.col("name") == name) & (pl.col("kind") == kind)).height
                assert n == STEPS, (name, kind)


def test_kernels_per_step_is_honoured() -> None:
    for kps in (60, 200):
        trace = make_trace(0, world_size=2, steps=2, seed=0, kernels_per_step=kps)
        n = sum(e.get("cat") == "kernel" for e in trace["traceEvents"])
        assert abs(n / 2 - kps) <= 0.1 * kps


# ---------------------------------------------------------------------------------------------
# ranks


def test_slow_rank_is_a_straggler(trace_dir) -> None:
    totals, step_time = [], []
    for pt in trace_dir[1]:
        ev = _events(pt)
        totals.append(ev.filter(pl.col("kind") == "kernel")["dur"].sum())
        step_time.append(ev.filter(pl.col("name").str.starts_with("ProfilerStep#"))["dur"].sum())
    others = [t for r, t in enumerate(totals) if r != SLOW]
    assert totals[SLOW] > 1.15 * max(others)
    assert step_time[SLOW] > max(s for r, s in enumerate(step_time) if r != SLOW)
    assert max(others) / min(others) < 1.1  # the others differ only a little ...
    assert len(set(others)) == len(others)  # ... but do differ


def test_ranks_run_the_same_collectives(trace_dir) -> None:
    seqs = []
    for pt in trace_dir[1]:
        k = _events(pt).filter((pl.col("kind") == "kernel") & _is_nccl(pl.col("name")))
        seqs.append(k.sort("ts")["name"].to_list())
    assert seqs[0] and all(s == seqs[0] for s in seqs)


# ---------------------------------------------------------------------------------------------
# determinism, sizes, API paths


def test_deterministic_bytes(tmp_path: Path) -> None:
    a = write_trace_dir(tmp_path / "a", ranks=2, steps=2, seed=5)
    b = write_trace_dir(tmp_path / "b", ranks=2, steps=2, seed=5)
    c = write_trace_dir(tmp_path / "c", ranks=2, steps=2, seed=6)
    for pa, pb, pc in zip(a, b, c, strict=True):
        assert pa.name == pb.name
        assert pa.read_bytes() == pb.read_bytes()
        assert gzip.decompress(pa.read_bytes()) != gzip.decompress(pc.read_bytes())


def test_make_trace_equals_streamed_file(tmp_path: Path) -> None:
    [streamed] = write_trace_dir(tmp_path / "s", ranks=1, steps=2, seed=4, slow_rank=None)
    trace = make_trace(0, world_size=1, steps=2, seed=4)
    out = write_trace(trace, tmp_path / "t.pt.trace.json.gz")
    assert gzip.decompress(out.read_bytes()) == gzip.decompress(streamed.read_bytes())
    plain = write_trace(trace, tmp_path / "t.json")
    assert plain.read_bytes() == gzip.decompress(streamed.read_bytes())


def test_make_trace_can_be_tweaked_and_written(tmp_path: Path) -> None:
    trace = make_trace(0, world_size=2, steps=1, seed=0)
    trace["traceEvents"] = [e for e in trace["traceEvents"] if e.get("cat") != "kernel"]
    pt = parse_file(write_trace(trace, tmp_path / "no_kernels.json.gz"))
    assert pt.meta["n_kernels"] == 0 and pt.meta["rank_in_file"] == 0


@pytest.mark.parametrize(("target_mb", "steps"), [(2.0, 4), (0.6, 2)])
def test_target_mb_sizes_files(tmp_path: Path, target_mb: float, steps: int) -> None:
    paths = write_trace_dir(tmp_path, ranks=2, steps=steps, target_mb=target_mb, seed=2)
    for p in paths:
        size = _uncompressed_size(p)
        assert abs(size - target_mb * 1e6) <= 0.1 * target_mb * 1e6, size
        pt = parse_file(p)
        n_steps = _events(pt).filter(pl.col("name").str.starts_with("ProfilerStep#")).height
        assert n_steps == steps


def test_plan_size_adds_steps_only_for_huge_targets() -> None:
    assert plan_size(1, world_size=2, steps=3, seed=0)[0] == 3
    steps, blocks = plan_size(5_000, world_size=2, steps=1, seed=0)
    assert steps > 1 and blocks > 100


def test_bad_arguments_raise() -> None:
    with pytest.raises(ValueError):
        make_trace(4, world_size=4, steps=1, seed=0)
    with pytest.raises(ValueError):
        make_trace(0, world_size=1, steps=0, seed=0)
    with pytest.raises(ValueError):
        make_trace(0, world_size=1, steps=1, seed=0, nccl_style="bogus")


def test_cli(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert synth_main([str(tmp_path), "--ranks", "2", "--steps", "1", "--slow-rank", "-1"]) == 0
    printed = capsys.readouterr().out.split()
    assert sorted(printed) == sorted(str(p) for p in tmp_path.iterdir())
    assert len(printed) == 2


@pytest.mark.heavy
def test_a_rank_is_sized_right(tmp_path: Path) -> None:
    """A rank of the size asked for, end to end through the CLI (the benchmarks ask for
    100 MB; a quarter of it here, the sizing being per step; speed and memory: bench/)."""
    cmd = [sys.executable, "-m", "hta_tui.synth", str(tmp_path), "--ranks", "1"]
    subprocess.run([*cmd, "--target-mb", "25"], check=True, capture_output=True)
    [path] = list(tmp_path.iterdir())
    size = _uncompressed_size(path)
    assert abs(size - 25e6) <= 2.5e6


def test_parity_shapes_are_deterministic_and_written_as_told(tmp_path: Path) -> None:
    """`synth.shapes`: the same bytes every time; ROCm hip calls carry the text stream
    "0x0" and steps on both sides; timestamps are exact three-decimal microseconds."""
    from hta_tui.synth.shapes import SHAPES, write_shape

    for name in SHAPES:
        a = [p.read_bytes() for p in write_shape(name, tmp_path / "a" / name)]
        b = [p.read_bytes() for p in write_shape(name, tmp_path / "b" / name)]
        assert a == b
    (rocm,) = write_shape("rocm", tmp_path / "rocm")
    events = orjson.loads(rocm.read_bytes())["traceEvents"]
    hip = [e for e in events if e["cat"] == "cuda_runtime"]
    assert hip and all(e["args"]["stream"] == "0x0" and e["name"].startswith("hip") for e in hip)
    steps = {(e["cat"], e["name"]) for e in events if e["name"].startswith("ProfilerStep")}
    assert steps == {
        (cat, f"ProfilerStep#{n}")
        for cat in ("user_annotation", "gpu_user_annotation")
        for n in (1, 2)
    }
    (epoch, _) = write_shape("epoch_ns", tmp_path / "epoch")
    assert b'"ts":1700000000000' in epoch.read_bytes()
