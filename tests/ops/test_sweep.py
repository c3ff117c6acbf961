"""plan, inspect, rorder and delete over every real table in the fixtures and over damaged copies made
here (a missing data file, a missing deletion-vector file, a truncated log entry, a metaData without
schemaString — in a commit or null in a checkpoint —, a ``_last_checkpoint`` naming a missing
checkpoint): each ends in success with content verified through delta-rs, or in exactly one error of
the hierarchy with the right ``retryable`` — never another exception type. The CLI says the same in one
line on stderr, with a non-zero exit code and no traceback."""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest
from oracle import rows_checksum, scan
from services import fixtures_dir

from deltaextras import delete, rorder
from deltaextras.errors import CorruptDataError, DeltaExtrasError, PartitionsFailedError, UnsupportedFeatureError
from deltaextras.ops.maintenance.inspect import read_amplification, row_group_table
from deltaextras.ops.rorder.plan import plan_table

# table -> (row-group column for plan / inspect / rorder, column a delete compares)
TABLES = {
    "cdf-table-with-cdc-and-dvs": ("id", "id"),
    "checkpoint-v2-table": ("id", "id"),
    "delta-0.8.0-null-partition": ("v", "k"),
    "delta-0.8.0-partitioned": ("value", "value"),
    "delta-0.8.0-special-partition": ("y", "x"),
    "delta-2.2.0-partitioned-types": ("c3", "c3"),
    "partition-type-primitives": ("id", "category"),
    "simple_table_with_checkpoint": ("version", "version"),
    "table-with-dv-small": ("value", "value"),
    "table-without-dv-small": ("value", "value"),
    "table_with_column_mapping": ("Super Name", "Super Name"),
    "table_with_deletion_logs": ("address", "id"),
    "table_with_edge_timestamps": ("BIG_DATE", "SOME_VALUE"),
    "table_with_partitioning_mapping": ("description", "newid"),
}
REFUSED = {"simple_table_features": "id", "table_with_liquid_clustering": "id"}
OPS = ("plan", "inspect", "rorder", "delete")


def test_every_fixture_is_in_the_sweep() -> None:
    assert sorted(p.name for p in fixtures_dir().iterdir() if (p / "_delta_log").is_dir()) == sorted(
        [*TABLES, *REFUSED]
    )


# ------------------------------------------------------------------------------------ helpers
def outcome(fn: Callable[[], Any]) -> BaseException | None:
    """None on success, else the error; anything outside the hierarchy fails the test."""
    try:
        fn()
    except DeltaExtrasError as exc:
        assert "\n" not in str(exc), f"error is not one line: {exc!r}"
        return exc
    except Exception as exc:
        pytest.fail(f"{type(exc).__name__} escaped the error hierarchy: {str(exc)[:300]}")
    return None


def log_digest(path: Path) -> str:
    """A digest of every file under ``_delta_log/``: unchanged means nothing was committed."""
    h = hashlib.sha256()
    for f in sorted((path / "_delta_log").rglob("*")):
        if f.is_file():
            h.update(f.name.encode() + f.read_bytes())
    return h.hexdigest()


def content(name: str, path: Path) -> pa.Table:
    """The table's live rows through delta-rs; for the INT96 timestamps beyond year 2262 (which delta-rs
    reads through nanoseconds, wrapped), the live files (as delta-rs lists them) read as microseconds."""
    if name != "table_with_edge_timestamps":
        return scan(str(path))
    from deltalake import DeltaTable

    live = DeltaTable(str(path)).file_uris()
    raw = pa.concat_tables([pq.read_table(p, coerce_int96_timestamp_unit="us") for p in sorted(live)])
    return raw.cast(
        pa.schema(
            [
                pa.field(f.name, pa.timestamp("us", tz="UTC") if pa.types.is_timestamp(f.type) else f.type)
                for f in raw.schema
            ]
        )
    )


def literal(value: Any) -> str:
    return str(value) if isinstance(value, int) else "'" + str(value).replace("'", "''") + "'"


def quoted(name: str) -> str:
    return f"`{name}`" if not name.isidentifier() else name


def delete_case(table: pa.Table, column: str) -> tuple[str, pa.Table]:
    """A predicate that deletes some rows (the middle value of ``column``) and the rows that must stay."""
    table = pa.table(
        [c.cast(pa.string()) if pa.types.is_string_view(c.type) else c for c in table.columns], names=table.column_names
    )
    values = sorted({v for v in table.column(column).to_pylist() if v is not None})
    value = values[len(values) // 2]
    col = table.column(column)
    if pa.types.is_string(col.type) or pa.types.is_large_string(col.type) or pa.types.is_string_view(col.type):
        col = col.cast(pa.string())
    hit = pc.fill_null(pc.equal(col, pa.scalar(value, col.type)), False)
    return f"{quoted(column)} = {literal(value)}", table.filter(pc.invert(hit))


def run(op: str, path: Path, by: str, predicate: str) -> BaseException | None:
    uri = str(path)
    if op == "plan":
        return outcome(lambda: plan_table(uri, by=by))
    if op == "inspect":
        return outcome(lambda: (row_group_table(uri, by), read_amplification(uri, by)))
    if op == "rorder":
        return outcome(lambda: rorder(uri, by=by, sort_by=by, max_workers=1))
    return outcome(lambda: delete(uri, predicate))


# ------------------------------------------------------------------------------------ real tables
@pytest.mark.parametrize("op", OPS)
@pytest.mark.parametrize("name", sorted(TABLES))
def test_real_tables_succeed_with_verified_content(name: str, op: str, fixture_table: Any) -> None:
    path = fixture_table(name)
    by, delete_column = TABLES[name]
    before = content(name, path)
    predicate, kept = delete_case(before, delete_column)
    digest = log_digest(path)
    error = run(op, path, by, predicate)
    assert error is None, f"{type(error).__name__}: {error}"
    after = content(name, path)
    if op == "delete":
        assert rows_checksum(after) == rows_checksum(kept)
        assert after.num_rows < before.num_rows
    else:
        assert rows_checksum(after) == rows_checksum(before)
    if op in ("plan", "inspect"):
        assert log_digest(path) == digest


@pytest.mark.parametrize("op", OPS)
@pytest.mark.parametrize("name", sorted(REFUSED))
def test_unsupported_tables_are_refused_by_every_operation(name: str, op: str, fixture_table: Any) -> None:
    path = fixture_table(name)
    digest = log_digest(path)
    error = run(op, path, REFUSED[name], f"{REFUSED[name]} = 1")
    if op == "inspect" and error is None:
        return  # reading footers needs no protocol support
    assert isinstance(error, UnsupportedFeatureError), f"{type(error).__name__}: {error}"
    assert error.retryable is False
    assert log_digest(path) == digest


# ------------------------------------------------------------------------------------ damage
def _data_files(path: Path) -> list[Path]:
    return sorted(p for p in path.rglob("*.parquet") if "_delta_log" not in p.parts and "_change_data" not in p.parts)


def missing_data_file(path: Path) -> None:
    for f in _data_files(path):
        f.unlink()


def missing_vector_file(path: Path) -> None:
    vectors = sorted(path.rglob("deletion_vector_*.bin"))
    assert vectors
    for f in vectors:
        f.unlink()


def truncated_log_entry(path: Path) -> None:
    entry = sorted((path / "_delta_log").glob("*.json"))[-1]
    data = entry.read_bytes()
    entry.write_bytes(data[: len(data) // 2])


def truncated_checkpoint(path: Path) -> None:
    for cp in sorted((path / "_delta_log").glob("*.checkpoint*.parquet")):
        cp.write_bytes(cp.read_bytes()[:100])


def missing_schema(path: Path) -> None:
    """Drop ``schemaString`` from every metaData action; null it in checkpoints."""
    for entry in sorted((path / "_delta_log").glob("*.json")):
        lines = []
        for line in entry.read_text().splitlines():
            action = json.loads(line)
            if "metaData" in action:
                action["metaData"].pop("schemaString", None)
            lines.append(json.dumps(action))
        entry.write_text("\n".join(lines) + "\n")
    for cp in sorted((path / "_delta_log").glob("*.checkpoint*.parquet")):
        table = pq.read_table(cp)
        md = table.column("metaData").combine_chunks()
        fields = [pa.field(f.name, f.type, True) for f in md.type]
        arrays = [pa.nulls(len(md), f.type) if f.name == "schemaString" else md.field(i) for i, f in enumerate(fields)]
        fixed = pa.StructArray.from_arrays(arrays, fields=fields, mask=md.is_null())
        pq.write_table(table.set_column(table.schema.get_field_index("metaData"), "metaData", fixed), cp)


def checkpoint_pointing_nowhere(path: Path) -> None:
    log = path / "_delta_log"
    for cp in log.glob("*.checkpoint*"):
        cp.unlink()
    latest = max(int(p.name[:20]) for p in log.glob("*.json"))
    (log / "_last_checkpoint").write_text(json.dumps({"version": latest, "size": 3}))


DAMAGE = {
    "missing data file": missing_data_file,
    "missing deletion vector file": missing_vector_file,
    "truncated log entry": truncated_log_entry,
    "truncated checkpoint": truncated_checkpoint,
    "missing schemaString": missing_schema,
    "_last_checkpoint pointing nowhere": checkpoint_pointing_nowhere,
}
# damage -> tables it is made on
DAMAGED = {
    "missing data file": ["table-without-dv-small", "delta-0.8.0-partitioned", "table-with-dv-small"],
    "missing deletion vector file": ["table-with-dv-small", "cdf-table-with-cdc-and-dvs", "table_with_deletion_logs"],
    "truncated log entry": ["table-without-dv-small", "cdf-table-with-cdc-and-dvs", "delta-0.8.0-partitioned"],
    "truncated checkpoint": ["simple_table_with_checkpoint", "table_with_deletion_logs"],
    "missing schemaString": ["table-without-dv-small", "simple_table_with_checkpoint", "table_with_column_mapping"],
    "_last_checkpoint pointing nowhere": ["table-without-dv-small", "simple_table_with_checkpoint"],
}
# (damage, operation) pairs that need what the damage took, so must fail; the others may also succeed
# (a plan reads no deletion vectors, inspect measures the physical layout) with nothing written.
MUST_FAIL = {
    ("missing data file", "inspect"),
    ("missing data file", "rorder"),
    ("missing data file", "delete"),
    ("missing deletion vector file", "rorder"),
    ("missing deletion vector file", "delete"),
    *(
        (d, op)
        for d in ("truncated log entry", "missing schemaString", "_last_checkpoint pointing nowhere")
        for op in OPS
    ),
}
CASES = [(damage, name, op) for damage, names in DAMAGED.items() for name in names for op in OPS]


@pytest.mark.parametrize(("damage", "name", "op"), CASES, ids=[f"{d}-{n}-{o}" for d, n, o in CASES])
def test_damaged_tables_end_in_one_permanent_error(damage: str, name: str, op: str, fixture_table: Any) -> None:
    path = fixture_table(name)
    by, delete_column = TABLES[name]
    predicate, _ = delete_case(scan(str(path)), delete_column)
    DAMAGE[damage](path)
    digest = log_digest(path)
    error = run(op, path, by, predicate)
    assert log_digest(path) == digest, "a damaged table was written to"
    if error is None:
        assert (damage, op) not in MUST_FAIL, f"{op} succeeded on a table with a {damage}"
        return
    if isinstance(error, PartitionsFailedError):  # rorder: the partition's own error is in the report
        assert {r.error_type for r in error.report.failed} == {"CorruptDataError"}, error
    else:
        assert isinstance(error, CorruptDataError), f"{type(error).__name__}: {error}"
    assert error.retryable is False, error


# ------------------------------------------------------------------------------------ the CLI
CLI_CASES = [
    ("missing data file", "table-without-dv-small", ["plan", "--by", "value"]),
    ("missing data file", "table-without-dv-small", ["run", "--by", "value", "--sort-by", "value", "--workers", "1"]),
    ("missing schemaString", "table-without-dv-small", ["delete", "--where", "value = 3"]),
    ("missing schemaString", "simple_table_with_checkpoint", ["inspect", "--column", "version"]),
    ("truncated log entry", "delta-0.8.0-partitioned", ["inspect", "--column", "value", "--json"]),
    ("truncated checkpoint", "table_with_deletion_logs", ["inspect", "--column", "address", "--json"]),
    ("_last_checkpoint pointing nowhere", "simple_table_with_checkpoint", ["plan", "--by", "version", "--json"]),
    ("missing deletion vector file", "table-with-dv-small", ["delete", "--where", "value = 4"]),
]


@pytest.mark.parametrize(("damage", "name", "args"), CLI_CASES, ids=[f"{c[0]}-{c[2][0]}" for c in CLI_CASES])
def test_cli_on_damaged_tables_says_one_line(damage: str, name: str, args: list[str], fixture_table: Any) -> None:
    path = fixture_table(name)
    DAMAGE[damage](path)
    command, *rest = args
    done = subprocess.run(
        [sys.executable, "-m", "deltaextras", command, str(path), *rest], capture_output=True, text=True, timeout=300
    )
    assert done.returncode != 0
    assert "Traceback" not in done.stderr and "Traceback" not in done.stdout
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    if command == "run":  # each partition's line, failures included, once on stdout; then the summary
        failed = [line for line in done.stdout.splitlines() if "CorruptDataError" in line]
        assert len(failed) == 1 and not lines, (done.stdout, done.stderr)
    else:
        assert len(lines) == 1 and "CorruptDataError" in lines[0], done.stderr
