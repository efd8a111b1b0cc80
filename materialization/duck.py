"""DuckDB connections of this process: two threads, and memory bounded beside Spark's JVM.

DuckDB takes 80 % of the machine's memory by default. Beside the driver's JVM that is more
than there is: an index build that outgrew it (TPC-DS q70's eager run) had the kernel kill
the whole process. Bounded, DuckDB spills to its temporary folder or fails with an error the
caller can report."""

from __future__ import annotations

import atexit
import contextlib
import functools
import os
import shutil
import tempfile
import threading
import uuid
import weakref
from collections.abc import Callable, Iterator
from typing import Any

import duckdb

from segmenter.errors import LineageError

MEMORY_SHARE = 0.25  # of the machine's memory, per connection, unless AL_DUCKDB_MEMORY says


def memory_limit() -> str:
    """``$AL_DUCKDB_MEMORY`` (DuckDB's syntax, e.g. ``4GB``), else a quarter of the machine's."""
    given = os.environ.get("AL_DUCKDB_MEMORY")
    if given:
        return given
    total = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    return f"{int(total * MEMORY_SHARE) // 2**20}MB"


_OPEN: weakref.WeakSet[duckdb.DuckDBPyConnection] = weakref.WeakSet()


def connect(**config: Any) -> duckdb.DuckDBPyConnection:
    """A DuckDB connection bounded to :func:`memory_limit`, spilling beyond it to
    ``temp_directory`` (by default a folder of this process's, removed at exit: DuckDB's own
    default is ``.tmp`` in the working directory, the user's)."""
    config.setdefault("temp_directory", _spill_folder())
    con = duckdb.connect(config={"threads": 2, "memory_limit": memory_limit(), **config})
    # DuckDB draws a progress bar on stdout for a query over 2 s: into `al lineage --json`'s answer
    con.execute("SET enable_progress_bar = false")
    _OPEN.add(con)
    return con


@functools.cache
def _spill_folder() -> str:
    """A name only: DuckDB makes the folder when it first spills, so a process that never
    spills (a Spark worker ends without running ``atexit``) leaves nothing behind."""
    folder = os.path.join(tempfile.gettempdir(), f"al-duckdb-{os.getpid()}-{uuid.uuid4().hex[:8]}")
    atexit.register(shutil.rmtree, folder, ignore_errors=True)
    return folder


_DATABASES: dict[tuple[str, str], duckdb.DuckDBPyConnection] = {}  # by name and memory bound
_LOCK = threading.Lock()


def cursor(database: str, setup: Callable[[duckdb.DuckDBPyConnection], Any]) -> duckdb.DuckDBPyConnection:
    """A new connection to this process's in-memory ``database``, made once (per memory
    bound: ``AL_DUCKDB_MEMORY`` as it is now) and given its functions by ``setup``. Tables
    registered on the connection stay its own; the database's functions and memory bound
    are shared (a cursor takes 0.01 ms, a database 11 ms: a tenth of a one-row question)."""
    key = (database, memory_limit())
    with _LOCK:
        if key not in _DATABASES:
            made = connect()
            setup(made)
            _DATABASES[key] = made
    con = _DATABASES[key].cursor()
    _OPEN.add(con)
    return con


def interrupt_all() -> None:
    """Stop the query every open connection of this process is running: a time limit's
    reach where cancelling Spark's jobs does not (an index build, an in-process question)."""
    for con in list(_OPEN):
        with contextlib.suppress(duckdb.ConnectionException):  # closed since
            con.interrupt()


@contextlib.contextmanager
def bounded(what: str, advice: str) -> Iterator[None]:
    """DuckDB's out-of-memory error inside the block as one line: ``what`` needed more than
    the bound, and ``advice``."""
    try:
        yield
    except duckdb.OutOfMemoryException:
        raise LineageError(
            f"{what} needed more memory than DuckDB may use here ({memory_limit()}; "
            f"AL_DUCKDB_MEMORY sets it): {advice}"
        ) from None
