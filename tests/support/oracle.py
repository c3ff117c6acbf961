"""Independent checks of a table: content checksums through deltalake's reader (which applies deletion
vectors and column mapping) and the row-group layout read from the Parquet footers."""

from __future__ import annotations

import datetime as dt
import decimal
import hashlib
import itertools
import json
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
from deltalake import DeltaTable, write_deltalake

from deltaextras.core.storage import TableStorage


def _canon(value: Any, spark: bool = False) -> Any:
    """A JSON-able form of a value: bit-exact, or (``spark``) equal for values Spark SQL finds equal —
    ``-0.0`` and ``0.0``, every NaN, ``1.5`` and ``1.50`` as decimals, one instant in any zone."""
    if spark and isinstance(value, decimal.Decimal):
        return "decimal:" + str(value.normalize() if value else decimal.Decimal(0))
    if spark and isinstance(value, dt.datetime) and value.tzinfo is not None:
        return repr(value.astimezone(dt.timezone.utc))
    if isinstance(value, (dt.datetime, dt.date, decimal.Decimal, bytes)):
        return repr(value)
    if isinstance(value, float) and value != value:
        return "NaN"
    if spark and isinstance(value, float):
        return value + 0.0
    if isinstance(value, dict):
        return {k: _canon(v, spark) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_canon(v, spark) for v in value]
    return value


def spark_value(value: Any) -> str:
    """One text per value as Spark SQL compares values (``-0.0`` is ``0.0``, every NaN one value)."""
    return json.dumps(_canon(value, spark=True), sort_keys=True, default=repr)


_VECTOR_ROWS = 50_000  # from here on a flat table of numbers and instants is digested column-wise


def _vector_column(column: pa.ChunkedArray, spark: bool) -> tuple[str, np.ndarray, np.ndarray] | None:
    """(type tag, int64 values, null mask) of one column, canonical as :func:`_canon` makes values equal;
    ``None`` for a type the row-wise path must handle."""
    t = column.type
    arr = column.combine_chunks() if column.num_chunks != 1 else column.chunk(0)
    mask = np.asarray(arr.is_null(), dtype=np.uint8) if arr.null_count else np.zeros(len(arr), np.uint8)
    if pa.types.is_boolean(t):
        tag, values = "bool", np.asarray(arr.fill_null(False), dtype=np.int64)
    elif pa.types.is_integer(t) and t.bit_width <= 64 and not (pa.types.is_unsigned_integer(t) and t.bit_width == 64):
        tag, values = "int", np.asarray(arr.fill_null(0)).astype(np.int64)
    elif pa.types.is_floating(t) and t.bit_width >= 32:
        x = np.asarray(arr.fill_null(0.0)).astype(np.float64)
        x = np.where(np.isnan(x), np.nan, x + 0.0 if spark else x)
        tag, values = "float", x.view(np.int64)
    elif pa.types.is_timestamp(t):
        scale = {"s": 1_000_000, "ms": 1_000, "us": 1, "ns": None}[t.unit]
        raw = np.asarray(arr.cast(pa.int64()).fill_null(0), dtype=np.int64)
        if scale is None:
            if (raw % 1000).any():
                return None
            values = raw // 1000
        else:
            values = raw * scale
        tag = "ts:" + ("aware" if spark and t.tz else str(t.tz))
    elif pa.types.is_date32(t):
        tag, values = "date", np.asarray(arr.cast(pa.int32()).fill_null(0)).astype(np.int64)
    else:
        return None
    return tag, np.where(mask.astype(bool), 0, values), mask


def _vector_digest(table: pa.Table, spark: bool) -> str | None:
    """:func:`rows_checksum`'s digest of a flat table of numbers and instants, computed column-wise (the
    same multiset of rows gives the same digest in any order); ``None`` when a column needs the row-wise
    path."""
    cols = []
    for name in table.column_names:
        col = _vector_column(table.column(name), spark)
        if col is None:
            return None
        cols.append((name, *col))
    keys = [a for _, _, values, mask in cols for a in (values, mask)]
    order = np.lexsort(keys[::-1])
    h = hashlib.sha256()
    for name, tag, values, mask in cols:
        h.update(f"{name}:{tag};".encode())
        h.update(mask[order].tobytes())
        h.update(values[order].tobytes())
    return "columns:" + h.hexdigest()


def rows_checksum(table: pa.Table, *, spark: bool = False) -> tuple[int, str]:
    """(row count, sha256 of the sorted canonical rows) — order-independent, duplicate-sensitive. With
    ``spark``, values compare as Spark SQL compares them (see ``_canon``): the oracle of any rewrite that
    may keep either of two Spark-equal rows."""
    table = table.select(sorted(table.column_names))
    if table.num_rows >= _VECTOR_ROWS:
        digest = _vector_digest(table, spark)
        if digest is not None:
            return table.num_rows, digest
    lines = sorted(json.dumps(_canon(r, spark), sort_keys=True, default=repr) for r in table.to_pylist())
    return len(lines), hashlib.sha256("\n".join(lines).encode()).hexdigest()


def spark_checksum(uri: str, storage_options: dict[str, str] | None = None) -> tuple[int, str]:
    """:func:`rows_checksum` with Spark's value equality of the live content as deltalake reads it."""
    return rows_checksum(scan(uri, storage_options), spark=True)


def change_rows(uri: str, version: int) -> pa.Table:
    """The rows one commit of a local table deleted or wrote as change data, with ``_change_type`` and the
    partition values as text: its change files (``cdc``) when it has any, else what its data-changing
    removes lost — the rows whose deletion vector (as delta-rs applies them, version by version) newly
    hides them, or every row of a file removed for good. (delta-rs's own change-feed reader takes file
    paths with percent signs literally, which timestamp partitions have.)"""
    from urllib.parse import unquote

    root = Path(uri)
    actions = [json.loads(line) for line in (root / "_delta_log" / f"{version:020d}.json").read_text().splitlines()]
    parts = []
    cdcs = [a["cdc"] for a in actions if "cdc" in a]
    for cdc in cdcs:
        parts.append(_with_partitions(pq.read_table(root / unquote(cdc["path"])), cdc))
    if not cdcs:
        removes = [a["remove"] for a in actions if "remove" in a and a["remove"].get("dataChange", True)]
        readded = {a["add"]["path"] for a in actions if "add" in a}
        before, after = _keep_masks(uri, version - 1), _keep_masks(uri, version)
        for rm in removes:
            table = pq.read_table(root / unquote(rm["path"]))
            name = rm["path"].rsplit("/", 1)[-1]
            live = _mask(before.get(name), table.num_rows)
            kept = _mask(after.get(name), table.num_rows) if rm["path"] in readded else np.zeros(table.num_rows, bool)
            gone = table.filter(pa.array(live & ~kept))
            gone = gone.append_column("_change_type", pa.array(["delete"] * gone.num_rows, pa.string()))
            parts.append(_with_partitions(gone, rm))
    return pa.concat_tables(parts, promote_options="default") if parts else pa.table({})


def _with_partitions(table: pa.Table, action: dict[str, Any]) -> pa.Table:
    for name, value in (action.get("partitionValues") or {}).items():
        table = table.append_column(name, pa.array([value] * table.num_rows, pa.string()))
    return table


def _keep_masks(uri: str, version: int) -> dict[str, np.ndarray]:
    """delta-rs's keep-masks (True: live) of the files with deletion vectors at a version, by file name."""
    out = {}
    for batch in DeltaTable(uri, version=version).deletion_vectors():
        rb = pa.record_batch(batch)
        for path, vector in zip(
            rb.column("filepath").to_pylist(), rb.column("selection_vector").to_pylist(), strict=True
        ):
            out[path.rsplit("/", 1)[-1]] = np.array(vector, dtype=bool)
    return out


def _mask(vector: np.ndarray | None, rows: int) -> np.ndarray:
    if vector is None:
        return np.ones(rows, dtype=bool)
    return np.concatenate([vector, np.ones(max(0, rows - len(vector)), dtype=bool)])[:rows]


def change_feed(uri: str, start: int = 0, end: int | None = None) -> pa.Table:
    """The change data feed (deltalake's reader) between two versions, without its version and
    timestamp columns: the data columns and ``_change_type``."""
    kwargs = {"starting_version": start} if end is None else {"starting_version": start, "ending_version": end}
    feed = pa.table(DeltaTable(uri).load_cdf(**kwargs).read_all())
    feed = feed.drop_columns([c for c in ("_commit_version", "_commit_timestamp") if c in feed.column_names])
    views = [i for i, f in enumerate(feed.schema) if pa.types.is_string_view(f.type)]
    for i in views:
        feed = feed.set_column(i, feed.schema.field(i).name, feed.column(i).cast(pa.string()))
    return feed


def normalized(table: pa.Table, columns: list[str]) -> pa.Table:
    """``columns`` of ``table`` with one set of types, whichever reader produced it: timestamps as UTC
    microseconds (int64), integers as int64, large and view strings as strings."""
    cols = []
    for name in columns:
        col = table.column(name)
        if pa.types.is_timestamp(col.type):
            col = col.cast(pa.timestamp("us", tz="UTC")).cast(pa.int64())
        elif pa.types.is_large_string(col.type) or pa.types.is_string_view(col.type):
            col = col.cast(pa.string())
        elif pa.types.is_integer(col.type):
            col = col.cast(pa.int64())
        cols.append(col)
    return pa.table(dict(zip(columns, cols, strict=True)))


def checksum(uri: str, storage_options: dict[str, str] | None = None) -> tuple[int, str]:
    """Checksum of the live content as deltalake reads it."""
    return rows_checksum(scan(uri, storage_options))


def scan(uri: str, storage_options: dict[str, str] | None = None) -> pa.Table:
    return pa.table(DeltaTable(uri, storage_options=storage_options or None).scan())


def live_adds(uri: str, storage_options: dict[str, str] | None = None) -> list[dict[str, Any]]:
    dt_ = DeltaTable(uri, storage_options=storage_options or None)
    return pa.table(dt_.get_add_actions(flatten=True)).to_pylist()


def footers(uri: str, storage_options: dict[str, str] | None = None) -> dict[str, pq.FileMetaData]:
    """Parquet footers of every live file, read straight from storage."""
    st = TableStorage(uri, storage_options)
    out = {}
    from urllib.parse import unquote

    for add in live_adds(uri, storage_options):
        data = st.read(unquote(add["path"]))
        out[add["path"]] = pq.ParquetFile(pa.BufferReader(data)).metadata
    return out


def assert_layout(
    uri: str, column: str, storage_options: dict[str, str] | None = None, partition: str | None = None
) -> int:
    """Every row group of every live file holds one value of ``column`` (or only nulls, last), values ascend
    across row groups and files of each partition directory with disjoint ranges. Returns the row-group count."""
    by_dir: dict[str, list[tuple[Any, Any, bool]]] = {}
    groups = 0
    column = physical_name(uri, column, storage_options)
    for path, md in footers(uri, storage_options).items():
        if partition is not None and not path.startswith(partition + "/"):
            continue
        names = [md.schema.column(j).path for j in range(len(md.schema))]
        j = names.index(column)
        seq = []
        for i in range(md.num_row_groups):
            st = md.row_group(i).column(j).statistics
            rows = md.row_group(i).num_rows
            groups += 1
            assert st is not None and st.has_null_count, f"{path} rg {i}: no statistics"
            if st.null_count == rows:
                seq.append((None, None, True))
                continue
            assert st.null_count == 0, f"{path} rg {i}: nulls mixed with values"
            assert st.min == st.max, f"{path} rg {i}: holds {st.min}..{st.max}"
            seq.append((st.min, st.max, False))
        values = [s[0] for s in seq if not s[2]]
        assert values == sorted(values), f"{path}: values not ascending"
        nulls = [s[2] for s in seq]
        assert nulls == sorted(nulls), f"{path}: null row group not last"
        by_dir.setdefault(path.rsplit("/", 1)[0] if "/" in path else "", []).append(
            (min(values) if values else None, max(values) if values else None, any(nulls))
        )
    for d, files in by_dir.items():
        ranges = sorted((lo, hi) for lo, hi, _ in files if lo is not None)
        for (_, hi), (lo, _) in itertools.pairwise(ranges):
            assert hi < lo, f"{d}: files overlap on values {hi} >= {lo}"
        assert sum(1 for *_, n in files if n) <= 1, f"{d}: nulls in more than one file"
    return groups


def physical_name(uri: str, column: str, storage_options: dict[str, str] | None = None) -> str:
    """The name of ``column`` inside the Parquet files: its physical name on a column-mapped table."""
    dt_ = DeltaTable(uri, storage_options=storage_options or None)
    for f in json.loads(dt_.schema().to_json())["fields"]:
        if f["name"] == column:
            return (f.get("metadata") or {}).get("delta.columnMapping.physicalName", column)
    return column


def sensor_batch(rng: np.random.Generator, nodes: int, rows: int, node_range: int = 0, base: int = 0) -> pa.Table:
    """One random-order batch of sensor rows for ``nodes`` node ids."""
    return pa.table(
        {
            "node_id": pa.array(rng.integers(base, base + nodes, rows), pa.int64()),
            "utc_time": pa.array(rng.integers(0, 10**15, rows), pa.timestamp("us", tz="UTC")),
            "data_values": rng.random(rows),
            "quality": pa.array(rng.integers(0, 3, rows), pa.int32()),
            "node_id_range": pa.array(np.full(rows, node_range), pa.int64()),
        }
    )


def write_sensor_table(
    uri: str,
    storage_options: dict[str, str] | None = None,
    *,
    batches: int = 6,
    nodes: int = 20,
    rows: int = 400,
    ranges: int = 1,
    seed: int = 7,
) -> None:
    rng = np.random.default_rng(seed)
    for _ in range(batches):
        t = pa.concat_tables([sensor_batch(rng, nodes, rows, r, base=r * nodes) for r in range(ranges)])
        write_deltalake(uri, t, partition_by=["node_id_range"], mode="append", storage_options=storage_options or None)


def row_groups(uri: str, storage_options: dict[str, str] | None = None) -> list[pa.Table]:
    """Every row group of every live file, in file and row-group order, as stored (deletion vectors ignored)."""
    from urllib.parse import unquote

    st = TableStorage(uri, storage_options)
    out = []
    for add in sorted(live_adds(uri, storage_options), key=lambda a: a["path"]):
        pf = pq.ParquetFile(pa.BufferReader(st.read(unquote(add["path"]))))
        out.extend(pf.read_row_group(i) for i in range(pf.metadata.num_row_groups))
    return out


# ------------------------------------------------------------------ several engines on one table
def content_checksum(table: pa.Table) -> tuple[int, str]:
    """:func:`rows_checksum` of every column after :func:`normalized`: equal for the same rows whichever
    engine read them (Spark, Sail and delta-rs differ in integer widths, string and timestamp types)."""
    return rows_checksum(normalized(table, sorted(table.column_names)))


def engine_checksums(
    uri: str, *, delta_spark: Any = None, sail: Any = None, storage_options: dict[str, str] | None = None
) -> dict[str, tuple[int, str]]:
    """Content checksums of the live rows through delta-rs and, when given, Apache Spark with Delta
    Lake (a classic session) and Sail (a Spark Connect session)."""
    out = {"delta-rs": content_checksum(scan(uri, storage_options))}
    if delta_spark is not None:
        out["spark"] = content_checksum(delta_spark.read.format("delta").load(uri).toArrow())
    if sail is not None:
        out["sail"] = content_checksum(sail.read.format("delta").load(uri).toArrow())
    return out


def assert_engines_agree(
    uri: str,
    *,
    delta_spark: Any = None,
    sail: Any = None,
    expected: tuple[int, str] | None = None,
    storage_options: dict[str, str] | None = None,
) -> tuple[int, str]:
    """Every engine reads the same content (and ``expected``, when given); Spark's ``DESCRIBE HISTORY``
    and ``DESCRIBE DETAIL`` accept the log and agree with delta-rs on the version and the live files."""
    sums = engine_checksums(uri, delta_spark=delta_spark, sail=sail, storage_options=storage_options)
    first = sums["delta-rs"]
    assert all(v == first for v in sums.values()), sums
    if expected is not None:
        assert first == expected, (first, expected)
    if delta_spark is not None:
        table = DeltaTable(uri, storage_options=storage_options or None)
        history = delta_spark.sql(f"DESCRIBE HISTORY delta.`{uri}`").collect()
        assert history[0]["version"] == table.version(), (history[0], table.version())
        detail = delta_spark.sql(f"DESCRIBE DETAIL delta.`{uri}`").collect()[0]
        assert detail["numFiles"] == len(live_adds(uri, storage_options)), detail
    return first
