"""The registry's former name (`analysis/registry.py` is the one door to the analyses): the
same objects, so code written against `catalog` keeps working. New code imports registry."""

from __future__ import annotations

from hta_tui.analysis.registry import (  # noqa: F401
    ANALYSES,
    BY_NAME,
    ENGINE,
    HTA_NAMES,
    LIST_KEYS,
    TABLE_OWNER,
    Analysis,
    FrameGetter,
    Lazy,
    Metas,
    Options,
    Ranks,
    Tables,
    declare,
    json_value,
    known,
    options_from,
    options_with,
    owner,
    parameters,
    run,
    select,
    table,
    tables,
    trace_frames,
    trace_meta,
    wanted_tables,
    with_rank,
    withdraw,
)
