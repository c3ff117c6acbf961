"""The test services themselves: each backend reads and writes Delta, enforces put-if-absent, and
Sail exchanges Delta tables with deltalake."""

from __future__ import annotations

import base64
import json
import uuid
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import obstore
import pyarrow as pa
import pytest
from deltalake import DeltaTable, write_deltalake
from obstore.exceptions import AlreadyExistsError
from services import Azurite, Backend, MotoServer, fixtures_dir, obstore_options


def _sample(n: int, offset: int = 0) -> pa.Table:
    return pa.table(
        {
            "node": pa.array([f"n{(i + offset) % 3}" for i in range(n)]),
            "value": pa.array([float(i + offset) for i in range(n)]),
            "day": pa.array(["2024-01-01" if i % 2 else "2024-01-02" for i in range(n)]),
        }
    )


def test_deltalake_write_append_read(backend: Backend) -> None:
    uri = backend.new_table_uri()
    write_deltalake(uri, _sample(10), partition_by=["day"], storage_options=backend.storage_options)
    write_deltalake(uri, _sample(5, offset=10), mode="append", storage_options=backend.storage_options)

    dt = DeltaTable(uri, storage_options=backend.storage_options)
    assert dt.version() == 1
    got = dt.to_pyarrow_table().sort_by("value")
    assert got.column("value").to_pylist() == [float(i) for i in range(15)]
    assert set(got.column("day").to_pylist()) == {"2024-01-01", "2024-01-02"}
    assert sorted(dt.partitions(), key=lambda p: p["day"]) == [{"day": "2024-01-01"}, {"day": "2024-01-02"}]

    # obstore sees the same table through the same options.
    store = backend.obstore_store(uri)
    keys = sorted(meta["path"] for batch in obstore.list(store, "_delta_log/") for meta in batch)
    assert keys == ["_delta_log/00000000000000000000.json", "_delta_log/00000000000000000001.json"]
    commit = bytes(obstore.get(store, keys[1]).bytes()).decode()
    adds = [json.loads(line)["add"] for line in commit.splitlines() if '"add"' in line]
    assert adds and all(a["path"].startswith("day=") for a in adds)
    for add in adds:
        assert obstore.head(store, add["path"].replace("%3A", ":"))["size"] == add["size"]


def test_put_if_absent(backend: Backend) -> None:
    store = backend.obstore_store(backend.new_table_uri())
    obstore.put(store, "_delta_log/00000000000000000000.json", b"first", mode="create")
    with pytest.raises(AlreadyExistsError):
        obstore.put(store, "_delta_log/00000000000000000000.json", b"second", mode="create")
    assert bytes(obstore.get(store, "_delta_log/00000000000000000000.json").bytes()) == b"first"


def test_put_if_absent_race_has_one_winner(backend: Backend) -> None:
    store = backend.obstore_store(backend.new_table_uri())
    key = "_delta_log/00000000000000000007.json"

    def attempt(i: int) -> bool:
        try:
            obstore.put(store, key, f"writer {i}".encode(), mode="create")
        except AlreadyExistsError:
            return False
        return True

    with ThreadPoolExecutor(8) as pool:
        results = list(pool.map(attempt, range(8)))
    assert results.count(True) == 1
    winner = results.index(True)
    assert bytes(obstore.get(store, key).bytes()) == f"writer {winner}".encode()


def test_obstore_options_split() -> None:
    config, client = obstore_options(
        {
            "AWS_ENDPOINT_URL": "http://127.0.0.1:1",
            "AWS_ALLOW_HTTP": "true",
            "azure_allow_http": "true",
            "timeout": "30s",
            "AWS_S3_ALLOW_UNSAFE_RENAME": "true",
            "azure_storage_endpoint": "http://127.0.0.1:2/devstoreaccount1",
        }
    )
    assert config == {
        "aws_endpoint_url": "http://127.0.0.1:1",
        "azure_storage_endpoint": "http://127.0.0.1:2/devstoreaccount1",
    }
    assert client == {"allow_http": "true", "timeout": "30s"}


def test_azurite_queue_roundtrip(azurite: Azurite) -> None:
    from azure.storage.queue import QueueClient, TextBase64EncodePolicy

    name = azurite.create_queue("services-test")
    sender = QueueClient.from_connection_string(
        azurite.connection_string, name, message_encode_policy=TextBase64EncodePolicy()
    )
    sender.send_message('{"hello": "world"}')
    receiver = QueueClient.from_connection_string(azurite.connection_string, name)
    messages = list(receiver.receive_messages(max_messages=5))
    assert len(messages) == 1
    assert json.loads(base64.b64decode(messages[0].content)) == {"hello": "world"}
    assert str(azurite.queue_port) in azurite.connection_string


def test_moto_sqs_and_dynamodb(moto: MotoServer) -> None:
    sqs = moto.boto3_client("sqs")
    queue_url = sqs.create_queue(QueueName="services-test")["QueueUrl"]
    sqs.send_message(QueueUrl=queue_url, MessageBody="ping")
    received = sqs.receive_message(QueueUrl=queue_url, MaxNumberOfMessages=1)["Messages"]
    assert [m["Body"] for m in received] == ["ping"]

    ddb = moto.boto3_client("dynamodb")
    ddb.create_table(
        TableName="services-test",
        KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}],
        AttributeDefinitions=[{"AttributeName": "pk", "AttributeType": "S"}],
        BillingMode="PAY_PER_REQUEST",
    )
    item = {"pk": {"S": "a"}}
    ddb.put_item(TableName="services-test", Item=item, ConditionExpression="attribute_not_exists(pk)")
    with pytest.raises(ddb.exceptions.ConditionalCheckFailedException):
        ddb.put_item(TableName="services-test", Item=item, ConditionExpression="attribute_not_exists(pk)")


def test_sail_reads_deltalake_table(spark: Any, tmp_path: Path) -> None:
    path = str(tmp_path / "t")
    write_deltalake(path, _sample(12), partition_by=["day"])
    write_deltalake(path, _sample(3, offset=12), mode="append")
    df = spark.read.format("delta").load(path)
    assert df.count() == 15
    assert df.filter("day = '2024-01-01'").count() == 7
    assert sorted(r["node"] for r in df.select("node").distinct().collect()) == ["n0", "n1", "n2"]


def test_spark_writes_delta_deltalake_reads(spark: Any, tmp_path: Path) -> None:
    path = str(tmp_path / "t")
    df = spark.range(20).selectExpr("id", "cast(id % 4 as string) as k", "id * 1.5 as v")
    df.write.format("delta").partitionBy("k").mode("append").save(path)
    more = spark.range(5).selectExpr("id + 100 as id", "'9' as k", "0.0 as v")
    more.write.format("delta").mode("append").save(path)

    dt = DeltaTable(path)
    assert dt.version() == 1
    assert dt.metadata().partition_columns == ["k"]
    got = dt.to_pyarrow_table()
    assert got.num_rows == 25
    assert sorted(got.column("id").to_pylist()) == [*range(20), *range(100, 105)]
    assert sorted({p["k"] for p in dt.partitions()}) == ["0", "1", "2", "3", "9"]


@pytest.mark.parametrize("where", ["azurite", "s3"])
def test_sail_on_cloud_storage(spark_cloud: Any, azurite: Azurite, moto: MotoServer, where: str) -> None:
    if where == "azurite":
        azurite.create_container("sail-tests")
        uri, options = f"az://sail-tests/{uuid.uuid4().hex}", azurite.storage_options
    else:
        moto.create_bucket("sail-tests")
        uri, options = f"s3://sail-tests/{uuid.uuid4().hex}", moto.storage_options
    write_deltalake(uri, _sample(6), partition_by=["day"], storage_options=options)
    assert spark_cloud.read.format("delta").load(uri).count() == 6
    extra = spark_cloud.range(4).selectExpr("'n9' as node", "cast(id as double) as value", "'2024-01-03' day")
    extra.write.format("delta").mode("append").save(uri)
    dt = DeltaTable(uri, storage_options=options)
    assert dt.version() == 1
    assert dt.to_pyarrow_table().num_rows == 10


def test_fixture_table_is_a_private_copy(fixture_table: Any) -> None:
    name = "table-without-dv-small"
    copy = fixture_table(name)
    original = fixtures_dir() / name
    assert copy != original and copy.is_dir()
    before = sorted(p.name for p in (original / "_delta_log").iterdir())
    rows = DeltaTable(str(copy)).to_pyarrow_table().num_rows
    write_deltalake(str(copy), DeltaTable(str(copy)).to_pyarrow_table(), mode="append")
    assert DeltaTable(str(copy)).to_pyarrow_table().num_rows == 2 * rows
    assert sorted(p.name for p in (original / "_delta_log").iterdir()) == before
