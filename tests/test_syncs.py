"""The sync finder: every host-device sync of real traces, counted against the raw JSON, and
backward ops traced to the forward op (and module) that created them."""

from __future__ import annotations

import gzip
import json
import re
from pathlib import Path

import polars as pl
import pytest

from hta_tui.analysis.backward_origin import backward_origins
from hta_tui.analysis.host_context import context
from hta_tui.analysis.sync_summary import (
    cpu_only_ranks,
    step_time,
    sync_summary,
    sync_verdict,
)
from hta_tui.analysis.syncs import rank_syncs, syncs
from hta_tui.synth import sync_story
from hta_tui.synth.files import write_trace
from hta_tui.trace.parse import parse_bytes, read_bytes
from tests.shared_sets import parsed

SYNC_CASES = [
    "critical_path/alexnet",
    "negative_queue_length_values_check",
    "trace_diff/control",
    "trace_diff/test",
    "tracelens_mi300_ddp_resnet18",  # HIP: hipDeviceSynchronize, hipMemcpyWithStream
    "tracelens_h100_bert_memory",
]
VIT = "pytorch_cpu_vit_memory/worker0.1795489276434075715.pt.trace.json.gz"

# Written from the CUDA / HIP / driver API docs, not from the analysis's tables.
_BLOCKING = re.compile(
    r"^(cuda|hip)(Stream|Device|Thread|Ctx|Event)Synchronize$|^cu(Stream|Ctx|Event)Synchronize$"
    r"|^(cuda|hip|cu)StreamWaitEvent$|^(cuda|hip)Memcpy(2D|3D|DtoH|HtoD|DtoD|FromSymbol|ToSymbol|WithStream)?$"
    r"|^cuMemcpy(DtoH|HtoD|DtoD|2D|3D)?$"
)


def _raw_events(path: Path) -> list[dict]:
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rt") as f:
        return [e for e in json.load(f)["traceEvents"] if e.get("ph") == "X"]


def _raw_syncs(events: list[dict]) -> tuple[set[int], set[int]]:
    """(correlations of the host calls that sync, correlations of cuda_sync events), read
    straight from the JSON."""
    host_cats = {"cuda_runtime", "cuda_driver", "runtime"}
    calls = {}
    for e in events:
        if e.get("cat") in host_cats:
            name = re.sub(r"(_v\d+)?(_ptsz|_ptds|_spt)?$", "", e["name"])
            calls[e["args"]["correlation"]] = name
    pageable = {
        e["args"]["correlation"]
        for e in events
        if e.get("cat") == "gpu_memcpy" and "DtoH" in e["name"] and "Pageable" in e["name"]
    }
    host = {c for c, n in calls.items() if _BLOCKING.match(n)}
    host |= {c for c, n in calls.items() if "Memcpy" in n and "Async" in n and c in pageable}
    gpu = {e["args"]["correlation"] for e in events if e.get("cat") == "cuda_sync"}
    return host, gpu


def _frames(path: Path) -> dict[str, pl.DataFrame]:
    return parsed(path).frames


@pytest.mark.shared
@pytest.mark.parametrize("case", SYNC_CASES)
def test_every_sync_event_is_listed(shared: Path, case: str) -> None:
    files = sorted((shared / "traces" / case).glob("*.json*"))
    assert files
    for path in files:
        raw = _raw_events(path)
        host, gpu = _raw_syncs(raw)
        frames = _frames(path)
        table = rank_syncs(frames["events"], frames["flows"])
        listed = set(table["correlation"].to_list())
        assert host, f"{path.name}: the trace has syncs"
        # Every sync call and every cuda_sync event has a row, and nothing else does.
        assert host <= listed
        assert gpu <= listed
        assert table.height == len(host | gpu)
        assert table["idx"].n_unique() == table.height
        # Each row is blocked for its host call's duration, read from the JSON.
        durs = {
            e["args"]["correlation"]: e["dur"]
            for e in raw
            if e.get("cat") == "cuda_runtime" and e["args"].get("correlation") in host
        }
        blocking = table.filter(pl.col("blocks_host"))
        for corr, blocked in blocking.select("correlation", "blocked (us)").iter_rows():
            assert blocked == pytest.approx(durs[corr], abs=1e-3)


@pytest.mark.shared
def test_alexnet_stream_syncs_wait_for_the_copy_on_their_stream(shared: Path) -> None:
    (path,) = (shared / "traces" / "critical_path" / "alexnet").glob("*.json*")
    raw = _raw_events(path)
    frames = _frames(path)
    table = rank_syncs(frames["events"], frames["flows"])
    # The stream of each Stream Sync, from its cuda_sync event in the JSON.
    streams = {
        e["args"]["correlation"]: e["args"]["stream"] for e in raw if e["name"] == "Stream Sync"
    }
    got = table.filter(pl.col("sync_type") == "stream_sync")
    assert got.height == len(streams) == 16
    assert dict(got.select("correlation", "stream").iter_rows()) == streams
    # cudaStreamWaitEvent queues a wait on the GPU: listed, never counted as host time.
    waits = table.filter(pl.col("sync_type") == "stream_wait_event")
    assert waits.height == sum(e["name"] == "cudaStreamWaitEvent" for e in raw)
    assert not waits["blocks_host"].any()
    assert (waits["blocked (us)"] == 0).all()
    # A sync that blocked long enough saw GPU work in flight on its stream.
    long = got.filter(pl.col("blocked (us)") > 50)
    assert long.height > 0
    assert (long["gpu_ops_in_flight"] > 0).all()


@pytest.mark.shared
def test_pageable_copies_are_syncs_with_their_operator(shared: Path) -> None:
    path = shared / "traces" / "negative_queue_length_values_check" / "rank0.json.gz"
    frames = _frames(path)
    table = rank_syncs(frames["events"], frames["flows"])
    copies = table.filter(pl.col("sync_type") == "pageable_copy")
    raw = _raw_events(path)
    assert copies.height == sum("DtoH (Device -> Pageable)" in e["name"] for e in raw)
    # Each copy is inside the aten op that asked for it (every one has an enclosing op here).
    assert copies["operator"].null_count() == 0
    assert copies["op_stack"].str.contains("aten::").all()


def _vit(shared: Path) -> dict[str, pl.DataFrame]:
    return _frames(shared / "traces" / VIT)


def _without_hooks(events: pl.DataFrame) -> pl.DataFrame:
    return events.filter(~pl.col("name").str.contains("backward of "))


@pytest.mark.shared
@pytest.mark.parametrize("use_flows", [True, False])
def test_gather_backward_maps_to_gather_in_patchdrop(shared: Path, use_flows: bool) -> None:
    frames = _vit(shared)
    events = _without_hooks(frames["events"])
    assert events.height < frames["events"].height  # the trace had hook markers
    origins = backward_origins(events, frames["flows"] if use_flows else None)
    names = events.select("idx", "name")
    gather_bwd = origins.join(names.rename({"idx": "bwd"}), on="bwd").filter(
        pl.col("name") == "GatherBackward0"
    )
    assert gather_bwd.height == 2  # one per training step in this span
    assert (gather_bwd["via"] == ("flow" if use_flows else "seq")).all()
    fwd = gather_bwd.join(names.rename({"idx": "fwd", "name": "fwd_name"}), on="fwd")
    assert fwd["fwd_name"].to_list() == ["aten::gather", "aten::gather"]
    assert gather_bwd["hook_module"].null_count() == 2  # hooks hidden, not needed
    queries = events.join(fwd.select(pl.col("fwd").alias("idx")), on="idx")
    ctx = context(events, queries)
    assert ctx["module"].to_list() == ["PatchDrop_0", "PatchDrop_0"]
    assert ctx["module_path"].to_list() == ["TinyViT_0/PatchDrop_0"] * 2
    assert ctx["call_site"].str.starts_with("make_cpu_traces.py(").all()


@pytest.mark.shared
def test_flows_and_hook_markers_agree_when_present(shared: Path) -> None:
    frames = _vit(shared)
    events = frames["events"]
    origins = backward_origins(events, frames["flows"])
    # The raw trace: fwdbwd flows, each "s" on a forward op and "f" on a backward op.
    with gzip.open(shared / "traces" / VIT, "rt") as f:
        raw = json.load(f)["traceEvents"]
    n_flows = len({e["id"] for e in raw if e.get("cat") == "fwdbwd"})
    assert (origins["via"] == "flow").sum() == n_flows
    gather = origins.join(events.select(pl.col("idx").alias("bwd"), "name"), on="bwd").filter(
        pl.col("name") == "GatherBackward0"
    )
    assert gather["hook_module"].to_list() == ["PatchDrop", "PatchDrop"]


def test_summary_and_verdict_rank_the_costliest_call_site() -> None:
    table = pl.DataFrame(
        {
            "rank": [0, 0, 0, 1],
            "phase": ["forward", "forward", "backward", "forward"],
            "module": ["Loss_0", "Loss_0", "PatchDrop_0", None],
            "operator": ["aten::item", "aten::item", "aten::copy_", None],
            "call_site": ["loss.py(88): forward"] * 2 + ["model.py(20): forward", None],
            "call": ["cudaStreamSynchronize"] * 4,
            "blocked (us)": [300.0, 100.0, 250.0, 0.0],
        }
    )
    steps = pl.DataFrame(
        {"rank": [0, 1], "steps": [2, 1], "step_ns": [1_000_000, 500_000]},
        schema={"rank": pl.Int64, "steps": pl.UInt32, "step_ns": pl.Int64},
    )
    summary = sync_summary(table, steps)
    top = summary.row(0, named=True)
    assert (top["operator"], top["count"], top["blocked (us)"]) == ("aten::item", 2, 400.0)
    assert top["per step (us)"] == 200.0
    assert top["step_pctg"] == pytest.approx(40.0)
    verdict = sync_verdict(summary, steps)
    line = verdict.filter(pl.col("rank") == 0)["verdict"].item()
    assert line == (
        "65.0% of step time is the host waiting in 2 call sites; "
        "the largest: aten::item in loss.py(88): forward, forward"
    )
    assert verdict.filter(pl.col("rank") == 1)["verdict"].item().startswith("the host never")


@pytest.mark.shared
def test_syncs_of_a_cpu_only_trace_are_empty_not_an_error(shared: Path) -> None:
    frames = _vit(shared)
    table = syncs({0: frames["events"]}, {0: frames["flows"]})
    assert table.is_empty()
    steps = step_time({0: frames["events"]})
    verdict = sync_verdict(sync_summary(table, steps), steps, cpu_only_ranks({0: frames["events"]}))
    assert verdict["verdict"].to_list() == ["no GPU to wait for (a CPU-only trace)"]


@pytest.mark.parametrize("hook_markers", [False, True])
def test_the_generated_story_finds_the_module_behind_the_backward_sync(
    tmp_path: Path, hook_markers: bool
) -> None:

    steps = 3
    path = write_trace(
        sync_story.make_sync_story(steps=steps, hook_markers=hook_markers), tmp_path / "t.json"
    )
    frames = _frames(path)
    table = rank_syncs(frames["events"], frames["flows"])
    bwd = table.filter(pl.col("phase") == "backward")
    assert bwd.height == steps
    assert set(bwd["module"]) == {sync_story.BACKWARD_SYNC_MODULE}
    assert set(bwd["call_site"]) == {sync_story.BACKWARD_SYNC_CALL_SITE}
    assert set(bwd["forward_op"]) == {"aten::gather"}
    assert set(bwd["backward_op"]) == {"GatherBackward0"}
    assert set(bwd["operator"]) == {"aten::copy_"}
    assert set(bwd["waited_for"]) == {"gather_backward_kernel"}
    fwd = table.filter((pl.col("phase") == "forward") & (pl.col("sync_type") == "stream_sync"))
    assert set(fwd["module"]) == {sync_story.FORWARD_SYNC_MODULE}
    assert set(fwd["call_site"]) == {sync_story.FORWARD_SYNC_CALL_SITE}
    hooks = bwd["hook_module"].to_list()
    assert hooks == (["PatchDrop"] * steps if hook_markers else [None] * steps)
    # The summary's costliest row is the backward sync (460 us a step against 300 + 4).
    steps_t = step_time({0: frames["events"]})
    summary = sync_summary(table.with_columns(pl.lit(0, pl.Int64).alias("rank")), steps_t)
    top = summary.row(0, named=True)
    assert (top["module"], top["phase"], top["per step (us)"]) == ("PatchDrop_0", "backward", 460)


def test_call_site_is_the_deepest_user_frame() -> None:
    """Issue 24, point 11: user code called through a library (a forward run by
    torch/nn/modules/module.py) and a helper of the user's below it: the sync is placed in
    the deepest user frame, the helper, whose line is the helper's first line."""

    def x(cat: str, name: str, ts: float, dur: float, **args: object) -> dict[str, object]:
        pid, tid = (0, 7) if cat in ("gpu_memcpy", "kernel") else (1, 1)
        return {"ph": "X", "cat": cat, "name": name, "pid": pid, "tid": tid, "ts": ts,
                "dur": dur, "args": args}  # fmt: skip

    frames = [
        "train.py(10): main",
        "torch/nn/modules/module.py(1750): _call_impl",
        "model.py(20): forward",
        "model.py(40): to_scalar",
        "torch/_tensor.py(30): item",
    ]
    events = [x("user_annotation", "ProfilerStep#1", 0, 1000)]
    for i, name in enumerate(frames):
        ids = {"Python id": i + 1, "Python parent id": i or None}
        events.append(x("python_function", name, 1 + i, 998 - 2 * i, **ids))
    gpu = {"device": 0, "stream": 7}
    events += [
        x("cpu_op", "aten::item", 20, 600),
        x("cpu_op", "aten::_local_scalar_dense", 21, 590),
        x("cuda_runtime", "cudaLaunchKernel", 12, 3, correlation=4),
        x("kernel", "k", 16, 390, correlation=4, **gpu),
        x("cuda_runtime", "cudaMemcpyAsync", 22, 500, correlation=5),
        x("gpu_memcpy", "Memcpy DtoH (Device -> Pageable)", 410, 5, correlation=5, **gpu),
    ]
    found = syncs({0: parse_bytes(json.dumps({"traceEvents": events}).encode()).frames["events"]})
    assert found["call_site"].to_list() == ["model.py(40): to_scalar"]


def test_backward_sync_in_user_code_keeps_its_own_call_site(tmp_path: Path) -> None:
    """Issue 24, point 11: a backward sync whose stack holds user code (here a custom
    autograd Function's backward frame around the copy) is placed there, the deeper frame;
    its module and forward op are still the forward op's."""
    trace = sync_story.make_sync_story(steps=1)
    events = trace["traceEvents"]
    (to,) = [e for e in events if e.get("name") == "aten::to" and e["tid"] == sync_story.BWD_TID]
    site = "my_ops.py(12): backward"
    frame = {"Python id": 999, "Python parent id": None}
    events.append(
        {"ph": "X", "cat": "python_function", "name": site, "pid": to["pid"], "tid": to["tid"],
         "ts": to["ts"] - 2, "dur": to["dur"] + 3, "args": frame}
    )  # fmt: skip
    path = write_trace(trace, tmp_path / "rank-0.json")
    found = rank_syncs(parse_bytes(read_bytes(path)).frames["events"])
    bwd = found.filter(pl.col("phase") == "backward")
    assert bwd.height == 1
    row = bwd.row(0, named=True)
    assert row["call_site"] == site
    assert row["module"] == sync_story.BACKWARD_SYNC_MODULE
    assert row["forward_op"] == "aten::gather"
    fwd = found.filter(pl.col("phase") == "forward")
    assert set(fwd["call_site"]) == {sync_story.FORWARD_SYNC_CALL_SITE}
