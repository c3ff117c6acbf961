"""Range partitioning helpers: derive ``<col>_range`` from ``<col>``, create the table, append to it.

``rorder`` expects a table partitioned by ``<col>_range``, where each range holds a fixed set of
values of ``<col>``. This module keeps that mapping in one place, a :class:`RangeSpec`:

* :func:`add_range` adds the range column to a PyArrow table, a pandas or polars DataFrame, or a
  PySpark DataFrame (classic or Spark Connect; built from Spark column expressions, so it runs on
  the cluster without Python UDFs);
* :meth:`RangeSpec.check_sql` is the ``CHECK`` constraint tying range to value;
* :func:`create_range_table` creates the Delta table (deltalake) partitioned by the range column,
  with that constraint and the spec stored as the table property ``deltaextras.rangeSpec``;
* :class:`RangeAppender` / :func:`append_ranged` read the spec from the table and append data
  with the range column derived, through Spark or through deltalake.

Which writers enforce the constraint (checked with deltalake 1.6.6 and Sail 0.7.2): deltalake
``write_deltalake``, ``DeltaTable.update`` and ``DeltaTable.merge`` (and polars ``write_delta``,
which uses deltalake) reject a violating row ("Invalid data found: 1 rows failed validation
check"), and so do Sail's DataFrame writer and ``UPDATE`` (``[DELTA_VIOLATE_CONSTRAINT_WITH_VALUES]
CHECK constraint ... violated``). ``rorder`` does not evaluate constraints: it only rearranges rows
already in the table.

pyspark is imported only inside the functions that receive a Spark DataFrame; pandas and polars
are never imported here (their objects are recognised by type name).

Example:
    >>> import pyarrow as pa
    >>> spec = RangeSpec.fixed_width("node_id", 150, stop=450)
    >>> add_range(pa.table({"node_id": [0, 149, 150, 449]}), spec)["node_id_range"].to_pylist()
    [0, 0, 1, 2]
    >>> for part in RangeSpec.from_boundaries("node_id", [0, 150, 300]).check_sql().split(" OR "):
    ...     print(part)
    node_id IS NOT NULL AND node_id_range IS NOT NULL AND ((node_id_range = 0 AND node_id >= 0 AND node_id < 150)
    (node_id_range = 1 AND node_id >= 150 AND node_id < 300))
"""

from __future__ import annotations

import itertools
import json
import math
import os
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from ...errors import InvalidArgumentError

__all__ = [
    "RANGE_SPEC_PROPERTY",
    "RangeAppender",
    "RangeSpec",
    "add_range",
    "append_ranged",
    "create_range_table",
    "range_constraint_sql",
    "read_range_spec",
]

#: The table property holding the JSON of the table's :class:`RangeSpec`.
RANGE_SPEC_PROPERTY = "deltaextras.rangeSpec"
RANGE_SUFFIX = "_range"
#: A fixed-width spec with more ranges than this gets an arithmetic ``CHECK`` instead of a list.
MAX_LISTED_RANGES = 256
# Lowercase only: deltalake stores a constraint over a mixed-case column with double-quoted
# identifiers ("nodeId"), which Spark SQL reads as string literals and Sail refuses to resolve.
_SQL_NAME = re.compile(r"^[a-z_][a-z0-9_]*$")

Number = int | float


def _number(value: Any, what: str) -> Number:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise InvalidArgumentError(f"{what} must be a number, got {value!r}")
    if isinstance(value, float) and not math.isfinite(value):
        raise InvalidArgumentError(f"{what} must be finite, got {value!r}")
    return value


def _literal(value: Number) -> str:
    """A plain decimal SQL literal (no exponent) that Spark SQL and deltalake read as ``value``.

    Floats are spelled with the shortest digits that round-trip (``repr``), so the engines parse
    back the same double.
    """
    if isinstance(value, int):
        return str(value)
    text = format(Decimal(repr(float(value))), "f")
    return text if "." in text else text + ".0"


def _integer(value: Any, what: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise InvalidArgumentError(
            f"{what} of a fixed-width spec must be an integer, got {value!r} (use from_boundaries for fractional edges)"
        )
    return value


@dataclass(frozen=True)
class RangeSpec:
    """How the values of ``column`` map to ranges (the ``<column>_range`` partition values).

    Two kinds, built by the class methods:

    * :meth:`fixed_width`: range ``r`` holds ``start + r * width <= value < start + (r + 1) * width``
      (integers ``width``, ``start``, ``stop``; values below ``start``, or at or above ``stop`` when
      given, are out of range; the value column may be integral or fractional);
    * :meth:`from_boundaries`: ``boundaries`` ``b0 < b1 < ... < bn`` make ``n`` ranges, range ``i``
      holding ``b[i] <= value < b[i + 1]``.

    ``allow_null``: a null value gets a null range (the table's null partition); otherwise a null
    value is refused like an out-of-range one. Range ids are 64-bit integers.

    Example:
        >>> spec = RangeSpec.fixed_width("node_id", 150)
        >>> spec.range_column, spec.range_of(0), spec.range_of(149), spec.range_of(15000)
        ('node_id_range', 0, 0, 100)
        >>> RangeSpec.from_boundaries("t", [0, 10, 100]).ranges()
        [(0, 0, 10), (1, 10, 100)]
    """

    column: str
    width: int | None = None
    start: int = 0
    stop: int | None = None
    boundaries: tuple[Number, ...] | None = None
    allow_null: bool = False

    def __post_init__(self) -> None:
        if not isinstance(self.column, str) or not self.column:
            raise InvalidArgumentError(f"the range spec needs a column name, got {self.column!r}")
        if (self.width is None) == (self.boundaries is None):
            raise InvalidArgumentError("a range spec has either a width or boundaries (use the class methods)")
        if self.width is not None:
            width = _integer(self.width, "width")
            start = _integer(self.start, "start")
            if width <= 0:
                raise InvalidArgumentError(f"width must be positive, got {width!r}")
            if self.stop is not None and _integer(self.stop, "stop") <= start:
                raise InvalidArgumentError(f"stop ({self.stop!r}) must be greater than start ({start!r})")
        else:
            bounds = tuple(_number(b, "each boundary") for b in self.boundaries or ())
            if len(bounds) < 2:
                raise InvalidArgumentError("boundaries need at least two values (the edges of one range)")
            if any(b >= c for b, c in itertools.pairwise(bounds)):
                raise InvalidArgumentError(f"boundaries must be strictly increasing, got {list(bounds)}")
            object.__setattr__(self, "boundaries", bounds)

    # ------------------------------------------------------------------ construction
    @classmethod
    def fixed_width(
        cls, column: str, width: int, *, start: int = 0, stop: int | None = None, allow_null: bool = False
    ) -> RangeSpec:
        """Buckets of ``width`` values from ``start`` (up to ``stop``, excluded, when given).

        Example:
            >>> RangeSpec.fixed_width("node_id", 150, stop=300).ranges()
            [(0, 0, 150), (1, 150, 300)]
        """
        return cls(column=column, width=width, start=start, stop=stop, allow_null=allow_null)

    @classmethod
    def from_boundaries(cls, column: str, boundaries: Sequence[Number], *, allow_null: bool = False) -> RangeSpec:
        """Ranges between consecutive ``boundaries`` (each range includes its lower edge).

        Example:
            >>> RangeSpec.from_boundaries("k", [0, 5, 50, 500]).range_of(49)
            1
        """
        return cls(column=column, boundaries=tuple(boundaries), allow_null=allow_null)

    @classmethod
    def from_json(cls, text: str | Mapping[str, Any]) -> RangeSpec:
        """Read the form :meth:`to_json` writes (a JSON text or the decoded object).

        Example:
            >>> spec = RangeSpec.fixed_width("k", 10, start=5)
            >>> RangeSpec.from_json(spec.to_json()) == spec
            True
        """
        try:
            data = json.loads(text) if isinstance(text, str) else dict(text)
        except (TypeError, ValueError) as exc:
            raise InvalidArgumentError(f"range spec is not valid JSON: {exc}") from None
        known = {"column", "width", "start", "stop", "boundaries", "allow_null"}
        unknown = sorted(set(data) - known)
        if unknown:
            raise InvalidArgumentError(f"range spec has unknown keys {unknown}")
        if data.get("boundaries") is not None:
            data["boundaries"] = tuple(data["boundaries"])
        return cls(**data)

    def to_json(self) -> str:
        """Compact JSON of the spec (stored as the table property ``deltaextras.rangeSpec``).

        Example:
            >>> RangeSpec.fixed_width("node_id", 150).to_json()
            '{"allow_null":false,"column":"node_id","start":0,"width":150}'
        """
        data: dict[str, Any] = {"column": self.column, "allow_null": self.allow_null}
        if self.width is not None:
            data.update(width=self.width, start=self.start)
            if self.stop is not None:
                data["stop"] = self.stop
        else:
            data["boundaries"] = list(self.boundaries or ())
        return json.dumps(data, separators=(",", ":"), sort_keys=True)

    # ------------------------------------------------------------------ queries
    @property
    def range_column(self) -> str:
        """The partition column: ``<column>_range``."""
        return self.column + RANGE_SUFFIX

    @property
    def bounded(self) -> bool:
        """Whether the ranges are a finite list (boundaries, or a width with a ``stop``)."""
        return self.boundaries is not None or self.stop is not None

    @property
    def low(self) -> Number:
        """The smallest value in range."""
        return self.boundaries[0] if self.boundaries is not None else self.start

    @property
    def high(self) -> Number | None:
        """The first value past the last range (``None`` for an unbounded fixed width)."""
        return self.boundaries[-1] if self.boundaries is not None else self.stop

    def ranges(self) -> list[tuple[int, Number, Number]]:
        """Every range as ``(id, low, high)`` with ``low <= value < high``; needs a bounded spec.

        Example:
            >>> RangeSpec.fixed_width("k", 4, start=1, stop=10).ranges()
            [(0, 1, 5), (1, 5, 9), (2, 9, 10)]
        """
        if self.boundaries is not None:
            b = self.boundaries
            return [(i, b[i], b[i + 1]) for i in range(len(b) - 1)]
        if self.stop is None:
            raise InvalidArgumentError(
                f"the fixed-width spec of {self.column!r} has no stop, so its ranges are not a finite list"
            )
        assert self.width is not None
        return [
            (r, self.start + r * self.width, min(self.start + (r + 1) * self.width, self.stop))
            for r in range(self.range_count())
        ]

    def range_count(self) -> int | None:
        """How many ranges there are (``None`` for an unbounded fixed width).

        Example:
            >>> RangeSpec.fixed_width("node_id", 150, stop=15000).range_count()
            100
        """
        if self.boundaries is not None:
            return len(self.boundaries) - 1
        if self.stop is None:
            return None
        assert self.width is not None
        return -(-(self.stop - self.start) // self.width)

    def range_of(self, value: Number | None) -> int | None:
        """The range id of one value (``None`` for ``None`` when nulls are allowed).

        Example:
            >>> RangeSpec.fixed_width("k", 10, start=-5).range_of(4.5)
            0
        """
        if value is None:
            if self.allow_null:
                return None
            raise InvalidArgumentError(f"null {self.column} refused: the range spec does not allow nulls")
        return add_range(pa.table({self.column: [value]}), self)[self.range_column][0].as_py()

    def check_sql(self) -> str:
        """The ``CHECK`` constraint tying the range column to the value column.

        Every comparison is guarded against nulls so the expression is never NULL (engines differ on
        whether a NULL check passes). Boundaries, and a fixed width with a ``stop`` and at most
        ``MAX_LISTED_RANGES`` ranges, list every range; otherwise the fixed width is spelled with
        arithmetic. Column names must be lowercase SQL identifiers.

        Example:
            >>> for part in RangeSpec.fixed_width("node_id", 150).check_sql().split(" AND "):
            ...     print(part)
            node_id IS NOT NULL
            node_id_range IS NOT NULL
            node_id_range >= 0
            node_id >= 150 * node_id_range
            node_id < 150 * (node_id_range + 1)
            >>> RangeSpec.from_boundaries("k", [0, 10], allow_null=True).check_sql()[:50]
            '(k IS NULL AND k_range IS NULL) OR (k IS NOT NULL '
        """
        col, rng = self.column, self.range_column
        for name in (col, rng):
            if not _SQL_NAME.match(name):
                raise InvalidArgumentError(
                    f"column {name!r} is not a lowercase SQL identifier ([a-z_][a-z0-9_]*): deltalake would "
                    "store the constraint with double-quoted names, which Spark SQL cannot read"
                )
        guard = f"{col} IS NOT NULL AND {rng} IS NOT NULL AND "
        count = self.range_count()
        if count is not None and (self.boundaries is not None or count <= MAX_LISTED_RANGES):
            terms = [
                f"({rng} = {r} AND {col} >= {_literal(lo)} AND {col} < {_literal(hi)})" for r, lo, hi in self.ranges()
            ]
            body = guard + "(" + " OR ".join(terms) + ")"
        else:
            w = _literal(self.width or 0)
            offset = "" if self.start == 0 else f"{_literal(self.start)} + "
            body = f"{guard}{rng} >= 0 AND {col} >= {offset}{w} * {rng} AND {col} < {offset}{w} * ({rng} + 1)"
            if self.stop is not None:
                body += f" AND {col} < {_literal(self.stop)}"
        if self.allow_null:
            return f"({col} IS NULL AND {rng} IS NULL) OR ({body})"
        return body

    def describe(self) -> str:
        """A short human description.

        Example:
            >>> RangeSpec.fixed_width("node_id", 150, stop=15000).describe()
            'node_id_range = floor((node_id - 0) / 150) for 0 <= node_id < 15000'
        """
        if self.width is not None:
            upper = f" < {self.stop}" if self.stop is not None else ""
            return (
                f"{self.range_column} = floor(({self.column} - {self.start}) / {self.width}) "
                f"for {self.start} <= {self.column}{upper}"
            )
        return f"{self.range_column} = index of the range of {self.column} in boundaries {list(self.boundaries or ())}"


def range_constraint_sql(spec: RangeSpec) -> str:
    """The ``CHECK`` constraint of a spec (same as :meth:`RangeSpec.check_sql`).

    Example:
        >>> range_constraint_sql(RangeSpec.from_boundaries("k", [0, 1])).endswith("(k_range = 0 AND k >= 0 AND k < 1))")
        True
    """
    return spec.check_sql()


# ---------------------------------------------------------------------------------- Arrow
def _range_ids(values: pa.Array | pa.ChunkedArray, spec: RangeSpec) -> pa.Array:
    """Range ids of an Arrow array of values; raises on an out-of-range (or refused null) value."""
    if isinstance(values, pa.ChunkedArray):
        values = values.combine_chunks()
    t = values.type
    if pa.types.is_dictionary(t):
        values = values.dictionary_decode()
        t = values.type
    integral = pa.types.is_integer(t)
    if not (integral or pa.types.is_floating(t) or pa.types.is_decimal(t)):
        raise InvalidArgumentError(f"column {spec.column!r} is {t}; range helpers need a numeric column")
    if not integral:
        values = values.cast(pa.float64())
        nan = pc.fill_null(pc.is_nan(values), False)
        if pc.any(nan).as_py():
            raise InvalidArgumentError(f"column {spec.column!r} holds NaN, which belongs to no range")
    else:
        values = values.cast(pa.int64())
    nulls = values.null_count
    if nulls and not spec.allow_null:
        raise InvalidArgumentError(
            f"column {spec.column!r} holds {nulls} null value(s); the range spec does not allow nulls "
            "(build it with allow_null=True to put them in the null partition)"
        )
    low, high = spec.low, spec.high
    inside = pc.greater_equal(values, pa.scalar(low))
    if high is not None:
        inside = pc.and_(inside, pc.less(values, pa.scalar(high)))
    outside = pc.invert(pc.fill_null(inside, True))
    if pc.any(outside).as_py():
        bad = pc.filter(values, outside)
        upper = "" if high is None else f", {high})"
        raise InvalidArgumentError(
            f"{len(bad)} value(s) of {spec.column!r} are outside the ranges [{low}{upper or ', ∞)'}, "
            f"e.g. {bad[0].as_py()!r}; widen the range spec"
        )
    if spec.width is not None:
        width, start = spec.width, spec.start
        if integral:
            # values >= start here, so truncating division is floor division
            return pc.divide(pc.subtract_checked(values, start), width).cast(pa.int64())
        q = pc.floor(pc.divide(pc.subtract(values, float(start)), float(width)))
        # the division rounds: settle each id by the comparisons the CHECK constraint makes
        lo = pc.add(pc.multiply(q, float(width)), float(start))
        q = pc.subtract(q, pc.less(values, lo).cast(pa.float64()))
        q = pc.add(q, pc.greater_equal(values, pc.add(lo, float(width))).cast(pa.float64()))
        return q.cast(pa.int64())
    bounds = spec.boundaries or ()
    ids = pa.array([0] * len(values), pa.int64())
    for b in bounds[1:-1]:
        ids = pc.add(ids, pc.fill_null(pc.greater_equal(values, pa.scalar(b)), False).cast(pa.int64()))
    return pc.if_else(pc.is_null(values), pa.scalar(None, pa.int64()), ids)


def _with_column(table: pa.Table, name: str, values: pa.Array) -> pa.Table:
    if name in table.column_names:
        return table.set_column(table.column_names.index(name), pa.field(name, pa.int64()), values)
    return table.append_column(pa.field(name, pa.int64()), values)


def _kind(data: Any) -> str:
    """``arrow``, ``pandas``, ``polars``, ``polars-lazy``, ``spark`` or ``arrow-stream`` (by type name)."""
    if isinstance(data, (pa.Table, pa.RecordBatch)):
        return "arrow"
    for cls in type(data).__mro__:
        package, name = (cls.__module__ or "").split(".")[0], cls.__name__
        if package == "pyspark" and name == "DataFrame":
            return "spark"
        if package == "pandas" and name == "DataFrame":
            return "pandas"
        if package == "polars" and name == "DataFrame":
            return "polars"
        if package == "polars" and name == "LazyFrame":
            return "polars-lazy"
    if hasattr(data, "__arrow_c_stream__"):
        return "arrow-stream"
    raise InvalidArgumentError(
        f"cannot add a range column to a {type(data).__module__}.{type(data).__name__}; pass a pyarrow "
        "Table or RecordBatch, a pandas or polars DataFrame, or a PySpark DataFrame"
    )


def add_range(data: Any, spec: RangeSpec) -> Any:
    """``data`` with the column ``<spec.column>_range`` (int64) added, or replaced if present.

    Returns the same kind of object: a pyarrow Table for a Table, RecordBatch or any Arrow stream
    (``__arrow_c_stream__``), a pandas or polars DataFrame for one, and a lazy PySpark DataFrame
    for a PySpark DataFrame. The Arrow, pandas and polars paths raise
    :class:`~deltaextras.errors.InvalidArgumentError` at once for a value outside the ranges (or a
    null the spec refuses); on Spark such a value fails the job when it runs (``raise_error``).

    Example:
        >>> import pyarrow as pa
        >>> spec = RangeSpec.from_boundaries("node_id", [0, 100, 1000])
        >>> add_range(pa.table({"node_id": [5, 100, 999]}), spec).column("node_id_range").to_pylist()
        [0, 1, 1]
        >>> add_range(pa.table({"node_id": [1000]}), spec)
        Traceback (most recent call last):
        ...
        deltaextras.errors.InvalidArgumentError: 1 value(s) of 'node_id' are outside the ranges [0, 1000), ...

    With PySpark (classic or Spark Connect) the range is a column expression::

        >>> df = add_range(spark.range(10).withColumnRenamed("id", "node_id"), spec)  # doctest: +SKIP
    """
    kind = _kind(data)
    if kind == "spark":
        return _add_range_spark(data, spec)
    if kind == "polars-lazy":
        raise InvalidArgumentError("add_range needs a polars DataFrame; collect() the LazyFrame first")
    if kind in ("arrow", "arrow-stream"):
        table = pa.table(data) if kind == "arrow-stream" else data
        if isinstance(table, pa.RecordBatch):
            table = pa.Table.from_batches([table])
        _require(table.column_names, spec)
        return _with_column(table, spec.range_column, _range_ids(table.column(spec.column), spec))
    if kind == "pandas":
        _require(list(data.columns), spec)
        ids = _range_ids(pa.array(data[spec.column]), spec)
        out = data.copy(deep=False)
        out[spec.range_column] = ids.to_pandas(types_mapper=_pandas_int64_mapper(ids))
        return out
    # polars
    _require(data.columns, spec)
    ids = _range_ids(data.get_column(spec.column).to_arrow(), spec)
    series = type(data.get_column(spec.column))(spec.range_column, ids)
    return data.with_columns(series)


def _pandas_int64_mapper(ids: pa.Array) -> Any:
    """A ``types_mapper`` that keeps int64 (nullable ``Int64`` only when there are nulls)."""
    if not ids.null_count:
        return None
    import pandas as pd  # only reached with pandas data

    return {pa.int64(): pd.Int64Dtype()}.get


def _require(columns: Sequence[str], spec: RangeSpec) -> None:
    if spec.column not in columns:
        raise InvalidArgumentError(f"the data has no column {spec.column!r} (columns: {list(columns)})")


# ---------------------------------------------------------------------------------- Spark
def _add_range_spark(df: Any, spec: RangeSpec) -> Any:
    """The PySpark path: one CASE expression, evaluated by the engine (no Python UDF)."""
    from pyspark.sql import functions as F
    from pyspark.sql import types as T

    fields = {f.name: f for f in df.schema.fields}
    if spec.column not in fields:
        raise InvalidArgumentError(f"the DataFrame has no column {spec.column!r} (columns: {list(fields)})")
    dtype = fields[spec.column].dataType
    integral = isinstance(dtype, T.IntegralType)
    if not (integral or isinstance(dtype, (T.FractionalType,))):
        raise InvalidArgumentError(f"column {spec.column!r} is {dtype.simpleString()}; range helpers need a number")
    v = F.col(spec.column)
    low, high = spec.low, spec.high
    inside = v >= F.lit(low)
    if high is not None:
        inside = inside & (v < F.lit(high))
    if not integral:
        inside = inside & ~F.isnan(v)
    if spec.width is not None:
        width, start = spec.width, spec.start
        if integral:
            # integral division (truncates; values are >= start here), exact for every 64-bit value
            name = spec.column.replace("`", "``")
            ids = F.expr(f"(CAST(`{name}` AS BIGINT) - ({start})) div {width}")
        else:
            d = v.cast("double")
            q = F.floor((d - F.lit(float(start))) / F.lit(float(width))).cast("bigint")
            lo = q * F.lit(width) + F.lit(start)
            # the same settling of rounded ids as the Arrow path (comparisons as in the CHECK)
            ids = F.when(d < lo, q - 1).when(d >= lo + F.lit(width), q + 1).otherwise(q)
    else:
        bounds = spec.boundaries or ()
        if len(bounds) == 2:
            ids = F.lit(0)
        else:
            chain = F.when(v < F.lit(bounds[1]), F.lit(0))
            for i in range(2, len(bounds) - 1):
                chain = chain.when(v < F.lit(bounds[i]), F.lit(i - 1))
            ids = chain.otherwise(F.lit(len(bounds) - 2))
    upper = "∞" if high is None else str(high)
    error = F.raise_error(
        F.concat(
            F.lit(f"value of {spec.column} outside the ranges of {spec.range_column} [{low}, {upper}): "),
            v.cast("string"),
        )
    )
    refused = F.raise_error(F.lit(f"null {spec.column} refused by the range spec"))
    null_case = F.lit(None) if spec.allow_null else refused
    expr = F.when(v.isNull(), null_case.cast("bigint")).when(inside, ids.cast("bigint")).otherwise(error.cast("bigint"))
    return df.withColumn(spec.range_column, expr)


# ---------------------------------------------------------------------------------- the table
def create_range_table(
    uri: str | os.PathLike[str],
    schema: Any,
    spec: RangeSpec,
    *,
    constraint_name: str | None = None,
    name: str | None = None,
    description: str | None = None,
    configuration: Mapping[str, str | None] | None = None,
    storage_options: Mapping[str, str] | None = None,
) -> Any:
    """Create an empty Delta table partitioned by the range column, with its ``CHECK`` constraint.

    ``schema`` is a pyarrow schema (or anything exporting ``__arrow_c_schema__``) with the value
    column; the range column (int64) is appended when missing. Three commits: create (deltalake),
    add the constraint ``constraint_name`` (default ``<column>_range_bounds``; it raises the
    table's writer version to 3, so every Delta writer must honour it), and set the table property
    ``deltaextras.rangeSpec`` to the spec's JSON (read back by :class:`RangeAppender`). Fails if a
    table exists at ``uri``. Returns the ``deltalake.DeltaTable``.

    Example:
        >>> import tempfile, pyarrow as pa
        >>> from deltalake import write_deltalake
        >>> path = tempfile.mkdtemp()
        >>> spec = RangeSpec.fixed_width("node_id", 150, stop=300)
        >>> dt = create_range_table(path, pa.schema([("node_id", pa.int64()), ("value", pa.float64())]), spec)
        >>> dt.metadata().partition_columns, dt.version()
        (['node_id_range'], 2)
        >>> try:  # node 7 belongs to range 0
        ...     write_deltalake(path, pa.table({"node_id": [7], "value": [1.0], "node_id_range": [1]}),
        ...                     mode="append")
        ... except Exception as exc:
        ...     print("1 rows failed validation check" in str(exc))
        True
    """
    from deltalake import DeltaTable

    arrow_schema = pa.schema(schema)
    names = arrow_schema.names
    if spec.column not in names:
        raise InvalidArgumentError(f"the schema has no column {spec.column!r} (columns: {names})")
    vtype = arrow_schema.field(spec.column).type
    if not (pa.types.is_integer(vtype) or pa.types.is_floating(vtype) or pa.types.is_decimal(vtype)):
        raise InvalidArgumentError(f"column {spec.column!r} is {vtype}; range helpers need a numeric column")
    if spec.range_column in names:
        rtype = arrow_schema.field(spec.range_column).type
        if rtype != pa.int64():
            raise InvalidArgumentError(f"range column {spec.range_column!r} must be int64, the schema has {rtype}")
    else:
        arrow_schema = arrow_schema.append(pa.field(spec.range_column, pa.int64()))
    check = spec.check_sql()
    options = dict(storage_options) if storage_options else None
    dt = DeltaTable.create(
        os.fspath(uri),
        arrow_schema,
        mode="error",
        partition_by=[spec.range_column],
        name=name,
        description=description,
        configuration=dict(configuration) if configuration else None,
        storage_options=options,
    )
    dt.alter.add_constraint({constraint_name or f"{spec.range_column}_bounds": check})
    # deltalake refuses non-"delta." keys at create time but stores them through ALTER.
    dt.alter.set_table_properties({RANGE_SPEC_PROPERTY: spec.to_json()}, raise_if_not_exists=False)
    return DeltaTable(os.fspath(uri), storage_options=options)


def read_range_spec(uri: str | os.PathLike[str], *, storage_options: Mapping[str, str] | None = None) -> RangeSpec:
    """The :class:`RangeSpec` stored on a table by :func:`create_range_table`.

    Example:
        >>> import tempfile, pyarrow as pa
        >>> path = tempfile.mkdtemp()
        >>> _ = create_range_table(path, pa.schema([("k", pa.int32())]), RangeSpec.fixed_width("k", 10))
        >>> read_range_spec(path).width
        10
    """
    from deltalake import DeltaTable

    dt = DeltaTable(os.fspath(uri), storage_options=dict(storage_options) if storage_options else None)
    text = dt.metadata().configuration.get(RANGE_SPEC_PROPERTY)
    if not text:
        raise InvalidArgumentError(
            f"the table at {uri} has no {RANGE_SPEC_PROPERTY!r} property (it was not created by "
            "create_range_table); pass the RangeSpec explicitly"
        )
    return RangeSpec.from_json(text)


class RangeAppender:
    """Appends batches to a range-partitioned table, deriving the range column on the way.

    ``spec`` defaults to the one stored on the table (read once, here). :meth:`append` takes a
    PySpark DataFrame (written by Spark: ``df.write.format("delta").mode("append").save(uri)``;
    ``spark_options`` are passed to the writer) or Arrow/pandas/polars data (written by
    deltalake's ``write_deltalake``, after its columns are cast to the table's types). Both
    writers enforce the table's ``CHECK`` constraint.

    Example:
        >>> import tempfile, pyarrow as pa
        >>> from deltalake import DeltaTable
        >>> path = tempfile.mkdtemp()
        >>> schema = pa.schema([("node_id", pa.int64()), ("value", pa.float64())])
        >>> _ = create_range_table(path, schema, RangeSpec.fixed_width("node_id", 150))
        >>> appender = RangeAppender(path)
        >>> appender.append(pa.table({"node_id": pa.array([3, 151], pa.int32()), "value": [0.5, 1.5]}))
        >>> sorted(DeltaTable(path).to_pyarrow_table().to_pylist(), key=lambda r: r["node_id"])[1]
        {'node_id': 151, 'value': 1.5, 'node_id_range': 1}

    With Spark::

        >>> appender.append(spark_df)  # doctest: +SKIP
    """

    def __init__(
        self,
        uri: str | os.PathLike[str],
        spec: RangeSpec | None = None,
        *,
        storage_options: Mapping[str, str] | None = None,
        spark_options: Mapping[str, str] | None = None,
    ) -> None:
        self.uri = os.fspath(uri)
        self.storage_options = dict(storage_options) if storage_options else None
        self.spark_options = dict(spark_options or {})
        self.spec = spec if spec is not None else read_range_spec(self.uri, storage_options=self.storage_options)
        self._schema: pa.Schema | None = None

    def prepare(self, data: Any) -> Any:
        """``data`` with the range column, as :meth:`append` would write it (nothing is written)."""
        ranged = add_range(data, self.spec)
        if _kind(ranged) == "spark":
            return ranged
        table = ranged if isinstance(ranged, pa.Table) else pa.table(ranged)
        return self._conform(table)

    def append(self, data: Any) -> None:
        """Derive the range column and append ``data`` to the table in one commit."""
        prepared = self.prepare(data)
        if _kind(prepared) == "spark":
            writer = prepared.write.format("delta").mode("append")
            if self.spark_options:
                writer = writer.options(**self.spark_options)
            writer.save(self.uri)
            return
        from deltalake import write_deltalake

        write_deltalake(self.uri, prepared, mode="append", storage_options=self.storage_options)

    def _conform(self, table: pa.Table) -> pa.Table:
        """Columns in the table's order, cast to the table's types (e.g. int32 → int64, ns → us);
        nullable columns the data lacks are filled with nulls."""
        if self._schema is None:
            from deltalake import DeltaTable

            dt = DeltaTable(self.uri, storage_options=self.storage_options)
            self._schema = pa.schema(dt.schema().to_arrow())
        target = self._schema
        extra = [c for c in table.column_names if c not in target.names]
        if extra:
            raise InvalidArgumentError(f"columns {extra} are not in the table (columns: {target.names})")
        missing = [f.name for f in target if f.name not in table.column_names and not f.nullable]
        if missing:
            raise InvalidArgumentError(f"the data lacks the non-nullable column(s) {missing}")
        arrays = [
            table.column(f.name).cast(f.type) if f.name in table.column_names else pa.nulls(table.num_rows, f.type)
            for f in target
        ]
        return pa.Table.from_arrays(arrays, schema=target)


def append_ranged(
    uri: str | os.PathLike[str],
    data: Any,
    spec: RangeSpec | None = None,
    *,
    storage_options: Mapping[str, str] | None = None,
    spark_options: Mapping[str, str] | None = None,
) -> None:
    """Append one batch with the range column derived (a one-shot :class:`RangeAppender`).

    Example:
        >>> import tempfile, pyarrow as pa
        >>> from deltalake import DeltaTable
        >>> path = tempfile.mkdtemp()
        >>> _ = create_range_table(path, pa.schema([("k", pa.int64())]), RangeSpec.fixed_width("k", 10))
        >>> append_ranged(path, pa.table({"k": [1, 25]}))
        >>> sorted(DeltaTable(path).to_pyarrow_table().column("k_range").to_pylist())
        [0, 2]
    """
    RangeAppender(uri, spec, storage_options=storage_options, spark_options=spark_options).append(data)
