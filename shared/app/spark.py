"""Run the partition jobs of ``rorder`` as Spark tasks: one work message per task, through ``mapInArrow``.

The driver plans the table (deltalake, as :func:`~deltaextras.ops.rorder.rorder.plan_messages` does), puts the
messages in a small DataFrame with one Spark partition per message, and maps each partition with a
Python function that calls :func:`~deltaextras.ops.rorder.rorder.rorder_single` on the executor. Each task
returns its :class:`~deltaextras.ops.rorder.report.PartitionReport` as an Arrow row; the driver collects them
and hands back a local report DataFrame. Only ``createDataFrame``, ``repartition``,
``mapInArrow`` and ``collect`` are used: DataFrame API calls that Spark Connect and a classic
``SparkSession`` both offer (the tests run it over Spark Connect against Sail 0.7.2 and on a classic
Apache Spark 4.2 session with Delta Lake 4.4).

Requirements on the cluster: ``deltaextras`` (with its dependencies deltalake, pyarrow, obstore,
pyroaring) importable by the Python that runs UDFs on the executors, and storage credentials on
the executors. With Sail the UDFs run inside the Sail server process (its embedded interpreter), so
install ``deltaextras`` in the environment that runs ``sail spark server``.

Each task catches its partition's failure and reports it (status ``failed``, ``error_type``,
``retryable``) instead of failing the Spark job, so Spark task retries do not replay permanent
errors; a re-run of the same messages is safe (speculative copies of a task included): a partition
already committed by an earlier delivery reports ``skipped``.

Example (needs a running Spark session)::

    >>> from deltaextras import rorder_spark
    >>> reports = rorder_spark(spark, "/data/sensors", sort_by="utc_time")  # doctest: +SKIP
    >>> reports.select("partition", "status", "rows", "row_groups").show()  # doctest: +SKIP

The report columns, without Spark:

    >>> REPORT_SCHEMA.names[:4]
    ['table', 'partition', 'status', 'reason']
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import fields
from typing import Any

import pyarrow as pa

from ..errors import DeltaExtrasError, InvalidArgumentError, PartitionsFailedError
from ..ops.rorder.report import PartitionReport, RorderReport

__all__ = ["REPORT_SCHEMA", "report_struct_type", "rorder_spark", "run_message_batch", "run_messages_spark"]

_ARROW_TYPES = {"str": pa.string(), "int": pa.int64(), "float": pa.float64(), "bool": pa.bool_()}


def _report_schema() -> pa.Schema:
    out = []
    for f in fields(PartitionReport):
        base = str(f.type).replace(" | None", "").strip()
        if base not in _ARROW_TYPES:  # pragma: no cover - guards a future field of another type
            raise TypeError(f"PartitionReport.{f.name} has type {f.type}, which has no report column type")
        out.append(pa.field(f.name, _ARROW_TYPES[base]))
    return pa.schema(out)


#: Arrow schema of the report rows: one column per :class:`~deltaextras.ops.rorder.report.PartitionReport` field.
REPORT_SCHEMA: pa.Schema = _report_schema()
_TASK_SCHEMA = pa.schema([pa.field("seq", pa.int64()), *REPORT_SCHEMA])


def report_struct_type(*, with_seq: bool = False) -> Any:
    """The report schema as a ``pyspark.sql.types.StructType`` (imports pyspark).

    Example:
        >>> report_struct_type().simpleString()[:40]  # doctest: +SKIP
        'struct<table:string,partition:string,sta'
    """
    from pyspark.sql import types as T

    spark_types = {
        pa.string(): T.StringType(),
        pa.int64(): T.LongType(),
        pa.float64(): T.DoubleType(),
        pa.bool_(): T.BooleanType(),
    }
    schema = _TASK_SCHEMA if with_seq else REPORT_SCHEMA
    return T.StructType([T.StructField(f.name, spark_types[f.type], True) for f in schema])


# ----------------------------------------------------------------------------- executor side
def _failed_report(message: Mapping[str, Any] | None, exc: BaseException, started: float) -> PartitionReport:
    return PartitionReport.failure(message, exc, time.monotonic() - started)


def run_message_batch(batch: pa.RecordBatch, storage_options: Mapping[str, str] | None) -> pa.RecordBatch:
    """Run every message of a batch (column ``message``: JSON text) and return their report rows.

    This is what each Spark task runs; it never raises for a partition's failure (the report says
    ``failed``). A ``seq`` column, if present, is passed through as the first output column.
    Usable without Spark.

    Example:
        >>> import json, tempfile, pyarrow as pa
        >>> from deltalake import write_deltalake
        >>> from deltaextras import plan_messages
        >>> path = tempfile.mkdtemp()
        >>> write_deltalake(path, pa.table({"k": [2, 1, 2], "k_range": [0, 0, 0]}), partition_by=["k_range"])
        >>> batch = pa.record_batch({"message": [json.dumps(m) for m in plan_messages(path)]})
        >>> run_message_batch(batch, None).select(["partition", "status", "values"]).to_pylist()
        [{'partition': 'k_range=0', 'status': 'committed', 'values': 2}]
    """
    from ..ops.rorder.rorder import rorder_single

    rows: list[dict[str, Any]] = []
    for text in batch.column("message").to_pylist():
        started = time.monotonic()
        message: dict[str, Any] | None = None
        try:
            message = json.loads(text)
            report = rorder_single(message, storage_options=storage_options)
        except Exception as exc:  # reported as a failed partition, never raised
            report = _failed_report(message, exc, started)
        rows.append(report.to_dict())
    out = pa.RecordBatch.from_pylist(rows, schema=REPORT_SCHEMA)
    if "seq" in batch.schema.names:
        seq = batch.column("seq").cast(pa.int64())
        out = pa.RecordBatch.from_arrays([seq, *out.columns], schema=_TASK_SCHEMA)
    return out


def _make_task(
    storage_options: dict[str, str] | None,
) -> Callable[[Iterator[pa.RecordBatch]], Iterator[pa.RecordBatch]]:
    """The function shipped to the executors (pickled by value; it imports deltaextras there)."""

    def rorder_partition_task(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        import time as _time

        for attempt in range(8):
            try:
                import deltaextras
                import deltaextras.ops.rorder.rorder  # noqa: F401
                from deltaextras.app.spark import run_message_batch as run

                break
            except (ImportError, RuntimeError) as exc:
                # Engines that run several tasks as threads of one interpreter (Sail) can import the package
                # in two threads at once: Python then breaks an import-lock cycle with a _DeadlockError, or
                # one thread sees a module the other is still initializing ("partially initialized").
                # The other thread finishes the import: try again.
                text = str(exc).lower()
                racing = "deadlock" in text or "partially initialized" in text
                if isinstance(exc, ImportError) and not racing:
                    raise RuntimeError(
                        "deltaextras is not importable by the Python that runs UDFs on this Spark executor "
                        f"({exc}); install it there (pip install deltaextras, a cluster library, or an "
                        "environment archive) — see docs/spark.md"
                    ) from exc
                if not racing or attempt == 7:
                    raise
                _time.sleep(0.05 * (attempt + 1))
        for batch in batches:
            if batch.num_rows:
                yield run(batch, storage_options)

    return rorder_partition_task


# ----------------------------------------------------------------------------- driver side
def run_messages_spark(
    spark: Any,
    messages: Sequence[Mapping[str, Any] | str],
    *,
    storage_options: Mapping[str, str] | None = None,
    max_tasks: int | None = None,
) -> list[PartitionReport]:
    """Run work messages (dicts or JSON text, e.g. from ``plan_messages``) as Spark tasks.

    One Spark partition per message, or ``max_tasks`` partitions sharing them round-robin (a task
    then runs its messages one after another). ``storage_options`` travel to the executors inside
    the pickled task function. Returns the reports in the order of ``messages``.

    Example:
        >>> from deltaextras import plan_messages  # doctest: +SKIP
        >>> reports = run_messages_spark(spark, plan_messages("/data/t"), max_tasks=8)  # doctest: +SKIP
    """
    if not messages:
        return []
    if max_tasks is not None and (isinstance(max_tasks, bool) or not isinstance(max_tasks, int) or max_tasks < 1):
        raise InvalidArgumentError(f"max_tasks must be a positive integer, got {max_tasks!r}")
    texts = [m if isinstance(m, str) else json.dumps(dict(m), separators=(",", ":")) for m in messages]
    tasks = min(len(texts), max_tasks or len(texts))
    from pyspark.sql import types as T

    schema = T.StructType([T.StructField("seq", T.LongType(), False), T.StructField("message", T.StringType(), False)])
    df = spark.createDataFrame([(i, t) for i, t in enumerate(texts)], schema=schema).repartition(tasks)
    task = _make_task(dict(storage_options) if storage_options else None)
    rows = df.mapInArrow(task, report_struct_type(with_seq=True)).collect()
    by_seq: dict[int, PartitionReport] = {}
    for row in rows:
        values = row.asDict()
        seq = int(values.pop("seq"))
        by_seq[seq] = PartitionReport(**values)
    missing = [i for i in range(len(texts)) if i not in by_seq]
    if missing:
        raise DeltaExtrasError(
            f"Spark returned no report for {len(missing)} message(s), e.g. {texts[missing[0]][:200]}"
        )
    return [by_seq[i] for i in range(len(texts))]


def rorder_spark(
    spark: Any,
    table_uri: str | os.PathLike[str] | Any,
    *,
    sort_by: Any = None,
    unique_by: Any = None,
    by: str | None = None,
    partitions: list[Any] | None = None,
    target_file_size: int | None = None,
    memory_budget: int | None = None,
    max_deleted_rows_ratio: float | None = None,
    layout: str | None = None,
    min_row_group_bytes: int | str | None = None,
    storage_options: Mapping[str, str] | None = None,
    task_storage_options: Mapping[str, str] | None = None,
    max_tasks: int | None = None,
    raise_on_failure: bool = True,
) -> Any:
    """``rorder`` with the partition jobs run as Spark tasks; returns a per-partition report DataFrame.

    Options as :func:`~deltaextras.ops.rorder.rorder.rorder`. The driver plans with ``storage_options``;
    the tasks use ``task_storage_options`` (default: the same; pass ``{}`` to let the executors use
    their own credentials, e.g. a managed identity). ``max_tasks`` caps the Spark partitions (and
    so the partitions rewritten at once). The returned DataFrame is built from the collected
    reports: reading it again does not re-run anything. Partitions already in layout are in it as
    ``skipped``. If any partition failed, :class:`~deltaextras.errors.PartitionsFailedError` is
    raised after all finished (its ``report`` holds them all) unless ``raise_on_failure=False``.

    Example:
        >>> reports = rorder_spark(spark, "/data/sensors", sort_by="utc_time")  # doctest: +SKIP
        >>> reports.groupBy("status").count().show()  # doctest: +SKIP
    """
    from ..ops.rorder.plan import plan_units

    plan = plan_units(
        os.fspath(table_uri) if isinstance(table_uri, os.PathLike) else table_uri,
        by=by,
        sort_by=sort_by,
        unique_by=unique_by,
        partitions=partitions,
        target_file_size=target_file_size,
        memory_budget=memory_budget,
        max_deleted_rows_ratio=max_deleted_rows_ratio,
        layout=layout,
        min_row_group_bytes=min_row_group_bytes,
        storage_options=dict(storage_options) if storage_options else None,
    )
    to_rewrite = plan.to_rewrite()
    messages = [plan.message(p).to_dict() for p in to_rewrite]
    executor_options = storage_options if task_storage_options is None else task_storage_options
    done = run_messages_spark(spark, messages, storage_options=executor_options, max_tasks=max_tasks)
    reports = {id(p): r for p, r in zip(to_rewrite, done, strict=True)}
    ordered = [
        reports[id(p)] if id(p) in reports else PartitionReport(plan.uri, _label(p), "skipped", p.reason, plan.version)
        for p in plan.partitions
    ]
    result = RorderReport(ordered)
    if result.failed and raise_on_failure:
        first = result.failed[0]
        raise PartitionsFailedError(
            f"{result.summary()}; first failure {first.partition}: {first.error_type}: {first.reason}", result
        )
    rows = [tuple(r.to_dict()[name] for name in REPORT_SCHEMA.names) for r in ordered]
    return spark.createDataFrame(rows, schema=report_struct_type())


def _label(part: Any) -> str | None:
    """A skipped unit's label: the partition or value range (None for the whole table)."""
    return part.label if part.partition_name is not None or getattr(part, "value_range", None) else None
