"""A file's own metadata (`deviceProperties`, `distributedInfo`), checked field by field.

Tables built from every rank's metadata (the GPUs, the hierarchy) take a column's type from
the values: one rank's `"numSms": "many"` made every rank's SM count text. So each file's
fields are checked on their own, and a field of the wrong type is dropped and counted by
reason (`dropped_events`), as a bad event value is.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

#: Reasons start with the key they come from, so the data quality line counts them in values.
KEYS = ("deviceProperties", "distributedInfo")

#: deviceProperties (and ROCm's computeProperties) fields the views read, by type.
_DEVICE_INTS = (
    "id",
    "totalGlobalMem",
    "computeMajor",
    "computeMinor",
    "maxThreadsPerBlock",
    "maxThreadsPerMultiprocessor",
    "regsPerBlock",
    "regsPerMultiprocessor",
    "warpSize",
    "sharedMemPerBlock",
    "sharedMemPerMultiprocessor",
    "numSms",
    "sharedMemPerBlockOptin",
)
_DEVICE_TEXTS = ("name",)
_DIST_INTS = ("world_size", "local_rank", "rank")
_DIST_TEXTS = ("backend",)
#: Integers a column can hold.
_MAX_INT = 2**63


def _ok_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and 0 <= value < _MAX_INT


def _checked(
    item: dict[str, Any], key: str, ints: tuple[str, ...], texts: tuple[str, ...], dropped: Counter
) -> dict[str, Any]:
    out = dict(item)
    for name in ints:
        if name in out and out[name] is not None and not _ok_int(out[name]):
            dropped[f"{key}: {name} is not a count"] += 1
            del out[name]
    for name in texts:
        if name in out and out[name] is not None and not isinstance(out[name], str):
            dropped[f"{key}: {name} is not text"] += 1
            del out[name]
    return out


def devices(props: Any, dropped: Counter[str]) -> list[dict[str, Any]]:
    """Each GPU's properties with the fields of a wrong type dropped; a GPU that is not an
    object is dropped whole."""
    if not isinstance(props, list):
        return []
    out = []
    for item in props:
        if not isinstance(item, dict):
            dropped["deviceProperties: a GPU that is not an object"] += 1
            continue
        out.append(_checked(item, "deviceProperties", _DEVICE_INTS, _DEVICE_TEXTS, dropped))
    return out


def distributed(dist: Any, dropped: Counter[str]) -> dict[str, Any] | None:
    """distributedInfo with its fields of a wrong type dropped (pg_config when not a list)."""
    if not isinstance(dist, dict):
        return None
    out = _checked(dist, "distributedInfo", _DIST_INTS, _DIST_TEXTS, dropped)
    if "pg_config" in out and not isinstance(out["pg_config"], list):
        dropped["distributedInfo: pg_config is not a list"] += 1
        del out["pg_config"]
    return out
