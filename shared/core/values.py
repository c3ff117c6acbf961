"""Value semantics, once: when two values are the same value and how values are ordered, as Spark SQL
decides it (see docs/values.md).

- Equality (grouping, de-duplication, indexing, matching): ``-0.0`` equals ``0.0``, every NaN equals
  every NaN whatever its payload, null equals null (nulls form one group).
- Order: numbers ascending, NaN after ``+inf``; nulls last (the layout's order) unless asked first.
- Partition values are compared as the typed values their log text spells, never as text: a timestamp
  written ``2024-01-01 00:00:00`` and ``2024-01-01 00:00:00.000000`` is one value.
- Decimal statistics are read exactly where the log's text allows, and widened by one step of a double
  where a writer may have rounded them through one: a bound is never tighter than the true value.

Arrow's own kernels (``unique``, ``index_in``, ``value_counts``, ``is_in``) compare floats bit for bit;
every component hands them :func:`canonical` columns instead.

Example:
    >>> nan, minus_zero = float("nan"), -0.0
    >>> codes, _ = value_codes(pa.array([0.0, minus_zero, nan, None, None]))
    >>> codes.tolist()
    [0, 0, 1, 2, 2]
    >>> sorted([nan, float("inf"), None, 1.0], key=sort_key)
    [1.0, inf, nan, None]
    >>> partition_key("2024-01-01 00:00:00", pa.timestamp("us")) == partition_key(
    ...     "2024-01-01 00:00:00.000000", pa.timestamp("us"))
    True
"""

from __future__ import annotations

import datetime as dt
import json
import math
from collections.abc import Callable, Mapping
from decimal import Decimal, InvalidOperation
from typing import Any, TypeVar

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ..errors import CorruptDataError
from .arrays import bool_array, int64_numpy, scalar

_NAN = float("nan")
T = TypeVar("T")
_FALSE = scalar(False, pa.bool_())


class _NanKey:
    """The one key every NaN maps to (orders above every number)."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "NaN"


NAN_KEY = _NanKey()


# ---------------------------------------------------------------------------------------------- arrays
def canonical(column: Any) -> Any:
    """A column whose Spark-equal values are equal bit for bit: floats with one zero and one NaN;
    other types unchanged (nested ones are compared through :func:`value_key`).

    Example:
        >>> canonical(pa.array([-0.0, 1.5, None])).to_pylist()
        [0.0, 1.5, None]
    """
    if not pa.types.is_floating(column.type):
        return column
    try:
        zeroed = pc.add(column, scalar(0.0, column.type))  # -0.0 + 0.0 is +0.0
        return pc.if_else(pc.is_nan(column), scalar(_NAN, column.type), zeroed)
    except pa.ArrowNotImplementedError:  # half floats: through Python values
        return column


def nan_mask(column: Any) -> Any:
    """True where a value is NaN; False for nulls and for types without NaN.

    Example:
        >>> nan_mask(pa.array([1.0, float("nan"), None])).to_pylist()
        [False, True, False]
    """
    if not pa.types.is_floating(column.type):
        return bool_array(np.zeros(len(column), dtype=bool))
    return pc.fill_null(pc.is_nan(column), _FALSE)


def same_values(a: Any, b: Any) -> Any:
    """Element-wise: the same value (Spark-equal) or both null — never null itself.

    Example:
        >>> nan = float("nan")
        >>> a, b = pa.chunked_array([[0.0, nan, None, 1.0]]), pa.chunked_array([[-0.0, nan, None, None]])
        >>> same_values(a, b).to_pylist()
        [True, True, True, False]
    """
    try:
        if pa.types.is_nested(a.type):
            raise pa.ArrowNotImplementedError("nested")
        same = pc.equal(a, b)  # IEEE: -0.0 == 0.0
    except pa.ArrowNotImplementedError:  # nested and other types: their Python values, keyed
        hits = [value_key(x) == value_key(y) for x, y in zip(a.to_pylist(), b.to_pylist(), strict=True)]
        return pa.chunked_array([bool_array(np.array(hits, dtype=bool))])
    same = pc.or_kleene(same, pc.and_(pc.is_null(a), pc.is_null(b)))
    if pa.types.is_floating(a.type):
        same = pc.or_kleene(same, pc.and_(pc.is_nan(a), pc.is_nan(b)))
    return pc.fill_null(same, scalar(False, pa.bool_()))


def value_codes(own: Any, other: Any = None) -> tuple[np.ndarray, np.ndarray | None]:
    """One integer per value of ``own`` (Spark-equal values and nulls share one; dense from 0), and per
    value of ``other`` the code of its equal in ``own`` (-1: none).

    Example:
        >>> a, b = value_codes(pa.array([1.0, float("nan")]), pa.array([float("nan"), 2.0, None]))
        >>> a.tolist(), b.tolist()
        ([0, 1], [1, -1, -1])
    """
    if pa.types.is_nested(own.type):
        index: dict[Any, int] = {}
        a = np.array([index.setdefault(value_key(v), len(index)) for v in own.to_pylist()], dtype=np.int64)
        if other is None:
            return a, None
        return a, np.array([index.get(value_key(v), -1) for v in other.to_pylist()], dtype=np.int64)
    own = canonical(own)
    uniq = pc.unique(own)
    a = int_numpy(pc.index_in(own, value_set=uniq, skip_nulls=False))
    if other is None:
        return a, None
    other = canonical(other.cast(own.type) if not other.type.equals(own.type) else other)
    return a, int_numpy(pc.fill_null(pc.index_in(other, value_set=uniq, skip_nulls=False), scalar(-1, pa.int32())))


def int_numpy(array: Any) -> np.ndarray:
    """A non-null integer Arrow array (or chunked array) as NumPy int64 (without pandas).

    Example:
        >>> int_numpy(pa.chunked_array([[1, 2], [3]], pa.int32())).tolist()
        [1, 2, 3]
    """
    return int64_numpy(array)


def distinct(column: Any) -> pa.Array:
    """The distinct values of a column, one per Spark value (nulls left out), in Spark's order.

    Example:
        >>> distinct(pa.array([float("nan"), 2.0, -0.0, 0.0, None, float("nan")])).to_pylist()
        [0.0, 2.0, nan]
    """
    uniq = pc.unique(canonical(column))
    if isinstance(uniq, pa.ChunkedArray):
        uniq = uniq.combine_chunks()
    uniq = uniq.drop_null()
    return uniq.take(pc.array_sort_indices(uniq, null_placement="at_end"))  # Arrow sorts NaN last too


def run_ends(column: Any) -> list[int]:
    """Where each value's rows end once sorted in Spark's order (nulls last): Spark-equal values (both
    zeros, every NaN) are one run.

    Example:
        >>> run_ends(pa.array([3.0, None, -0.0, 0.0, float("nan")]))
        [2, 3, 4, 5]
    """
    counts = pc.value_counts(canonical(column))
    order = pc.array_sort_indices(counts.field("values"), null_placement="at_end")
    total = 0
    out = []
    for c in counts.field("counts").take(order).to_pylist():
        total += c
        out.append(total)
    return out


def within(column: Any, lo: pa.Scalar | None, hi: pa.Scalar | None) -> Any:
    """True where ``lo <= value <= hi`` in Spark's order (NaN above ``+inf``; bounds are Arrow scalars
    of the column's type, None: unbounded); False for nulls.

    Example:
        >>> nan = pa.scalar(float("nan"))
        >>> within(pa.array([1.0, float("nan"), float("inf"), None]), pa.scalar(2.0), nan).to_pylist()
        [False, True, True, False]
    """
    mask: Any = pc.is_valid(column)
    floating = pa.types.is_floating(column.type)
    nan = nan_mask(column)
    if lo is not None:
        if _is_nan(lo.as_py() if floating else None):
            mask = pc.and_(mask, nan)
        else:
            ge = pc.fill_null(pc.greater_equal(column, lo), _FALSE)
            mask = pc.and_(mask, pc.or_(ge, nan) if floating else ge)
    if hi is not None and not _is_nan(hi.as_py() if floating else None):
        mask = pc.and_(mask, pc.fill_null(pc.less_equal(column, hi), _FALSE))  # NaN is never <= a number
    return mask


# --------------------------------------------------------------------------------------- Python values
def _is_nan(value: Any) -> bool:
    return isinstance(value, float) and value != value


def value_key(value: Any) -> Any:
    """A hashable key of a Python value: Spark-equal values (``-0.0``/``0.0``, every NaN, equal nested
    values) get equal keys.

    Example:
        >>> value_key(-0.0) == value_key(0.0), value_key(float("nan")) == value_key(float("nan"))
        (True, True)
        >>> value_key({"a": [1.0, float("nan")]})
        (('a', (1.0, NaN)),)
    """
    if isinstance(value, float):
        return NAN_KEY if value != value else value + 0.0
    if isinstance(value, dict):
        return tuple((k, value_key(v)) for k, v in value.items())
    if isinstance(value, (list, tuple)):
        return tuple(value_key(v) for v in value)
    return value


def sort_key(value: Any, *, nulls_first: bool = False) -> tuple[int, Any]:
    """A key that sorts Python values in Spark's order: NaN after ``+inf``, nulls last (or first).

    Example:
        >>> sorted([None, float("nan"), 2, -1.0], key=lambda v: sort_key(v, nulls_first=True))
        [None, -1.0, 2, nan]
    """
    if value is None:
        return (-1, 0) if nulls_first else (2, 0)
    if _is_nan(value):
        return (1, 0)
    return (0, value + 0.0 if isinstance(value, float) else value)


# ---------------------------------------------------------------------------------- partition values
def parse_partition_value(text: str | None, typ: pa.DataType) -> pa.Scalar:
    """A partition value as the log serializes it (text; empty or None is NULL) typed: timestamps with or
    without fractional seconds, ``T`` or space, with or without zone; dates; decimals; numbers.

    Example:
        >>> parse_partition_value("2024-01-02", pa.date32()).as_py()
        datetime.date(2024, 1, 2)
        >>> parse_partition_value("", pa.int64()).is_valid
        False
        >>> parse_partition_value("2024-01-01 00:00:00.000000", pa.timestamp("us")).as_py()
        datetime.datetime(2024, 1, 1, 0, 0)
    """
    if text is None or text == "":
        return scalar(None, typ)
    try:
        if pa.types.is_timestamp(typ):
            value = iso_timestamp(text)
            if typ.tz is None:
                value = value.replace(tzinfo=None)
            elif value.tzinfo is None:
                value = value.replace(tzinfo=dt.timezone.utc)
            return scalar(value, typ)
        if pa.types.is_date(typ):
            return scalar(dt.date.fromisoformat(text.strip()[:10]), typ)
        if pa.types.is_boolean(typ):
            return scalar(text.strip().lower() == "true", typ)
        if pa.types.is_decimal(typ):
            return scalar(Decimal(text.strip()), typ)
        if pa.types.is_integer(typ):
            return scalar(int(text.strip()), typ)
        if pa.types.is_floating(typ):
            return scalar(float(text.strip()), typ)
        if pa.types.is_binary(typ) or pa.types.is_large_binary(typ):
            return scalar(text.encode("utf-8"), typ)
        return scalar(text, typ)
    except (ValueError, TypeError, OverflowError, ArithmeticError, pa.ArrowException) as exc:
        raise CorruptDataError(f"partition value {text!r} is not a valid {typ}: {exc}") from None


def iso_timestamp(text: str) -> dt.datetime:
    """A timestamp's text (``T`` or space, optional fraction, optional zone or ``Z``); aware ones in UTC.

    Example:
        >>> iso_timestamp("2024-01-01T01:00:00+01:00")
        datetime.datetime(2024, 1, 1, 0, 0, tzinfo=datetime.timezone.utc)
    """
    s = text.strip().replace("T", " ", 1)
    if s.endswith(("Z", "z")):
        s = s[:-1] + "+00:00"
    value = dt.datetime.fromisoformat(s)
    return value.astimezone(dt.timezone.utc) if value.tzinfo is not None else value


def spelled_once(typ: pa.DataType) -> bool:
    """Whether every value of the type has one spelling in the log, so that text equality is value
    equality: all but timestamps (with or without fraction, ``T`` or space, zone), decimals (trailing
    zeros) and floats (``1`` and ``1.0``, ``-0.0`` and ``0``). Integers, dates, booleans and text keep
    the fast path of comparing the log's text.

    Example:
        >>> spelled_once(pa.string()), spelled_once(pa.int64()), spelled_once(pa.timestamp("us"))
        (True, True, False)
    """
    return not (pa.types.is_timestamp(typ) or pa.types.is_decimal(typ) or pa.types.is_floating(typ))


def partition_key(text: str | None, typ: pa.DataType | None) -> Any:
    """The key of a partition value's text: equal for every spelling of one value (None for NULL; the
    text itself when the type is unknown or the text does not parse).

    Example:
        >>> partition_key("1.50", pa.decimal128(5, 2)) == partition_key("1.5", pa.decimal128(5, 2))
        True
        >>> partition_key("-0.0", pa.float64()) == partition_key("0", pa.float64())
        True
    """
    if text is None or text == "":
        return None
    if typ is None or spelled_once(typ):
        return text
    try:
        value = parse_partition_value(text, typ).as_py()
    except CorruptDataError:
        return text
    if isinstance(value, Decimal):
        return ("decimal", value.normalize() if value else Decimal(0))
    return (type(value).__name__, value_key(value))


def partition_values_key(
    values: Mapping[str, str | None] | None, types: Mapping[str, pa.DataType]
) -> tuple[tuple[str, Any], ...]:
    """The key of a file's whole ``partitionValues`` (one directory of a unit), spelling-independent.

    Example:
        >>> t = {"d": pa.timestamp("us")}
        >>> partition_values_key({"d": "2024-01-01 00:00:00"}, t) == partition_values_key(
        ...     {"d": "2024-01-01T00:00:00.000000"}, t)
        True
    """
    return tuple(sorted((k, partition_key(v, types.get(k))) for k, v in (values or {}).items()))


def merge_spellings(
    groups: Mapping[str | None, T], typ: pa.DataType | None, merge: Callable[[T, T], T]
) -> dict[str | None, T]:
    """Groups keyed by a partition value's text, with the groups of every spelling of one value merged
    under the least of its spellings (``merge(kept, other)``); order of first appearance kept.

    Example:
        >>> merged = merge_spellings({"2024-01-01 00:00:00.000000": [1], "2024-01-01 00:00:00": [2], "x": [3]},
        ...                          pa.timestamp("us"), lambda a, b: a + b)
        >>> merged
        {'2024-01-01 00:00:00': [1, 2], 'x': [3]}
    """
    if typ is None or spelled_once(typ):
        return dict(groups)
    by_key: dict[Any, list[str | None]] = {}
    for text in groups:
        by_key.setdefault(partition_key(text, typ), []).append(text)
    out: dict[str | None, T] = {}
    for spellings in by_key.values():
        label = min(spellings, key=lambda t: (t is not None, t or ""))
        merged = groups[spellings[0]]
        for other in spellings[1:]:
            merged = merge(merged, groups[other])
        out[label] = merged
    return out


# -------------------------------------------------------------------------------------- statistics
_DOUBLE_DIGITS = 17  # a double's shortest decimal text has at most this many significant digits


def decimal_bound(value: Any, *, upper: bool) -> Decimal | None:
    """A decimal column's statistic as a bound never tighter than the true value: exact when its text
    cannot have come from a double, else widened by one step of a double (writers that pass decimals
    through doubles round them by up to half a step). ``value``: a JSON number as parsed (float, int,
    Decimal) or its text.

    Example:
        >>> decimal_bound(Decimal("12345678901234567.89"), upper=False)
        Decimal('12345678901234567.89')
        >>> decimal_bound(1.2345678901234568e16, upper=False) <= Decimal("12345678901234567.89")
        True
    """
    if value is None or isinstance(value, bool):
        return None
    try:
        exact = Decimal(str(value)) if not isinstance(value, Decimal) else value
        if not exact.is_finite():
            return None
        as_double = float(exact)
        digits = len(exact.normalize().as_tuple().digits)
        if digits > _DOUBLE_DIGITS and Decimal(as_double) != exact:
            return exact
        if math.isinf(as_double):
            return None
        return Decimal(math.nextafter(as_double, math.inf if upper else -math.inf))
    except (InvalidOperation, ValueError, OverflowError):
        return None


def exact_statistics(text: Any) -> dict[str, Any]:
    """A file's JSON statistics with every non-integer number kept as its exact text (a ``Decimal``),
    for decimal columns; empty when absent or unreadable.

    Example:
        >>> exact_statistics('{"minValues": {"d": 12345678901234567.89}}')["minValues"]["d"]
        Decimal('12345678901234567.89')
    """
    if not isinstance(text, str) or not text:
        return {}
    try:
        parsed = json.loads(text, parse_float=Decimal)
    except ValueError:
        return {}
    return parsed if isinstance(parsed, dict) else {}


__all__ = [
    "NAN_KEY",
    "canonical",
    "decimal_bound",
    "distinct",
    "exact_statistics",
    "int_numpy",
    "iso_timestamp",
    "merge_spellings",
    "nan_mask",
    "parse_partition_value",
    "partition_key",
    "partition_values_key",
    "run_ends",
    "same_values",
    "sort_key",
    "spelled_once",
    "value_codes",
    "value_key",
    "within",
]
