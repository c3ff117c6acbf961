"""The target layout: Parquet writer settings chosen for value-sorted data, and the check of whether
a file already has the layout (one value of ``by`` per row group, ascending).

Encodings (measured on sensor data; see the README): the row-group column and low-cardinality
columns use dictionaries (judged for the row groups the values make); sorted or slowly changing integers
and timestamps use ``DELTA_BINARY_PACKED``; floats stay plain (``BYTE_STREAM_SPLIT`` would be smaller,
but Apache Spark's vectorized Parquet reader, up to 4.2 at least, refuses it: "Unsupported encoding:
BYTE_STREAM_SPLIT"); everything is zstd-compressed. The page index is written only where a value's
column chunk spans several pages (:func:`page_index_pays`): elsewhere readers that load it (deltalake,
Sail) pay a request and its bytes per file and can skip nothing.

Example:
    >>> import pyarrow as pa
    >>> n = 100
    >>> sample = pa.table({"node_id": [1] * n, "t": pa.array(range(n), pa.timestamp("us")),
    ...                    "v": [i / 7 for i in range(n)], "q": pa.array([i % 3 for i in range(n)], pa.int32())})
    >>> props = writer_properties(sample.schema, sample, by="node_id")
    >>> props["column_encoding"]
    {'t': 'DELTA_BINARY_PACKED'}
    >>> sorted(props["use_dictionary"])
    ['node_id', 'q']
"""

from __future__ import annotations

from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

LAYOUT_TAG = "deltaextras.layout"
RUN_TAG = "deltaextras.run"
# Share of distinct values below which a column gets a dictionary.
DICTIONARY_RATIO = 0.10
SAMPLE_ROWS = 100_000
# Counting distinct values copies them into a hash table: text columns are sampled by bytes too.
SAMPLE_BYTES = 4 * 1024 * 1024
# pyarrow's data page limits (data_page_size and its rows per page): a column chunk holding less than two
# pages' worth has one or two pages, and a page index lets a reader skip none of them.
PAGE_BYTES = 1024 * 1024
PAGE_ROWS = 20_000


def layout_signature(by: str, sort_by: tuple[tuple[str, str], ...], unique_by: tuple[str, ...]) -> str:
    """The tag value that records which layout a file was written in.

    Example:
        >>> layout_signature("node_id", (("utc_time", "ascending"),), ())
        'by=node_id;sort=utc_time:ascending;unique='
    """
    sort = ",".join(f"{c}:{o}" for c, o in sort_by)
    return f"by={by};sort={sort};unique={','.join(unique_by)}"


def sample_cardinality(schema: pa.Schema, sample: pa.Table, by: str) -> dict[str, tuple[int, int] | None]:
    """(rows sampled, distinct values) of each column whose encoding depends on its cardinality, from the
    head of ``sample``; None for a column whose values cannot be counted.

    Example:
        >>> t = pa.table({"k": [1, 1, 2], "v": [0.5, 0.5, 0.25], "b": [True, False, True]})
        >>> sample_cardinality(t.schema, t, "k")
        {'v': (3, 2)}
    """
    head = sample.slice(0, SAMPLE_ROWS)
    out: dict[str, tuple[int, int] | None] = {}
    for field in schema:
        t = field.type
        if field.name == by or pa.types.is_nested(t) or pa.types.is_boolean(t) or pa.types.is_null(t):
            continue
        column = _bounded(head.column(field.name))
        try:
            out[field.name] = (len(column), pc.count_distinct(column).as_py()) if len(column) else (0, 0)
        except (pa.ArrowNotImplementedError, pa.ArrowInvalid):
            out[field.name] = None
    return out


def distinct_in(rows: int, distinct: int, group_rows: float) -> float:
    """The distinct values expected among ``group_rows`` rows drawn from ``rows`` rows that hold ``distinct``
    values, each as often as the others.

    Example:
        >>> round(distinct_in(18_000, 1_000, 96)), round(distinct_in(3_000_000, 1_000, 20_000))
        (92, 1000)
    """
    if group_rows >= rows or distinct <= 0:
        return float(distinct)
    return distinct * (1.0 - (1.0 - group_rows / rows) ** (rows / distinct))


def writer_properties(
    schema: pa.Schema,
    sample: pa.Table,
    by: str,
    *,
    group_rows: float | None = None,
    cardinality: dict[str, tuple[int, int] | None] | None = None,
) -> dict[str, Any]:
    """Keyword arguments for :class:`pyarrow.parquet.ParquetWriter` for this data. A column gets a
    dictionary when its row groups of ``group_rows`` rows (default: the sample's) are expected to hold at
    most ``DICTIONARY_RATIO`` as many distinct values as rows: in row groups of a hundred rows a dictionary
    is a second page holding every value once. ``cardinality``: :func:`sample_cardinality`, when known."""
    if cardinality is None:
        cardinality = sample_cardinality(schema, sample, by)
    dictionary: list[str] = []
    encoding: dict[str, str] = {}
    for field in schema:
        t = field.type
        if field.name == by:
            dictionary.append(field.name)
            continue
        if field.name not in cardinality:
            continue  # nested, boolean, null: writer defaults
        counted = cardinality[field.name]
        if counted is None:
            low_card = False
        else:
            n, distinct = counted
            m = n if group_rows is None else min(float(n), max(1.0, group_rows))
            low_card = not n or distinct_in(n, distinct, m) <= max(1, int(m * DICTIONARY_RATIO))
        if low_card:
            dictionary.append(field.name)
        elif pa.types.is_floating(t):
            continue  # plain: Spark's vectorized reader cannot decode BYTE_STREAM_SPLIT
        elif pa.types.is_integer(t) or pa.types.is_temporal(t):
            encoding[field.name] = "DELTA_BINARY_PACKED"
        elif pa.types.is_string(t) or pa.types.is_binary(t):
            encoding[field.name] = "DELTA_LENGTH_BYTE_ARRAY"
        # decimals and the rest: writer defaults (plain)
    return {
        "use_dictionary": dictionary,
        "column_encoding": encoding,
        "compression": _compression(schema, by),
        "write_page_index": True,
        "write_statistics": True,
    }


def page_index_pays(rows: int, values: int, nbytes: int, columns: int) -> bool:
    """Whether the average value's column chunk spans several data pages (more than two pages' rows or
    bytes), so that a page index lets a reader skip pages inside a row group.

    Measured on the soak's hourly tiered runs (1,500 sensors): without the index a point query made 3
    requests per file instead of 4 and read a quarter fewer bytes, and the files were 3 % smaller.

    Example:
        >>> page_index_pays(rows=3_000_000, values=150, nbytes=120_000_000, columns=6)  # 20,000 rows a value
        False
        >>> page_index_pays(rows=3_000_000, values=10, nbytes=120_000_000, columns=6)  # 300,000 rows a value
        True
    """
    if values <= 0:
        return False
    per_value_rows = rows / values
    per_chunk_bytes = nbytes / values / max(1, columns)
    return per_value_rows > 2 * PAGE_ROWS or per_chunk_bytes > 2 * PAGE_BYTES


def _compression(schema: pa.Schema, by: str) -> str | dict[str, str]:
    """zstd, but none for the row-group column of a flat schema: each of its row groups is one
    dictionary entry and one run of indices, a few bytes that zstd cannot shrink and pays a context
    for, page by page. (Nested columns would need their leaf paths named: all zstd then.)

    Example:
        >>> _compression(pa.schema([("k", pa.int64()), ("v", pa.float64())]), "k")
        {'k': 'none', 'v': 'zstd'}
    """
    if any(pa.types.is_nested(field.type) for field in schema):
        return "zstd"
    return {field.name: "none" if field.name == by else "zstd" for field in schema}


def _bounded(column: pa.ChunkedArray) -> pa.ChunkedArray:
    """The head of a column holding at most about ``SAMPLE_BYTES``."""
    if column.nbytes <= SAMPLE_BYTES:
        return column
    return column.slice(0, max(1, int(len(column) * SAMPLE_BYTES / column.nbytes)))


def row_groups_in_layout(metadata: Any, column_index: int) -> bool:
    """Whether every row group of a Parquet footer holds one value (or only nulls) of a column, in
    ascending order across row groups, with nulls last.

    Example:
        >>> import io, pyarrow.parquet as pq
        >>> buf = io.BytesIO()
        >>> with pq.ParquetWriter(buf, pa.schema([("k", pa.int64())])) as w:
        ...     w.write_table(pa.table({"k": [1, 1]})); w.write_table(pa.table({"k": [2]}))
        >>> row_groups_in_layout(pq.ParquetFile(io.BytesIO(buf.getvalue())).metadata, 0)
        True
    """
    previous = None
    seen_null_group = False
    for i in range(metadata.num_row_groups):
        col = metadata.row_group(i).column(column_index)
        stats = col.statistics
        rows = metadata.row_group(i).num_rows
        if stats is None:
            return False
        if stats.has_null_count and stats.null_count == rows and rows > 0:
            seen_null_group = True
            continue
        if seen_null_group or not stats.has_min_max or stats.min != stats.max:
            return False
        if stats.has_null_count and stats.null_count:
            return False
        if previous is not None and stats.min < previous:
            return False
        previous = stats.min
    return True
