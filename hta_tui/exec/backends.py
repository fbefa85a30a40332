"""Where per-file work runs: one interface, three back-ends.

    inline  in this process, one task after another (tests, small folders)
    pool    local worker processes (today's default: forkserver workers, trace/pool.py)
    dask    a Dask cluster through `distributed.Client`: a running scheduler
            ("tcp://host:8786") or a LocalCluster started here ("local" or "local:N")

A task is a module-level function and its picklable arguments (one rank file -> its
per-rank tables as bytes); `submit` answers a `concurrent.futures.Future` on every
back-end, so callers wait for results the same way. On Dask a task that fails (its worker
died, say) is retried once on another worker before its future fails (`retries=1`).
"""

from __future__ import annotations

import multiprocessing as mp
import os
import threading
from collections.abc import Callable
from concurrent.futures import Executor, Future, ProcessPoolExecutor
from pathlib import Path
from typing import Any

from hta_tui.trace.cache_root import entry_name
from hta_tui.trace.discover import describe, is_candidate
from hta_tui.trace.pool import START_METHOD, _children_skip_main, _usable_stderr, prepare_pool

#: What `--dask` says when the optional dependency is missing.
INSTALL_HINT = "--dask needs Dask's distributed: pip install 'hta-tui[dask]'"
#: What every pool worker needs for per-rank work, imported once by the forkserver: the
#: rank work, every analysis's module and what each worker would otherwise make on its first
#: rank (`worker_start` imports them all). Named, not imported here: this module imports no
#: analysis, so a front end can start the forkserver before its own heavy imports
#: (`start_early`).
WORK_MODULES = ("hta_tui.exec.worker_start",)


#: A cache entry's folder of its rank's results (`rank_work.result_path`).
RESULTS_DIR = "results"
#: Not an analysis: the steps each kind of table covers on this rank (`coverage`), for the
#: report's scope section, made with the rank's tables and kept beside them
#: (`rank_work.steps_path`): a rank run alone keeps them in its entry, a batch of small ranks
#: in one file beside its first rank's (`rank_work.batch_steps_path`).
STEPS = "steps_covered"
#: Not an analysis either: in a rank's answer, the texts its task kept (`rank_work.Texts`),
#: table by table with their sizes (`rank_work.texts_kept`).
TEXTS_KEPT = "texts_kept"
#: Ranks whose trace file is smaller than this run their analyses together, a batch of up to
#: `rank_work.BATCH_RANKS` consecutive ranks per task (`rank_work.batch_tables`): a rank of a
#: few dozen events cost ~0.25 s of CPU alone (fixed costs: a task, ~30 result files written
#: and read, the analyses' setup per call), the numbers being the same either way.
BATCH_BYTES = 1_000_000
#: `start_early` looks at most at this many files' entries
EARLY_LOOKS = 8

#: Where a local cluster listens (its scheduler, workers and their HTTP servers): this
#: machine only.
LOOPBACK = "127.0.0.1"


class BackendError(Exception):
    """A back-end that cannot start (distributed missing, a scheduler out of reach): its
    message is the one line the front end prints."""


class Backend:
    """The in-process back-end, and the interface of the others."""

    kind = "inline"
    #: Per-rank analysis work goes to workers (not run in the caller) from this much work on,
    #: counted in bytes of trace files (`worth_workers`): below it, a worker start costs more
    #: than the work.
    remote_bytes = 0
    #: What a rank costs besides its bytes (a task's, its analyses' fixed costs), counted as
    #: this many bytes of trace file: a folder of many tiny files is rank work, not bytes.
    rank_bytes = 0

    def worth_workers(self, ranks: int, size: int) -> bool:
        """Whether the work of `ranks` ranks of `size` bytes of files together goes to the
        workers (`remote_bytes`, `rank_bytes`); none to do goes nowhere."""
        return ranks > 0 and size + ranks * self.rank_bytes >= self.remote_bytes

    def submit(self, fn: Callable[..., Any], *args: Any) -> Future[Any]:
        """Run `fn(*args)`; its result (or exception) in the future."""
        fut: Future[Any] = Future()
        try:
            fut.set_result(fn(*args))
        except Exception as exc:
            fut.set_exception(exc)
        return fut

    def describe(self) -> str:
        """Where the work runs, for a log line."""
        return "in-process"

    def warm(self) -> None:
        """Start now what the first task would wait for, so it gets ready while the caller
        does other work (nothing here)."""

    def rest(self) -> None:
        """A round of tasks is over: what only held memory for it may go (nothing here)."""

    def close(self) -> None:
        """Stop what the back-end started (idempotent)."""

    def __enter__(self) -> Backend:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class PoolBackend(Backend):
    """Local worker processes, started on the first submit. Loads keep their own pools
    (trace/load.py, with the parse time limit's watchdog); this one runs per-rank analyses
    of folders big enough to be worth a process start."""

    kind = "pool"
    #: 20 MB of trace files: below it the analyses run in the caller, as before.
    remote_bytes = 20_000_000
    #: 100 tiny ranks (a few KB each) are worth the workers: ~1 s of CPU in batches (~10 ms
    #: a rank), halved over two cores, against a start of ~0.3 s; a job of 2-8 small ranks
    #: stays in the caller (the pool made it slower: one batch, no work to share).
    rank_bytes = 200_000

    def __init__(self, workers: int | None = None, *, one_round: bool = False) -> None:
        self._workers = workers
        self._pool: ProcessPoolExecutor | None = None
        self._one_round = one_round

    def describe(self) -> str:
        return f"process pool ({self._workers or 'one per core'})"

    @property
    def started(self) -> bool:
        """Whether worker processes are up (or starting)."""
        return self._pool is not None

    def warm(self) -> None:
        """The forkserver started, importing the analyses (~0.3 s of CPU) on another core
        while the caller reads summaries and kept results; the first submit then waits
        for what is left of it, not all of it."""
        prepare_pool(WORK_MODULES)

    def rest(self) -> None:
        """`one_round` (a report: its rank-wise work is one round, then the reduction here):
        the workers end. Idle, each held what its ranks freed, ~250-340 MB on 100 MB ranks
        (polars' allocator, jemalloc, gives freed pages back on a timer whose thread a
        forked process does not have), all through the reduction, when this process
        peaks; a later task forks new workers from the forkserver, which stays. Not waited
        for: a worker giving back its memory and ending took ~0.1-0.3 s, the reduction's
        time, which runs meanwhile (every task has answered: nothing is left to wait for)."""
        if self._one_round and self._pool is not None:
            self._pool.shutdown(wait=False)
            self._pool = None

    def submit(self, fn: Callable[..., Any], *args: Any) -> Future[Any]:
        if self._pool is None:
            from hta_tui.trace.load import default_workers

            prepare_pool(WORK_MODULES)
            with _usable_stderr():
                self._pool = ProcessPoolExecutor(
                    max_workers=self._workers or default_workers(),
                    mp_context=mp.get_context(START_METHOD),
                )
        with _usable_stderr(), _children_skip_main():
            return self._pool.submit(fn, *args)

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=True, cancel_futures=True)
            self._pool = None


class DaskBackend(Backend):
    """A `distributed.Client` (see the module docstring). `processes=False` starts a local
    cluster of threads in this process (the tests). `lazy`: connect (or start the local
    cluster) on the first submit, so a run whose every result is kept already (a warm
    report) starts nothing; BackendError then comes from that submit."""

    kind = "dask"
    remote_bytes = 0  # every rank's work goes to the cluster: that is what it is for

    def __init__(self, address: str, *, processes: bool = True, lazy: bool = False) -> None:
        try:
            import distributed  # noqa: F401 (said at once when missing, even when lazy)
        except ImportError:
            raise BackendError(INSTALL_HINT) from None
        self.address = address
        self.processes = processes
        self.client: Any = None
        self._cluster: Any = None
        self._executor: Executor | None = None
        self._lock = threading.Lock()
        self._local = _local_workers(address) if address.partition(":")[0] == "local" else None
        if not lazy or self._local is None:  # a scheduler's address: reached (or not) now
            self._start()

    def _start(self) -> Executor:
        with self._lock:
            if self._executor is not None:
                return self._executor
            import distributed

            try:
                if self._local is not None:
                    # loopback only, on free ports: Dask's HTTP servers start even with
                    # the dashboard "off" (`None` still binds 0.0.0.0:8787)
                    loopback = {"host": LOOPBACK} if self.processes else {}
                    self._cluster = distributed.LocalCluster(
                        n_workers=self._local,
                        threads_per_worker=1,
                        processes=self.processes,
                        dashboard_address=f"{LOOPBACK}:0",
                        worker_dashboard_address=f"{LOOPBACK}:0",
                        **loopback,
                    )
                    self.client = distributed.Client(self._cluster)
                else:
                    self.client = distributed.Client(self.address, timeout="10s")
            except (OSError, TimeoutError, ValueError) as exc:
                self._stop()
                raise BackendError(
                    f"cannot reach the Dask scheduler at {self.address}: {exc}"
                ) from None
            self._executor = self.client.get_executor(retries=1, pure=False)
            return self._executor

    @property
    def started(self) -> bool:
        return self._executor is not None

    def describe(self) -> str:
        return f"Dask at {self.address}"

    def submit(self, fn: Callable[..., Any], *args: Any) -> Future[Any]:
        return self._start().submit(fn, *args)

    def close(self) -> None:
        with self._lock:
            self._stop()

    def _stop(self) -> None:
        self._executor = None
        if self.client is not None:
            self.client.close()
            self.client = None
        if self._cluster is not None:
            self._cluster.close()
            self._cluster = None


def start_early(path: Path, cache_root: Path | None) -> bool:
    """Start the process pool's forkserver now, importing what the workers need
    (`WORK_MODULES`, ~0.3 s of CPU) on another core while the caller makes its own imports
    (as long again), when the files under `path` will likely need workers: they are worth
    them by their count and bytes (`PoolBackend.worth_workers`) and one of them has no
    rank results kept under `cache_root` (its entry, of any version, has no steps covered;
    None: nothing is kept) or no entry (its parse needs them too). Told by the file system
    alone (a few files looked at; no frame read, no polars). A wrong guess costs that CPU,
    or the start, never a number. Whether it started."""
    if START_METHOD != "forkserver":
        return False
    files = _worth(path, PoolBackend())
    if not files:
        return False
    if cache_root is not None and min(files.values()) < BATCH_BYTES:
        # (small files run in batches whose steps are kept in one file beside the batch's
        # first rank's entry, which `_kept` cannot tell; such a report's own start is long
        # anyway: its pool starts when the files are listed, as before)
        return False
    if cache_root is not None and _kept(list(files), cache_root):
        return False
    prepare_pool(WORK_MODULES)
    return True


def _worth(path: Path, pool: PoolBackend) -> dict[Path, int]:
    """The trace files under `path` seen until they were worth `pool`'s workers
    (`worth_workers`: a folder of 10,000 tiny files, its first hundred), with their sizes;
    none when they are not."""
    seen: dict[Path, int] = {}
    size = 0
    try:
        if path.is_file():
            size = path.stat().st_size
            return {path: size} if pool.worth_workers(1, size) else {}
        for folder, subfolders, names in os.walk(path):
            subfolders[:] = sorted(d for d in subfolders if not d.startswith("."))
            for name in sorted(names):
                found = Path(folder, name)
                if not is_candidate(found):
                    continue
                try:
                    seen[found] = found.stat().st_size
                except OSError:
                    continue
                size += seen[found]
                if pool.worth_workers(len(seen), size):
                    return seen
    except OSError:
        pass
    return {}


def _kept(files: list[Path], cache_root: Path) -> bool:
    """Whether the rank results of `files` look kept: each of at most EARLY_LOOKS of them,
    spread over the list, has an entry (in any version's folder) with its steps covered."""
    for trace in files[:: -(-len(files) // EARLY_LOOKS)]:
        try:
            name = entry_name(describe(trace))
        except OSError:
            return False
        found = cache_root.glob(f"v*-c*/{name[:2]}/{name}/{RESULTS_DIR}/{STEPS}-*.arrow")
        if next(found, None) is None:
            return False
    return True


def _local_workers(address: str) -> int:
    """ "local:N" -> N workers; "local" -> the machine's cores."""
    _, _, count = address.partition(":")
    if not count:
        from hta_tui.trace.load import default_workers

        return default_workers()
    try:
        n = int(count)
    except ValueError:
        raise BackendError(f"--dask local:N wants a number of workers, not {count!r}") from None
    if n < 1:
        raise BackendError("--dask local:N wants at least one worker")
    return n


def open_backend(
    dask: str | None = None,
    *,
    workers: int | None = None,
    processes: bool = True,
    lazy: bool = False,
    one_round: bool = False,
) -> Backend:
    """The back-end a front end asked for: Dask at `dask` when given (started on its first
    task when `lazy`), else the process pool of `workers` (BackendError with its one line
    when Dask cannot start); `one_round`: its workers end when a round of tasks is over
    (`PoolBackend.rest`)."""
    if dask:
        return DaskBackend(dask, processes=processes, lazy=lazy)
    return PoolBackend(workers, one_round=one_round)
