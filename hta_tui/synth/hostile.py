"""Traces whose names attack the terminal: every control character, escape sequences that set
the title, write the clipboard or draw links, bidi overrides and Rich markup, in every name a
view can show: kernel, operator, annotation, Python frame and nn.Module, thread and process
names, the GPU's name, process groups, the names memory events are charged to, file and
folder names. The app and the report must show all of it as text (issue 16);
`tests/test_hostile_names.py` renders every view of them.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from hta_tui.synth.files import make_trace, trace_file_name, write_trace
from hta_tui.synth.memory import MemoryOptions
from hta_tui.synth.sync_story import make_sync_story

#: OSC 0: set the window title
TITLE = "\x1b]0;PWNED\x07"
#: Rich / Textual markup: bold, a link, a click action.
MARKUP = "[b]M[/b][link=http://x]L[/link][@click=app.quit]Q[/]"
#: OSC 8 (hyperlink), OSC 52 (write the clipboard), then CSI: clear the screen, red.
ESCAPES = "\x1b]8;;http://x\x1b\\link\x1b]8;;\x1b\\\x1b]52;c;UFdORUQ=\x07\x1b[2J\x1b[31m"
#: Bidi embeddings, overrides, isolates and marks (they reorder what follows on screen).
BIDI = "".join(map(chr, (*range(0x202A, 0x202F), *range(0x2066, 0x206A), 0x200E, 0x200F, 0x61C)))
#: Every C0 control, DEL and every C1 control.
CONTROLS = "".join(map(chr, (*range(0x00, 0x20), 0x7F, *range(0x80, 0xA0))))
#: All of it, behind a plain tag; the title and markup first, so that a name cut to fit a
#: column still shows them.
PAYLOAD = f"evil{TITLE}{MARKUP}{ESCAPES}{BIDI}{CONTROLS}:"
#: The same in a path: a folder and a file name (a name holds no "/" or NUL, 255 bytes at most).
FOLDER_PAYLOAD = f"evil{TITLE}{MARKUP}{ESCAPES}".replace("/", "")
FILE_PAYLOAD = f"{BIDI}{CONTROLS}:".replace("\x00", "")
#: Name starts the analyses classify by (NCCL kernels and ops, HTA's kernel types, nn.Module
#: frames): the payload goes after them. Longest first.
_KEPT_STARTS = ("ncclDevKernel_", "ncclKernel_", "nn.Module: ", "nccl:", "Memcpy", "Memset")
#: A Python frame's file and line (`with_stack=True`): the payload goes after them.
_PY_FRAME = re.compile(r"^[^()]+\.py\(\d+\): ")
#: Event categories whose name a view shows.
_NAMED_CATS = (
    "kernel",
    "cpu_op",
    "user_annotation",
    "gpu_user_annotation",
    "gpu_memcpy",
    "gpu_memset",
    "python_function",
)
#: Args a view shows as a name (the process group of a collective).
_NAMED_ARGS = ("Process Group Name", "Process Group Description")


def _hostile(name: str, payload: str = PAYLOAD) -> str:
    if name.startswith("ProfilerStep#"):  # the analyses find steps by this name
        return name
    if name.endswith(")") and name.startswith("thread "):  # "thread 12 (pt_main_thread)":
        head, _, inner = name.partition("(")  # the timeline shows the name in brackets
        return f"{head}({payload}{inner}"
    frame = _PY_FRAME.match(name)  # "train.py(20): forward": analyses read the file part
    keep = frame.end() if frame else next((len(p) for p in _KEPT_STARTS if name.startswith(p)), 0)
    return f"{name[:keep]}{payload}{name[keep:]}"


def make_hostile(trace: dict[str, Any], payload: str = PAYLOAD) -> dict[str, Any]:
    """`trace` (changed in place) with `payload` in every name a view shows: events of
    `_NAMED_CATS`, thread and process names, process groups, the GPUs' names."""
    for ev in trace["traceEvents"]:
        args = ev.get("args")
        if ev.get("ph") == "X" and ev.get("cat") in _NAMED_CATS:
            ev["name"] = _hostile(ev["name"], payload)
        elif ev.get("ph") == "M" and ev.get("name") in ("thread_name", "process_name"):
            args = ev.setdefault("args", {})
            args["name"] = _hostile(str(args.get("name", "")), payload)
        if isinstance(args, dict):
            for key in _NAMED_ARGS:
                if key in args:
                    args[key] = f"{payload}{args[key]}"
    for device in trace.get("deviceProperties", []):
        device["name"] = f"{payload}{device['name']}"
    for pg in trace.get("distributedInfo", {}).get("pg_config", []):
        pg["pg_name"] = f"{payload}{pg['pg_name']}"
        pg["pg_desc"] = f"{payload}{pg['pg_desc']}"
    return trace


def hostile_trace(
    rank: int,
    *,
    world_size: int = 2,
    steps: int = 3,
    seed: int = 0,
    memory: bool = True,
    payload: str = PAYLOAD,
) -> dict:
    """`make_trace`'s rank (with GPU memory events unless `memory` is False) with `payload`
    in every name (`make_hostile`). Memory events are charged to operators by their names, so
    they are written before the names change."""
    options = MemoryOptions() if memory else None
    trace = make_trace(rank, world_size=world_size, steps=steps, seed=seed, memory=options)
    return make_hostile(trace, payload)


def hostile_story(
    rank: int, world_size: int, *, start_us: float | None = None, payload: str = PAYLOAD
) -> dict[str, Any]:
    """The sync story (`synth/sync_story.py`: syncs in Python call sites and nn.Modules, which
    the DDP simulation has none of) as rank `rank`, its names hostile; moved to begin at
    `start_us` (beside the other ranks: on one time axis with them)."""
    trace = make_sync_story()
    if start_us is not None:
        shift = start_us - min(e["ts"] for e in trace["traceEvents"] if "ts" in e)
        for ev in trace["traceEvents"]:
            if "ts" in ev:
                ev["ts"] += shift
    trace["distributedInfo"] = {"backend": "nccl", "rank": rank, "world_size": world_size}
    return make_hostile(trace, payload)


def write_hostile_dir(
    out_dir: str | Path,
    *,
    ranks: int = 2,
    steps: int = 3,
    seed: int = 0,
    story: bool = True,
    payload: str = PAYLOAD,
) -> list[Path]:
    """`ranks` hostile traces in a FOLDER_PAYLOAD folder of `out_dir`, FILE_PAYLOAD in front
    of each file name, and (`story`) the hostile sync story as one more rank; returns the
    paths, the story last."""
    out = Path(out_dir) / FOLDER_PAYLOAD
    out.mkdir(parents=True, exist_ok=True)
    paths = []
    start = None
    for rank in range(ranks):
        name = trace_file_name(rank, seed=seed)
        trace = hostile_trace(rank, world_size=ranks, steps=steps, seed=seed, payload=payload)
        start = min(e["ts"] for e in trace["traceEvents"] if "ts" in e)
        paths.append(write_trace(trace, out / f"{FILE_PAYLOAD}{name}"))
    if story:
        trace = hostile_story(ranks, ranks + 1, start_us=start, payload=payload)
        paths.append(write_trace(trace, out / f"{FILE_PAYLOAD}story-rank-{ranks}.json.gz"))
    return paths
