"""A run as OpenLineage RunEvents (START, then COMPLETE), so catalogs that read OpenLineage
(Marquez, DataHub, OpenMetadata) show which files and models produced its output, joined to
the graph openlineage-spark already draws, and link back to the row-level answers only this
project gives.

A run's record and task in, events out (nothing else is read but the reason types of the
UDFs installed packages declare). Built from the ``openlineage-python``
client's classes (generated from the spec), so the JSON has the spec's shape and the client's
transports send it unchanged. Datasets are named as openlineage-spark names the same files
(namespace ``file`` and the absolute path; ``s3://bucket`` and the key, ...). Column lineage
follows column ids through the operator tree: what a column's value is computed from is
DIRECT; what decides which rows exist (filters, join and grouping keys, order) is INDIRECT,
at the dataset level. The custom facets' JSON schemas ship in the package
(``openlineage_schemas/``), named by their ``_schemaURL``.
"""

from __future__ import annotations

import json
import shlex
import traceback
import uuid
from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from importlib.metadata import version
from importlib.resources import files
from typing import Any

import attr
from openlineage.client import OpenLineageClient
from openlineage.client.event_v2 import InputDataset, Job, OutputDataset, Run, RunEvent, RunState
from openlineage.client.facet_v2 import (
    DatasetFacet,
    JobFacet,
    RunFacet,
    column_lineage_dataset,
    dataset_version_dataset,
    datasource_dataset,
    error_message_run,
    output_statistics_output_dataset,
    parent_run,
    schema_dataset,
    source_code_job,
    sql_job,
    symlinks_dataset,
)
from openlineage.client.serde import Serde

from materialization.fingerprints import files_version, location
from reasoning_udfs.udf import load_declared
from segmenter import operators as ops
from tracing.task_summary import tables_read, task_name

# a URN: the project has no public URL to name (OpenLineage asks for a URI, e.g. a git tag)
PRODUCER = f"urn:augmented-lineage:{version('augmented-lineage')}"
PREFIX = "augmentedLineage"  # custom facet names start with the producer's name (spec convention)
# where the custom facets' schemas are named: their files ship beside this module
SCHEMAS = "urn:augmented-lineage:spec:facets:1-0-0:"
OBJECT_STORES = {"s3": "s3", "s3a": "s3", "s3n": "s3", "gs": "gs", "wasbs": "wasbs", "abfss": "abfss"}


@dataclass(frozen=True)
class JobId:
    """A job (or the parent run's job) as OpenLineage names it."""

    namespace: str
    name: str


@dataclass(frozen=True)
class ParentId:
    """The run that started this one (an Airflow task, a notebook's job), as the spec's
    ``ParentRunFacet`` names it; ``parse`` reads the ``namespace/name/runId`` form of
    ``OPENLINEAGE_PARENT_ID`` (the form Airflow's ``lineage_parent_id`` macro gives)."""

    job: JobId
    run_id: str

    @classmethod
    def parse(cls, text: str) -> ParentId:
        parts = text.rsplit("/", 2)  # a namespace may hold slashes (a URI), a job name not
        if len(parts) != 3 or not all(parts):
            raise ValueError(f"a parent run is NAMESPACE/JOB_NAME/RUN_ID (a UUID), not {text!r}")
        return cls(JobId(parts[0], parts[1]), str(uuid.UUID(parts[2])))


def openlineage_event(
    record: Mapping[str, Any], task: ops.Task, store: str, namespace: str | None = None
) -> dict[str, Any]:
    """The run's COMPLETE event in JSON form (see :func:`run_events`)."""
    job = JobId(namespace or store, task_name(record, task))
    return Serde.to_dict(run_events(record, task, store, job)[-1])


def run_events(
    record: Mapping[str, Any], task: ops.Task, store: str, job: JobId, parent: ParentId | None = None
) -> list[RunEvent]:
    """The run ``record`` (with its parsed ``task``) of results store ``store`` as its START
    and COMPLETE events of job ``job``, under ``parent`` if one started it. The runId is a UUID
    derived from store and run id, so exporting twice names one run. (A run that fails leaves
    no record in the store; :class:`OpenLineageEmitter`, told while the run runs, sends its
    FAIL.)"""
    ended = datetime.fromisoformat(record["created"])
    started = ended - timedelta(seconds=record.get("task_seconds", 0.0))
    return [  # each event its own objects: the client adds facets to the events it sends
        _event(RunState.START, started, record, task, store, job, parent),
        _event(RunState.COMPLETE, ended, record, task, store, job, parent),
    ]


def _event(
    state: RunState,
    at: datetime,
    record: Mapping[str, Any],
    task: ops.Task,
    store: str,
    job: JobId,
    parent: ParentId | None,
    error: BaseException | None = None,
) -> RunEvent:
    """One event of the run: the output only in COMPLETE, the error only in FAIL."""
    named = datasets(record, task, store)
    facets = _run_facets(record, task, store, parent)
    if error is not None:
        facets["errorMessage"] = error_message_run.ErrorMessageRunFacet(
            message=f"{type(error).__name__}: {error}".strip().splitlines()[0],
            programmingLanguage="PYTHON",
            stackTrace="".join(traceback.format_exception(error)),
            producer=PRODUCER,
        )
    return RunEvent(
        eventType=state,
        eventTime=at.isoformat(),
        producer=PRODUCER,
        run=Run(runId=ol_run_id(store, record["run_id"]), facets=facets),
        job=Job(namespace=job.namespace, name=job.name, facets=_job_facets(task)),
        inputs=_inputs(task, named, store),
        outputs=[_output(record, task, store, named)] if state == RunState.COMPLETE else [],
    )


class OpenLineageEmitter:
    """Sends a run's START when it begins and its COMPLETE, or FAIL with the error, when it
    ends, as openlineage-spark does for a Spark job: ``LineageSession(listeners=
    [OpenLineageEmitter({"type": "http", "url": ...})])``. ``transport``: the client's
    transport config (None: the client's own configuration, ``OPENLINEAGE_URL`` or
    ``openlineage.yml``); the job is ``namespace`` (default the store's URI) and ``job_name``
    (default the task's name), under ``parent`` if one started it."""

    def __init__(
        self,
        transport: Mapping[str, Any] | None = None,
        namespace: str | None = None,
        job_name: str | None = None,
        parent: ParentId | None = None,
    ) -> None:
        self.client = OpenLineageClient(config={"transport": dict(transport)} if transport else None)
        self.namespace = namespace
        self.job_name = job_name
        self.parent = parent

    def started(self, record: Mapping[str, Any], task: ops.Task, store: str) -> None:
        at, job = datetime.fromisoformat(record["created"]), self._job(record, task, store)
        self.client.emit(_event(RunState.START, at, record, task, store, job, self.parent))

    def ended(
        self, record: Mapping[str, Any], task: ops.Task, store: str, error: BaseException | None
    ) -> None:
        job = self._job(record, task, store)
        if error is None:
            at = datetime.fromisoformat(record["created"])
            self.client.emit(_event(RunState.COMPLETE, at, record, task, store, job, self.parent))
        else:
            at = datetime.now(UTC)
            self.client.emit(_event(RunState.FAIL, at, record, task, store, job, self.parent, error))

    def _job(self, record: Mapping[str, Any], task: ops.Task, store: str) -> JobId:
        return JobId(self.namespace or store, self.job_name or task_name(record, task))


def send(events: Iterable[RunEvent], transport: Mapping[str, Any]) -> None:
    """Each event through the openlineage-python client's ``transport`` (its config: ``file``,
    ``http``, ``kafka``...); the client adds its own ``tags`` run facet (its version)."""
    client = OpenLineageClient(config={"transport": dict(transport)})
    for event in events:
        client.emit(event)


def ol_run_id(store: str, run_id: str) -> str:
    """The run's OpenLineage runId: a UUID from the store and run id, the same at every export."""
    return str(uuid.uuid5(uuid.NAMESPACE_URL, f"{store}/runs/{run_id}"))


def _run_facets(
    record: Mapping[str, Any], task: ops.Task, store: str, parent: ParentId | None
) -> dict[str, RunFacet]:
    run_id = record["run_id"]
    facets: dict[str, RunFacet] = {
        f"{PREFIX}_modelCalls": ModelCallsRunFacet(udfs=_model_calls(record, task), producer=PRODUCER),
        f"{PREFIX}_execution": ExecutionRunFacet(
            strategy=record["strategy"],
            backend=record.get("backend", "lazy"),
            reasons=record.get("reasons"),
            producer=PRODUCER,
        ),
        f"{PREFIX}_rowLineage": RowLineageRunFacet(
            store=store,
            runId=run_id,
            command=f"al lineage {run_id} --store {shlex.quote(store)}",
            producer=PRODUCER,
        ),
    }
    if parent is not None:
        facets["parent"] = parent_run.ParentRunFacet(
            run=parent_run.Run(runId=parent.run_id),
            job=parent_run.Job(namespace=parent.job.namespace, name=parent.job.name),
            producer=PRODUCER,
        )
    return facets


def facet_schemas() -> dict[str, dict[str, Any]]:
    """The custom facets' JSON schemas shipped with the package, by ``$id``."""
    found = (json.loads(f.read_text()) for f in files(__package__).joinpath("openlineage_schemas").iterdir())
    return {s["$id"]: s for s in found}


@attr.define
class CustomRunFacet(RunFacet):
    """A facet of this project's: its schema ships in the package, named after the class."""

    @classmethod
    def _get_schema(cls) -> str:
        return f"{SCHEMAS}{cls.__name__}.json#/$defs/{cls.__name__}"


@attr.define
class ModelCallsRunFacet(CustomRunFacet):
    """Each UDF the task calls: where it comes from, the weights and sha256 the run used, the
    type of its reasons and the calls (value column, arguments)."""

    udfs: list[dict[str, Any]]


@attr.define
class ExecutionRunFacet(CustomRunFacet):
    """How the run was kept: what an auditor needs to know how its answers are derived."""

    strategy: str
    backend: str
    reasons: str | None = None  # older runs did not record it


@attr.define
class RowLineageRunFacet(CustomRunFacet):
    """Where the per-row answers (source rows and model reasons of one output row) are asked."""

    store: str
    runId: str
    command: str


def _model_calls(record: Mapping[str, Any], task: ops.Task) -> list[dict[str, Any]]:
    """Each UDF once, with all its call sites (a task may call one model on two columns)."""
    calls: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for node in task.root.walk():
        if isinstance(node, ops.Function):
            args = [ops.pretty(a.sql) for a in node.args]
            calls[node.udf].append({"value": node.value.name, "arguments": args})
    models = record.get("models") or {}
    found = []
    for name in sorted(calls):
        udf = load_declared(name)  # declared by an installed package or already imported
        entry = {"name": name, "module": record.get("udfs", {}).get(name), **models.get(name, {})}
        entry |= {"reasonType": udf.reason_type if udf else None, "calls": calls[name]}
        found.append({k: v for k, v in entry.items() if v is not None})
    return found


def _job_facets(task: ops.Task) -> dict[str, JobFacet]:
    if task.language == "sql" and task.text:
        return {"sql": sql_job.SQLJobFacet(query=task.text, dialect="spark", producer=PRODUCER)}
    if task.language == "code":
        code = source_code_job.SourceCodeJobFacet(language="python", sourceCode=task.text, producer=PRODUCER)
        return {"sourceCode": code}
    return {}  # Spark's analyzed plan is no code a catalog should show


def _schema(cols: Iterable[ops.Col]) -> schema_dataset.SchemaDatasetFacet:
    fields = [schema_dataset.SchemaDatasetFacetFields(name=c.name, type=c.dtype) for c in cols]
    return schema_dataset.SchemaDatasetFacet(fields=fields, producer=PRODUCER)


Datasets = Mapping[str, tuple[str, str, str, str]]  # table -> namespace, name, version, URI


def dataset_naming(uri: str) -> tuple[str, str]:
    """A file or folder's OpenLineage (namespace, name), as openlineage-spark names it
    (``FilesystemDatasetUtils``): ``file`` and the absolute path; an object store's bucket
    (``s3a``/``s3n`` as ``s3``) and the key; else ``scheme://authority`` and the path."""
    scheme, _, rest = uri.partition(":")
    if scheme == "file":
        return "file", "/" + rest.lstrip("/").rstrip("/")
    authority, _, path = rest.lstrip("/").partition("/")
    if scheme in OBJECT_STORES:
        return f"{OBJECT_STORES[scheme]}://{authority}", path.strip("/") or "/"
    return f"{scheme}://{authority}", "/" + path.rstrip("/")


def datasets(record: Mapping[str, Any], task: ops.Task, store: str) -> Datasets:
    """Each source table as an OpenLineage dataset named by where Spark read it: a store
    snapshot by its folder, versioned by its id; the user's files read in place by their
    path, versioned by their fingerprint."""
    in_place = {e["table"]: e for e in record.get("read_in_place", [])}
    found: dict[str, tuple[str, str, str, str]] = {}
    for node in task.root.walk():
        if not isinstance(node, ops.Source) or node.table in found:
            continue
        entry = in_place.get(node.table)
        if entry is None:
            uri, at = node.snapshot, node.snapshot.rstrip("/").rsplit("/", 1)[-1]
        else:
            uri, at = location(entry), files_version(entry)
        found[node.table] = (*dataset_naming(uri), at, uri)
    return found


def _inputs(task: ops.Task, named: Datasets, store: str) -> list[InputDataset]:
    """One dataset per table read (a table read twice, e.g. a self-join, once)."""
    inputs = []
    for table, cols in tables_read(task).items():
        namespace, name, at, uri = named[table]
        facets: dict[str, DatasetFacet] = {
            "schema": _schema(cols),
            "version": dataset_version_dataset.DatasetVersionDatasetFacet(
                datasetVersion=at, producer=PRODUCER
            ),
            "dataSource": datasource_dataset.DatasourceDatasetFacet(
                name=namespace, uri=uri, producer=PRODUCER
            ),
            "symlinks": _table_name(store, table),
        }
        inputs.append(InputDataset(namespace=namespace, name=name, facets=facets))
    return inputs


def _table_name(store: str, table: str) -> symlinks_dataset.SymlinksDatasetFacet:
    """The name the task reads the dataset by (a registered table, a view, a file's stem), as
    openlineage-spark gives a catalog table's name beside its location."""
    named = symlinks_dataset.Identifier(namespace=store, name=table, type="TABLE")
    return symlinks_dataset.SymlinksDatasetFacet(identifiers=[named], producer=PRODUCER)


def _output(record: Mapping[str, Any], task: ops.Task, store: str, named: Datasets) -> OutputDataset:
    """The run's output folder in the store, named as Spark wrote it."""
    lineage = ColumnLineage(task)
    output = record["output"]
    namespace, name = dataset_naming(f"{store.rstrip('/')}/runs/{record['run_id']}/{output['dir']}")
    return OutputDataset(
        namespace=namespace,
        name=name,
        facets={"schema": _schema(task.output), "columnLineage": lineage.facet(task.output, named)},
        outputFacets={
            "outputStatistics": output_statistics_output_dataset.OutputStatisticsOutputDatasetFacet(
                rowCount=output["rows"], size=output["bytes"], producer=PRODUCER
            )
        },
    )


# --- column lineage ---------------------------------------------------------------------------

SUBTYPES = ("IDENTITY", "TRANSFORMATION", "AGGREGATION")  # DIRECT ones, weakest first
SourceColumn = tuple[str, str]  # (table, column name)


@dataclass(frozen=True)
class Via:
    """How a value reaches a column from a source column: the strongest step on the way and
    the UDFs it passed through (the model calls a catalog user asks about)."""

    subtype: str = "IDENTITY"
    udfs: frozenset[str] = frozenset()

    def then(self, subtype: str, udfs: frozenset[str] = frozenset()) -> Via:
        return Via(max(self.subtype, subtype, key=SUBTYPES.index), self.udfs | udfs)


Origins = dict[SourceColumn, Via]


class ColumnLineage:
    """The source columns behind every column of a task's tree (DIRECT), and those that
    decide which rows there are (INDIRECT: subtype FILTER, JOIN, GROUP_BY, WINDOW or SORT)."""

    def __init__(self, task: ops.Task) -> None:
        self.indirect: dict[SourceColumn, set[str]] = defaultdict(set)
        self.columns = self._walk(task.root)
        for key in task.order:
            self._decides(self.columns, key.expr.refs, "SORT")

    def facet(
        self, output: Iterable[ops.Col], named: Datasets
    ) -> column_lineage_dataset.ColumnLineageDatasetFacet:
        """The columnLineage facet of ``output``; a column computed from no source column
        (``COUNT(*)``) has only the dataset-level lineage."""
        fields = {
            c.name: column_lineage_dataset.Fields(
                inputFields=[
                    _field(named, src, [_transformation("DIRECT", via.subtype, via.udfs)])
                    for src, via in sorted(self.columns[c.id].items())
                ]
            )
            for c in output
            if self.columns[c.id]
        }
        dataset = [
            _field(named, src, [_transformation("INDIRECT", s) for s in sorted(subtypes)])
            for src, subtypes in sorted(self.indirect.items())
        ]
        return column_lineage_dataset.ColumnLineageDatasetFacet(
            fields=fields, dataset=dataset, producer=PRODUCER
        )

    def _walk(self, node: ops.Node) -> dict[str, Origins]:
        """Column id -> its origins, for the columns ``node`` gives."""
        if isinstance(node, ops.Source):
            return {c.id: {(node.table, c.name): Via()} for c in node.cols}
        below = [self._walk(child) for child in node.children]
        cols: dict[str, Origins] = {k: v for child in below for k, v in child.items()}
        if isinstance(node, ops.Selection | ops.Join | ops.OuterJoin):
            kind = "FILTER" if isinstance(node, ops.Selection) else "JOIN"
            for cond in node.condition:
                self._decides(cols, cond.refs, kind)
            if isinstance(node, ops.OuterJoin) and node.flag is not None:  # EXISTS: the condition's value
                tested = frozenset().union(*(e.refs for e in node.condition))
                cols[node.flag.id] = _through((cols[ref] for ref in tested), "TRANSFORMATION")
        elif isinstance(node, ops.Projection):
            return {c.id: _derive(cols, e, "TRANSFORMATION") for c, e in node.outputs}
        elif isinstance(node, ops.Aggregation):
            for _, key in node.keys:
                self._decides(cols, key.refs, "GROUP_BY")
            keys = set(node.key_ids)
            return {
                c.id: _derive(cols, e, "TRANSFORMATION" if c.id in keys else "AGGREGATION")
                for c, e in node.outputs
            }
        elif isinstance(node, ops.Union):  # each input's columns feed the outputs by position
            return {
                out.id: _merge(got[child.match_columns()[i].id] for got, child in zip(below, node.inputs))
                for i, out in enumerate(node.outputs)
            }
        elif isinstance(node, ops.Difference):  # the right input's rows remove left rows
            self._decides(below[1], [c.id for c in node.right.match_columns()], "FILTER")
        elif isinstance(node, ops.Window):  # a frame is chosen by its keys
            for _, key in node.keys:
                self._decides(cols, key.refs, "WINDOW")
            cols |= {c.id: _derive(cols, e, "AGGREGATION") for c, e in node.functions}
        elif isinstance(node, ops.Expand):  # each grouping set's expression feeds an output
            return {
                out.id: _merge(_derive(cols, p[i], "TRANSFORMATION") for p in node.projections)
                for i, out in enumerate(node.outputs)
            }
        elif isinstance(node, ops.Generate):
            cols |= {o.id: _derive(cols, node.generator, "TRANSFORMATION") for o in node.outputs}
        elif isinstance(node, ops.Function):
            read = (cols[c.id] for c in node.arg_columns())
            made = _through(read, "TRANSFORMATION", frozenset({node.udf}))
            cols |= {node.value.id: made, node.reason.id: made}
        return {c.id: cols[c.id] for c in node.columns}

    def _decides(self, cols: Mapping[str, Origins], refs: Iterable[str], subtype: str) -> None:
        for ref in refs:
            for src in cols[ref]:
                self.indirect[src].add(subtype)


def _derive(cols: Mapping[str, Origins], expr: ops.Expr, subtype: str) -> Origins:
    """Origins of a value computed by ``expr``: a bare column keeps its own."""
    bare = expr.is_column()
    if bare is not None:
        return cols[bare]
    return _through((cols[ref] for ref in expr.refs), subtype)


def _through(parts: Iterable[Origins], subtype: str, udfs: frozenset[str] = frozenset()) -> Origins:
    return {src: via.then(subtype, udfs) for src, via in _merge(parts).items()}


def _merge(parts: Iterable[Origins]) -> Origins:
    merged: Origins = {}
    for part in parts:
        for src, via in part.items():
            merged[src] = merged[src].then(via.subtype, via.udfs) if src in merged else via
    return merged


def _field(
    named: Datasets, src: SourceColumn, transformations: list[column_lineage_dataset.Transformation]
) -> column_lineage_dataset.InputField:
    table, column = src
    namespace, name, _, _ = named[table]
    return column_lineage_dataset.InputField(
        namespace=namespace, name=name, field=column, transformations=transformations
    )


def _transformation(
    kind: str, subtype: str, udfs: frozenset[str] = frozenset()
) -> column_lineage_dataset.Transformation:
    description = f"through UDF {', '.join(sorted(udfs))}" if udfs else None
    return column_lineage_dataset.Transformation(type=kind, subtype=subtype, description=description)
