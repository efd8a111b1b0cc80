"""The AL manager (paper §6.2): register sources, run tasks under a strategy, and ask any
run, in this process or a later one, for the augmented lineage of its output rows.

    als = LineageSession(store="al_store")
    als.register_table("client", client_df, key="ClientID")
    run = als.run(task_dataframe_or_sql, strategy="fm")
    print(run.lineage(where="Judge = 'Reject'"))

Two lineage backends answer the same questions: ``lazy`` (tracing queries at question time,
nothing captured while the task runs) and ``eager`` (``als.run(task, backend="eager")``:
lineage indexes captured while the task runs, questions answered from them in-process; it
also answers forward questions, :meth:`Run.forward`). A third, ``confidence``, answers them
as ``lazy`` does and also keeps boolean lineage over uncertain facts (source rows declared
uncertain, model decisions with a probability), so :meth:`Run.confidence` can say how
likely each output row is.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import warnings
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import replace
from datetime import UTC, datetime
from functools import cached_property
from typing import TYPE_CHECKING, Any, Protocol, TypeAlias

import duckdb
import pyarrow as pa
from pyspark.errors import AnalysisException, ParseException
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from materialization import duck, fingerprints
from materialization.capture import Capture
from materialization.compile import aliased, compared, ident, read_columns, ref, source_rows, visible
from materialization.compressed_index import COMPRESSED
from materialization.duck_expressions import NotInProcess
from materialization.execute import execute_run, translate_task_errors
from materialization.fingerprints import check_fingerprints, fingerprint
from materialization.formulas import VAR, refuse_unsound, root_vars
from materialization.integrity import Check, budget, check_run, check_snapshot
from materialization.restore import Restorer
from materialization.settle import settle
from materialization.spark import SparkOf, spark_session, tuned_for_lookups
from materialization.store import DERIVED, ResultsStore, Uncertainty, new_id
from materialization.strategies import check_reasons, check_strategy, resolve_reasons
from models.checksums import changed_weights, udf_models
from reasoning_udfs.udf import load_declared, lookup
from segmenter.errors import LineageError
from segmenter.operators import Function, Node, Source, Task
from segmenter.parser import parse_dataframe
from segmenter.rewrites import rewritten
from segmenter.segments import Segment, render_segments, segment
from segmenter.sources import Keys, read_by_spark_only, read_through
from segmenter.step_words import step_names, user_columns
from tracing import sample as sampled
from tracing import views
from tracing.allowed_sql import (
    TASK_CHARS,
    TASK_DEPTH,
    TASK_OPERATORS,
    check_bounded,
    check_question,
    stored_task,
)
from tracing.confidence.answer import ConfidenceAnswer
from tracing.confidence.batch import batch_confidences
from tracing.confidence.checks import always_together, can_coexist, extraneous
from tracing.confidence.formula import Formula
from tracing.confidence.rows import Target, expanded, row_confidences
from tracing.confidence.store import FormulaStore
from tracing.derive import Read, derive
from tracing.eager import EagerIndex
from tracing.engines import Engine, Settled, choose_engine
from tracing.engines.in_process import DuckEngine
from tracing.engines.spark_engine import SparkEngine
from tracing.errors import NotCapturedError, TargetNotFoundError, filter_where, first_line, value_errors
from tracing.forward import ForwardLineage
from tracing.lineage import PER_ROW_MAX, AugmentedLineage, as_arrow
from tracing.parquet_reader import ParquetReader
from tracing.regions import RegionLineage, region_lineage
from tracing.task_code import with_code
from tracing.tracking import Option, track

if TYPE_CHECKING:
    import pandas as pd

BACKENDS = ("lazy", "eager", "compressed", "confidence")
SNAPSHOTS = ("in-place", "copy")  # how sources of the user's files are read
CAPTURED = {"eager": "pairs", "compressed": "provrc"}  # captured backends -> their index storage
BUDGET = 20_000  # Shannon expansions an exact evaluation may take before "auto" samples

TableData: TypeAlias = "DataFrame | pd.DataFrame | str"  # pandas imported when a table is registered


class RunListener(Protocol):
    """Told when a run starts (``record``: what is known then: run id, strategy, backend,
    reasons, the files read in place, the start time, the name) and when it ends (the run's
    record, or that first one and the error)."""

    def started(self, record: Mapping[str, Any], task: Task, store: str) -> None: ...

    def ended(
        self, record: Mapping[str, Any], task: Task, store: str, error: BaseException | None
    ) -> None: ...


class LineageSession:
    def __init__(
        self,
        spark: SparkSession | None = None,
        store: str = "al_store",
        progress: Callable[[str], None] | None = None,
        mlflow: Option = None,
        start_spark: SparkOf = spark_session,
        listeners: Sequence[RunListener] = (),
    ) -> None:
        """``mlflow``: each run is logged into the active MLflow run when there is one (None);
        True, a folder or a tracking URI also starts one per run otherwise; False: never.
        ``listeners`` are told when each run starts and ends, e.g.
        ``tracing.present.openlineage_event.OpenLineageEmitter``, which sends its OpenLineage
        START, then COMPLETE or FAIL.
        Without ``spark``, ``start_spark`` makes the session when something first needs it:
        questions a local store answers in process never start a JVM."""
        if spark is not None and type(spark).__module__.startswith("pyspark.sql.connect"):
            raise LineageError(
                "Spark Connect sessions are not supported: lineage is read from Spark's analyzed plan "
                "through the driver's JVM, which a Connect client has not; use a classic SparkSession "
                "(SparkSession.builder.master(...).getOrCreate(), or LineageSession() to make one)"
            )
        self.started_spark = spark  # None until a session is needed
        self._start_spark = start_spark
        self.mlflow = mlflow
        self.listeners = list(listeners)
        self.scale_factor: float | None = None  # logged with each run when a workload sets it
        self.store = ResultsStore(lambda: self.spark, store)
        if not self.store.catalog.exists():
            self.store.check_writable()  # a new store is made now; an existing one may be read-only
        self.progress = progress or (lambda msg: None)

    @property
    def spark(self) -> SparkSession:
        """The Spark session, started on first use."""
        if self.started_spark is None:
            self.started_spark = self._start_spark()
        return self.started_spark

    # --- sources ------------------------------------------------------------------------------
    def register_table(
        self,
        name: str,
        data: TableData,
        key: str | Sequence[str] | None = None,
        confidence: str | None = None,
        alternatives: str | None = None,
        replace: bool = False,
    ) -> DataFrame:
        """Persist ``data`` (DataFrame, pandas DataFrame or Parquet path) as source ``name``.

        ``key`` names the column(s) that identify a row; without one, a ``_rid`` column of
        stable row ids is added and stored with the data. ``confidence`` makes the table
        uncertain: that column holds each row's probability (rows independent), and rows with
        equal ``alternatives`` values are mutually exclusive alternatives of one fact. A name
        registered before with other columns needs ``replace=True``."""
        import pandas as pd  # deferred: a question from the command line needs no pandas

        keys = [key] if isinstance(key, str) else list(key) if key else None
        if isinstance(data, pd.DataFrame):
            _check_pandas(name, data, keys or [])
            data = self.spark.createDataFrame(data)
        elif isinstance(data, str):
            data = self.spark.read.parquet(data)
        if alternatives is not None and confidence is None:
            raise ValueError("alternatives= needs confidence= (the column of each alternative's probability)")
        uncertainty = Uncertainty(confidence, alternatives) if confidence else None
        self.progress(f"registering source table {name}")
        self.store.register_source(name, data, keys, uncertainty, replace=replace)
        return self.table(name)

    def register_result(
        self, name: str, run: Run, key: str | Sequence[str] | None = None, replace: bool = False
    ) -> DataFrame:
        """Register the output of a confidence run as source ``name`` (one row per distinct
        output row) that keeps its lineage: a later ``backend="confidence"`` run over it
        expands into this run's formulas, so rows that share facts stay dependent (deep
        lineage across a sequence of tasks, as ULDB derived relations)."""
        run.formulas  # noqa: B018  (refuses a run that kept no boolean lineage)
        names = [c.name for c in run.task.output]
        rows = run._visible_vars(run._stored_output)
        derived = rows.groupBy(*[F.col(f"`{n}`") for n in names]).agg(
            F.sort_array(F.collect_set(VAR)).alias(DERIVED)
        )
        keys = [key] if isinstance(key, str) else list(key) if key else None
        self.progress(f"registering the output of run {run.id} as source table {name}")
        self.store.register_source(name, derived, keys, derived_from=run.dir, replace=replace)
        return self.table(name)

    def table(self, name: str) -> DataFrame:
        """The current snapshot of source ``name`` (also registered as a SQL view)."""
        ref_ = self.store.current_source(name)
        df = self.store.read_snapshot(ref_.snapshot)
        df.createOrReplaceTempView(name)
        return df

    def sql(self, query: str) -> DataFrame:
        """A Spark SQL query over the registered source tables."""
        check_bounded(query, "the SQL task", TASK_CHARS, TASK_OPERATORS, TASK_DEPTH)
        for name in self.store.source_names():
            self.table(name)
        try:
            return self.spark.sql(query)
        except (AnalysisException, ParseException) as exc:
            raise LineageError(f"invalid SQL task: {first_line(exc)}") from None

    # --- tasks --------------------------------------------------------------------------------
    def parse(self, task: DataFrame | str, keys: Keys | None = None) -> Task:
        """The operator tree of a DataFrame or SQL task; ``keys``: the columns that identify
        the rows of sources read in place, by table name (without one, file and position)."""
        text = task if isinstance(task, str) else ""
        df = self.sql(task) if isinstance(task, str) else task
        return parse_dataframe(df, self.store.resolve, text, keys)

    def _placed(self, task: Task, snapshot: str) -> tuple[Task, list[dict[str, Any]]]:
        """``task`` reading each source of the user's files where it is, or through a copy in
        the store: with ``snapshot="copy"``, and where only Spark reads the files as the task
        did (:func:`read_by_spark_only`; a copy made once per version of the files, reused);
        and the fingerprint of every such source's files, which the run records."""
        found: dict[str, dict[str, Any]] = {}
        copies: dict[str, str] = {}
        for leaf in task.root.walk():
            if not isinstance(leaf, Source) or leaf.files is None or leaf.table in found:
                continue
            self.progress(f"fingerprinting source {leaf.table} ({len(leaf.files.paths)} file(s))")
            entry = found[leaf.table] = fingerprint(leaf)
            entry["copy"] = snapshot == "copy"
            if entry["copy"] or read_by_spark_only(leaf.files):
                entry["snapshot"] = copies[leaf.table] = self._copy(leaf, entry)
        return read_through(task, copies), list(found.values())

    def _copy(self, leaf: Source, entry: dict[str, Any]) -> str:
        """The store's copy of ``leaf``'s files as fingerprinted in ``entry``, made if none is."""
        named = [fingerprints.files_version(entry), leaf.key_names, [c.name for c in leaf.cols]]
        digest = hashlib.sha256(json.dumps(named).encode()).hexdigest()  # a touched file: the same copy
        found = self.store.copy_of(leaf.table, digest)
        if found is not None:
            return found.snapshot
        self.progress(f"copying source {leaf.table} into the store")
        rows = source_rows(self.spark, leaf)
        copied = self.store.register_source(
            leaf.table, rows, leaf.key_names, folder="copies", fingerprint=digest
        )
        return copied.snapshot

    def run(
        self,
        task: DataFrame | str,
        strategy: str | None = None,
        run_id: str | None = None,
        backend: str = "lazy",
        capture: Capture | None = None,
        code: str | None = None,
        reasons: str = "auto",
        keys: Keys | None = None,
        snapshot: str = "in-place",
        name: str | None = None,
    ) -> Run:
        """Run ``task`` and persist it.

        ``backend="lazy"`` (default): under ``strategy`` rerun, full or fm (default fm).
        ``backend="eager"``: capture lineage indexes while the task runs; every intermediate
        result is stored as under ``full`` (the only strategy it takes). ``capture`` prunes
        what is captured (tables, directions) or coarsens it (granularity), see
        :class:`materialization.capture.Capture`. ``backend="compressed"``: the same capture,
        its indexes kept as ProvRC range-compressed relations (``Capture(storage=("pairs",
        "provrc"))`` keeps both). ``backend="confidence"``: also under
        ``full``, plus the boolean lineage of every row over uncertain facts. ``code``: the
        code that built a DataFrame task, recorded for reports (else Spark's analyzed plan).
        ``reasons="lazy"`` (lazy and eager backends): model calls run in normal mode while the
        task runs; a question computes the reasons of the calls it reaches and keeps them in the
        run; ``"eager"``: reasons computed while the task runs; ``"auto"`` (default): lazy where a
        model's reasons are expensive (``ReasoningUDF.reason_cost``) on the lazy and eager
        backends (a forward question filtering on reasons computes every call's once), eager on
        the others.

        Sources read with ``spark.read`` (Parquet, ORC, CSV, JSON), catalog tables and views
        over them are read where they are, fingerprinted; a question about the run fails in
        one line if one of their files changed since. ``keys``: the columns naming each such
        table's rows (``{"orders": "order_id"}``), else file and position. ``snapshot="copy"``
        reads them through a copy in the store instead, for files that change. ``name``: the
        task's, naming the run's MLflow run and OpenLineage job (default: the function its
        code defines, else ``al.<tables read>.<digest>``)."""
        if snapshot not in SNAPSHOTS:
            raise ValueError(f"snapshot must be one of {', '.join(SNAPSHOTS)}, not {snapshot!r}")
        if backend not in BACKENDS:
            raise ValueError(f"backend must be one of {', '.join(BACKENDS)}, not {backend!r}")
        if run_id is not None:
            self.store.check_new_run(run_id)
        if backend != "lazy":
            if strategy not in (None, "full"):
                raise ValueError(
                    f"backend={backend!r} stores every intermediate result, as strategy 'full' does; "
                    f"leave strategy out (got {strategy!r})"
                )
            strategy = "full"
        if backend in CAPTURED:
            capture = capture or Capture()
            if capture.storage is None:
                capture = replace(capture, storage=(CAPTURED[backend],))
            elif CAPTURED[backend] not in capture.storage:
                raise ValueError(
                    f"backend={backend!r} keeps its indexes as {CAPTURED[backend]!r}; "
                    f"capture= asks for storage {list(capture.storage)}"
                )
        elif capture is not None:
            raise ValueError("capture= applies to backend='eager' or 'compressed' only")
        strategy = check_strategy(strategy or "fm")
        if check_reasons(reasons) == "lazy" and backend not in ("lazy", "eager"):
            raise ValueError(
                f"reasons='lazy' applies to backend='lazy' or 'eager' only (got backend={backend!r})"
            )
        parsed, read_in_place = self._placed(with_code(self.parse(task, keys), task, code), snapshot)
        check = Check(self.store.catalog.fs, budget=budget())
        for snap in sorted({n.snapshot for n in parsed.root.walk() if isinstance(n, Source) and n.in_store}):
            check_snapshot(self.store.catalog, snap, None, check)
        check.raise_any("a source the task reads is damaged")
        if backend in ("lazy", "eager"):
            costs = [lookup(n.udf).reason_cost for n in parsed.root.walk() if isinstance(n, Function)]
            reasons = resolve_reasons(reasons, strategy, costs)
        else:
            reasons = "eager"
        root = segments_for(parsed.root, backend)
        if capture is not None:
            capture.resolve(parsed)  # a bad declaration fails before anything runs
        if backend == "confidence":
            refuse_unsound(root)
        run_id = run_id or new_id("r")
        self.progress(f"run {run_id}: {strategy}/{backend}, {len(list(root.walk()))} segment(s)")
        begun = {
            "run_id": run_id, "strategy": strategy, "backend": backend, "reasons": reasons,
            "read_in_place": read_in_place, "created": datetime.now(UTC).isoformat(),
            **({"name": name} if name else {}),
        }  # fmt: skip
        self._tell("started", begun, parsed, self.store.uri)
        try:
            record = execute_run(
                self.spark, self.store, parsed, root, strategy, run_id, self.progress, capture,
                confidence=backend == "confidence", reasons=reasons, read_in_place=read_in_place, name=name,
            )
        except BaseException as failed:
            self._tell("ended", begun, parsed, self.store.uri, failed)
            raise
        self._tell("ended", record, parsed, self.store.uri, None)
        done = Run(self, record, parsed, root)
        done.mlflow_run = track(done, self.mlflow, self.scale_factor)
        return done

    def _tell(self, news: str, *args: Any) -> None:
        """Each listener told (``news``: ``started`` or ``ended``); one that fails (a lineage
        server down) is said, not raised: the run is the user's, its telling a side matter."""
        for listener in self.listeners:
            try:
                getattr(listener, news)(*args)
            except Exception as exc:
                warnings.warn(f"{type(listener).__name__} failed: {first_line(exc)}", stacklevel=3)

    def load_run(self, run_id: str) -> Run:
        """A run persisted earlier, possibly by another process."""
        record = self.store.read_run(run_id)
        for name in record.get("udfs", {}):
            # only needed to recompute (a clear error comes then if the UDF is missing); the
            # module the record names is never imported: the store does not choose code
            with contextlib.suppress(ImportError):
                load_declared(name)
        task = stored_task(record, run_id, lambda: self.spark)  # its expressions run at question time
        check = Check(self.store.catalog.fs, budget=budget())
        check_run(self.store.catalog, record, check)
        check.raise_any(f"run {run_id} is damaged")
        native = "capture" not in record or record["capture"].get("outer_joins") == "native"
        root = segments_for(task.root, record.get("backend", "lazy"), native)
        return Run(self, record, task, root, changed_weights(record.get("models", {})))

    def runs(self) -> list[str]:
        return self.store.run_ids()


def segments_for(root: Node, backend: str, native: bool = True) -> Segment:
    """The segments a run of ``backend`` runs and answers from: an outer join is one
    operator, evaluated, traced and captured in one step, except for the confidence
    backend, whose formulas are built for the seven operators, and an eager or compressed
    run captured before that (not ``native``): they run its rewrite."""
    return segment(rewritten(root) if backend == "confidence" or not native else root)


class Run:
    """A task run kept in the results store."""

    def __init__(
        self,
        session: LineageSession,
        record: dict[str, Any],
        task: Task,
        root: Segment,
        warnings: Sequence[str] = (),
    ):
        """``warnings``: what an answer from this run should say, e.g. that a model's weights
        changed since the run was made."""
        self.session = session
        self.record = record
        self.task = task
        self.root = root
        self.warnings = list(warnings)
        self.mlflow_run: str | None = None  # the MLflow run it was logged as by this process
        self._indexes: dict[str, EagerIndex] = {}

    @property
    def run_id(self) -> str:
        """The run's id, as its answers (``lin.run_id``), every JSON and `al` name it."""
        return self.record["run_id"]

    id = run_id  # the short name

    @property
    def models(self) -> dict[str, dict[str, str]]:
        """The weights file and sha256 behind each model UDF, as recorded when the run was
        made (for a run recorded before runs held them: the files there now)."""
        return self.record.get("models") or udf_models(sorted(self.record.get("udfs", {})))

    @property
    def strategy(self) -> str:
        return self.record["strategy"]

    @property
    def backend(self) -> str:
        return self.record.get("backend", "lazy")

    @property
    def dir(self) -> str:
        return self.session.store.run_dir(self.id)

    @property
    def _output_path(self) -> str:
        return f"{self.dir}/{self.record['output']['dir']}"

    @cached_property
    def _restorer(self) -> Restorer:
        """Reads the run's stored segments; made once, as it works out which segments share
        files (5 ms of CDA Q9's 110 ms question)."""
        return Restorer(lambda: self.session.spark, self.dir, self.record["stored"], self.root)

    @cached_property
    def _stored_output(self) -> DataFrame:
        """The root's rows by column id (an eager run stores lineage columns beside them)."""
        cols = self.task.root.columns
        df = read_columns(self.session.spark, self._output_path, [(c.id, c.dtype) for c in cols])
        return df.selectExpr(*[ident(c.id) for c in cols])

    def _index(self, backend: str) -> EagerIndex:
        """The run's captured indexes as kept for ``backend`` (eager: Parquet pairs,
        compressed: ProvRC), opened once."""
        storage = CAPTURED.get(backend)
        kept = self.record.get("capture", {}).get("capture", {}).get("storage", ["pairs"])
        if storage is None or storage not in kept or "capture" not in self.record:
            raise NotCapturedError(
                f"run {self.id} kept no {backend if storage else 'captured'} lineage indexes (backend "
                f"{self.backend!r}); run the task with backend='eager' or 'compressed' to ask forward "
                "questions or answer from indexes"
            )
        if storage not in self._indexes:
            self._indexes[storage] = EagerIndex(
                lambda: self.session.spark, self.session.store, self.record, self.task, self.root, storage,
                self._said,
            )
        return self._indexes[storage]

    def _said(self, news: str) -> None:
        """What a question says it is doing, to the session's progress (read when said)."""
        self.session.progress(news)

    @property
    def index_bytes(self) -> int:
        """Bytes of the lineage indexes the capture wrote (0 for a lazy run; a forward index
        sorted by a first forward question is a cache of the run, not counted)."""
        meta = self.record.get("capture")
        if not meta:
            return 0
        sizes = [d["bytes"] for info in meta["indexes"].values() for k, d in info.items() if k != "attrs"]
        sizes += [d["bytes"] for sets in meta["controls"].values() for d in sets.values()]
        sizes += [d["bytes"] for d in meta.get("reads", {}).values()]
        compressed = meta.get(COMPRESSED)
        if compressed:
            sizes.append(compressed["bytes"])
        return sum(sizes) + (meta["ctl"]["bytes"] if meta.get("ctl") else 0)

    @property
    def output(self) -> DataFrame:
        """The task's result as the user's query defines it."""
        return visible(self.task, self._stored_output)

    def tree(self) -> str:
        return self.task.render()

    def segments(self) -> str:
        return render_segments(self.root)

    @property
    def stored_tuples(self) -> int:
        return sum(s["rows"] for s in self.record["stored"].values() if "same_as" not in s)

    @property
    def stored_bytes(self) -> int:
        return sum(s["bytes"] for s in self.record["stored"].values())

    def _repr_html_(self) -> str:
        return views.html(self)

    def __repr__(self) -> str:
        return (
            f"<Run {self.id} strategy={self.strategy} backend={self.backend} "
            f"output_rows={self.record['output']['rows']}>"
        )

    # --- lineage ------------------------------------------------------------------------------
    def lineage(
        self,
        where: str | None = None,
        rows: Sequence[dict[str, Any] | Sequence[Any]] | None = None,
        sample: int | None = None,
        seed: int = 0,
        backend: str | None = None,
        engine: str | None = None,
    ) -> AugmentedLineage:
        """Augmented lineage of output rows: those matching the SQL predicate ``where``, the
        given ``rows`` (dicts by column name, or tuples in output column order), ``sample``
        rows drawn with ``seed`` (as places in the stored output: the same rows on every engine
        and backend, see :mod:`tracing.sample`), or, with none of these, every output row.

        ``backend``: the run's own by default; ``"lazy"`` traces an eager run with tracing
        queries instead of reading its indexes. ``engine`` runs those tracing queries:
        ``"in-process"`` (DuckDB over the run's files, no Spark job), ``"spark"``, or
        ``"auto"`` (the default, or ``$AL_TRACING_ENGINE``), in process wherever that gives
        Spark's answers exactly."""
        self._check_choice(where, rows, sample)
        self._check_sources()
        backend = backend or self.backend
        if backend not in BACKENDS:
            raise ValueError(f"backend must be one of {', '.join(BACKENDS)}, not {backend!r}")
        if backend == "confidence" and self.backend != "confidence":
            raise ValueError(
                f"run {self.id} kept no boolean lineage (backend {self.backend!r}): its rows have no "
                "probabilities; run the task with backend='confidence'"
            )
        drawn = self._drawn(sample, seed)
        advice = "set it higher, or ask with backend='lazy', engine='spark'"
        with tuned_for_lookups(self.session.started_spark), duck.bounded("answering in process", advice):
            if backend in CAPTURED:
                found = self._eager_lineage(self._index(backend), where, rows, drawn)
            else:
                engine = engine or os.environ.get("AL_TRACING_ENGINE", "auto")
                found = self._lineage(where, rows, drawn, engine)
        found.warnings = list(self.warnings)
        found.origins = self.origins()
        found.output = self.task.output
        found.steps = step_names(self.root, user_columns(self.task.root))
        return found

    def lineage_pages(
        self,
        where: str | None = None,
        page: int | None = None,
        backend: str | None = None,
        engine: str | None = None,
    ) -> Iterator[AugmentedLineage]:
        """The answer for every output row matching ``where`` (all without), ``page`` rows at
        a time (default ``PER_ROW_MAX``), each row's answer apart (``lin.rows``) however many
        rows match: one question answers apart up to ``PER_ROW_MAX`` rows and merges more. The
        rows are chosen once; each page is asked for when the previous one has been read."""
        page = PER_ROW_MAX if page is None else page
        if isinstance(page, bool) or not isinstance(page, int) or not 1 <= page <= PER_ROW_MAX:
            raise ValueError(f"page= is a number of output rows from 1 to {PER_ROW_MAX:,} (got {page!r})")
        self._check_choice(where, None, None)
        with value_errors(where):
            chosen = self._choose(where, None, None)
            names = [ident(c.id) for c in self.task.output]
            rows = [tuple(r) for r in chosen.selectExpr(*names).distinct().collect()]
        if not rows:
            raise TargetNotFoundError(f"no output row of run {self.id} matches where={where!r}")
        for start in range(0, len(rows), page):
            yield self.lineage(rows=rows[start : start + page], backend=backend, engine=engine)

    def forward(
        self,
        table: str | None = None,
        ids: Sequence[Any] | None = None,
        where: str | None = None,
        udf: str | None = None,
        backend: str | None = None,
    ) -> ForwardLineage:
        """Output rows that depend on given source rows or model decisions (eager and
        compressed runs).

        ``table`` with ``ids`` (key values, a tuple per row for composite keys; values of the
        captured attributes for a coarser granularity) or ``where`` (a SQL predicate on the
        table): which results do these rows feed? ``udf`` with ``where`` (a predicate on the
        call's input names, value and reason): which results rest on these model decisions?
        ``backend``: which kept indexes answer (a run captured with both storages)."""
        if (table is None) == (udf is None):
            raise ValueError("give table= (source rows) or udf= (model decisions)")
        self._check_sources()
        index = self._index(backend or self.backend)
        tuned = tuned_for_lookups(self.session.started_spark)
        with tuned, duck.bounded("answering in process", "set it higher"):
            if udf is not None:
                if ids is not None:
                    raise ValueError("model decisions are chosen with where=, not ids=")
                return index.forward_calls(udf, where)
            return index.forward_sources(table, ids, where)  # type: ignore[arg-type]

    def regions(
        self, rows: Sequence[Any] | None = None, where: str | None = None, udf: str | None = None
    ) -> RegionLineage:
        """Region lineage: which pixels of which images (words of which reviews, features of
        which inputs) the reasons of ``udf`` point to for the chosen output rows, kept in the
        run as ProvRC tables; ``.backward()`` and ``.forward(subject, region)`` answer in situ
        (docs/compressed.md)."""
        return region_lineage(self, rows=rows, where=where, udf=udf)

    # --- confidence ---------------------------------------------------------------------------
    @cached_property
    def formulas(self) -> FormulaStore:
        """The run's boolean lineage and base facts (confidence runs)."""
        if self.backend != "confidence":
            raise NotCapturedError(
                f"run {self.id} kept no boolean lineage (backend {self.backend!r}); "
                "run the task with backend='confidence' to ask how likely its rows are"
            )
        return FormulaStore(lambda: self.session.spark, self.dir, self.record["confidence"])

    def confidence(
        self,
        where: str | None = None,
        rows: Sequence[dict[str, Any] | Sequence[Any]] | None = None,
        sample: int | None = None,
        seed: int = 0,
        algorithm: str = "indep",
        method: str = "auto",
        epsilon: float = 0.05,
        delta: float = 0.05,
        explain: int = 3,
        budget: int | None = BUDGET,
    ) -> ConfidenceAnswer:
        """How likely output rows are, computed from their boolean lineage (Trio): rows chosen
        as for :meth:`lineage`. ``method``: ``exact``, ``karp-luby``, ``monte-carlo`` or
        ``auto`` (exact within a budget, else sampling with the (``epsilon``, ``delta``)
        guarantee); each answer says which was used. ``budget``: Shannon expansions allowed
        to an exact evaluation before ``auto`` samples. ``explain``: how many of each row's most
        influential facts to name."""
        self._check_choice(where, rows, sample)
        store = self.formulas
        with value_errors(where):
            chosen = self._confidence_targets(self._choose(where, rows, self._drawn(sample, seed)))
        return row_confidences(
            store, chosen, algorithm, explain,
            method=method, epsilon=epsilon, delta=delta, seed=seed, budget=budget,
        )

    def confidence_table(
        self,
        algorithm: str = "indep",
        method: str = "auto",
        epsilon: float = 0.05,
        delta: float = 0.05,
        seed: int = 0,
        budget: int | None = BUDGET,
        partitions: int | None = None,
    ) -> DataFrame:
        """Every output row with its probability, computed by a Spark job (Trio's batch
        algorithm): cheaper than :meth:`confidence` once a good fraction of the rows is
        wanted. Columns: the output's, ``probability``, ``method``, ``samples``, ``seconds``."""
        names = [c.name for c in self.task.output]
        rows = self._visible_vars(self._stored_output)
        return batch_confidences(
            rows, names, self.dir, self.formulas.meta, algorithm,
            partitions, method=method, epsilon=epsilon, delta=delta, seed=seed, budget=budget,
        )

    def extraneous(self) -> list[dict[str, Any]]:
        """Output rows that exist in no possible world (Trio's extraneous data: a lineage
        formula no choice of facts satisfies, e.g. a row removed by a certain difference)."""
        targets = self._confidence_targets(self._stored_output)
        facts = self.formulas.facts
        return [row for (row, _), f in zip(targets, expanded(self.formulas, targets)) if extraneous(f, facts)]

    def coexist(self, row_a: dict[str, Any] | Sequence[Any], row_b: dict[str, Any] | Sequence[Any]) -> bool:
        """Whether some possible world holds both output rows."""
        f1, f2 = self._two_formulas(row_a, row_b)
        return can_coexist(f1, f2, self.formulas.facts)

    def always_together(
        self, row_a: dict[str, Any] | Sequence[Any], row_b: dict[str, Any] | Sequence[Any]
    ) -> bool:
        """Whether every possible world holding one of the two output rows holds the other."""
        f1, f2 = self._two_formulas(row_a, row_b)
        return always_together(f1, f2, self.formulas.facts)

    def _two_formulas(self, row_a: Any, row_b: Any) -> tuple[Formula, Formula]:
        targets = [self._confidence_targets(self._choose(None, [row], None))[0] for row in (row_a, row_b)]
        f1, f2 = expanded(self.formulas, targets)
        return f1, f2

    def _visible_vars(self, rows: DataFrame) -> DataFrame:
        """Stored output rows (by column id) as the user sees them, with each row's variable."""
        with_vars = root_vars(self.id, self.root, rows)
        return with_vars.select(*[ref(c.id).alias(c.name) for c in self.task.output], VAR)

    def _confidence_targets(self, chosen: DataFrame) -> list[Target]:
        """Chosen output rows (by column id) as the user sees them, each with the root
        variables behind it."""
        names = [c.name for c in self.task.output]
        found = self._visible_vars(chosen).collect()
        if not found:
            raise TargetNotFoundError(f"no output row of run {self.id} matches the question")
        grouped: dict[tuple[Any, ...], set[int]] = {}
        for r in found:
            grouped.setdefault(tuple(r[n] for n in names), set()).add(r[VAR])
        return [(dict(zip(names, values)), sorted(ids)) for values, ids in grouped.items()]

    def _eager_lineage(
        self, index: EagerIndex, where: str | None, rows: Any, drawn: pa.Table | None
    ) -> AugmentedLineage:
        with value_errors(where):
            if rows is not None:
                targets, lids = index.rows_targets(self._given_rows(rows))
            elif drawn is not None:
                try:
                    targets, lids = index.drawn_targets(drawn)
                except NotInProcess:  # not a local store: Spark reads the drawn places
                    targets, lids = index.targets(self._choose(None, None, drawn))
            elif where is None:
                targets, lids = index.targets(None)
            else:
                try:
                    targets, lids = index.where_targets(where)
                except NotInProcess:  # a predicate DuckDB might judge otherwise: Spark chooses
                    targets, lids = index.targets(self._choose(where, None, None))
        if not lids:
            raise TargetNotFoundError(f"no output row of run {self.id} matches where={where!r}")
        return index.backward(targets, lids)

    def _lineage(self, where: str | None, rows: Any, drawn: pa.Table | None, engine: str) -> AugmentedLineage:
        complete = self.record["mode"] == "reasoning"
        restorer = self._restorer
        tracer = choose_engine(self.root, restorer, complete, engine, self._said)
        with value_errors(where):
            chosen, df = self._targets(tracer, where, rows, drawn)
        if chosen.count == 0:
            raise TargetNotFoundError(f"no output row of run {self.id} matches where={where!r}")
        with translate_task_errors():
            try:
                result = self._derive(tracer, chosen, complete)
            except (NotInProcess, duckdb.OutOfMemoryException):  # a case the check missed, or
                # more rows than DuckDB may hold here: Spark answers, never a guess
                if engine == "in-process":
                    raise
                tracer = SparkEngine(restorer)
                chosen, df = self._targets(tracer, where, rows, drawn)
                result = self._derive(tracer, chosen, complete)
        result.targets = tracer.named(chosen.rows, self.task.output, distinct=False)
        result.keys = _source_keys(self.task)
        result.run_id = self.id
        if self.backend == "confidence":
            df = df if df is not None else self._choose(where, rows, drawn)
            with value_errors(where):
                chosen_rows = self._confidence_targets(df)
            result.confidence = row_confidences(self.formulas, chosen_rows)
        return result

    def _targets(
        self, tracer: Engine, where: str | None, rows: Any, drawn: pa.Table | None
    ) -> tuple[Settled, DataFrame | None]:
        """The chosen output rows (by column id) as the engine's relation: read in process
        where the engine can, else chosen by Spark (then also returned as a DataFrame)."""
        if isinstance(tracer, DuckEngine):
            given = self._given_rows(rows) if rows is not None else None
            try:
                task = self.task
                picked = tracer.chosen(self._output_path, task.root.columns, task.output, where, given, drawn)
                return picked, None
            except (NotInProcess, duckdb.OutOfMemoryException):
                pass  # a predicate DuckDB might judge otherwise (or out of its memory): Spark chooses
        df, count, local = settle(self._choose(where, rows, drawn))
        ids = df.selectExpr(*[ident(c.id) for c in self.task.root.columns])
        rows = (local if local is not None else ids.toArrow()).select(ids.columns)
        return Settled(tracer.targets(ids, rows), count, rows), df

    def _derive(self, engine: Engine, chosen: Settled, complete: bool) -> AugmentedLineage:
        """The answer for the chosen rows, and for each apart when there are a few."""
        match = {c.id: c.id for c in self.task.root.match_columns()}
        numbered = chosen.count <= PER_ROW_MAX
        if numbered:
            chosen = engine.numbered(chosen)
        read = _source_reader() if isinstance(engine, DuckEngine) else None  # rows only checked: when asked
        result = derive(self.root, chosen.restricting(match, complete, numbered), engine, read)
        if result.by_row is not None:
            targets = engine.named(chosen.rows, self.task.output, distinct=False)
            result.by_row = replace(result.by_row, targets=targets).local()
        result.engine = engine.name
        return result

    def origins(self) -> dict[str, dict[str, Any]]:
        """Where each table read in place lives, for answers to name (and to place a keyless
        row: its ``_rid`` is its file's place in ``files`` << 40 | its row in the file)."""
        leaves = [n for n in self.task.root.walk() if isinstance(n, Source) and n.files is not None]
        row_ids = {n.table: n.files.row_id for n in leaves if n.files is not None}
        return {
            e["table"]: {
                "location": fingerprints.shown(fingerprints.location(e)),
                "format": e["format"],
                "files": [f["path"] for f in e["files"]],
                "row_id": row_ids.get(e["table"], False),
                "copy": e.get("copy", False),
            }
            for e in self.record.get("read_in_place", [])
        }

    def _check_sources(self) -> None:
        """A question reads the user's files where they are: each must be as the run read it."""
        check_fingerprints(self.record.get("read_in_place", []), self.id, budget())

    def _check_choice(self, where: str | None, rows: Any, sample: int | None) -> None:
        """One way of choosing output rows, each checked before anything runs."""
        if sum(x is not None for x in (where, rows, sample)) > 1:
            raise ValueError("give at most one of where=, rows=, sample=")
        if where is not None:
            check_question(where, self.task.output, lambda: self.session.spark)
        if sample is not None and (isinstance(sample, bool) or not isinstance(sample, int) or sample < 1):
            raise ValueError(f"sample= is a number of output rows, at least 1 (got {sample!r})")

    def _drawn(self, sample: int | None, seed: int) -> pa.Table | None:
        """The places of ``sample`` output rows drawn with ``seed``, which every way of
        choosing reads (:mod:`tracing.sample`); None where no sample is asked or it is every row."""
        if sample is None:
            return None
        match = [(c.id, c.dtype) for c in self.task.root.match_columns()]
        return sampled.draw(self._output_path, match, sample, seed, lambda: self.session.spark)

    def _choose(self, where: str | None, rows: Any, drawn: pa.Table | None) -> DataFrame:
        """The chosen output rows (by column id) as Spark chooses them."""
        if drawn is not None:
            cols = [(c.id, c.dtype) for c in self.task.root.columns]
            return sampled.in_spark(lambda: self.session.spark, self._output_path, cols, drawn)
        out = self._stored_output
        named = out.selectExpr(
            *map(ident, out.columns), *[aliased(ident(c.id), c.name) for c in self.task.output]
        )
        if where is not None:
            chosen = filter_where(named, where)
        elif rows is not None:
            chosen = self._rows(out, rows)
        else:
            chosen = named
        return chosen.selectExpr(*map(ident, out.columns))

    def _given_rows(self, rows: Any) -> list[dict[str, Any]]:
        """``rows=`` (dicts by output column name, or tuples of every value in order), checked,
        as dicts by column id: a tuple also picks a row whose output repeats a name."""
        if not rows:
            raise ValueError("rows= is empty")
        output = self.task.output
        names = [c.name for c in output]
        ids = {c.name: c.id for c in output}
        wanted = []
        for r in rows:
            if not isinstance(r, dict):
                if len(r) != len(names):
                    raise LineageError(f"row {tuple(r)!r} has {len(r)} values; the output has {names}")
                wanted.append({c.id: v for c, v in zip(output, r, strict=True)})
                continue
            unknown = set(r) - set(names)
            if unknown:
                raise LineageError(f"rows= names unknown column(s) {sorted(unknown)}; output has {names}")
            twice = sorted(n for n in r if names.count(n) > 1)
            if twice:
                raise LineageError(
                    f"the output has two columns named {twice[0]!r}: give the row as a tuple of "
                    f"all {len(names)} values"
                )
            wanted.append({ids[n]: v for n, v in r.items()})
        named = sorted({tuple(c.name for c in output if c.id in r) for r in wanted})
        if len(named) > 1:  # a column one row leaves out would be matched as NULL
            raise LineageError(
                f"rows= gives the columns {list(named[0])} in one row and {list(named[1])} in another: "
                "give every row the same columns"
            )
        return wanted

    def _rows(self, out: DataFrame, rows: Any) -> DataFrame:
        wanted = self._given_rows(rows)
        order = [c.id for c in self.task.output]
        cols = sorted({k for r in wanted for k in r}, key=order.index)
        schema = out.select(*[ref(c) for c in cols]).schema
        given = self.session.spark.createDataFrame([tuple(r.get(c) for c in cols) for r in wanted], schema)
        same = [given[c].eqNullSafe(out[c]) for c in compared(given, cols)] or [F.lit(True)]
        missing = given.join(out.select(*[ref(c) for c in cols]), same, "left_anti").collect()
        if missing:
            names = {c.id: c.name for c in self.task.output}
            shown = {names[c]: v for c, v in zip(cols, missing[0], strict=True)}
            raise TargetNotFoundError(
                f"{len(missing)} of the given rows are not in the output of run {self.id}, e.g. {shown}"
            )
        return out.join(given, same, "left_semi")

    def openlineage(self, namespace: str | None = None) -> dict[str, Any]:
        """This run as one OpenLineage RunEvent (JSON-able) for catalogs such as Marquez;
        ``namespace``: the job's (default the store's URI). docs/openlineage.md"""
        return views.openlineage(self, namespace)


def _check_pandas(name: str, data: pd.DataFrame, keys: Sequence[str]) -> None:
    """No column of a pandas table holds only missing values (Spark cannot tell its type and
    stores none: ``UNSUPPORTED_DATATYPE "VOID"`` from deep in its writer), and a key holds no
    NaN: pandas marks a missing value so, and Spark stores it as NULL, so
    ``forward(ids=[nan])`` would find nothing and the row be named by no value."""
    untyped = [str(c) for c in data.columns if data[c].dtype == object and len(data) and data[c].isna().all()]
    if untyped:
        raise ValueError(
            f"column(s) {', '.join(map(repr, untyped))} of {name!r} hold only missing values, so Spark "
            f"cannot tell their type: give them one, e.g. data[{untyped[0]!r}].astype('string')"
        )
    for column in keys:
        if column in data.columns and data[column].dtype.kind == "f":
            missing = int(data[column].isna().sum())
            if missing:
                raise ValueError(
                    f"key column {column!r} of {name!r} holds NaN in {missing} row(s): pandas marks a "
                    "missing value so, and Spark stores it as NULL; a key names each row"
                )


def _source_keys(task: Task) -> dict[str, tuple[str, ...]]:
    keys = {}
    for node in task.root.walk():
        if isinstance(node, Source):
            keys[node.table] = node.key_names
    return keys


def _source_reader() -> Read:
    """A source's whole rows by their key's values, read in this process (an in-process
    answer's sources are local files)."""
    reader = ParquetReader(None, local=True)
    return lambda leaf, keys: as_arrow(reader.semi(leaf, keys, [(c.name, c.name) for c in leaf.cols]))
