"""Helpers of the commit-fault, conflict-table and commit-regression suites (no tests here): a small
sensor table with a unique ``seq`` per row, the operations under test driven through the public API,
and oracles that judge a table from outside -- content checksums through delta-rs, and "every file
the log references exists", read from the raw log (deletion-vector files of storage type ``u`` and
``p`` included), from deltalake's file list and from deltalake's deletion-vector reader.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import time
import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import unquote, urlparse

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
from deltalake import DeltaTable, write_deltalake
from reliability_support import T0, UNIT, expected, log_entries

import deltaextras
from deltaextras.core.storage import TableStorage

Options = Mapping[str, str] | None

# the operations under test: rorder of partition 0, and delete in both modes
OPS = ("rorder", "delete_dv", "delete_cow")
DELETE_PREDICATE = "node_id = 2"
OUR_OPERATIONS = {"rorder": "OPTIMIZE", "delete_dv": "DELETE", "delete_cow": "DELETE"}

_Z85 = "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ.-:+=^!/*?&<>()[]{}@%$#"
_Z85_VALUE = {c: i for i, c in enumerate(_Z85)}


def z85_uuid(text: str) -> str:
    """The UUID of a 20-character Z85 text (Delta's deletion-vector file names), decoded independently.

    Example:
        >>> z85_uuid("vBn[lx{q8@P<9BNH/isA")
        '61d16c75-6994-46b7-a15b-8b538852e50e'
    """
    assert len(text) == 20, text
    raw = b""
    for i in range(0, 20, 5):
        n = 0
        for c in text[i : i + 5]:
            n = n * 85 + _Z85_VALUE[c]
        raw += n.to_bytes(4, "big")
    h = raw.hex()
    return f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}"


# ------------------------------------------------------------------------------------------ tables
def sensor_rows(seq_start: int, count: int, *, part: int = 0, nodes: tuple[int, ...] = (0, 1, 2, 3, 4, 5)) -> pa.Table:
    """``count`` rows of partition ``part``, unique ``seq`` from ``seq_start``, node ids cycling over ``nodes``."""
    rng = np.random.default_rng(seq_start + 7 * part)
    seq = np.arange(seq_start, seq_start + count, dtype=np.int64)
    rng.shuffle(seq)
    node = np.array([nodes[int(s) % len(nodes)] for s in seq], dtype=np.int64)
    return pa.table(
        {
            "node_id": pa.array(node, pa.int64()),
            "utc_time": pa.array(
                [T0 + dt.timedelta(minutes=int(s)) for s in seq],
                pa.timestamp("us", tz="UTC"),
            ),
            "seq": pa.array(seq, pa.int64()),
            "value": pa.array(rng.random(count), pa.float64()),
            UNIT: pa.array(np.full(count, part, dtype=np.int64), pa.int64()),
        }
    )


def append(uri: str, options: Options, table: pa.Table, configuration: dict[str, str] | None = None) -> None:
    """Append with delta-rs (another writer)."""
    write_deltalake(
        uri,
        table,
        partition_by=[UNIT],
        mode="append",
        storage_options=dict(options or {}) or None,
        configuration=configuration,
    )


def make_table(
    uri: str,
    options: Options,
    *,
    deletion_vectors: bool = False,
    checkpoint_interval: int | None = None,
    other_partition: bool = False,
) -> pa.Table:
    """Partition 0 from three delta-rs appends (40 rows each, nodes 0..5, so every file holds node 2);
    with ``other_partition`` also one file in partition 1 holding nodes 7 and 8 only (a delete of
    ``node_id = 2`` prunes it by statistics). Returns every row written."""
    config = {"delta.checkpointInterval": str(checkpoint_interval)} if checkpoint_interval else None
    written = []
    for b in range(3):
        t = sensor_rows(b * 40, 40)
        append(uri, options, t, config if b == 0 else None)
        written.append(t)
    if other_partition:
        t = sensor_rows(1000, 20, part=1, nodes=(7, 8))
        append(uri, options, t)
        written.append(t)
    if deletion_vectors:
        deltaextras.enable_deletion_vectors(uri, storage_options=options)
    return pa.concat_tables(written)


def spark_style_append(uri: str, table: pa.Table) -> int:
    """Append ``table`` (one partition) to a local table the way Spark does: one Parquet file, then the
    next log entry created exclusively, with ``commitInfo.isBlindAppend: true`` (delta-rs leaves that
    field out, which Delta's conflict rules read as "not a blind append") and per-file statistics.
    Returns the version committed."""
    part = table.column(UNIT)[0].as_py()
    assert pc.all(pc.equal(table.column(UNIT), part)).as_py(), "one partition per append"
    rel = f"{UNIT}={part}/part-00000-{uuid.uuid4()}.c000.snappy.parquet"
    data = table.drop_columns([UNIT])
    pq.write_table(data, os.path.join(uri, rel))
    stats = {
        "numRecords": data.num_rows,
        "minValues": {c: pc.min(data.column(c)).as_py() for c in ("node_id", "seq")},
        "maxValues": {c: pc.max(data.column(c)).as_py() for c in ("node_id", "seq")},
        "nullCount": {c: 0 for c in ("node_id", "seq")},
    }
    version = DeltaTable(uri).version() + 1
    while True:
        actions = [
            {
                "commitInfo": {
                    "timestamp": int(time.time() * 1000),
                    "operation": "WRITE",
                    "operationParameters": {"mode": "Append", "partitionBy": json.dumps([UNIT])},
                    "readVersion": version - 1,
                    "isolationLevel": "Serializable",
                    "isBlindAppend": True,
                    "engineInfo": "Apache-Spark/3.5.0 Delta-Lake/3.2.0",
                    "txnId": str(uuid.uuid4()),
                }
            },
            {
                "add": {
                    "path": rel,
                    "partitionValues": {UNIT: str(part)},
                    "size": os.path.getsize(os.path.join(uri, rel)),
                    "modificationTime": int(time.time() * 1000),
                    "dataChange": True,
                    "stats": json.dumps(stats),
                }
            },
        ]
        body = "\n".join(json.dumps(a) for a in actions) + "\n"
        try:
            fd = os.open(os.path.join(uri, "_delta_log", f"{version:020d}.json"), os.O_WRONLY | os.O_CREAT | os.O_EXCL)
        except FileExistsError:
            version += 1
            continue
        with os.fdopen(fd, "w") as fh:
            fh.write(body)
        return version


def without(rows: pa.Table, predicate: str) -> pa.Table:
    """``rows`` minus the rows a simple ``col = value`` / ``col IN (...)`` predicate selects."""
    column, _, value = predicate.partition(" = ")
    if value:
        mask = pc.equal(rows.column(column.strip()), int(value))
    else:
        column, _, values = predicate.partition(" IN ")
        wanted = [int(v) for v in values.strip("() ").split(",")]
        mask = pc.is_in(rows.column(column.strip()), pa.array(wanted, pa.int64()))
    return rows.filter(pc.invert(mask))


# -------------------------------------------------------------------------------------- operations
@dataclass
class Outcome:
    """What one call of an operation reported: ``committed``, ``nothing`` (already done / nothing to do)
    or ``raised`` (with the error)."""

    kind: str
    version: int | None = None
    error: BaseException | None = None
    detail: str = ""


def run_op(op: str, uri: str, options: Options, hooks: Mapping[str, Any] | None = None) -> Outcome:
    """Run one operation through the public API and classify what it reported."""
    try:
        if op == "rorder":
            report = deltaextras.rorder_single(
                {"path": uri, "partition_value": 0}, storage_options=options, hooks=hooks
            )
            if report.status == "committed":
                return Outcome("committed", report.commit_version, detail=report.reason)
            return Outcome("nothing", None, detail=f"{report.status}: {report.reason}")
        mode = "deletion_vectors" if op == "delete_dv" else "copy_on_write"
        # vectors go to files (storage type ``u``), never inline: the file PUT and its existence are tested
        rep = deltaextras.delete(
            uri, DELETE_PREDICATE, storage_options=options, mode=mode, inline_max_bytes=0, hooks=hooks
        )
        if rep.commit_version is not None:
            return Outcome("committed", rep.commit_version, detail=rep.line())
        return Outcome("nothing", None, detail=rep.line())
    except deltaextras.DeltaExtrasError as exc:
        return Outcome("raised", None, exc, f"{type(exc).__name__}: {exc}")


def after_op(op: str, rows: pa.Table) -> pa.Table:
    """The content the table must hold once ``op`` committed on top of ``rows``."""
    return rows if op == "rorder" else without(rows, DELETE_PREDICATE)


# ----------------------------------------------------------------------------------------- oracles
def content(uri: str, options: Options) -> tuple[int, str]:
    """Checksum of the live rows as delta-rs reads them (deletion vectors applied)."""
    from reliability_support import content as rs_content

    return rs_content(uri, options)


def _dv_id(dv: Mapping[str, Any] | None) -> str | None:
    if not dv:
        return None
    return f"{dv.get('storageType')}{dv.get('pathOrInlineDv')}@{dv.get('offset')}"


def dv_key(uri: str, dv: Mapping[str, Any]) -> str | None:
    """Storage key (under the table root) of a deletion vector's file; None for inline vectors."""
    kind = dv["storageType"]
    text = str(dv["pathOrInlineDv"])
    if kind == "i":
        return None
    if kind == "u":
        prefix, encoded = text[:-20], text[-20:]
        name = f"deletion_vector_{z85_uuid(encoded)}.bin"
        return f"{prefix}/{name}" if prefix else name
    assert kind == "p", f"unknown deletion vector storage type {kind!r}"
    parsed = urlparse(text)
    path = unquote(parsed.path if parsed.scheme else text)
    root = urlparse(uri).path if "://" in uri else uri
    root = root.rstrip("/")
    assert path.startswith(root + "/"), f"absolute deletion vector {text} lies outside the table {uri}"
    return path[len(root) + 1 :]


def live_from_log(uri: str, options: Options) -> dict[str, dict[str, Any]]:
    """The live ``add`` actions, replayed from the raw JSON log (logical file = path + vector id)."""
    live: dict[tuple[str, str | None], dict[str, Any]] = {}
    for _version, actions in sorted(log_entries(uri, options).items()):
        for action in actions:
            if "add" in action:
                add = action["add"]
                live[(unquote(add["path"]), _dv_id(add.get("deletionVector")))] = add
            elif "remove" in action:
                rm = action["remove"]
                live.pop((unquote(rm["path"]), _dv_id(rm.get("deletionVector"))), None)
    by_path: dict[str, dict[str, Any]] = {}
    for (path, _), add in live.items():
        assert path not in by_path, f"{path} is live twice (with two deletion vectors)"
        by_path[path] = add
    return by_path


def assert_files_exist(uri: str, options: Options) -> int:
    """Every file a live ``add`` of the log names exists: data files, ``u``/``p`` deletion-vector files,
    and the checkpoint ``_last_checkpoint`` points to. The raw log and deltalake agree on the live files,
    and deltalake can read every deletion vector. Returns the number of live files."""
    st = TableStorage(uri, options)
    live = live_from_log(uri, options)
    dt = DeltaTable(uri, storage_options=dict(options or {}) or None)
    lake = {unquote(p) for p in pa.table(dt.get_add_actions(flatten=True)).column("path").to_pylist()}
    assert set(live) == lake, f"raw log and deltalake disagree on live files: {sorted(set(live) ^ lake)}"
    missing = []
    for path, add in live.items():
        if not st.exists(path):
            missing.append(path)
        dv = add.get("deletionVector")
        key = dv_key(uri, dv) if dv else None
        if key is not None and not st.exists(key):
            missing.append(f"{key} (deletion vector of {path})")
    try:
        raw = st.read("_delta_log/_last_checkpoint")
    except FileNotFoundError:
        pass
    else:
        version = int(json.loads(raw)["version"])
        name = f"_delta_log/{version:020d}.checkpoint.parquet"
        if not st.exists(name) and not any(
            k.startswith(f"_delta_log/{version:020d}.checkpoint.") for k, _ in st.list_dir("_delta_log/")
        ):
            missing.append(f"{name} (named by _last_checkpoint)")
    assert not missing, f"the log references files that do not exist: {missing}"
    for _row in dt.deletion_vectors():  # reads every vector file; fails on a missing one
        pass
    return len(live)


def our_commits(uri: str, options: Options, op: str) -> list[int]:
    """Versions of the commits of ``op`` written by deltaextras (its ``commitInfo.operation``; for a delete
    also its predicate, so that other deletes of ours do not count)."""
    found = []
    for version, actions in sorted(log_entries(uri, options).items()):
        for action in actions:
            info = action.get("commitInfo")
            if (
                info
                and str(info.get("engineInfo", "")).startswith("deltaextras")
                and info.get("operation") == OUR_OPERATIONS[op]
                and (op == "rorder" or (info.get("operationParameters") or {}).get("predicate") == DELETE_PREDICATE)
            ):
                found.append(version)
    return found


__all__ = [
    "DELETE_PREDICATE",
    "OPS",
    "Outcome",
    "after_op",
    "append",
    "assert_files_exist",
    "content",
    "dv_key",
    "expected",
    "live_from_log",
    "make_table",
    "our_commits",
    "run_op",
    "sensor_rows",
    "without",
    "z85_uuid",
]
