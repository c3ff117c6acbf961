"""Property: whatever values a table holds (NaN of two payloads, both zeros, infinities, nulls, decimals of
precision 38, timestamp partition values spelled both ways the protocol allows) and whatever commits race
a rewrite (appends, our deletion-vector and copy-on-write DELETE, a writer that read before an append and
deletes by deletion vectors), with or without ``unique_by`` and with a memory budget small enough for
several passes: the table's content and the change feed of our commits equal a serial model of the same
commits, comparing values as Spark does (tests/support/oracle.py). Derandomized: the same examples every run."""

from __future__ import annotations

import datetime as dt
import math
import struct
from collections.abc import Callable
from decimal import Decimal
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pytest
from deltalake import DeltaTable, write_deltalake
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from oracle import change_rows, rows_checksum, scan, spark_value
from values_support import live_paths, race, winner_delete

from deltaextras import delete, enable_deletion_vectors
from deltaextras.errors import ConcurrentDeleteReadError


def _nan(payload: int) -> float:
    return struct.unpack("<d", struct.pack("<Q", 0x7FF8000000000000 | payload))[0]


FLOATS = [_nan(1), _nan(2), 0.0, -0.0, 1.0, 2.5, math.inf, -math.inf, None]
BIG = Decimal("12345678901234567890123456789012.3456")
DECIMALS = [BIG, Decimal("1.0000"), Decimal("-0.0001"), None]  # one per g: rows of one key are identical
DAYS = [dt.datetime(2024, 1, 1), dt.datetime(2024, 1, 2)]
SCHEMA = pa.schema([("f", pa.float64()), ("g", pa.int64()), ("d", pa.decimal128(38, 4)), ("ts", pa.timestamp("us"))])


def _is_nan(v: Any) -> bool:
    return isinstance(v, float) and v != v


# Each predicate with its meaning under Spark SQL (NULL never matches; NaN = NaN and above +inf).
PREDICATES: dict[str, Callable[[dict[str, Any]], bool]] = {
    "f = 0": lambda r: r["f"] is not None and not _is_nan(r["f"]) and r["f"] == 0,
    "f = 'NaN'": lambda r: _is_nan(r["f"]),
    "f > 1": lambda r: r["f"] is not None and (_is_nan(r["f"]) or r["f"] > 1),
    "f IS NULL": lambda r: r["f"] is None,
    f"d = {BIG}": lambda r: r["d"] == BIG,
    "d < 0": lambda r: r["d"] is not None and r["d"] < 0,
    "g = 1 AND f >= 0": lambda r: r["g"] == 1 and r["f"] is not None and (_is_nan(r["f"]) or r["f"] >= 0),
    "ts = '2024-01-02 00:00:00'": lambda r: r["ts"] == DAYS[1],
}
DATA_PREDICATES = [p for p in PREDICATES if not p.startswith("ts")]

rows_st = st.lists(
    st.tuples(st.integers(0, len(FLOATS) - 1), st.integers(0, len(DECIMALS) - 1)), min_size=1, max_size=30
)
batch_st = st.tuples(rows_st, st.integers(0, 1), st.booleans())  # rows, day, short spelling
winner_st = st.one_of(
    st.tuples(st.just("append"), batch_st),
    st.tuples(st.sampled_from(["deletion_vectors", "copy_on_write"]), st.sampled_from(sorted(PREDICATES))),
    st.tuples(st.just("earlier_reader"), st.sampled_from(sorted(DATA_PREDICATES))),
)


def _rows(batch: tuple[list[tuple[int, int]], int, bool]) -> list[dict[str, Any]]:
    rows, day, _ = batch
    return [{"f": FLOATS[i], "g": g, "d": DECIMALS[g], "ts": DAYS[day]} for i, g in rows]


def _append(path: str, batch: tuple[list[tuple[int, int]], int, bool]) -> None:
    """Append with delta-rs; the short spelling of the partition value rewritten into its commit."""
    write_deltalake(path, pa.Table.from_pylist(_rows(batch), SCHEMA), partition_by=["ts"], mode="append")
    if batch[2]:
        entry = Path(path) / "_delta_log" / f"{DeltaTable(path).version():020d}.json"
        long = f'"ts":"{DAYS[batch[1]]:%Y-%m-%d %H:%M:%S}.000000"'
        text = entry.read_text()
        assert long in text
        entry.write_text(text.replace(long, long.replace(".000000", "")))


def _key(row: dict[str, Any]) -> tuple[str, ...]:
    return tuple(spark_value(row[c]) for c in ("ts", "f", "g"))


class Model:
    """The serial order: the winners in commit order, then the rewrite (carried deletes applied)."""

    def __init__(self, batches: list[Any]) -> None:
        # ``read``: a row of the rewrite's inputs, still in the file it was read from; ``file``: its file
        self.live = [dict(r, read=True, file=(b, r["ts"])) for b, batch in enumerate(batches) for r in _rows(batch)]
        self.deleted: dict[int, list[dict[str, Any]]] = {}  # version -> rows our delete removed there
        self.appends = len(batches)

    def apply(self, kind: str, arg: Any, result: Any) -> None:
        if kind == "append":
            self.live += [dict(r, read=False, file=(self.appends, r["ts"])) for r in _rows(arg)]
            self.appends += 1
            return
        hit = PREDICATES[arg]
        gone = [r for r in self.live if hit(r) and (kind != "earlier_reader" or r["read"])]
        self.live = [r for r in self.live if not any(r is g for g in gone)]
        if kind == "copy_on_write":  # the files it touched are rewritten: their other rows move to new files
            touched = {r["file"] for r in gone}
            for r in self.live:
                if r["file"] in touched:
                    r["read"], r["file"] = False, ("rewritten", result.commit_version, r["ts"])
        if kind != "earlier_reader" and result.commit_version is not None:
            self.deleted[result.commit_version] = gone

    def rewrite(self, unique: bool, days: set[dt.datetime]) -> list[dict[str, Any]]:
        """Apply a committed rewrite of the units ``days``; the rows its de-duplication dropped."""
        if not unique:
            return []
        kept: dict[tuple[str, ...], dict[str, Any]] = {}
        dropped, out = [], []
        for r in self.live:
            if r["read"] and r["ts"] in days:
                if _key(r) in kept:
                    dropped.append(r)
                    continue
                kept[_key(r)] = r
            out.append(r)
        self.live = out
        return dropped


def _table(rows: list[dict[str, Any]]) -> pa.Table:
    return pa.Table.from_pylist([{c: r[c] for c in SCHEMA.names} for r in rows], SCHEMA)


def _deletes(path: str, version: int) -> tuple[int, str]:
    """Checksum (Spark's equality) of the deletions the change files of one commit record."""
    rows = change_rows(path, version)
    if not rows.num_rows:
        return rows_checksum(SCHEMA.empty_table(), spark=True)
    rows = rows.filter(pc.equal(rows.column("_change_type"), "delete"))
    days = [None if v in (None, "") else dt.datetime.fromisoformat(v) for v in rows.column("ts").to_pylist()]
    rows = rows.set_column(rows.schema.get_field_index("ts"), "ts", pa.array(days, pa.timestamp("us")))
    return rows_checksum(rows.select(SCHEMA.names), spark=True)


@settings(
    max_examples=60,
    derandomize=True,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(
    setup=st.lists(batch_st, min_size=1, max_size=3),
    winners=st.lists(winner_st, min_size=1, max_size=3),
    unique=st.booleans(),
    budget=st.sampled_from([None, 300]),
)
def test_racing_commits_equal_a_serial_order(
    tmp_path_factory: pytest.TempPathFactory, setup: list[Any], winners: list[Any], unique: bool, budget: int | None
) -> None:
    path = str(tmp_path_factory.mktemp("race") / "t")
    write_deltalake(
        path, SCHEMA.empty_table(), partition_by=["ts"], configuration={"delta.enableChangeDataFeed": "true"}
    )
    enable_deletion_vectors(path)
    for batch in setup:
        _append(path, batch)
    model = Model(setup)
    read = live_paths(path)

    def run(kind: str, arg: Any) -> Callable[[], Any]:
        def go() -> Any:
            if kind == "append":
                return _append(path, arg)
            if kind == "earlier_reader":
                return winner_delete(path, read, arg)
            return delete(path, arg, mode=kind)

        return go

    plan = {"by": "f", "unique_by": ["g"] if unique else None, "memory_budget": budget}
    reports, results = race(path, [run(k, a) for k, a in winners], **plan)
    for (kind, arg), result in zip(winners, results, strict=True):
        model.apply(kind, arg, result)
    days = set()
    for r in reports:
        if isinstance(r, Exception):  # the one refusal: a copy-on-write change rewrote an input under unique_by
            assert unique and isinstance(r, ConcurrentDeleteReadError) and "copy-on-write" in str(r), r
        elif r.status == "committed":
            days.add(dt.datetime.fromisoformat(r.partition.split("=", 1)[1]))
    dropped = model.rewrite(unique, days)

    assert rows_checksum(scan(path).select(SCHEMA.names), spark=True) == rows_checksum(_table(model.live), spark=True)
    for version, gone in model.deleted.items():  # our deletes' change data
        assert _deletes(path, version) == rows_checksum(_table(gone), spark=True), version
    for r in reports:  # our rewrites' change data: the duplicates a serial rewrite drops
        if not isinstance(r, Exception) and r.status == "committed":
            day = dt.datetime.fromisoformat(r.partition.split("=", 1)[1])
            want = [d for d in dropped if d["ts"] == day]
            assert _deletes(path, r.commit_version) == rows_checksum(_table(want), spark=True), r
