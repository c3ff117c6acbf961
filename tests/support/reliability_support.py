"""Helpers of the reliability suites (crashes, races, fuzzed input, confinement): tables with a unique
row id, content checksums through delta-rs and Sail, a strict reader of the log, counts and figures.
(No tests in this module.)

Counts: the suites run reduced counts by default (CI); ``DELTAEXTRAS_RELIABILITY_FULL=1`` runs the
full counts. When ``DELTAEXTRAS_RELIABILITY_FIGURES`` names a file, every scenario appends one JSON
line with its figures to it (``bench/reliability_figures.py`` sums them into the table of the docs).
"""

from __future__ import annotations

import datetime as dt
import json
import os
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
from deltalake import DeltaTable, write_deltalake
from oracle import normalized, rows_checksum

from deltaextras.core.log import LOG_DIR, parse_actions
from deltaextras.core.storage import TableStorage

FULL = os.environ.get("DELTAEXTRAS_RELIABILITY_FULL", "") not in ("", "0")
FIGURES_ENV = "DELTAEXTRAS_RELIABILITY_FIGURES"
COLUMNS = ["node_id", "utc_time", "seq", "value", "node_id_range"]
UNIT = "node_id_range"
BY = "node_id"
T0 = dt.datetime(2024, 1, 1, tzinfo=dt.timezone.utc)
_COMMIT_NAME = re.compile(r"^\d{20}\.json$")
_STAGING = re.compile(r"#\d+$")


def scale(reduced: int, full: int) -> int:
    """``full`` under ``DELTAEXTRAS_RELIABILITY_FULL=1``, ``reduced`` otherwise (CI)."""
    return full if FULL else reduced


def record(
    suite: str,
    scenario: str,
    *,
    backend: str = "-",
    runs: int = 1,
    injections: int = 0,
    fuzz_cases: int = 0,
    failures: int = 0,
    note: str = "",
) -> None:
    """Append one scenario's figures to the figures file, if one is configured.

    ``failures`` counts broken promises the scenario observed; a test asserts it is zero after recording,
    so a failing run still leaves its figures behind.
    """
    target = os.environ.get(FIGURES_ENV)
    if not target:
        return
    line = json.dumps(
        {
            "suite": suite,
            "scenario": scenario,
            "backend": backend,
            "runs": runs,
            "injections": injections,
            "fuzz_cases": fuzz_cases,
            "failures": failures,
            "note": note,
        },
        separators=(",", ":"),
    )
    with open(target, "a", encoding="utf-8") as fh:  # one short line per write: appends stay whole
        fh.write(line + "\n")


# ----------------------------------------------------------------------------------------- tables
def rows(seq_start: int, count: int, *, nodes: int = 6, seed: int = 0) -> pa.Table:
    """``count`` sensor rows of partition 0 with unique ``seq`` values from ``seq_start``, in random order."""
    rng = np.random.default_rng(seed * 7919 + seq_start)
    seq = np.arange(seq_start, seq_start + count, dtype=np.int64)
    rng.shuffle(seq)
    return pa.table(
        {
            "node_id": pa.array(rng.integers(0, nodes, count), pa.int64()),
            "utc_time": pa.array([T0 + dt.timedelta(seconds=int(s) * 60) for s in seq], pa.timestamp("us", tz="UTC")),
            "seq": pa.array(seq, pa.int64()),
            "value": pa.array(rng.random(count), pa.float64()),
            UNIT: pa.array(np.zeros(count, dtype=np.int64), pa.int64()),
        }
    )


def append(uri: str, storage_options: Mapping[str, str] | None, table: pa.Table) -> None:
    """Append with delta-rs (the other writer)."""
    write_deltalake(uri, table, partition_by=[UNIT], mode="append", storage_options=dict(storage_options or {}) or None)


def new_table(
    uri: str,
    storage_options: Mapping[str, str] | None,
    *,
    batches: int = 3,
    per_batch: int = 40,
    nodes: int = 6,
    seed: int = 0,
) -> pa.Table:
    """A table of ``batches`` delta-rs appends into partition 0; returns every row written."""
    written = []
    for b in range(batches):
        t = rows(b * per_batch, per_batch, nodes=nodes, seed=seed)
        append(uri, storage_options, t)
        written.append(t)
    return pa.concat_tables(written)


def normal(table: pa.Table) -> pa.Table:
    """The suite's columns with one set of types, whichever reader produced the table."""
    return normalized(table, COLUMNS)


def expected(table: pa.Table) -> tuple[int, str]:
    """Checksum of rows that should be the table's content."""
    return rows_checksum(normal(table))


def content(uri: str, storage_options: Mapping[str, str] | None = None) -> tuple[int, str]:
    """Checksum of the live content as delta-rs reads it (deletion vectors applied)."""
    dt_ = DeltaTable(uri, storage_options=dict(storage_options or {}) or None)
    return rows_checksum(normal(pa.table(dt_.scan())))


def sail_content(spark: Any, uri: str) -> tuple[int, str]:
    """Checksum of the live content as Sail (Spark Connect) reads it."""
    return rows_checksum(normal(spark.read.format("delta").load(uri).toArrow()))


def seqs(uri: str, storage_options: Mapping[str, str] | None = None) -> list[int]:
    """Every live ``seq`` value (duplicates kept)."""
    dt_ = DeltaTable(uri, storage_options=dict(storage_options or {}) or None)
    return pa.table(dt_.scan(columns=["seq"])).column("seq").to_pylist()


# -------------------------------------------------------------------------------------------- log
def log_entries(uri: str, storage_options: Mapping[str, str] | None = None) -> dict[int, list[dict[str, Any]]]:
    """Every commit file the store lists, each parsed completely: a torn or partial entry fails here.

    Checks that every non-empty line is a JSON object with exactly one action, that versions are
    contiguous, and that each rewrite entry of this package is whole: its ``remove`` and ``add`` counts
    equal the ``numRemovedFiles`` / ``numAddedFiles`` of its ``commitInfo`` (the first line), so an
    entry cut at a line boundary is caught as well.
    """
    st = TableStorage(uri, storage_options)
    out: dict[int, list[dict[str, Any]]] = {}
    for key, _size in st.list_dir(LOG_DIR):
        name = key.rsplit("/", 1)[-1]
        if not _COMMIT_NAME.match(name):
            continue
        version = int(name.split(".", 1)[0])
        actions = [a.to_json() for a in parse_actions(st.read(key), version)]
        for action in actions:
            assert isinstance(action, dict) and len(action) == 1, f"log entry {version}: malformed action"
        info = actions[0].get("commitInfo", {}) if actions else {}
        rewrite = any(str((a.get("txn") or {}).get("appId", "")).startswith("deltaextras.rorder:") for a in actions)
        # A rewrite is OPTIMIZE, or DELETE when unique_by dropped duplicate rows.
        ours = str(info.get("engineInfo", "")).startswith("deltaextras/")
        if ours and (info.get("operation") == "OPTIMIZE" or rewrite):
            metrics = info["operationMetrics"]
            removes = sum(1 for a in actions if "remove" in a)
            adds = sum(1 for a in actions if "add" in a)
            assert (removes, adds) == (int(metrics["numRemovedFiles"]), int(metrics["numAddedFiles"])), (
                f"log entry {version} is not whole: {removes} removes, {adds} adds for {metrics}"
            )
            assert any("txn" in a for a in actions), f"log entry {version} has no txn"
        out[version] = actions
    versions = sorted(out)
    assert versions == list(range(versions[0], versions[-1] + 1)), f"log versions not contiguous: {versions}"
    return out


def txn_commits(
    entries: Mapping[int, list[dict[str, Any]]], app_prefix: str = "deltaextras.rorder:"
) -> list[tuple[int, str, int]]:
    """``(commit version, appId, txn version)`` of every commit carrying a rewrite's ``txn``."""
    found = []
    for version, actions in sorted(entries.items()):
        for action in actions:
            txn = action.get("txn")
            if txn and str(txn.get("appId", "")).startswith(app_prefix):
                found.append((version, str(txn["appId"]), int(txn["version"])))
    return found


def tombstoned(uri: str, storage_options: Mapping[str, str] | None = None) -> set[str]:
    """Storage keys of data files that a ``remove`` retired and no live ``add`` uses."""
    from deltaextras.core.storage import log_path_to_key

    entries = log_entries(uri, storage_options)
    removed: set[str] = set()
    for actions in entries.values():
        for action in actions:
            if "remove" in action:
                removed.add(log_path_to_key(action["remove"]["path"]))
    dt_ = DeltaTable(uri, storage_options=dict(storage_options or {}) or None)
    adds = pa.table(dt_.get_add_actions(flatten=True)).column("path").to_pylist()
    live = {log_path_to_key(p) for p in adds}
    return removed - live


def staging_files(uri: str) -> list[str]:
    """Half-written staging files of atomic puts (``name#n``) under a local table."""
    root = Path(uri)
    if "://" in uri or not root.is_dir():
        return []
    return sorted(str(p.relative_to(root)) for p in root.rglob("*") if p.is_file() and _STAGING.search(p.name))
