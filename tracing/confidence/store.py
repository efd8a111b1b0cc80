"""A confidence run's boolean lineage and base facts, read back from the results store
(with those of the earlier confidence runs whose outputs it read).

``lam`` answers a whole level of the lineage DAG per call (one lookup in the lineage table,
sorted by variable), which is the access pattern :class:`~tracing.confidence.deep.LineageGraph`
uses. Rows are turned into formulas exactly as :mod:`materialization.formulas` defines them.
"""

from __future__ import annotations

from collections.abc import Collection
from functools import cached_property
from typing import Any

import pyarrow as pa

from materialization.locations import local_path
from materialization.spark import SparkOf
from tracing.confidence.facts import Facts
from tracing.confidence.formula import Formula, Var, conj, disj, neg
from tracing.parquet_reader import ParquetReader


class FormulaStore:
    def __init__(self, spark_of: SparkOf | None, run_dir: str, meta: dict[str, Any]) -> None:
        """``spark_of`` may be None inside a Spark task: a local store is read by DuckDB alone."""
        self.meta = meta
        self.reader = ParquetReader(spark_of, local_path(run_dir) is not None)
        runs = [run_dir, *meta.get("upstream", [])]  # earlier runs whose output it read
        self.lineage_uris = [f"{r}/{meta['lineage']}" for r in runs]
        self.facts_uris = [f"{r}/{meta['facts']}" for r in runs]
        self.lookups = 0  # lineage-table lookups made (one per level of the DAG)

    def lam(self, ids: Collection[int]) -> dict[int, Formula]:
        """λ of the derived variables among ``ids`` (base facts are absent from the answer)."""
        if not ids:
            return {}
        self.lookups += 1
        keys = pa.table({"var": pa.array(sorted(ids), pa.int64())})
        select = [(c, c) for c in ("var", "kind", "clause")]
        rows = pa.concat_tables([self.reader.lookup(uri, keys, select) for uri in self.lineage_uris])
        parts: dict[int, dict[str, list[Formula]]] = {}
        for var, kind, clause in zip(*(rows.column(c).to_pylist() for c in ("var", "kind", "clause"))):
            parts.setdefault(var, {"all": [], "any": [], "none": []})[kind].append(
                conj(*[Var(i) for i in clause])
            )
        return {var: conj(*p["all"], disj(*p["any"]), neg(disj(*p["none"]))) for var, p in parts.items()}

    @cached_property
    def _facts_table(self) -> pa.Table:
        return pa.concat_tables([self.reader.scan(uri) for uri in self.facts_uris])

    @cached_property
    def facts(self) -> Facts:
        """Every base fact of the run (uncertain source rows and model decisions)."""
        t = self._facts_table
        vs, ps, gs = (t.column(c).to_pylist() for c in ("var", "prob", "grp"))
        return Facts(dict(zip(vs, ps)), {v: g for v, g in zip(vs, gs) if g is not None})

    @cached_property
    def labels(self) -> dict[int, str]:
        """A person's name for each base fact: ``table{"key": ...}`` or ``udf({E}) = value``."""
        t = self._facts_table
        return dict(zip(t.column("var").to_pylist(), t.column("label").to_pylist()))

    @cached_property
    def kinds(self) -> dict[int, str]:
        t = self._facts_table
        return dict(zip(t.column("var").to_pylist(), t.column("kind").to_pylist()))
