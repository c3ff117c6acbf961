"""Typed log actions and their codecs: JSON lines and checkpoint Parquet decode by the protocol's
declarations (maps are maps, lists are lists, even when empty), and unknown fields survive a round trip."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pyarrow as pa
import pytest
from deltalake import DeltaTable, write_deltalake
from oracle import scan

from deltaextras.core.actions import (
    Add,
    Cdc,
    CommitInfo,
    DeletionVectorDescriptor,
    DomainMetadata,
    Metadata,
    OtherAction,
    Protocol,
    Remove,
    Txn,
    decode_commit,
    encode_commit,
)
from deltaextras.core.log import checkpoint_actions, list_log
from deltaextras.core.storage import TableStorage
from deltaextras.errors import CorruptDataError
from deltaextras.ops.maintenance.upgrade import enable_deletion_vectors

LINES = [
    {"commitInfo": {"timestamp": 1, "operation": "WRITE", "isBlindAppend": True, "txnId": "t", "newField": {"a": 1}}},
    {"protocol": {"minReaderVersion": 3, "minWriterVersion": 7, "readerFeatures": [], "writerFeatures": ["x"]}},
    {
        "metaData": {
            "id": "i",
            "format": {"provider": "parquet", "options": {}},
            "schemaString": "{}",
            "partitionColumns": [],
            "configuration": {},
            "createdTime": 5,
        }
    },
    {
        "add": {
            "path": "a%20b.parquet",
            "partitionValues": {"p": None},
            "size": 3,
            "modificationTime": 4,
            "dataChange": True,
            "stats": "{}",
            "tags": {},
            "deletionVector": {
                "storageType": "u",
                "pathOrInlineDv": "ab",
                "offset": 1,
                "sizeInBytes": 36,
                "cardinality": 2,
                "future": True,
            },
            "clusteringProvider": "liquid",
        }
    },
    {"remove": {"path": "b", "deletionTimestamp": 9, "dataChange": False, "partitionValues": {}}},
    {"txn": {"appId": "app", "version": 3, "lastUpdated": 2}},
    {"domainMetadata": {"domain": "d", "configuration": "{}", "removed": False}},
    {"cdc": {"path": "c", "partitionValues": {}, "size": 1, "dataChange": False}},
    {"checkpointMetadata": {"version": 7, "tags": {}}},
]


def test_json_round_trip_keeps_every_field_and_shape() -> None:
    data = b"\n".join(json.dumps(line, separators=(",", ":")).encode() for line in LINES) + b"\n"
    actions = decode_commit(data, 0)
    assert [type(a) for a in actions] == [
        CommitInfo,
        Protocol,
        Metadata,
        Add,
        Remove,
        Txn,
        DomainMetadata,
        Cdc,
        OtherAction,
    ]
    assert [a.to_json() for a in actions] == LINES
    add = actions[3]
    assert isinstance(add, Add) and isinstance(add.deletion_vector, DeletionVectorDescriptor)
    assert add.deletion_vector.unique_id == "uab@1" and add.deletion_vector.extra == {"future": True}
    assert add.extra == {"clusteringProvider": "liquid"}
    meta = actions[2]
    assert isinstance(meta, Metadata) and meta.partition_columns == [] and meta.configuration == {}


def test_remove_repeats_the_logical_file() -> None:
    (add,) = decode_commit(json.dumps(LINES[3]).encode(), 0)
    assert isinstance(add, Add)
    remove = add.retire(10, data_change=False)
    assert remove.file_id == add.file_id and remove.deletion_vector == add.deletion_vector
    assert remove.to_json()["remove"]["partitionValues"] == {"p": None}


@pytest.mark.parametrize(
    "line",
    [b"not json", b'{"add": {"path": "a", "partitionValues": []}}', b'{"add": 1, "remove": 2}'],
)
def test_malformed_actions_are_corrupt_data(line: bytes) -> None:
    with pytest.raises(CorruptDataError):
        decode_commit(line, 4)


def test_checkpoint_decodes_empty_lists_as_lists_and_empty_maps_as_maps(tmp_path: Path) -> None:
    uri = str(tmp_path / "t")
    write_deltalake(uri, pa.table({"x": [1]}))
    write_deltalake(uri, pa.table({"x": [2]}), mode="append")
    DeltaTable(uri).create_checkpoint()
    storage = TableStorage(uri)
    listing = list_log(storage)
    actions = list(checkpoint_actions(storage, listing.checkpoints[1]))
    (meta,) = [a for a in actions if isinstance(a, Metadata)]
    assert meta.partition_columns == [] and meta.configuration == {}
    adds = [a for a in actions if isinstance(a, Add)]
    assert len(adds) == 2 and all(a.partition_values == {} for a in adds)
    assert not any(k.endswith("_parsed") for a in adds for k in a.extra)


def test_enabling_deletion_vectors_after_a_checkpoint_keeps_the_table_readable(tmp_path: Path) -> None:
    """Write, append, checkpoint, enable deletion vectors: deltalake still reads the table (the copied
    ``metaData`` keeps ``partitionColumns`` a list)."""
    uri = str(tmp_path / "t")
    write_deltalake(uri, pa.table({"id": [1], "x": [1]}))
    write_deltalake(uri, pa.table({"id": [2], "x": [5]}), mode="append")
    DeltaTable(uri).create_checkpoint()
    assert enable_deletion_vectors(uri) == 2
    dt = DeltaTable(uri)
    assert dt.metadata().partition_columns == []
    assert dt.metadata().configuration["delta.enableDeletionVectors"] == "true"
    assert sorted(r["id"] for r in scan(uri).to_pylist()) == [1, 2]
    line = json.loads((tmp_path / "t" / "_delta_log" / f"{2:020d}.json").read_text().splitlines()[-1])
    assert line["metaData"]["partitionColumns"] == []


def test_checkpoint_of_a_partitioned_fixture_decodes(tmp_path: Path) -> None:
    """A Spark-written checkpoint (``*_parsed`` columns, maps, lists) decodes into typed actions."""
    from services import fixtures_dir

    candidates = [p for p in sorted(fixtures_dir().iterdir()) if list((p / "_delta_log").glob("*.checkpoint.parquet"))]
    if not candidates:
        pytest.skip("no fixture with a checkpoint")
    root = tmp_path / "t"
    shutil.copytree(candidates[0], root)
    storage = TableStorage(str(root))
    listing = list_log(storage)
    version = max(listing.checkpoints)
    actions = list(checkpoint_actions(storage, listing.checkpoints[version]))
    assert any(isinstance(a, Protocol) for a in actions) and any(isinstance(a, Metadata) for a in actions)
    for a in actions:
        if isinstance(a, Add):
            assert isinstance(a.partition_values, dict)
        if isinstance(a, Metadata):
            assert isinstance(a.partition_columns, list) and isinstance(a.configuration, dict)
    assert encode_commit(actions)  # and they encode back
