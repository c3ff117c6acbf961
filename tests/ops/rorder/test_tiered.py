"""The tiered layout on real tables: content, one value per row group, unique_by across tiers, reruns,
racing appends, the plan and the messages, on every backend."""

from __future__ import annotations

import json
from typing import Any
from urllib.parse import unquote

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest
from deltalake import DeltaTable, write_deltalake
from oracle import assert_engines_agree, checksum, content_checksum, live_adds, rows_checksum, scan, sensor_batch

from deltaextras import MessageError, plan_messages, rorder, rorder_single
from deltaextras.app.cli import main as cli_main
from deltaextras.core.actions import Add
from deltaextras.core.snapshot import LiveFile, TableSnapshot
from deltaextras.core.storage import TableStorage
from deltaextras.ops.rorder.message import RorderMessage
from deltaextras.ops.rorder.options import RorderOptions
from deltaextras.ops.rorder.plan import plan_table
from deltaextras.ops.rorder.plan_stream import plan_table_lean
from deltaextras.ops.rorder.rewrite.layout import RUN_TAG
from deltaextras.ops.rorder.tiers import MAX_TIERS, TIER_FANOUT, select_files

# a row group per value (small values would share one by default: tests/ops/rorder/test_row_group_packing.py)
TIERED = {"sort_by": "utc_time", "unique_by": "utc_time", "layout": "tiered", "min_row_group_bytes": 0}


def _append(uri: str, opts: dict[str, str], table: pa.Table) -> None:
    write_deltalake(uri, table, partition_by=["node_id_range"], mode="append", storage_options=opts or None)


def _rows(nodes: int, times: range, *, seed: int = 0) -> pa.Table:
    """Every node at every second of ``times``: unique on (node_id, utc_time)."""
    rng = np.random.default_rng(seed)
    t = np.repeat(np.array(list(times), dtype=np.int64) * 1_000_000, nodes)
    n = len(t)
    return pa.table(
        {
            "node_id": pa.array(np.tile(np.arange(nodes, dtype=np.int64), len(times))),
            "utc_time": pa.array(t, pa.timestamp("us", tz="UTC")),
            "data_values": pa.array(np.round(rng.random(n), 3)),
            "quality": pa.array(rng.integers(0, 3, n), pa.int32()),
            "node_id_range": pa.array(np.zeros(n, dtype=np.int64)),
        }
    ).take(pa.array(rng.permutation(n)))


def _version(uri: str, opts: dict[str, str]) -> int:
    return DeltaTable(uri, storage_options=opts or None).version()


def _runs(uri: str, opts: dict[str, str]) -> dict[str | None, list[str]]:
    out: dict[str | None, list[str]] = {}
    for f in TableSnapshot.load(uri, opts).files:
        out.setdefault(f.tags.get(RUN_TAG), []).append(f.path)
    return out


def assert_one_value_per_row_group(uri: str, opts: dict[str, str], column: str = "node_id") -> int:
    """Every row group of every live file holds one value of ``column``, values ascending in each file."""
    st = TableStorage(uri, opts)
    groups = 0
    for add in live_adds(uri, opts):
        pf = pq.ParquetFile(pa.BufferReader(st.read(unquote(add["path"]))))
        previous = None
        for i in range(pf.metadata.num_row_groups):
            values = pc_unique(pf.read_row_group(i, columns=[column]).column(0))
            assert len(values) == 1, f"{add['path']} row group {i} holds {values[:5]}"
            assert previous is None or values[0] > previous, f"{add['path']}: values not ascending"
            previous = values[0]
            groups += 1
    return groups


def _sail(backend: Any, request: Any) -> Any:
    """A Spark Connect session on Sail that reaches the backend's storage."""
    return request.getfixturevalue("spark" if backend.name == "local" else "spark_cloud")


def checksum_of(uri: str, opts: dict[str, str]) -> tuple[int, str]:
    """The content checksum of the table as delta-rs reads it, in the engines' common form."""
    return content_checksum(scan(uri, opts))


def pc_unique(col: pa.ChunkedArray) -> list[Any]:
    return sorted(set(col.to_pylist()), key=repr)


# ---------------------------------------------------------------------- content, layout, reruns
def test_hourly_tiered_runs_keep_content_and_one_value_per_row_group(backend: Any, request: Any) -> None:
    uri, opts = backend.new_table_uri(), backend.storage_options
    _append(uri, opts, _rows(6, range(0, 200)))
    first = rorder(uri, storage_options=opts, max_workers=1, **TIERED)
    assert [r.status for r in first] == ["committed"]
    for hour in range(1, 7):
        for k in range(2):
            _append(uri, opts, _rows(6, range(hour * 1000 + k * 10, hour * 1000 + k * 10 + 10), seed=hour * 10 + k))
        expected = checksum(uri, opts)
        report = rorder(uri, storage_options=opts, max_workers=1, **TIERED)
        (part,) = report.partitions
        assert part.status == "committed", part.reason
        assert part.files_removed >= 2  # the two fresh files, plus any tier merged
        assert checksum(uri, opts) == expected
        assert assert_one_value_per_row_group(uri, opts) == 6 * len(_runs(uri, opts))
        assert len(_runs(uri, opts)) <= MAX_TIERS
        assert None not in _runs(uri, opts)  # no fresh file left
    version = _version(uri, opts)
    again = rorder(uri, storage_options=opts, max_workers=1, **TIERED)
    assert [r.status for r in again] == ["skipped"] and again.partitions[0].reason.startswith("tiered: no fresh")
    assert _version(uri, opts) == version  # a rerun is a no-op: no commit
    assert_engines_agree(uri, sail=_sail(backend, request), storage_options=opts, expected=checksum_of(uri, opts))


def test_a_run_without_merges_reads_only_the_fresh_files(backend: Any) -> None:
    uri, opts = backend.new_table_uri(), backend.storage_options
    _append(uri, opts, _rows(5, range(0, 300)))
    rorder(uri, storage_options=opts, max_workers=1, **TIERED)
    (history,) = _runs(uri, opts).values()
    _append(uri, opts, _rows(5, range(1000, 1010), seed=1))
    plan = plan_table(uri, storage_options=opts, **TIERED)
    (part,) = plan.partitions
    assert part.tiers == {
        "fresh_files": 1,
        "fresh_bytes": part.bytes,
        "tiers_merged": 0,
        "settled_files_read": 0,
        "bytes_to_rewrite": part.bytes,
        "tiers_before": 1,
        "tiers_after": 2,
    }
    (message,) = plan_messages(uri, storage_options=opts, **TIERED)
    assert [p for p, _ in message["files"]] == [f.path for f in part.files] and message["layout"] == "tiered"
    report = rorder_single(message, storage_options=opts)
    assert (report.status, report.files_removed) == ("committed", 1)
    assert history[0] in [a["path"] for a in live_adds(uri, opts)]  # never read, still live


def test_tiers_merge_when_k_runs_of_similar_size_exist(tmp_path: Any) -> None:
    uri = str(tmp_path / "t")
    _append(uri, {}, _rows(4, range(0, 2000)))  # a big history run: never in the small runs' tier
    rorder(uri, max_workers=1, **TIERED)
    for hour in range(1, TIER_FANOUT):
        _append(uri, {}, _rows(4, range(hour * 10_000, hour * 10_000 + 10), seed=hour))
        rorder(uri, max_workers=1, **TIERED)
    assert len(_runs(uri, {})) == TIER_FANOUT  # history + k - 1 small runs
    _append(uri, {}, _rows(4, range(90_000, 90_010), seed=9))
    (part,) = plan_table(uri, **TIERED).partitions
    assert part.tiers is not None and part.tiers["tiers_merged"] == TIER_FANOUT - 1 and part.tiers["tiers_after"] == 2
    assert "1 fresh file(s) in, 3 tier(s) merged" in part.reason
    expected = checksum(uri)
    rorder(uri, max_workers=1, **TIERED)
    assert len(_runs(uri, {})) == 2 and checksum(uri) == expected


def test_tiered_content_reads_the_same_through_sail(tmp_path: Any, spark: Any) -> None:
    uri = str(tmp_path / "t")
    _append(uri, {}, _rows(8, range(0, 100)))
    rorder(uri, max_workers=1, **TIERED)
    for hour in range(1, 4):
        batch = _rows(8, range(hour * 1000, hour * 1000 + 20), seed=hour)
        _append(uri, {}, batch)
        _append(uri, {}, batch.slice(0, 40))  # a retried append: duplicates of fresh rows
        rorder(uri, max_workers=1, **TIERED)
    expected = rows_checksum(
        pa.concat_tables(
            [_rows(8, range(0, 100))] + [_rows(8, range(h * 1000, h * 1000 + 20), seed=h) for h in range(1, 4)]
        ).select(scan(uri).column_names)
    )
    assert checksum(uri) == expected
    assert_engines_agree(uri, sail=spark)


# ---------------------------------------------------------------------- unique_by across tiers
def test_duplicates_across_tiers_are_removed_and_disjoint_tiers_never_read(backend: Any, request: Any) -> None:
    uri, opts = backend.new_table_uri(), backend.storage_options
    run_a, run_b, new = _rows(5, range(0, 100)), _rows(5, range(100, 200), seed=1), _rows(5, range(200, 210), seed=2)
    _append(uri, opts, run_a)
    rorder(uri, storage_options=opts, max_workers=1, **TIERED)
    (a_files,) = _runs(uri, opts).values()
    _append(uri, opts, run_b)
    rorder(uri, storage_options=opts, max_workers=1, **TIERED)
    assert len(_runs(uri, opts)) == 2
    # The pipeline retries: run B's rows of times 150..159 arrive again (identical), with new rows 200..209.
    seconds = pc.divide(pc.cast(run_b["utc_time"], pa.int64()), 1_000_000)
    again = run_b.filter(pc.and_(pc.greater_equal(seconds, 150), pc.less(seconds, 160)))
    assert again.num_rows == 50
    _append(uri, opts, pa.concat_tables([again, new]))
    (part,) = plan_table(uri, storage_options=opts, **TIERED).partitions
    assert part.tiers is not None and part.tiers["settled_files_read"] >= 1 and part.tiers["tiers_merged"] == 1
    assert not set(a_files) & {f.path for f in part.files}  # run A's times are disjoint: never read
    (r,) = rorder(uri, storage_options=opts, max_workers=1, **TIERED).partitions
    assert r.status == "committed" and r.duplicates_removed == 50
    assert set(a_files) <= {a["path"] for a in live_adds(uri, opts)}
    content = scan(uri, opts)
    keys = list(zip(content["node_id"].to_pylist(), content["utc_time"].to_pylist(), strict=True))
    assert len(keys) == len(set(keys)) == 5 * 210
    assert content_checksum(content) == content_checksum(pa.concat_tables([run_a, run_b, new]))
    expected = content_checksum(pa.concat_tables([run_a, run_b, new]))
    assert_engines_agree(uri, sail=_sail(backend, request), storage_options=opts, expected=expected)
    assert_one_value_per_row_group(uri, opts)
    version = _version(uri, opts)
    assert [p.status for p in rorder(uri, storage_options=opts, max_workers=1, **TIERED)] == ["skipped"]
    assert _version(uri, opts) == version


def _file(path: str, stats: dict[str, Any] | None, run: str | None = None) -> LiveFile:
    tags = {"deltaextras.layout": "by=k;sort=;unique=t", "deltaextras.run": run} if run else None
    return LiveFile(Add(path=path, size=100, stats=json.dumps(stats) if stats is not None else None, tags=tags), {})


def test_selection_joins_settled_files_whose_key_ranges_may_overlap(tmp_path: Any) -> None:
    uri = str(tmp_path / "t")
    write_deltalake(uri, pa.table({"k": pa.array([1], pa.int64()), "t": pa.array([1], pa.int64())}))
    schema = TableSnapshot.load(uri).schema
    options = RorderOptions.build(unique_by="t", layout="tiered")

    def stats(lo: int, hi: int, nulls: int = 0) -> dict[str, Any]:
        return {
            "numRecords": 10,
            "minValues": {"k": 0, "t": lo},
            "maxValues": {"k": 9, "t": hi},
            "nullCount": {"k": 0, "t": nulls},
        }

    fresh = _file("fresh", stats(100, 200))
    settled = [
        _file("disjoint", stats(0, 99), "r1"),
        _file("overlaps", stats(150, 300), "r2"),
        _file("no-stats", None, "r3"),
        _file("touches", stats(200, 250), "r4"),
    ]
    sel = select_files([fresh, *settled], schema, "k", options)
    assert [f.path for f in sel.fresh] == ["fresh"]
    assert sorted(f.path for f in sel.overlapping) == ["no-stats", "overlaps", "touches"]
    # Nulls equal nulls under unique_by: a settled file holding nulls joins a fresh file holding nulls.
    sel = select_files(
        [_file("fresh", stats(100, 200, nulls=1)), _file("nulls", stats(0, 10, nulls=2), "r1")], schema, "k", options
    )
    assert [f.path for f in sel.overlapping] == ["nulls"]
    # Fresh files without statistics: every settled file may hold their keys.
    sel = select_files([_file("fresh", None), _file("disjoint", stats(0, 99), "r1")], schema, "k", options)
    assert [f.path for f in sel.overlapping] == ["disjoint"]
    # No unique_by: nothing joins for keys; no fresh file: nothing at all.
    plain = RorderOptions.build(layout="tiered")
    assert select_files([fresh, *settled], schema, "k", plain).overlapping == []
    assert select_files(settled, schema, "k", options).files == []


# ---------------------------------------------------------------------- concurrency
def test_an_append_racing_a_tier_merge_is_kept(backend: Any) -> None:
    uri, opts = backend.new_table_uri(), backend.storage_options
    for hour in range(TIER_FANOUT):
        _append(uri, opts, _rows(5, range(hour * 100, hour * 100 + 10), seed=hour))
        if hour < TIER_FANOUT - 1:
            rorder(uri, storage_options=opts, max_workers=1, **TIERED)
    (message,) = plan_messages(uri, storage_options=opts, **TIERED)
    assert len(message["files"]) == TIER_FANOUT  # the fresh file and k - 1 settled runs merge
    racer = sensor_batch(np.random.default_rng(5), 5, 33)

    raced: list[int] = []

    def append_now(version: int) -> None:  # called before each commit attempt: append before the first
        if not raced:
            raced.append(version)
            _append(uri, opts, racer)

    before = scan(uri, opts)
    expected = content_checksum(pa.concat_tables([before, racer.select(before.column_names).cast(before.schema)]))
    report = rorder_single(message, storage_options=opts, hooks={"before_commit": append_now})
    assert report.status == "committed" and report.commit_version == message["version"] + 2
    assert report.files_removed == TIER_FANOUT
    assert content_checksum(scan(uri, opts)) == expected
    # The racing append is a fresh file for the next run, which settles it.
    (part,) = plan_table(uri, storage_options=opts, **TIERED).partitions
    assert part.tiers is not None and part.tiers["fresh_files"] == 1
    before = checksum(uri, opts)
    rorder(uri, storage_options=opts, max_workers=1, **TIERED)
    assert checksum(uri, opts) == before


# ---------------------------------------------------------------------- plans, messages, options
def test_lean_plan_selects_the_same_files_as_the_full_plan(tmp_path: Any) -> None:
    uri = str(tmp_path / "t")
    for hour in range(TIER_FANOUT):
        _append(uri, {}, _rows(5, range(hour * 100, hour * 100 + 10), seed=hour))
        if hour < TIER_FANOUT - 1:
            rorder(uri, max_workers=1, **TIERED)
    full = plan_table(uri, **TIERED)
    lean = plan_table_lean(uri, **TIERED)
    assert [m.to_dict() for m in full.messages()] == [m.to_dict() for m in lean.messages()]
    assert full.to_dict() == lean.to_dict()
    rorder(uri, max_workers=1, **TIERED)
    lean = plan_table_lean(uri, **TIERED)
    assert lean.messages() == [] and lean.partitions[0].reason.startswith("tiered: no fresh files")
    assert lean.to_dict() == plan_table(uri, **TIERED).to_dict()


def test_layout_option_is_validated_everywhere(tmp_path: Any) -> None:
    with pytest.raises(MessageError, match="layout must be 'full' or 'tiered', got 'zigzag'") as exc:
        RorderMessage.from_dict({"path": "/t", "layout": "zigzag"})
    assert "\n" not in str(exc.value) and not exc.value.retryable
    with pytest.raises(MessageError, match="layout must be"):
        RorderMessage.from_dict({"path": "/t", "layout": ["tiered"]})
    m = RorderMessage.from_dict({"path": "/t", "layout": "tiered"})
    assert RorderMessage.decode(m.encode()) == m and m.to_dict()["layout"] == "tiered"
    assert "layout" not in RorderMessage.from_dict({"path": "/t"}).to_dict()  # the default stays as it was
    assert RorderOptions.from_mapping({"layout": "tiered"}).layout == "tiered"


def test_cli_plan_shows_what_a_tiered_run_does_and_commit_info_names_the_layout(
    tmp_path: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    uri = str(tmp_path / "t")
    _append(uri, {}, _rows(5, range(0, 50)))
    rorder(uri, max_workers=1, **TIERED)
    _append(uri, {}, _rows(5, range(100, 110), seed=1))
    options = ["--sort-by", "utc_time", "--unique-by", "utc_time", "--layout", "tiered", "--min-row-group-bytes", "0"]
    args = ["plan", uri, *options]
    assert cli_main(args) == 0
    out = capsys.readouterr().out
    assert "tiered: 1 fresh file(s) in, 0 tier(s) merged" in out and "1 -> 2 tier(s)" in out
    assert cli_main([*args, "--json"]) == 0
    plan = json.loads(capsys.readouterr().out)
    assert plan["layout"] == "tiered" and plan["partitions"][0]["tiers"]["fresh_files"] == 1
    assert cli_main(["run", uri, *options]) == 0
    params = DeltaTable(uri).history(1)[0]["operationParameters"]
    assert params["layout"] == "tiered"


def test_inspect_shows_files_per_partition_and_row_groups_per_value(
    tmp_path: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    uri = str(tmp_path / "t")
    for hour in range(3):
        _append(uri, {}, _rows(4, range(hour * 100, hour * 100 + 10), seed=hour))
        rorder(uri, max_workers=1, **TIERED)
    assert cli_main(["inspect", uri, "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["files_per_partition"] == {"0": 3}
    assert out["row_groups_per_value"] == {"values": 4, "max": 3, "mean": 3.0}
    assert out["read_amplification"] == 1.0
    assert cli_main(["inspect", uri]) == 0
    assert "files per partition: 3..3 over 1 partition(s); row groups a point query on node_id reads: at most 3" in (
        capsys.readouterr().out
    )
    rorder(uri, max_workers=1, sort_by="utc_time", unique_by="utc_time")  # the full layout: one run
    assert cli_main(["inspect", uri, "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["row_groups_per_value"]["max"] == 1


def test_rorder_spark_runs_the_tiered_layout(spark: Any, tmp_path: Any) -> None:
    from deltaextras.app.spark import rorder_spark

    uri = str(tmp_path / "t")
    _append(uri, {}, _rows(4, range(0, 50)))
    rorder(uri, max_workers=1, **TIERED)
    (history,) = _runs(uri, {}).values()
    _append(uri, {}, _rows(4, range(100, 110), seed=1))
    expected = checksum(uri)
    rows = [r.asDict() for r in rorder_spark(spark, uri, **TIERED).collect()]
    assert [(r["status"], r["files_removed"]) for r in rows] == [("committed", 1)]
    assert checksum(uri) == expected and set(history) <= {a["path"] for a in live_adds(uri)}
    again = [r.asDict() for r in rorder_spark(spark, uri, **TIERED).collect()]
    assert [r["status"] for r in again] == ["skipped"] and again[0]["reason"].startswith("tiered: no fresh")


def test_a_tier_whose_deletion_vectors_hide_too_many_rows_is_purged_alone(tmp_path: Any) -> None:
    from deltaextras.ops.delete.delete import delete
    from deltaextras.ops.maintenance.upgrade import enable_deletion_vectors

    uri = str(tmp_path / "t")
    _append(uri, {}, _rows(4, range(0, 100)))
    enable_deletion_vectors(uri)
    rorder(uri, max_workers=1, **TIERED)
    _append(uri, {}, _rows(4, range(1000, 1010), seed=1))
    rorder(uri, max_workers=1, **TIERED)
    runs = _runs(uri, {})
    assert len(runs) == 2
    delete(uri, "utc_time < '1970-01-01T00:00:10Z'")  # 10 of the history's 100 seconds: 10 % of its rows
    expected = checksum(uri)
    (part,) = plan_table(uri, **TIERED).partitions
    assert part.action == "rewrite" and part.tiers is not None
    assert (part.tiers["fresh_files"], part.tiers["settled_files_read"], part.tiers["tiers_after"]) == (0, 1, 2)
    (r,) = rorder(uri, max_workers=1, **TIERED).partitions
    assert r.status == "committed" and r.deleted_rows_purged == 40
    assert checksum(uri) == expected and len(_runs(uri, {})) == 2
    version = _version(uri, {})
    assert [p.status for p in rorder(uri, max_workers=1, **TIERED)] == ["skipped"] and _version(uri, {}) == version
