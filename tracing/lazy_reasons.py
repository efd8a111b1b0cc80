"""Reasons computed when a question reaches a call, not while the task ran (``reasons="lazy"``).

A call's reason comes from the run's cache, else from its UDF run now in reasoning mode on
the arguments Spark passed it (checked against the value the task stored), and is cached in
the run: ``reasons/<value id>/``, a file per question that computed some, named by its
sha256 and listed in the run's record. The in-process engine gives them to a lazy run's
rows; the eager backend to its answer's model calls.
"""

from __future__ import annotations

import functools
import hashlib
import os
import uuid
from collections.abc import Callable
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
from pyspark.sql.pandas.types import to_arrow_type

from materialization.duck_expressions import SqlType, typed_duckdb
from materialization.duck_plan import quoted
from materialization.integrity import add_to_record, listed_cache
from materialization.locations import local_path, sql_string
from reasoning_udfs.spark_types import parse_type
from reasoning_udfs.udf import lookup
from segmenter.errors import LineageError
from segmenter.operators import Function

Tell = Callable[[str], None]  # where a question says what it is doing (the session's progress)


def with_reasons(
    con: Any, run_dir: str, fn: Function, rows: pa.Table, types: dict[str, SqlType], tell: Tell | None = None
) -> pa.Table:
    """``rows`` (by column id, ``fn``'s arguments and value among them) with the reason of
    each call in ``fn.reason.id``: the run's cached reasons looked up in one query, those not
    cached computed now (said to ``tell`` first: an expensive model's may take minutes),
    cached, and given to their rows by a second."""
    evaluated, args, ddls = argument_columns(fn, types)
    kept = [c for c in rows.column_names if c != fn.reason.id]
    keyed = f"SELECT *, {evaluated} FROM {{rows}}"
    folder = f"reasons/{fn.value.id}"
    cached = listed_cache(run_dir, folder)  # local paths: the store is local
    if cached:
        cache = "read_parquet([" + ", ".join(map(sql_string, cached)) + "])"
        on = " AND ".join(f"x.{quoted(a)} IS NOT DISTINCT FROM k.{quoted(a)}" for a in args)
        found = f"(SELECT DISTINCT *, TRUE AS __found FROM {cache}) k"
        sql = f"SELECT x.*, k.__reason, k.__found FROM ({keyed}) x LEFT JOIN {found} ON {on}"
    else:
        sql = f"SELECT x.*, NULL AS __reason, NULL::BOOLEAN AS __found FROM ({keyed}) x"
    looked = _query(con, sql, rows=rows.select(kept))
    missing = pc.invert(pc.fill_null(looked.column("__found"), False))
    if pc.any(missing).as_py():  # None where there are no rows
        calls = ", ".join(map(quoted, [*args, fn.value.id]))
        todo = _query(con, f"SELECT DISTINCT {calls} FROM {{missed}}", missed=looked.filter(missing))
        if tell is not None:
            tell(f"{fn.udf}: computing the reasons of {todo.num_rows:,} call(s) the task ran without them")
        made = lookup(fn.udf).arrow_function("reasoning")(*arguments(todo, args, ddls))
        if made.field("value").to_pylist() != todo.column(fn.value.id).to_pylist():
            raise LineageError(
                f"UDF {fn.udf} gives other values now than while the task ran: its reasons cannot be "
                "computed at question time; run the task with reasons='eager'"
            )
        fresh = todo.select(args).append_column("__reason", made.field("reason"))
        _keep(fresh, run_dir, folder)
        on = " AND ".join(f"x.{quoted(a)} IS NOT DISTINCT FROM f.{quoted(a)}" for a in args)
        filled = "SELECT x.* EXCLUDE (__reason), coalesce(x.__reason, f.__reason) AS __reason"
        joined = f"{filled} FROM {{looked}} x LEFT JOIN {{fresh}} f ON {on}"
        looked = _query(con, joined, looked=looked, fresh=fresh)
    return looked.select(kept).append_column(fn.reason.id, looked.column("__reason"))


def argument_columns(fn: Function, types: dict[str, SqlType]) -> tuple[str, list[str], list[str]]:
    """``fn``'s arguments as DuckDB SQL naming each ``__arg<i>`` (a SELECT list), those
    names, and the arguments' Spark types (DDL)."""
    typed = [typed_duckdb(a, types) for a in fn.args]
    args = [f"__arg{i}" for i in range(len(typed))]
    evaluated = ", ".join(f"{sql} AS {quoted(a)}" for (sql, _), a in zip(typed, args, strict=True))
    return evaluated, args, [ddl for _, ddl in typed]


def _query(con: Any, sql: str, **tables: pa.Table) -> pa.Table:
    """``sql`` with each ``{name}`` reading the Arrow table given as ``name``."""
    names = {k: f"__{k}_{uuid.uuid4().hex}" for k in tables}
    for k, table in tables.items():
        con.register(names[k], table)
        sql = sql.replace(f"{{{k}}}", names[k])
    try:
        return con.sql(sql).to_arrow_table()
    finally:
        for name in names.values():
            con.unregister(name)


def _keep(table: pa.Table, run_dir: str, folder: str) -> None:
    """Cache computed reasons in the run's ``folder``, in a file named by its sha256 and
    listed in the run's record (concurrent questions never write the same file); a read-only
    store, or one off this machine, keeps none."""
    run = local_path(run_dir)
    if run is None:  # a store off this machine: the reasons are computed again next time
        return
    local = os.path.join(run, folder)
    tmp = f"{local}/{uuid.uuid4().hex}.tmp"
    try:
        os.makedirs(local, exist_ok=True)
        pq.write_table(table, tmp)
        with open(tmp, "rb") as f:
            name = f"{hashlib.file_digest(f, 'sha256').hexdigest()}.parquet"
        os.replace(tmp, f"{local}/{name}")  # readers never see half a file
        add_to_record(run_dir, folder, {name: [os.path.getsize(f"{local}/{name}"), name[:64]]})
    except OSError:
        pass


def arguments(table: pa.Table, args: list[str], types: list[str]) -> list[pa.Array]:
    """The argument columns as the Arrow arrays Spark would pass a UDF (its types, one chunk)."""
    return [table.column(a).combine_chunks().cast(arrow_type(t)) for a, t in zip(args, types, strict=True)]


@functools.lru_cache(maxsize=256)
def arrow_type(ddl: str) -> pa.DataType:
    """The Arrow type Spark gives values of the Spark type ``ddl`` (parsed by Spark's JVM:
    a round trip each, kept per process)."""
    return to_arrow_type(parse_type(ddl))

