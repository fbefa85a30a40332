"""The registry's former name (`analysis/registry.py` is the one door to the analyses): the
same objects, so code written against `catalog` keeps working. New code imports registry."""

from __future__ import annotations

from hta_tui.analysis.registry import (  # noqa: F401
    ANALYSES,
    BY_NAME,
    ENGINE,
    LIST_KEYS,
    TABLE_OWNER,
    Analysis,
    FrameGetter,
    Options,
    Ranks,
    Tables,
    declare,
    json_value,
    known,
    options_with,
    parameters,
    run,
    select,
    table,
    tables,
    wanted_tables,
    with_rank,
    withdraw,
)
