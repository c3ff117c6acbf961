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
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa


def bool_array(mask: np.ndarray) -> pa.BooleanArray:
    """A non-null Arrow boolean array from a NumPy boolean mask."""
    n = len(mask)
    bits = np.packbits(np.asarray(mask, dtype=bool), bitorder="little")
    return pa.BooleanArray.from_buffers(pa.bool_(), n, [None, pa.py_buffer(bits)])


def bool_numpy(array: pa.BooleanArray) -> np.ndarray:
    """A NumPy boolean mask from a non-null Arrow boolean array."""
    if array.null_count:
        array = array.fill_null(False)
    n = len(array)
    data = array.buffers()[1]
    bits = np.unpackbits(np.frombuffer(data, dtype=np.uint8), bitorder="little")
    return bits[array.offset : array.offset + n].astype(bool)


def int64_array(values: np.ndarray) -> pa.Int64Array:
    """A non-null Arrow int64 array from NumPy integers."""
    data = np.ascontiguousarray(values, dtype=np.int64)
    return pa.Array.from_buffers(pa.int64(), len(data), [None, pa.py_buffer(data)])
