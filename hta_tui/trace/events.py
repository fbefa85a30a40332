"""The typed shape msgspec decodes each trace event into.

Only the fields some analysis reads are declared; msgspec skips the rest without building
them. `gc=False`: a million small structs hold no cycles, and tracking them would make every
collection walk them.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Literal

import msgspec

Num = int | float

#: The phases of the Chrome trace format; an event with another `ph` is counted as dropped.
KNOWN_PHASES = frozenset("XBEiICbneNOPDstfMRc")


#: An absent JSON-text arg (immutable, so one object serves every event).
NO_TEXT = msgspec.Raw()


class EventArgs(msgspec.Struct, gc=False, frozen=True):
    # In the order Kineto writes them (kernels, copies, cpu ops, python functions, memory
    # events): msgspec looks for a key from the field after the last one it found, so a key
    # in its expected place costs one comparison, not a scan of every field.
    external_id: int | None = msgspec.field(default=None, name="External id")
    seq: int | None = msgspec.field(default=None, name="Sequence number")
    input_type: msgspec.Raw = msgspec.field(default=NO_TEXT, name="Input type")
    input_dims: msgspec.Raw = msgspec.field(default=NO_TEXT, name="Input Dims")
    # PyTorch 1.8-1.9 (2021) spelled it "Input dims": read as `input_dims` (columns.py)
    input_dims_legacy: msgspec.Raw = msgspec.field(default=NO_TEXT, name="Input dims")
    call_stack: str | None = msgspec.field(default=None, name="Call stack")
    device: int | None = None
    stream: int | str | None = None
    correlation: int | None = None
    registers: int | None = msgspec.field(default=None, name="registers per thread")
    shared_memory: int | None = msgspec.field(default=None, name="shared memory")
    blocks_per_sm: Num | None = msgspec.field(default=None, name="blocks per SM")
    # kept as JSON text and read by polars: triton cpu ops write a string here. Absent: one
    # shared empty Raw (a default_factory made an object per event and field: a tenth of
    # the decode)
    grid: msgspec.Raw = NO_TEXT
    block: msgspec.Raw = NO_TEXT
    occupancy: Num | None = msgspec.field(default=None, name="est. achieved occupancy %")
    # ROCm writes it as text on hipMemcpy calls ("bytes": "2"): an int-only field sent each
    # chunk holding one such call down the slow event-by-event path (a third of a real
    # MI300 trace's chunks); the column reads digit strings as numbers either way
    bytes: int | str | None = None
    bandwidth: Num | None = msgspec.field(default=None, name="memory bandwidth (GB/s)")
    sync_kind: str | None = msgspec.field(default=None, name="cuda_sync_kind")
    wait_on_stream: int | None = None  # a Stream Wait Event: the stream it waits for
    python_parent_id: int | None = msgspec.field(default=None, name="Python parent id")
    python_id: int | None = msgspec.field(default=None, name="Python id")
    python_module_id: int | None = msgspec.field(default=None, name="Python module id")
    # "[memory]" instant events (profile_memory=True): see trace/memory.py
    total_reserved: Num | None = msgspec.field(default=None, name="Total Reserved")
    total_allocated: Num | None = msgspec.field(default=None, name="Total Allocated")
    mem_bytes: int | None = msgspec.field(default=None, name="Bytes")
    addr: int | None = msgspec.field(default=None, name="Addr")
    device_id: int | None = msgspec.field(default=None, name="Device Id")
    device_type: int | None = msgspec.field(default=None, name="Device Type")
    external_id_legacy: int | None = msgspec.field(default=None, name="external id")
    # collectives: record_param_comms (and NCCL kernels of newer PyTorch); loose types, since
    # a field of an unexpected type would send the whole file down the slow lenient path
    coll_name: str | None = msgspec.field(default=None, name="Collective name")
    in_nelems: Num | str | None = msgspec.field(default=None, name="In msg nelems")
    out_nelems: Num | str | None = msgspec.field(default=None, name="Out msg nelems")
    group_size: Num | str | None = msgspec.field(default=None, name="Group size")
    dtype: str | None = None
    pg_name: str | int | None = msgspec.field(default=None, name="Process Group Name")
    # a list in some writers; typed, not Raw: a Raw default is one more object per event
    # (a tenth of the decode time)
    pg_ranks: str | list | None = msgspec.field(default=None, name="Process Group Ranks")
    comm_seq: Num | str | None = msgspec.field(default=None, name="Seq")
    # metadata ("M") events carry their value here; a graphed kernel its CUDA-graph
    # annotation's name (see `annotation`)
    name: str | int | None = None
    labels: str | None = None
    sort_index: int | None = None
    # CUDA-graph kernel annotations (PyTorch 2026, `export_chrome_trace(...,
    # cuda_graph_annotations=...)`): on a graphed kernel, a dict annotation's keys (`name`, a
    # module's `module_fqn`), or a bare string under `name` (older: `annotation`, `str`). Any
    # type: an odd value is ignored (`annotations`), never a reason for the slow path.
    module_fqn: Any = None
    annotation_arg: Any = msgspec.field(default=None, name="annotation")
    str_arg: Any = msgspec.field(default=None, name="str")


NO_ARGS = EventArgs()


class Event(msgspec.Struct, gc=False):
    ph: str = ""
    cat: str | None = None
    name: str | int | float | None = None
    pid: int | str | None = None
    tid: int | str | None = None
    # A float, or (decoded with `float_hook=str`, see parse.py) a fractional number's JSON
    # text: `numbers` turns either into exact integer ns. Any type is accepted here: a string
    # or an object is a bad value the columns count and drop, not a reason to reject the file.
    ts: Any = None
    dur: Any = None
    id: int | str | None = None
    # Absent: one shared empty EventArgs (frozen, so it can be the default), so a field is
    # read from every event's args alike; null only where the JSON says null.
    args: EventArgs | None = NO_ARGS


def annotations(args: list[EventArgs] | tuple[EventArgs, ...]) -> list[str | None]:
    """Each kernel's CUDA-graph annotation: module_fqn, else name, else annotation, else str
    (the first non-empty string, or number as text); None when it has none. One
    comprehension of plain field reads (a property read per event cost 15 times more); the
    rare value that is no string goes through `_annotation`."""
    first = [a.module_fqn or a.name or a.annotation_arg or a.str_arg for a in args]
    if first.count(None) == len(first):
        return first
    return [
        v if v is None or (type(v) is str and v) else _annotation(a)
        for v, a in zip(first, args, strict=True)
    ]


def _annotation(a: EventArgs) -> str | None:
    for value in (a.module_fqn, a.name, a.annotation_arg, a.str_arg):
        if isinstance(value, str) and value:
            return value
        if isinstance(value, int | float) and not isinstance(value, bool):
            return str(value)
    return None


def args_of(events: list[Event]) -> list[EventArgs]:
    """Each event's args, `NO_ARGS` where the JSON says null (so every field can be read)."""
    args = [e.args for e in events]
    return [a or NO_ARGS for a in args] if None in args else args


class Decoded(list):  # type: ignore[type-arg]
    """A chunk's events decoded with numbers as floats; `exact()` decodes the chunk again
    with fractional numbers as their text (see `numbers.InexactNumbers`)."""

    def __init__(self, events: list[Event], exact: Callable[[], list[Event]]) -> None:
        super().__init__(events)
        self.exact = exact


class MetadataArgs(msgspec.Struct, gc=False):
    """A metadata event's args: `EventArgs`' three fields it uses, of the same types."""

    name: str | int | None = None
    labels: str | None = None
    sort_index: int | None = None


class MetadataEvent(msgspec.Struct, gc=False, kw_only=True):
    """A `ph: "M"` event as `Event` has it, but only the fields the threads frame reads:
    a trace naming tens of thousands of processes and threads (a real MTIA trace's 310k
    metadata events) decodes them at two thirds of the cost (`parse._metadata_chunk`).
    msgspec checks what the threads frame would otherwise check a pass at a time: `ph` is
    "M" and `args` an object (an event of another phase, or without args, is a
    ValidationError, and its chunk goes the usual way)."""

    name: str | int | float | None = None
    ph: Literal["M"]
    pid: int | str | None = None
    tid: int | str | None = None
    args: MetadataArgs


class Metadata(list):  # type: ignore[type-arg]
    """A chunk whose events are all `ph: "M"`, as `MetadataEvent`s."""
