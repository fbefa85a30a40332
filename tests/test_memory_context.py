"""The memory events' Python context (`memory_context.python_context`): each allocation's
innermost nn.Module and its STACK_DEPTH innermost other Python frames, innermost first, on
its own thread only. Frames written by hand, the answers read off the nesting drawn below."""

from __future__ import annotations

import polars as pl

from hta_tui.analysis.memory_context import python_context

# thread 1:  a [0,100) > nn.Module: Net [10,90) > b [20,80) > c [30,70) > d [40,60)
#            (an operator [35,65) around d is not a Python frame)
# thread 2:  e [0,50)
_EVENTS = [
    # idx, kind, tid, ts, dur, name
    (0, "python", 1, 0, 100, "a.py(1): a"),
    (1, "python", 1, 10, 80, "nn.Module: Net"),
    (2, "python", 1, 20, 60, "b.py(2): b"),
    (3, "python", 1, 30, 40, "c.py(3): c"),
    (4, "cpu_op", 1, 35, 30, "aten::mm"),
    (5, "python", 1, 40, 20, "d.py(4): d"),
    (6, "python", 2, 0, 50, "e.py(5): e"),
]


def _events(rows: list[tuple]) -> pl.DataFrame:
    return pl.DataFrame(
        rows,
        schema={
            "idx": pl.UInt32,
            "kind": pl.String,
            "tid": pl.Int64,
            "ts": pl.Int64,
            "dur": pl.Int64,
            "name": pl.String,
        },
        orient="row",
    )


def _recs() -> pl.DataFrame:
    return pl.DataFrame(
        {
            "seq": [0, 1, 2, 3, 4, 5, 6],
            "tid": [1, 1, 1, 1, 2, None, 3],
            "ts": [45, 25, 5, 200, 10, 45, 45],
        },
        schema={"seq": pl.Int64, "tid": pl.Int64, "ts": pl.Int64},
    )


def test_stack_is_the_innermost_frames_of_the_allocations_thread() -> None:
    out = python_context(_events(_EVENTS), _recs()).sort("seq")
    assert out["module"].to_list() == ["Net", "Net", None, None, None, None, None]
    assert out["stack"].to_list() == [
        "d.py(4): d < c.py(3): c < b.py(2): b",  # three deep; a is the fourth
        "b.py(2): b < a.py(1): a",  # the module frame between them is not a stack frame
        "a.py(1): a",
        None,  # after every frame of its thread
        "e.py(5): e",  # its own thread's frame, not thread 1's around the same time
        None,  # no thread
        None,  # a thread without Python frames
    ]


def test_no_stack_when_every_frame_is_a_module() -> None:
    modules = [r for r in _EVENTS if r[5].startswith("nn.Module")]
    out = python_context(_events(modules), _recs()).sort("seq")
    assert out["module"].to_list() == ["Net", "Net", None, None, None, None, None]
    assert out["stack"].to_list() == [None] * 7
