"""The shared traces (../shared/traces) parsed once per test process (trace sets and the API's
once per run: the processes share a cache folder), for the tests that read their frames and
test neither the parser nor the cache: every module that reads one file (or case) gets the
same frames. Each module used to parse its cases again, some in every test
(a case's folder again in each of the plugin oracle's four tests, a file twice for its
events and its metadata), and the parse of every shared case is ~5 s of CPU.

Read-only: a test derives new frames from these and never changes them (nor the dicts
holding them).
"""

from __future__ import annotations

import functools
import os
from pathlib import Path

from hta_tui.api import TraceAnalysis
from hta_tui.trace.cache import Cache
from hta_tui.trace.model import TraceSet, open_set
from hta_tui.trace.parse import ParsedTrace, parse_file
from tests.conftest import CASES_CACHE


@functools.cache
def parsed(path: Path) -> ParsedTrace:
    """One trace file as `parse_file` gives it."""
    return parse_file(path)


def cases_cache() -> Cache:
    """The run's cache of the shared cases (conftest.py's `CASES_CACHE`; without it, no
    cache): a report given it reads the frames another test parsed (it keeps its results
    there too, which `trace_set`'s readers never look at)."""
    root = os.environ.get(CASES_CACHE)
    return Cache(Path(root)) if root else Cache(enabled=False)


@functools.cache
def trace_set(path: Path) -> TraceSet:
    """A folder (or one file) as `open_set` loads it, through the run's cache of the shared
    cases (`cases_cache`)."""
    return open_set(path, cases_cache())


@functools.cache
def analysis(path: Path) -> TraceAnalysis:
    """A folder (or one file) opened by the API, through the run's cache of the shared cases
    (`cases_cache`: the frames `trace_set` reads, parsed once a run for both; a summary the
    API's parse would have added to an entry `trace_set` made is made when asked). It keeps
    no table either way: each method makes its tables again."""
    cache = cases_cache()
    return TraceAnalysis(path, cache=cache if cache.enabled else False)
