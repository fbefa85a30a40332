"""Traces whose names attack the terminal: every control character, escape sequences that set
the title, write the clipboard or draw links, bidi overrides and Rich markup, in kernel,
operator, annotation, thread and file names. The app and the report must show all of it as
text (issue 16); `tests/test_hostile_names.py` renders every view of them.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from hta_tui.synth.files import make_trace, trace_file_name, write_trace

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
#: Name starts the analyses classify by (HTA's kernel types): the payload goes after them.
_KEPT_STARTS = ("nccl", "Memcpy", "Memset")


def _hostile(name: str) -> str:
    if name.startswith("ProfilerStep#"):  # the analyses find steps by this name
        return name
    keep = next((len(p) for p in _KEPT_STARTS if name.startswith(p)), 0)
    return f"{name[:keep]}{PAYLOAD}{name[keep:]}"


def hostile_trace(rank: int, *, world_size: int = 2, steps: int = 3, seed: int = 0) -> dict:
    """`make_trace`'s rank with PAYLOAD in front of every kernel, operator, annotation,
    thread and process name."""
    trace = make_trace(rank, world_size=world_size, steps=steps, seed=seed)
    for ev in trace["traceEvents"]:
        if ev.get("ph") == "X" and ev.get("cat") in (
            "kernel",
            "cpu_op",
            "user_annotation",
            "gpu_user_annotation",
            "gpu_memcpy",
            "gpu_memset",
        ):
            ev["name"] = _hostile(ev["name"])
        elif ev.get("ph") == "M" and ev.get("name") in ("thread_name", "process_name"):
            args: dict[str, Any] = ev.setdefault("args", {})
            args["name"] = _hostile(str(args.get("name", "")))
    return trace


def write_hostile_dir(
    out_dir: str | Path, *, ranks: int = 2, steps: int = 3, seed: int = 0
) -> list[Path]:
    """`ranks` hostile traces in a FOLDER_PAYLOAD folder of `out_dir`, FILE_PAYLOAD in front
    of each file name; returns the paths."""
    out = Path(out_dir) / FOLDER_PAYLOAD
    out.mkdir(parents=True, exist_ok=True)
    paths = []
    for rank in range(ranks):
        name = trace_file_name(rank, seed=seed)
        trace = hostile_trace(rank, world_size=ranks, steps=steps, seed=seed)
        paths.append(write_trace(trace, out / f"{FILE_PAYLOAD}{name}"))
    return paths
