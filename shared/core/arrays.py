"""NumPy ↔ Arrow conversions that stay on the buffer level.

``pa.array(numpy)`` and ``Array.to_numpy()`` make pyarrow import pandas when it is installed (half
a second and tens of MB per process); these helpers never do.

Example:
    >>> import numpy as np
    >>> bool_array(np.array([True, False, True])).to_pylist()
    [True, False, True]
    >>> bool_numpy(bool_array(np.array([False, True]))).tolist()
    [False, True]
    >>> int64_array(np.arange(3)).to_pylist()
    [0, 1, 2]
    >>> scalar(7, pa.int16()).as_py(), scalar("x", pa.string()).as_py()
    (7, 'x')
    >>> constant_array(scalar("x", pa.string()), 2).to_pylist()
    ['x', 'x']
"""

from __future__ import annotations

import datetime as dt
from decimal import Decimal
from typing import Any

import numpy as np
import pyarrow as pa


def bool_array(mask: np.ndarray) -> pa.BooleanArray:
    """A non-null Arrow boolean array from a NumPy boolean mask."""
    n = len(mask)
    bits = np.packbits(np.asarray(mask, dtype=bool), bitorder="little")
    return pa.BooleanArray.from_buffers(pa.bool_(), n, [None, pa.py_buffer(bits)])


def bool_numpy(array: pa.BooleanArray) -> np.ndarray:
    """A NumPy boolean mask from an Arrow boolean array (null reads as False)."""
    n = len(array)
    validity, data = array.buffers()[:2]
    bits = np.unpackbits(np.frombuffer(data, dtype=np.uint8), bitorder="little")[array.offset : array.offset + n]
    if array.null_count and validity is not None:
        valid = np.unpackbits(np.frombuffer(validity, dtype=np.uint8), bitorder="little")
        bits = bits & valid[array.offset : array.offset + n]
    return bits.astype(bool)


def int64_array(values: np.ndarray) -> pa.Int64Array:
    """A non-null Arrow int64 array from NumPy integers."""
    return fixed_width_array(pa.int64(), np.ascontiguousarray(values, dtype=np.int64))


def fixed_width_array(type: pa.DataType, values: np.ndarray) -> pa.Array:
    """A non-null Arrow array of a fixed-width ``type`` over the buffer of contiguous NumPy ``values`` of
    its width (no copy).

    Example:
        >>> fixed_width_array(pa.date32(), np.array([0, 1], dtype=np.int32)).to_pylist()
        [datetime.date(1970, 1, 1), datetime.date(1970, 1, 2)]
    """
    return pa.Array.from_buffers(type, len(values), [None, pa.py_buffer(values)])


def one_array(column: pa.Array | pa.ChunkedArray) -> pa.Array:
    """A column as one array (a chunked array's only chunk as it is, several concatenated).

    Example:
        >>> one_array(pa.chunked_array([[1], [2, 3]], pa.int8())).to_pylist()
        [1, 2, 3]
        >>> len(one_array(pa.chunked_array([], pa.int8())))
        0
    """
    if not isinstance(column, pa.ChunkedArray):
        return column
    if column.num_chunks == 1:
        return column.chunk(0)
    return pa.concat_arrays(column.chunks) if column.num_chunks else pa.nulls(0, column.type)


def int64_numpy(array: pa.Array | pa.ChunkedArray) -> np.ndarray:
    """An integer Arrow array (or chunked array) as NumPy int64, null as 0 (read from its buffers).

    Example:
        >>> int64_numpy(pa.array([3, None, 5], pa.int32())).tolist()
        [3, 0, 5]
        >>> int64_numpy(pa.chunked_array([[1, 2], [3]], pa.uint8())).tolist()
        [1, 2, 3]
    """
    array = one_array(array)
    if not pa.types.is_integer(array.type):
        raise TypeError(f"expected integers, got {array.type}")
    n = len(array)
    if array.null_count == n:
        return np.zeros(n, dtype=np.int64)
    width = array.type.bit_width // 8
    kind = "i" if pa.types.is_signed_integer(array.type) else "u"
    out = np.frombuffer(array.buffers()[1], dtype=f"<{kind}{width}")[array.offset : array.offset + n].astype(np.int64)
    if array.null_count:
        out[~bool_numpy(array.is_valid())] = 0
    return out


def string_array(values: list[str]) -> pa.StringArray:
    """A non-null Arrow string array from Python strings, built from buffers (no Python-to-Arrow conversion,
    which makes pyarrow import pandas).

    Example:
        >>> string_array(["a", "bc"]).to_pylist(), len(string_array([]))
        (['a', 'bc'], 0)
    """
    encoded = [v.encode() for v in values]
    offsets = np.zeros(len(encoded) + 1, dtype=np.int32)
    np.cumsum([len(b) for b in encoded], out=offsets[1:])
    return pa.Array.from_buffers(
        pa.string(), len(encoded), [None, pa.py_buffer(offsets), pa.py_buffer(b"".join(encoded))]
    )


def nullable_string_array(values: list[str | None]) -> pa.StringArray:
    """An Arrow string array from Python strings and None (null), built from buffers like :func:`string_array`.

    Example:
        >>> nullable_string_array(["a", None, "bc"]).to_pylist()
        ['a', None, 'bc']
    """
    valid = np.array([v is not None for v in values], dtype=bool)
    plain = string_array([v if v is not None else "" for v in values])
    if valid.all():
        return plain
    bits = pa.py_buffer(np.packbits(valid, bitorder="little"))
    return pa.Array.from_buffers(pa.string(), len(values), [bits, *plain.buffers()[1:]])


def scalar(value: Any, type: pa.DataType) -> pa.Scalar:
    """The Arrow scalar of a Python value in ``type``, built from buffers.

    Covers null, boolean, integer, floating, text, binary, decimal, date and timestamp types; other
    types go through ``pa.scalar``. Raises ``OverflowError`` / ``ValueError`` / ``TypeError`` where the
    value does not fit the type exactly (a timestamp in a coarser unit raises ``pa.ArrowInvalid``).

    Example:
        >>> scalar(None, pa.int64()).is_valid
        False
        >>> scalar(Decimal("1.50"), pa.decimal128(5, 2)).as_py()
        Decimal('1.50')
        >>> scalar(dt.date(2024, 1, 2), pa.date32()).as_py()
        datetime.date(2024, 1, 2)
        >>> scalar(300, pa.int8())
        Traceback (most recent call last):
        ...
        OverflowError: 300 does not fit int8
    """
    if value is None:
        return pa.nulls(1, type)[0]
    if pa.types.is_boolean(type):
        if not isinstance(value, (bool, np.bool_)):
            raise TypeError(f"{value!r} is not a boolean")
        return bool_array(np.array([bool(value)]))[0]
    if pa.types.is_integer(type):
        if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer)):
            raise TypeError(f"{value!r} is not an integer")
        dtype = np.dtype(f"{'u' if pa.types.is_unsigned_integer(type) else ''}int{type.bit_width}")
        info = np.iinfo(dtype)
        if not info.min <= int(value) <= info.max:
            raise OverflowError(f"{value} does not fit {type}")
        return _one(type, np.array([int(value)], dtype=dtype))
    if pa.types.is_floating(type):
        if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, float, np.integer, np.floating)):
            raise TypeError(f"{value!r} is not a number")
        return _one(type, np.array([float(value)], dtype=np.dtype(f"float{type.bit_width}")))
    if _is_text(type) or _is_bytes(type):
        if isinstance(value, str):
            data = value.encode("utf-8")
        elif isinstance(value, bytes):
            data = value
        else:
            raise TypeError(f"{value!r} is not text")
        large = pa.types.is_large_string(type) or pa.types.is_large_binary(type)
        if _is_text(type):
            base = pa.large_string() if large else pa.string()
        else:
            base = pa.large_binary() if large else pa.binary()
        offsets = np.array([0, len(data)], dtype=np.int64 if large else np.int32)
        array = pa.Array.from_buffers(base, 1, [None, pa.py_buffer(offsets), pa.py_buffer(data)])
        if _is_text(type):
            array.validate(full=True)
        return array[0] if base.equals(type) else array.cast(type)[0]
    if pa.types.is_decimal(type):
        return _one(type, _decimal_bytes(value, type))
    if pa.types.is_date(type):
        if isinstance(value, dt.datetime) or not isinstance(value, dt.date):
            raise TypeError(f"{value!r} is not a date")
        days = value.toordinal() - _EPOCH_DAY
        if pa.types.is_date32(type):
            return _one(type, np.array([days], dtype=np.int32))
        return _one(type, np.array([days * 86_400_000], dtype=np.int64))
    if pa.types.is_timestamp(type):
        if not isinstance(value, dt.datetime):
            raise TypeError(f"{value!r} is not a timestamp")
        epoch = _EPOCH if value.tzinfo is None else _EPOCH.replace(tzinfo=dt.timezone.utc)
        delta = value - epoch
        micros = (delta.days * 86_400 + delta.seconds) * 1_000_000 + delta.microseconds
        us = _one(pa.timestamp("us", tz=type.tz), np.array([micros], dtype=np.int64))
        return us if us.type.equals(type) else us.cast(type)
    return pa.scalar(value, type)


def constant_array(value: pa.Scalar, rows: int) -> pa.Array:
    """An array of ``rows`` copies of one scalar (null included).

    Example:
        >>> constant_array(scalar(None, pa.int64()), 2).null_count
        2
    """
    return pa.repeat(value, rows)


def true_mask(result: pa.Array | pa.ChunkedArray) -> np.ndarray:
    """NumPy booleans: True where a three-valued boolean result is TRUE (null is not).

    Example:
        >>> b = scalar(True, pa.bool_())
        >>> true_mask(pa.concat_arrays([constant_array(b, 1), pa.nulls(1, pa.bool_())])).tolist()
        [True, False]
    """
    if isinstance(result, pa.ChunkedArray):
        result = result.combine_chunks() if result.num_chunks != 1 else result.chunk(0)
    return bool_numpy(result)


def infer_scalar(value: Any) -> pa.Scalar:
    """The Arrow scalar of a Python value in its natural type (bool, int64 or uint64 above its range,
    float64, string, binary, date32, timestamp[us]).

    Example:
        >>> infer_scalar(2.5).type, infer_scalar("a").type
        (DataType(double), DataType(string))
    """
    if isinstance(value, bool):
        return scalar(value, pa.bool_())
    if isinstance(value, int):
        return scalar(value, pa.int64() if value < 2**63 else pa.uint64())
    if isinstance(value, float):
        return scalar(value, pa.float64())
    if isinstance(value, str):
        return scalar(value, pa.string())
    if isinstance(value, bytes):
        return scalar(value, pa.binary())
    if isinstance(value, dt.datetime):
        return scalar(value, pa.timestamp("us", tz="UTC" if value.tzinfo is not None else None))
    if isinstance(value, dt.date):
        return scalar(value, pa.date32())
    return pa.scalar(value)


def py_value(value: pa.Scalar) -> Any:
    """The Python value of a scalar, like ``Scalar.as_py()`` (which imports pandas for timestamps);
    a timestamp with a time zone comes back as an aware datetime in UTC.

    Example:
        >>> py_value(scalar(dt.datetime(2024, 5, 1, 12, 30), pa.timestamp("ms")))
        datetime.datetime(2024, 5, 1, 12, 30)
    """
    typ = value.type
    if not (pa.types.is_timestamp(typ) and value.is_valid and typ.unit != "ns"):
        return value.as_py()
    ticks = value.cast(pa.int64()).as_py()
    per_second = {"s": 1, "ms": 1_000, "us": 1_000_000}[typ.unit]
    seconds, frac = divmod(ticks, per_second)
    moment = _EPOCH + dt.timedelta(seconds=seconds, microseconds=frac * (1_000_000 // per_second))
    return moment if typ.tz is None else moment.replace(tzinfo=dt.timezone.utc)


_EPOCH = dt.datetime(1970, 1, 1)
_EPOCH_DAY = dt.date(1970, 1, 1).toordinal()


def _one(type: pa.DataType, data: np.ndarray | bytes) -> pa.Scalar:
    buffer = pa.py_buffer(data)
    return pa.Array.from_buffers(type, 1, [None, buffer])[0]


def _is_text(type: pa.DataType) -> bool:
    return pa.types.is_string(type) or pa.types.is_large_string(type) or pa.types.is_string_view(type)


def _is_bytes(type: pa.DataType) -> bool:
    return pa.types.is_binary(type) or pa.types.is_large_binary(type) or pa.types.is_binary_view(type)


def _decimal_bytes(value: Any, type: pa.DataType) -> bytes:
    """The unscaled little-endian two's-complement bytes of ``value`` in a decimal type, exactly."""
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (Decimal, int, np.integer)):
        raise TypeError(f"{value!r} is not a decimal")
    d = Decimal(int(value)) if not isinstance(value, Decimal) else value
    if not d.is_finite():
        raise ValueError(f"{value} is not a finite decimal")
    sign, digits, exponent = d.as_tuple()
    assert isinstance(exponent, int)
    coefficient = int("".join(map(str, digits)) or "0")
    shift = exponent + type.scale  # exact integer arithmetic: Decimal's context would round
    if shift >= 0:
        n = coefficient * 10**shift
    else:
        n, rest = divmod(coefficient, 10**-shift)
        if rest:
            raise ValueError(f"{value} has more than {type.scale} digits after the point of {type}")
    n = -n if sign else n
    if abs(n) >= 10**type.precision:
        raise OverflowError(f"{value} does not fit {type}")
    return n.to_bytes(type.bit_width // 8, "little", signed=True)


def numpy_indices(array: pa.Array | pa.ChunkedArray) -> np.ndarray:
    """A non-null integer index array (``sort_indices`` gives uint64) as NumPy int32, or int64 when
    the indices need it.

    Example:
        >>> numpy_indices(pa.array([2, 0, 1], pa.uint64())).tolist()
        [2, 0, 1]
    """
    if isinstance(array, pa.ChunkedArray):
        array = array.combine_chunks()
    width = array.type.bit_width // 8
    data = np.frombuffer(array.buffers()[1], dtype=f"<u{width}")[array.offset : array.offset + len(array)]
    return data.astype(np.int32 if len(array) < 2**31 else np.int64)


def plain_integers(column: pa.ChunkedArray) -> np.ndarray | None:
    """A column of integers or times without nulls as a NumPy view of its values, else ``None``.

    Example:
        >>> plain_integers(pa.chunked_array([[3, 1]])).tolist(), plain_integers(pa.chunked_array([[3, None]]))
        ([3, 1], None)
    """
    if column.null_count or column.num_chunks != 1:
        return None
    return integer_view(column.chunk(0))


def integer_view(array: pa.Array) -> np.ndarray | None:
    """An array of integers or times without nulls as a NumPy view of its values, else ``None``.

    Example:
        >>> integer_view(pa.array([5, 6, 7]).slice(1)).tolist(), integer_view(pa.array([1.5]))
        ([6, 7], None)
    """
    t = array.type
    if array.null_count or not integer_like(t):
        return None
    kind = "u" if pa.types.is_unsigned_integer(t) else "i"
    width = t.bit_width // 8
    return np.frombuffer(array.buffers()[1], dtype=f"<{kind}{width}")[array.offset : array.offset + len(array)]


def integer_like(t: pa.DataType) -> bool:
    """Whether values of ``t`` are stored as plain integers: integers, timestamps, dates, times, durations.

    Example:
        >>> integer_like(pa.timestamp("us")), integer_like(pa.float64())
        (True, False)
    """
    return bool(
        pa.types.is_integer(t)
        or pa.types.is_timestamp(t)
        or pa.types.is_date(t)
        or pa.types.is_time(t)
        or pa.types.is_duration(t)
    )


def pool_numpy(n: int, dtype: Any) -> np.ndarray:
    """An uninitialized writable NumPy array of ``n`` items held in Arrow's memory pool: freed, it goes
    back to the system with the pool's unused memory, where large arrays that NumPy allocates would
    fragment the C heap of the thread that made them.

    Example:
        >>> a = pool_numpy(3, np.int64)
        >>> a[:] = [3, 1, 2]; a.sort(); a.tolist()
        [1, 2, 3]
    """
    kind = np.dtype(dtype)
    return np.frombuffer(pa.allocate_buffer(max(1, n) * kind.itemsize), dtype=kind)[:n]


def index_array(values: np.ndarray) -> pa.Array:
    """NumPy int32 or int64 indices as an Arrow array (no copy when contiguous).

    Example:
        >>> index_array(np.array([4, 2], dtype=np.int32)).to_pylist()
        [4, 2]
    """
    data = np.ascontiguousarray(values)
    kind = pa.int32() if data.dtype == np.int32 else pa.int64()
    return pa.Array.from_buffers(kind, len(data), [None, pa.py_buffer(data)])


def row_numbers(n: int) -> pa.Array:
    """The int64 row numbers ``0 .. n - 1``.

    Example:
        >>> row_numbers(3).to_pylist()
        [0, 1, 2]
    """
    return int64_array(np.arange(n, dtype=np.int64))
