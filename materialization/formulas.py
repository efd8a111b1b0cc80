"""Boolean lineage for the confidence backend (Trio's ULDB lineage, one derived relation per
segment), captured after the task ran.

Every row a segment can produce is a variable ``__var`` (a 64-bit hash of the segment and
the values that identify the row, as the eager capture's lineage ids). Its formula is written
over the variables of the segment's inputs: the rows of child segments (derived: deep lineage
expands them) and the base facts, which are the rows of uncertain source tables and the model
decisions of UDFs that declare a probability. Certain rows are TRUE and leave no trace.

One ``confidence/lineage`` table holds (seg, var, kind, clause) rows meaning

    λ(var) = ⋀ all-clauses ∧ ⋁ any-clauses ∧ ¬ ⋁ none-clauses      (a clause: ⋀ of its ids)

- any: one derivation of the row: the inputs joined into one body row (σ ⋈ ∪ π keep them
  together, α and duplicate elimination make alternatives of them);
- all: the segment's model decisions about the row (φ on top of the segment);
- none: for T1 − T2, the rows of T2 equal to the row: the row exists only if none does.

A difference removes rows in the run, but in other worlds those rows may exist, and a parent
of the difference must see them to write correct formulas (T1 − (A − B) holds a row of A
when B's row is absent). So segments at or above a difference are evaluated over *candidate*
rows: every row that exists in some world. Elsewhere the run's stored outputs are the
candidates (σ π ⋈ α ∪ φ are monotone: the run, where every fact holds, has every row).

``confidence/facts`` lists the base facts: (var, prob, grp, kind, label); facts of one ``grp``
are mutually exclusive alternatives (an x-tuple of a source table).
"""

from __future__ import annotations

from collections.abc import Callable
from functools import reduce
from operator import and_
from typing import Any

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T

from materialization.capture import lid_columns
from materialization.compile import TAG_PREFIX, Compiler, read_source, ref, sql_col, tags_of
from materialization.restore import read_stored, stored_columns
from materialization.store import DERIVED, ResultsStore, Uncertainty
from reasoning_udfs.udf import ERROR_MARKER, ReasoningUDF, lookup
from segmenter.errors import UnsupportedTaskError
from segmenter.operators import Difference, Function, Node, Source
from segmenter.segments import Segment

VAR = "__var"
FOLDER = "confidence"
LINEAGE = f"{FOLDER}/lineage"
FACTS = f"{FOLDER}/facts"

LINEAGE_SCHEMA = "seg int, var bigint, kind string, clause array<bigint>"
FACTS_SCHEMA = "var bigint, prob double, grp bigint, kind string, label string"


def hashed(prefix: str, cols: list[Column]) -> Column:
    """A 64-bit id of ``cols``' values in the namespace ``prefix`` (nulls told apart)."""
    return F.xxhash64(F.lit(prefix), *cols, *[c.isNull() for c in cols])


def refuse_unsound(root: Segment) -> None:
    """A bag difference (EXCEPT ALL) keeps a row where T1 has more copies of it than T2 in a
    world, which no formula of this form states (it counts): such a task is refused before
    it runs, rather than given a probability that is wrong where a row has several copies."""
    for seg in root.walk():
        if isinstance(seg.top, Difference) and seg.top.kind == "all":
            raise UnsupportedTaskError(
                "EXCEPT ALL (exceptAll) with backend='confidence'",
                f"segment {seg.id}",
                "it keeps a row where the left input has more copies of it than the right, which a "
                "boolean formula of rows cannot count: use EXCEPT (subtract), or another backend",
            )


def segment_var(run_id: str, seg: Segment) -> Column:
    """A row's variable: its values in the namespace of its segment in its run (a later run
    over this run's output has a segment 0 of its own, and must not meet these ids)."""
    return hashed(f"{run_id}/s{seg.id}", [ref(c) for c in lid_columns(seg)])


def root_vars(run_id: str, root: Segment, output: DataFrame) -> DataFrame:
    """The variable of each stored output row (the root's columns by id)."""
    return output.withColumn(VAR, segment_var(run_id, root))


def capture_formulas(
    spark: SparkSession,
    store: ResultsStore,
    staging: str,
    run_id: str,
    root: Segment,
    stored: dict[str, Any],
    progress: Callable[[str], None],
) -> dict[str, Any]:
    """Write the run's boolean lineage and base facts under ``staging``; returns their meta.

    ``stored`` says where the run (strategy full) stored each non-root segment's output."""
    capturer = _FormulaCapture(spark, store, staging, run_id, stored, root)
    for seg in root.post_order():
        progress(f"segment {seg.id} ({seg.pattern()}): writing its boolean lineage")
        capturer.segment(seg, seg is root)
    lineage = _union(spark, capturer.lineage, LINEAGE_SCHEMA).distinct()
    facts = _union(spark, capturer.facts, FACTS_SCHEMA).dropDuplicates(["var"])
    store.write_parquet(lineage.repartition(4, "var").sortWithinPartitions("var"), f"{staging}/{LINEAGE}")
    store.write_parquet(facts.coalesce(1).sortWithinPartitions("var"), f"{staging}/{FACTS}")
    counts = {
        name: spark.read.parquet(f"{staging}/{path}").count()
        for name, path in (("lineage", LINEAGE), ("facts", FACTS))
    }
    return {
        "lineage": LINEAGE,
        "facts": FACTS,
        "rows": counts,
        "bytes": store.size(f"{staging}/{FOLDER}"),
        "uncertain_tables": sorted(capturer.uncertain),
        "uncertain_udfs": sorted(capturer.uncertain_udfs),
        "upstream": sorted(capturer.upstream),
    }


class _FormulaCapture:
    def __init__(
        self,
        spark: SparkSession,
        store: ResultsStore,
        staging: str,
        run_id: str,
        stored: dict[str, Any],
        root: Segment,
    ):
        self.spark = spark
        self.firsts = root.firsts()
        self.run_id = run_id
        self.store = store
        self.staging = staging
        self.stored = stored
        self.candidates: dict[int, DataFrame] = {}  # segment id -> its candidate rows + VAR
        self.lineage: list[DataFrame] = []
        self.facts: list[DataFrame] = []
        self.uncertain: set[str] = set()
        self.uncertain_udfs: set[str] = set()
        self.upstream: set[str] = set()  # earlier confidence runs this one's lineage refers to

    # --- inputs -------------------------------------------------------------------------------
    def _input(self, seg: Segment, j: int, leaf: Node) -> DataFrame:
        """A segment input whose tag is the variable of each row (none for a certain table)."""
        tag = f"{TAG_PREFIX}{j}"
        child = seg.child_for(leaf)
        if child is not None:
            rows = self.candidates[child.id]
            return rows.select(*[ref(c.id) for c in leaf.columns], ref(VAR).alias(tag))
        assert isinstance(leaf, Source)
        df = read_source(self.spark, leaf)
        uncertainty = self.store.uncertainty(leaf.snapshot)
        upstream = self.store.derived_from(leaf.snapshot)
        if uncertainty is None and upstream is None:
            return df
        fact = hashed(f"t:{leaf.snapshot}", [ref(k) for k in leaf.key])
        if leaf.table not in self.uncertain:
            self.uncertain.add(leaf.table)
            if upstream is not None:
                self._link(df, leaf, fact, upstream)
            else:
                assert uncertainty is not None
                self.facts.append(_source_facts(df, leaf, uncertainty, fact))
        return df.withColumn(tag, fact)

    def _link(self, df: DataFrame, leaf: Source, fact: Column, upstream: str) -> None:
        """A row of an earlier confidence run's output is a derived fact: λ(row) = ⋁ of the
        run's rows it stands for, whose formulas stay in that run (deep lineage, as a ULDB
        query over a derived relation). The lookups follow the chain of runs."""
        column = {c.name: c.id for c in leaf.cols}[DERIVED]
        behind = df.select(fact.alias("var"), F.explode(ref(column)).alias("row"))
        self.lineage.append(
            behind.select(
                F.lit(-1).alias("seg"), "var", F.lit("any").alias("kind"), F.array("row").alias("clause")
            )
        )
        record = self.store.read_record(f"{upstream}/run.json")
        self.upstream |= {upstream, *record["confidence"].get("upstream", [])}

    # --- segments -----------------------------------------------------------------------------
    def segment(self, seg: Segment, is_root: bool) -> None:
        inputs = {id(leaf): self._input(seg, j, leaf) for j, leaf in enumerate(seg.leaves)}
        if seg.is_d:
            rows = self._difference(seg, inputs)
        else:
            rows = self._candidates(seg, inputs, is_root).withColumn(VAR, segment_var(self.run_id, seg))
            self._derivations(seg, inputs)
            for fn in seg.functions:
                self._decisions(seg, fn, rows)
        if not is_root:
            self.candidates[seg.id] = rows

    def _candidates(self, seg: Segment, inputs: dict[int, DataFrame], is_root: bool) -> DataFrame:
        """Every row the segment can produce. The root's are the output rows (the rows anyone
        asks about); a segment free of differences below has them stored by the run."""
        if is_root:
            return self.spark.read.parquet(f"{self.staging}/output")
        if not _has_difference(seg):
            info = self.stored[str(seg.id)]
            pairs = stored_columns(info, seg, self.firsts)
            return read_stored(self.spark, f"{self.staging}/{info['dir']}", pairs, seg)
        untagged = {k: v.drop(*tags_of(v)) for k, v in inputs.items()}
        unchecked = Compiler(self.spark, "reasoning", inputs=lambda n: untagged.get(id(n)), checks=False)
        return unchecked.compile(seg.top)

    def _derivations(self, seg: Segment, inputs: dict[int, DataFrame]) -> None:
        """'any' clauses: one per body row (its inputs' variables), keyed like the output."""
        if seg.aggregations and not seg.aggregations[0].key_ids:
            # a global aggregate has its one row in every world, over no input rows too
            row = self.spark.range(1).select(segment_var(self.run_id, seg).alias(VAR))
            self.lineage.append(_clauses(row, seg, "any", []))
            return
        body = Compiler(
            self.spark, "normal", inputs=lambda n: inputs.get(id(n)), tagged=True, checks=False, frames=False
        )
        df = body.compile(seg.body_top)
        for agg in reversed(seg.aggregations):
            df = df.withColumns({c.id: sql_col(e) for c, e in agg.keys})
        df = df.withColumn(VAR, segment_var(self.run_id, seg))
        self.lineage.append(_clauses(df, seg, "any", tags_of(df)))

    def _decisions(self, seg: Segment, fn: Function, rows: DataFrame) -> None:
        """'all' clauses and facts: the model decisions a row of the segment rests on."""
        udf = lookup(fn.udf)
        if type(udf).probability is ReasoningUDF.probability:
            return  # the UDF declares no probability: its decisions are certain
        self.uncertain_udfs.add(fn.udf)
        args = [ref(c.id) for c in fn.arg_columns()]
        value, reason = ref(fn.value.id), ref(fn.reason.id)
        fact = hashed(f"f:{fn.udf}", [*args, value])
        label = F.concat(
            F.lit(f"{fn.udf}("), F.to_json(F.struct(*args)), F.lit(") = "), value.cast("string")
        )
        decided = rows.filter(value.isNotNull()).select(
            ref(VAR), fact.alias("fact"), label.alias("label"), _probability(udf)(value, reason).alias("prob")
        )
        self.lineage.append(
            decided.select(
                F.lit(seg.id).alias("seg"), ref(VAR).alias("var"), F.lit("all").alias("kind"),
                F.array(F.col("fact")).alias("clause"),
            )
        )
        self.facts.append(
            decided.select(
                F.col("fact").alias("var"), F.col("prob"), F.lit(None).cast("bigint").alias("grp"),
                F.lit("model").alias("kind"), F.col("label"),
            )
        )

    def _difference(self, seg: Segment, inputs: dict[int, DataFrame]) -> DataFrame:
        """T1 − T2 over candidates: every T1 row (any: its equal T1 rows), none: its equal
        T2 rows. Rows keep T1's column ids, as the difference's output does."""
        node = seg.top
        assert isinstance(node, Difference)
        cols = [c.id for c in node.left.match_columns()]
        left = inputs[id(node.left)]
        right = inputs[id(node.right)]
        right_tags = tags_of(right)
        right = right.select(
            *[ref(s.id).alias(f"__m{i}") for i, s in enumerate(node.right.match_columns())], *right_tags
        )
        left = left.withColumn(VAR, segment_var(self.run_id, seg))
        self.lineage.append(_clauses(left, seg, "any", tags_of(left)))
        rows = left.select(*[ref(c) for c in cols], ref(VAR)).distinct()
        equal = reduce(and_, [ref(c).eqNullSafe(F.col(f"__m{i}")) for i, c in enumerate(cols)])
        self.lineage.append(_clauses(rows.join(right, equal, "inner"), seg, "none", right_tags))
        return rows


def _clauses(df: DataFrame, seg: Segment, kind: str, tags: list[str]) -> DataFrame:
    """(seg, var, kind, clause) rows: the clause holds the row's non-null tags (a union's
    branch leaves the other branches' tags null; a certain input has none: TRUE)."""
    ids = F.array(*[ref(t).cast("bigint") for t in tags]) if tags else F.array().cast("array<bigint>")
    return df.select(
        F.lit(seg.id).alias("seg"), ref(VAR).alias("var"), F.lit(kind).alias("kind"),
        F.array_sort(F.array_distinct(F.filter(ids, lambda x: x.isNotNull()))).alias("clause"),
    )


def _source_facts(df: DataFrame, leaf: Source, uncertainty: Uncertainty, fact: Column) -> DataFrame:
    names = {c.name.lower(): c.id for c in leaf.cols}
    conf = ref(names[uncertainty.confidence.lower()])
    group = F.lit(None).cast("bigint")
    if uncertainty.alternatives:  # a row whose group is NULL stands alone
        alt = ref(names[uncertainty.alternatives.lower()])
        group = F.when(alt.isNotNull(), hashed(f"g:{leaf.table}", [alt]))
    key = F.struct(*[ref(k).alias(n) for k, n in zip(leaf.key, _key_names(leaf))])
    label = F.concat(F.lit(f"{leaf.table}"), F.to_json(key))
    return df.select(
        fact.alias("var"), conf.cast("double").alias("prob"), group.alias("grp"),
        F.lit("source").alias("kind"), label.alias("label"),
    )


def _key_names(leaf: Source) -> list[str]:
    by_id = {c.id: c.name for c in leaf.cols}
    return [by_id[k] for k in leaf.key]


def _probability(udf: ReasoningUDF) -> Any:
    """``udf.probability`` as a Spark UDF over (value, reason), checked to be a probability."""

    def prob(value: Any, reason: Any) -> float:
        p = udf.probability(value, reason.asDict(recursive=True) if reason is not None else None)
        p = 1.0 if p is None else float(p)
        if not 0.0 <= p <= 1.0:
            raise ValueError(
                f"{ERROR_MARKER}[{udf.name}] declared probability {p!r} for value {value!r}; "
                f"a probability must be in [0, 1]{ERROR_MARKER}"
            )
        return p

    return F.udf(prob, T.DoubleType())


def _has_difference(seg: Segment) -> bool:
    return any(s.is_d for s in seg.walk())


def _union(spark: SparkSession, frames: list[DataFrame], schema: str) -> DataFrame:
    if not frames:
        return spark.createDataFrame([], schema)
    out = frames[0]
    for df in frames[1:]:
        out = out.unionByName(df)
    return out
