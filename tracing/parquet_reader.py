"""Small relational operations over Parquet directories of the results store, answered
in-process by DuckDB when the store is on the local file system (no Spark job: a point
lookup in a sorted index reads one row group), whatever the size, within DuckDB's memory
limit and its spill; by Spark otherwise.
"""

from __future__ import annotations

import os
from collections.abc import Sequence

import duckdb
import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from materialization import duck
from materialization.compile import null_safe_match, ref, source_rows
from materialization.duck_expressions import register_functions
from materialization.duck_plan import quoted, source_scan
from materialization.locations import local_path, parquet_scan
from materialization.provrc import Boxes
from materialization.spark import SparkOf
from segmenter.operators import Source
from tracing.sample import in_duck

IN_LIST_MAX = 300  # key values up to this many also filter the scan as literals (see _in_list)
LOADED_BYTES = 8 << 20  # a local folder up to this size is read once into memory, then queried there

Selection = Sequence[tuple[str, str]]  # (column in the file, name in the answer)
Rows = str | Source  # a store folder's URI, or a source's rows (a snapshot, or files read in place)


def _selected(df: DataFrame, select: Selection | None) -> DataFrame:
    return df if select is None else df.select(*[ref(c).alias(a) for c, a in select])


def _equals(keys: pa.Table, column: str) -> str:
    """``=`` where the keys hold no NULL (the same answer, and DuckDB prunes row groups by it),
    else the null-safe comparison."""
    return "=" if keys.column(column).null_count == 0 else "IS NOT DISTINCT FROM"


def _in_list(keys: pa.Table) -> str:
    """A WHERE clause restricting one integer key column to the keys' values as literals,
    where they are at most ``IN_LIST_MAX``: DuckDB pushes a literal IN list into the Parquet
    scan (only the rows it passes are decoded whole), a semi-join's keys beyond a few only as
    their min and max. Random line items of TPC-H SF 1 (two 3 M-row row groups): 65 keys 0.9
    → 0.23 s, 150 keys 0.81 → 0.40 s; from about 500 on the list no longer gains."""
    for name in keys.column_names:
        column = keys.column(name)
        if pa.types.is_integer(column.type) and column.null_count == 0:
            if len(pc.unique(column.slice(0, 4 * IN_LIST_MAX))) > IN_LIST_MAX:
                return ""  # too many already among the first keys (1 M keys: 0.13 s saved)
            values = pc.unique(column).to_pylist()
            if not 0 < len(values) <= IN_LIST_MAX:
                return ""
            return f" WHERE t.{quoted(name)} IN ({', '.join(map(str, values))})"
    return ""


class ParquetReader:
    def __init__(self, spark_of: SparkOf | None, local: bool) -> None:
        """``spark_of`` (the session, started when a read needs Spark) may be None where
        only a local store is read (inside a Spark task)."""
        self.spark_of = spark_of
        self.local = local
        self._con: duckdb.DuckDBPyConnection | None = None
        self._loaded: dict[str, str] = {}  # folder -> what a query reads it as

    @property
    def con(self) -> duckdb.DuckDBPyConnection:
        if self._con is None:
            # functions a question's predicate translated from Spark SQL may call
            self._con = register_functions(duck.connect())
            # index files never change once written: keep their Parquet footers between lookups
            self._con.execute("SET parquet_metadata_cache = true")
        return self._con

    @property
    def spark(self) -> SparkSession:
        assert self.spark_of is not None
        return self.spark_of()

    def _read(self, uri: Rows | pa.Table) -> DataFrame:
        if isinstance(uri, pa.Table):
            return self.spark.createDataFrame(uri)
        if isinstance(uri, Source):
            return source_rows(self.spark, uri)
        return self.spark.read.parquet(uri)

    def _from(self, uri: Rows) -> str:
        """The rows of a local Parquet folder: a small one is read once (a question asks
        an index several times, and a query over files costs their listing and decoding every
        time; files are immutable once committed and checked when their run is loaded)."""
        if isinstance(uri, Source):
            return source_scan(uri, self._from)
        path = local_path(uri)
        assert path is not None
        if path not in self._loaded:
            files = parquet_scan(path)
            if sum(e.stat().st_size for e in os.scandir(path) if e.name.endswith(".parquet")) > LOADED_BYTES:
                self._loaded[path] = files
            else:
                table = f"__loaded_{len(self._loaded)}"
                self.con.execute(f"CREATE TEMP TABLE {table} AS SELECT * FROM {files}")
                self._loaded[path] = table
        return self._loaded[path]

    def lookup(
        self, uri: Rows, keys: pa.Table, select: Selection | None = None, distinct: bool = True
    ) -> pa.Table:
        """Rows of ``uri`` whose ``keys.column_names`` equal (null-safely) a row of ``keys``,
        always returned in-process (index pairs feed the next step)."""
        found = self.semi(uri, keys, select, distinct)
        return found if isinstance(found, pa.Table) else found.toArrow()

    def semi(
        self,
        uri: Rows,
        keys: pa.Table,
        select: Selection | None = None,
        distinct: bool = True,
    ) -> pa.Table | DataFrame:
        """Like :meth:`lookup`, but an answer that Spark computes (a store off the local file
        system) stays a (lazy) Spark DataFrame. A local store's is DuckDB's, however many keys
        (bounded by its memory limit and spill; more is a one-line error): before, a lookup of
        more than 2 M keys went to Spark, and its answer, collected past
        ``spark.driver.maxResultSize``, failed with Spark's stack trace."""
        if self.local:
            cond = " AND ".join(f"t.{quoted(c)} {_equals(keys, c)} k.{quoted(c)}" for c in keys.column_names)
            unique = "DISTINCT " if distinct else ""
            sql = f"SELECT {unique}{self._columns(select)} FROM {self._from(uri)} t SEMI JOIN __keys k"
            sql += f" ON {cond}{_in_list(keys)}"
            return self.query(sql, __keys=keys)
        df = self._read(uri)
        given = self.spark.createDataFrame(keys)
        picked = _selected(null_safe_match(df, given, {c: c for c in keys.column_names}, "left_semi"), select)
        return picked.distinct() if distinct else picked

    def ranges(self, uri: str, column: str, boxes: Boxes, select: Selection) -> pa.Table:
        """Distinct rows of ``uri`` whose int64 ``column`` falls in one of the 1-D ranges
        ``boxes.lo[:, 0]..boxes.hi[:, 0]`` (a range join: the ranges are never expanded)."""
        ranges = pa.table({"lo": boxes.lo[:, 0], "hi": boxes.hi[:, 0]})
        sql = (
            f"SELECT DISTINCT {self._columns(select)} FROM {self._from(uri)} t "
            f"JOIN __ranges r ON t.{quoted(column)} BETWEEN r.lo AND r.hi"
        )
        return self.query(sql, __ranges=ranges)

    def query(self, sql: str, **tables: pa.Table) -> pa.Table:
        """``sql`` run by DuckDB with the Arrow ``tables`` visible by their names."""
        for name, table in tables.items():
            self.con.register(name, table)
        try:
            return self.con.sql(sql).to_arrow_table()
        finally:
            for name in tables:
                self.con.unregister(name)

    def scan(self, uri: Rows, select: Selection | None = None, where: str | None = None) -> pa.Table:
        """Rows of ``uri`` (optionally only those matching the SQL predicate ``where`` over
        the selected names), in-process."""
        if self.local:
            sql = f"SELECT * FROM (SELECT {self._columns(select)} FROM {self._from(uri)} t)"
            if where is not None:
                sql += f" WHERE {where}"
            return self.con.sql(sql).to_arrow_table()
        return self.spark_scan(uri, select, where)

    def drawn(self, uri: str, places: pa.Table, select: Selection) -> pa.Table:
        """Rows of the local folder ``uri`` at the drawn ``places`` (:mod:`tracing.sample`),
        in process."""
        path = local_path(uri)
        assert path is not None
        return self.query(in_duck(path, self._columns(select), "SELECT * FROM __places"), __places=places)

    def spark_scan(
        self, uri: Rows | pa.Table, select: Selection | None = None, where: str | None = None
    ) -> pa.Table:
        """:meth:`scan` by Spark, whatever the store (or of rows in hand): ``where`` in Spark
        SQL's dialect."""
        df = _selected(self._read(uri), select)
        return (df.filter(F.expr(where)) if where is not None else df).toArrow()

    @staticmethod
    def _columns(select: Selection | None) -> str:
        if select is None:
            return "t.*"
        return ", ".join(f"t.{quoted(c)} AS {quoted(a)}" for c, a in select)
