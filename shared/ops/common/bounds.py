"""Values a delete prunes with: partition values (log text) and file and row-group statistics (log JSON,
Parquet statistics) turned into Python bounds comparable with the predicate's literals.

Example:
    >>> partition_scalar("7", pa.int32()).as_py(), json_bound("b", pa.string(), upper=False)
    (7, 'b')
"""

from __future__ import annotations

import datetime as dt
import json
from typing import Any

import pyarrow as pa

from ...core.arrays import py_value, scalar
from ...core.values import decimal_bound, iso_timestamp, parse_partition_value

_STRING_MAX_PAD = "\U0010ffff"


def partition_scalar(text: str | None, typ: pa.DataType) -> pa.Scalar:
    """A partition value as the log serializes it (text; empty or None is NULL), typed
    (:func:`deltaextras.core.values.parse_partition_value`).

    Example:
        >>> partition_scalar("2024-01-02", pa.date32()).as_py()
        datetime.date(2024, 1, 2)
        >>> partition_scalar("", pa.int64()).is_valid
        False
    """
    return parse_partition_value(text, typ)


def json_bound(value: Any, typ: pa.DataType, *, upper: bool) -> Any:
    """A log statistic (JSON) as a Python bound comparable with bound literals; None when unusable.

    Upper bounds are widened where writers truncate: timestamps by a millisecond (statistics are
    truncated to milliseconds), text by a maximal character (statistics keep a prefix).

    Example:
        >>> json_bound("2024-01-01T00:00:00.000Z", pa.timestamp("us", tz="UTC"), upper=True)
        datetime.datetime(2024, 1, 1, 0, 0, 0, 1000, tzinfo=datetime.timezone.utc)
        >>> json_bound(5, pa.int32(), upper=False)
        5
    """
    if value is None or isinstance(value, (dict, list)):
        return None
    try:
        if pa.types.is_timestamp(typ):
            ts = iso_timestamp(str(value))
            if typ.tz is None:
                ts = ts.replace(tzinfo=None)
            elif ts.tzinfo is None:
                ts = ts.replace(tzinfo=dt.timezone.utc)
            return ts + dt.timedelta(milliseconds=1) if upper else ts
        if pa.types.is_date(typ):
            return dt.date.fromisoformat(str(value)[:10])
        if pa.types.is_string(typ) or pa.types.is_large_string(typ):
            return str(value) + _STRING_MAX_PAD if upper else str(value)
        if pa.types.is_boolean(typ):
            return bool(value) if isinstance(value, bool) else None
        if pa.types.is_decimal(typ):
            return decimal_bound(value, upper=upper)  # exact, or widened where a double may have rounded it
        if pa.types.is_integer(typ) or pa.types.is_floating(typ):
            if isinstance(value, bool) or not isinstance(value, (int, float)):
                return None
            return value
    except (ValueError, TypeError, ArithmeticError):
        return None
    return None


def _statistic_bounds(st: Any, typ: pa.DataType) -> tuple[Any, Any]:
    """A Parquet statistic's min and max; INT64 timestamps decoded from their raw integers (pyarrow's
    own decoding imports pandas), other timestamps unusable."""
    if not pa.types.is_timestamp(typ):
        return st.min, st.max
    if st.physical_type != "INT64":
        return None, None
    try:
        info = json.loads(st.logical_type.to_json())
    except (ValueError, AttributeError):
        return None, None
    unit = info.get("timeUnit")
    if info.get("Type") != "Timestamp" or unit not in ("milliseconds", "microseconds", "nanoseconds"):
        return None, None
    tz = dt.timezone.utc if info.get("isAdjustedToUTC") else None

    def moment(raw: Any, upper: bool) -> dt.datetime | None:
        if not isinstance(raw, int):
            return None
        if unit == "milliseconds":
            micros = raw * 1000
        elif unit == "microseconds":
            micros = raw
        else:  # nanoseconds, rounded outwards so the bound still holds
            micros = -(-raw // 1000) if upper else raw // 1000
        try:
            return (dt.datetime(1970, 1, 1) + dt.timedelta(microseconds=micros)).replace(tzinfo=tz)
        except OverflowError:
            return None

    return moment(st.min_raw, False), moment(st.max_raw, True)


def parquet_bound(value: Any, typ: pa.DataType, *, upper: bool) -> Any:
    """A Parquet row-group statistic as a Python bound (text upper bounds widened, as writers may
    truncate them); None when unusable.

    Example:
        >>> parquet_bound("abc", pa.string(), upper=True) > "abc"
        True
    """
    if value is None:
        return None
    try:
        if isinstance(value, bytes) and (pa.types.is_string(typ) or pa.types.is_large_string(typ)):
            value = value.decode("utf-8")
        if pa.types.is_string(typ) or pa.types.is_large_string(typ):
            return str(value) + _STRING_MAX_PAD if upper else str(value)
        if pa.types.is_timestamp(typ):
            if not isinstance(value, dt.datetime):
                return None
            if typ.tz is None:
                return value.replace(tzinfo=None)
            return value if value.tzinfo is not None else value.replace(tzinfo=dt.timezone.utc)
        if isinstance(value, float) and value != value:  # NaN bound
            return None
        return py_value(scalar(value, typ))
    except (ValueError, TypeError, OverflowError, UnicodeDecodeError, pa.ArrowException):
        return None
