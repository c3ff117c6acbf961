"""One parser for every path the Delta log holds: relative and percent-escaped, ``file:/abs`` (as Spark
writes absolute paths), ``file:///abs``, plain ``/abs``, ``abfss://``, ``az://``, ``s3://``; used for data
files and for deletion-vector files of storage type ``p``."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest
from oracle import checksum, scan

from deltaextras import delete, rorder
from deltaextras.core.dv import decode_uuid
from deltaextras.core.storage import Location, TableStorage, location, log_path_to_key
from deltaextras.errors import UnsupportedFeatureError
from deltaextras.ops.rorder.plan import plan_table


@pytest.mark.parametrize(
    ("uri", "expected"),
    [
        ("file:/data/t/p=1/f.parquet", Location("file", "", "data/t/p=1/f.parquet")),
        ("file:///data/t/p=1/f.parquet", Location("file", "", "data/t/p=1/f.parquet")),
        ("file://localhost/data/t/f.parquet", Location("file", "", "data/t/f.parquet")),
        ("/data/t/f.parquet", Location("file", "", "data/t/f.parquet")),
        ("file:/data/my%20t/x%3DA%252FA/f.parquet", Location("file", "", "data/my t/x=A%2FA/f.parquet")),
        ("abfss://lake@acct.dfs.core.windows.net/t/f.parquet", Location("azure", "lake", "t/f.parquet")),
        ("abfs://lake@acct.dfs.core.windows.net/t/f.parquet", Location("azure", "lake", "t/f.parquet")),
        ("az://lake/t/f.parquet", Location("azure", "lake", "t/f.parquet")),
        ("wasbs://lake@acct.blob.core.windows.net/t/f.parquet", Location("azure", "lake", "t/f.parquet")),
        ("https://acct.blob.core.windows.net/lake/t/f.parquet", Location("azure", "lake", "t/f.parquet")),
        ("s3://bucket/t/f.parquet", Location("s3", "bucket", "t/f.parquet")),
        ("s3a://bucket/t/f%20g.parquet", Location("s3", "bucket", "t/f g.parquet")),
        ("gs://bucket/t/f.parquet", Location("gs", "bucket", "t/f.parquet")),
    ],
)
def test_every_absolute_form_parses_to_one_location(uri: str, expected: Location) -> None:
    assert location(uri, encoded=True) == expected


@pytest.mark.parametrize(
    ("path", "root", "key"),
    [
        ("p=1/f.parquet", "/data/t", "p=1/f.parquet"),
        ("x=A%252FA/f.parquet", "/data/t", "x=A%2FA/f.parquet"),
        ("file:/data/t/p=1/f.parquet", "/data/t", "p=1/f.parquet"),
        ("file:///data/t/p=1/f.parquet", "/data/t", "p=1/f.parquet"),
        ("file:/data/t/f%20g.parquet", "/data/t", "f g.parquet"),
        ("abfss://lake@acct.dfs.core.windows.net/t/p=1/f.parquet", "az://lake/t", "p=1/f.parquet"),
        ("az://lake/t/f.parquet", "abfss://lake@acct.dfs.core.windows.net/t", "f.parquet"),
        ("s3://bucket/t/f.parquet", "s3a://bucket/t", "f.parquet"),
    ],
)
def test_log_paths_become_keys_under_the_root(path: str, root: str, key: str) -> None:
    assert log_path_to_key(path, root) == key


@pytest.mark.parametrize("path", ["file:/elsewhere/f.parquet", "s3://other/t/f.parquet", "file:/data/tt/f.parquet"])
def test_a_data_file_outside_the_table_is_refused_by_name(path: str) -> None:
    with pytest.raises(UnsupportedFeatureError, match="outside the table"):
        log_path_to_key(path, "/data/t")


def test_a_vector_outside_the_table_opens_its_own_directory(tmp_path: Path) -> None:
    (tmp_path / "t").mkdir()
    (tmp_path / "vectors dir").mkdir()
    st = TableStorage(str(tmp_path / "t"))
    other, key = st.resolve(f"file:{quote(str(tmp_path / 'vectors dir'))}/deletion_vector_x.bin")
    assert other is not st and other.uri == str(tmp_path / "vectors dir") and key == "deletion_vector_x.bin"


# ------------------------------------------------------------------------------------- tables
def _absolute_dv(table: Path, spell: Any) -> None:
    """Rewrite the fixture's log so its deletion vector is of storage type ``p``, spelled by ``spell``."""
    log = table / "_delta_log" / "00000000000000000001.json"
    lines = []
    for line in log.read_text().splitlines():
        action = json.loads(line)
        dv = (action.get("add") or {}).get("deletionVector")
        if dv:
            name = f"deletion_vector_{decode_uuid(dv['pathOrInlineDv'])}.bin"
            dv["storageType"] = "p"
            dv["pathOrInlineDv"] = spell(table / name)
        lines.append(json.dumps(action))
    log.write_text("\n".join(lines) + "\n")


SPELLINGS = {
    "file:/abs (Spark)": lambda p: "file:" + quote(str(p)),
    "file:///abs": lambda p: "file://" + quote(str(p)),
}


@pytest.mark.parametrize("spelling", sorted(SPELLINGS))
def test_delete_reads_an_absolute_deletion_vector(spelling: str, fixture_table: Any, tmp_path: Path) -> None:
    """A ``p`` vector as Spark writes it (``file:/abs/path``, escaped: the table's directory has a space)."""
    source = fixture_table("table-with-dv-small")
    table = tmp_path / "my table"
    shutil.move(str(source), str(table))
    _absolute_dv(table, SPELLINGS[spelling])
    assert sorted(scan(str(table)).column("value").to_pylist()) == [1, 2, 3, 4, 5, 6, 7, 8]
    plan = plan_table(str(table), by="value", sort_by="value")
    assert [p.files[0].key for p in plan.partitions] == [
        "part-00000-fae5310a-a37d-4e51-827b-c3d5516560ca-c000.snappy.parquet"
    ]
    report = delete(str(table), "value = 4")
    assert report.rows_deleted == 1
    assert sorted(scan(str(table)).column("value").to_pylist()) == [1, 2, 3, 5, 6, 7, 8]
    rorder(str(table), by="value", sort_by="value", max_workers=1)
    assert sorted(scan(str(table)).column("value").to_pylist()) == [1, 2, 3, 5, 6, 7, 8]


def test_absolute_data_file_paths_in_the_log(fixture_table: Any, tmp_path: Path) -> None:
    """Data files named by absolute ``file:/`` paths (inside the table) are read, deleted from and rewritten."""
    table = fixture_table("table-without-dv-small")
    log = table / "_delta_log" / "00000000000000000000.json"
    lines = []
    for line in log.read_text().splitlines():
        action = json.loads(line)
        if "add" in action:
            action["add"]["path"] = "file:" + quote(str(table / action["add"]["path"]))
        lines.append(json.dumps(action))
    log.write_text("\n".join(lines) + "\n")
    before = checksum(str(table))
    assert plan_table(str(table), by="value").partitions
    rorder(str(table), by="value", sort_by="value", max_workers=1)
    assert checksum(str(table)) == before
    delete(str(table), "value = 3")
    assert sorted(scan(str(table)).column("value").to_pylist()) == [v for v in range(10) if v != 3]


@pytest.mark.parametrize(
    ("root", "path", "where", "key"),
    [
        ("s3://bucket/t", "s3a://bucket/t/deletion_vector_a.bin", None, "deletion_vector_a.bin"),
        ("s3://bucket/t", "s3://other/v%20x/deletion_vector_a.bin", "s3://other/v x", "deletion_vector_a.bin"),
        (
            "abfss://c@acct.dfs.core.windows.net/t",
            "abfss://c@acct.dfs.core.windows.net/t/dv/deletion_vector_b.bin",
            None,
            "dv/deletion_vector_b.bin",
        ),
        (
            "abfss://c@acct.dfs.core.windows.net/t",
            "abfss://d@acct.dfs.core.windows.net/x/deletion_vector_b.bin",
            "abfss://d@acct.dfs.core.windows.net/x",
            "deletion_vector_b.bin",
        ),
        (
            "az://c/t",
            "https://acct.blob.core.windows.net/c/t/deletion_vector_b.bin",
            None,
            "deletion_vector_b.bin",
        ),
    ],
)
def test_remote_vector_paths_resolve_in_or_beside_the_table(root: str, path: str, where: str | None, key: str) -> None:
    """``p`` vectors on object stores: inside the table they use the table's storage, elsewhere their own."""
    options = {"AWS_REGION": "us-east-1", "account_name": "acct", "account_key": "a2V5"}
    st = TableStorage(root, {k: v for k, v in options.items() if (k.startswith("AWS")) == root.startswith("s3")})
    other, got = st.resolve(path)
    assert got == key
    assert (other is st) if where is None else (other.uri == where)
