"""Deletion vectors, byte for byte as the Delta protocol defines them.

* **Z85** (the ZeroMQ Base85 alphabet) encodes UUIDs (16 bytes → 20 characters) and inline vectors;
  input that is not a multiple of 4 bytes is padded with zero bytes, as Delta does, and the
  descriptor's ``sizeInBytes`` says how many decoded bytes are real.
* A vector is a ``RoaringBitmapArray``: the magic number 1681511377 (little endian), then a 64-bit
  roaring bitmap in the portable format — the number of 32-bit buckets (int64 LE) and, per bucket,
  its key (int32 LE) and a portable 32-bit roaring bitmap. Row indexes are positions in the Parquet
  file, starting at 0. Only bucket 0 is written (files with fewer than 2³² rows).
* A vector file ``deletion_vector_<uuid>.bin`` in the table root holds a version byte ``1`` and then,
  per vector, its size (int32 BE), its bytes and their CRC-32 (BE). A descriptor's ``offset`` points
  at the size field of its vector, so the first vector of a file has offset 1.
* Storage type ``u`` names such a file by an optional random prefix and the Z85 UUID, ``p`` by an
  absolute path, and ``i`` holds the Z85 bytes of the vector in the log itself.

The in-memory vector is a :class:`pyroaring.BitMap` of deleted row indexes.

Example:
    >>> from pyroaring import BitMap
    >>> data = serialize_bitmap(BitMap([0, 9]))
    >>> len(data), parse_bitmap(data) == BitMap([0, 9])
    (36, True)
    >>> d = inline_descriptor(BitMap([3, 4, 7, 11, 18, 29]))
    >>> d.storage_type, d.size_in_bytes, d.cardinality
    ('i', 44, 6)
    >>> sorted(read_inline(d))
    [3, 4, 7, 11, 18, 29]
"""

from __future__ import annotations

import array
import struct
import uuid
import zlib
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from pyroaring import BitMap, BitMap64

from ..errors import CorruptDataError, UnsupportedFeatureError
from .actions import DeletionVectorDescriptor
from .storage import TableStorage

MAGIC = 1681511377
MAGIC_NATIVE = 1681511376
FORMAT_VERSION = 1
FILE_PREFIX = "deletion_vector_"
UUID_CHARS = 20
# Vectors whose serialized form is at most this many bytes go inline into the log (``i``).
DEFAULT_INLINE_MAX_BYTES = 64
# Largest vector the reader accepts (the protocol's sizeInBytes is an int32).
MAX_VECTOR_BYTES = 2**31 - 1

_Z85 = "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ.-:+=^!/*?&<>()[]{}@%$#"
_Z85_INDEX = {c: i for i, c in enumerate(_Z85)}
_POWERS = (85**4, 85**3, 85**2, 85, 1)


# ---------------------------------------------------------------------------------------- Z85
def z85_encode(data: bytes) -> str:
    """Z85 text of ``data``, zero-padded to a multiple of 4 bytes first (as Delta pads).

    Example:
        >>> z85_encode(bytes([0x86, 0x4F, 0xD2, 0x6F, 0xB5, 0x59, 0xF7, 0x5B]))
        'HelloWorld'
    """
    if len(data) % 4:
        data = data + bytes(4 - len(data) % 4)
    out: list[str] = []
    for (word,) in struct.iter_unpack(">I", data):
        out.append(
            _Z85[word // 52200625]
            + _Z85[word // 614125 % 85]
            + _Z85[word // 7225 % 85]
            + _Z85[word // 85 % 85]
            + _Z85[word % 85]
        )
    return "".join(out)


def z85_decode(text: str, size: int | None = None) -> bytes:
    """Bytes of Z85 ``text``; ``size`` drops the padding (the descriptor's ``sizeInBytes``).

    Example:
        >>> z85_decode("HelloWorld").hex()
        '864fd26fb559f75b'
    """
    if len(text) % 5:
        raise CorruptDataError(f"Z85 text of {len(text)} characters is not a multiple of 5")
    words = []
    for i in range(0, len(text), 5):
        value = 0
        for power, char in zip(_POWERS, text[i : i + 5], strict=True):
            digit = _Z85_INDEX.get(char)
            if digit is None:
                raise CorruptDataError(f"{char!r} is not a Z85 character (in {text[:40]!r})")
            value += digit * power
        if value > 0xFFFFFFFF:
            raise CorruptDataError(f"Z85 block {text[i : i + 5]!r} is out of range")
        words.append(value)
    data = struct.pack(f">{len(words)}I", *words)
    if size is not None:
        if size > len(data):
            raise CorruptDataError(f"inline vector says {size} bytes but its text holds {len(data)}")
        data = data[:size]
    return data


def encode_uuid(value: uuid.UUID) -> str:
    """The 20-character Z85 form of a UUID (its 16 big-endian bytes).

    Example:
        >>> encode_uuid(uuid.UUID("61d16c75-6994-46b7-a15b-8b538852e50e"))
        'vBn[lx{q8@P<9BNH/isA'
    """
    return z85_encode(value.bytes)


def decode_uuid(text: str) -> uuid.UUID:
    """The UUID of a 20-character Z85 text.

    Example:
        >>> str(decode_uuid("vBn[lx{q8@P<9BNH/isA"))
        '61d16c75-6994-46b7-a15b-8b538852e50e'
    """
    if len(text) != UUID_CHARS:
        raise CorruptDataError(f"an encoded deletion vector UUID has {UUID_CHARS} characters, not {len(text)}")
    return uuid.UUID(bytes=z85_decode(text))


# ------------------------------------------------------------------------------ RoaringBitmapArray
def serialize_bitmap(bitmap: BitMap) -> bytes:
    """The ``RoaringBitmapArray`` bytes of a vector: magic, one bucket (key 0), portable bitmap.

    Runs are compacted first (``run_optimize``), which the portable format carries.

    Example:
        >>> serialize_bitmap(BitMap([0, 9])).hex()
        'd1d339640100000000000000000000003a30000001000000000001001000000000000900'
    """
    bm = BitMap(bitmap)
    bm.run_optimize()
    return struct.pack("<IqI", MAGIC, 1, 0) + bm.serialize()


def parse_bitmap(data: bytes) -> BitMap:
    """The row indexes of ``RoaringBitmapArray`` bytes (magic checked).

    Example:
        >>> sorted(parse_bitmap(serialize_bitmap(BitMap([5, 70000]))))
        [5, 70000]
    """
    if len(data) < 12:
        raise CorruptDataError(f"deletion vector of {len(data)} bytes is too short")
    (magic,) = struct.unpack_from("<I", data, 0)
    if MAGIC_NATIVE in (magic, struct.unpack_from(">I", data, 0)[0]):
        return _parse_native(data, "<" if magic == MAGIC_NATIVE else ">")
    if magic != MAGIC:
        raise CorruptDataError(f"deletion vector has magic number {magic}, not {MAGIC}")
    (buckets,) = struct.unpack_from("<q", data, 4)
    try:
        if buckets == 0:
            return BitMap()
        if buckets == 1 and struct.unpack_from("<i", data, 12)[0] == 0:
            return BitMap.deserialize(data[16:])
        wide = BitMap64.deserialize(data[4:])
    except (ValueError, OverflowError) as exc:
        raise CorruptDataError(f"deletion vector bitmap is not a valid portable roaring bitmap: {exc}") from None
    if len(wide) and wide.max() >= 2**32:
        raise UnsupportedFeatureError(
            "the deletion vector names rows beyond 2^32 in one file; deltaextras reads files of fewer rows"
        )
    return BitMap(np.frombuffer(wide.to_array(), dtype=np.uint64).astype(np.uint32))


def _parse_native(data: bytes, order: str) -> BitMap:
    """The older "native" ``RoaringBitmapArray`` layout (magic 1681511376): a count of 32-bit bitmaps,
    then each bitmap's size and portable bytes, the bitmap's index being its key. Read, never written.

    Example (the inline vector of the protocol's JSON example 3):
        >>> sorted(parse_bitmap(z85_decode("wi5b=000010000siXQKl0rr91000f55c8Xg0@@D72lkbi5=-{L")))
        [3, 4, 7, 11, 18, 29]
    """
    try:
        (count,) = struct.unpack_from(f"{order}i", data, 4)
        pos = 8
        result = BitMap()
        for key in range(count):
            (size,) = struct.unpack_from(f"{order}i", data, pos)
            part = BitMap.deserialize(data[pos + 4 : pos + 4 + size])
            pos += 4 + size
            if len(part) and key:
                raise UnsupportedFeatureError(
                    "the deletion vector names rows beyond 2^32 in one file; deltaextras reads files of fewer rows"
                )
            result |= part
    except (struct.error, ValueError) as exc:
        raise CorruptDataError(f"deletion vector in the native layout is damaged: {exc}") from None
    return result


# ------------------------------------------------------------------------------------ descriptors
def descriptor_of(d: DeletionVectorDescriptor | Mapping[str, Any]) -> DeletionVectorDescriptor:
    """A descriptor as the typed action (a JSON object as the log holds it is decoded).

    Example:
        >>> descriptor_of({"storageType": "i", "pathOrInlineDv": "x", "sizeInBytes": 1, "cardinality": 1}).storage_type
        'i'
    """
    if isinstance(d, DeletionVectorDescriptor):
        return d
    return DeletionVectorDescriptor.from_json(dict(d))


def inline_descriptor(bitmap: BitMap) -> DeletionVectorDescriptor:
    """A storage type ``i`` descriptor holding the vector itself (Z85 text in the log).

    Example:
        >>> d = inline_descriptor(BitMap([1]))
        >>> d.size_in_bytes, len(d.path_or_inline_dv), sorted(read_inline(d))
        (34, 45, [1])
    """
    data = serialize_bitmap(bitmap)
    return DeletionVectorDescriptor("i", z85_encode(data), None, len(data), len(bitmap))


def file_key(descriptor: DeletionVectorDescriptor | Mapping[str, Any]) -> str:
    """The storage key (relative to the table root) of a ``u`` descriptor's vector file.

    Example:
        >>> file_key({"storageType": "u", "pathOrInlineDv": "ab" + "vBn[lx{q8@P<9BNH/isA"})
        'ab/deletion_vector_61d16c75-6994-46b7-a15b-8b538852e50e.bin'
    """
    d = descriptor_of(descriptor)
    if d.storage_type != "u":
        raise CorruptDataError(f"descriptor of storage type {d.storage_type!r} has no relative file")
    text = str(d.path_or_inline_dv)
    if len(text) < UUID_CHARS:
        raise CorruptDataError(f"deletion vector path {text!r} is shorter than an encoded UUID")
    prefix, encoded = text[: len(text) - UUID_CHARS], text[len(text) - UUID_CHARS :]
    name = f"{FILE_PREFIX}{decode_uuid(encoded)}.bin"
    return f"{prefix}/{name}" if prefix else name


def read_inline(descriptor: DeletionVectorDescriptor | Mapping[str, Any]) -> BitMap:
    """The vector of an inline (``i``) descriptor."""
    d = descriptor_of(descriptor)
    data = z85_decode(str(d.path_or_inline_dv), int(d.size_in_bytes))
    return _checked(parse_bitmap(data), d)


def _checked(bitmap: BitMap, descriptor: DeletionVectorDescriptor) -> BitMap:
    want = descriptor.cardinality
    if want is not None and int(want) != len(bitmap):
        raise CorruptDataError(
            f"deletion vector {descriptor.path_or_inline_dv!s:.40} holds {len(bitmap)} rows, its descriptor says {want}"
        )
    return bitmap


def read_deletion_vector(
    storage: TableStorage, descriptor: DeletionVectorDescriptor | Mapping[str, Any] | None
) -> BitMap:
    """The deleted rows a descriptor names (empty for ``None``), checked against size, CRC and cardinality.

    Example:
        >>> import tempfile
        >>> st = TableStorage(tempfile.mkdtemp())
        >>> w = VectorFileWriter()
        >>> d = w.add(BitMap([2, 3]))
        >>> w.write(st)
        >>> sorted(read_deletion_vector(st, d))
        [2, 3]
    """
    return read_deletion_vectors(storage, [descriptor])[0]


def read_deletion_vectors(
    storage: TableStorage, descriptors: Sequence[DeletionVectorDescriptor | Mapping[str, Any] | None]
) -> list[BitMap]:
    """Read many vectors, fetching each vector file once (up to the end of the last vector needed)."""
    typed = [None if not d else descriptor_of(d) for d in descriptors]
    out: list[BitMap | None] = [None] * len(typed)
    by_file: dict[tuple[str, str], list[int]] = {}
    for i, d in enumerate(typed):
        if d is None:
            out[i] = BitMap()
        elif d.storage_type == "i":
            out[i] = read_inline(d)
        elif d.storage_type == "u":
            by_file.setdefault(("u", file_key(d)), []).append(i)
        elif d.storage_type == "p":
            by_file.setdefault(("p", str(d.path_or_inline_dv)), []).append(i)
        else:
            raise CorruptDataError(f"deletion vector storage type {d.storage_type!r} is not u, i or p")
    for (kind, where), indexes in by_file.items():
        src, key = (storage, where) if kind == "u" else _absolute(storage, where)
        end = max(_span(typed[i])[1] for i in indexes)
        try:
            blob = src.read_range(key, 0, end)
        except FileNotFoundError:
            raise CorruptDataError(f"deletion vector file {key} is named in the log but missing") from None
        if len(blob) < end:
            raise CorruptDataError(f"deletion vector file {key} has {len(blob)} bytes; the log needs {end}")
        if blob[0] != FORMAT_VERSION:
            raise CorruptDataError(f"deletion vector file {key} has format version {blob[0]}, not {FORMAT_VERSION}")
        for i in indexes:
            d = typed[i]
            assert d is not None
            out[i] = _checked(parse_bitmap(_frame(blob, d, key)), d)
    return [b if b is not None else BitMap() for b in out]


def _span(d: DeletionVectorDescriptor | None) -> tuple[int, int]:
    assert d is not None
    offset = int(d.offset or 0)
    size = int(d.size_in_bytes)
    if offset < 1 or size < 12 or size > MAX_VECTOR_BYTES:
        raise CorruptDataError(f"deletion vector descriptor has offset {offset} and size {size}")
    return offset, offset + 4 + size + 4


def _frame(blob: bytes, d: DeletionVectorDescriptor, key: str) -> bytes:
    start, _ = _span(d)
    (size,) = struct.unpack_from(">I", blob, start)
    if size != int(d.size_in_bytes):
        raise CorruptDataError(f"deletion vector at {key}@{start} has {size} bytes, the log says {d.size_in_bytes}")
    data = blob[start + 4 : start + 4 + size]
    (crc,) = struct.unpack_from(">I", blob, start + 4 + size)
    if zlib.crc32(data) & 0xFFFFFFFF != crc:
        raise CorruptDataError(f"deletion vector at {key}@{start} fails its CRC-32 check")
    return data


def _absolute(storage: TableStorage, path: str) -> tuple[TableStorage, str]:
    """Storage and key of a ``p`` (absolute path) vector file, in any URI form the log holds
    (``file:/abs``, ``file:///abs``, ``abfss://``, ``s3://``, percent-escaped).

    Example:
        >>> import tempfile
        >>> st = TableStorage(tempfile.mkdtemp())
        >>> _absolute(st, f"file:{st.uri}/deletion_vector_a%20b.bin")[1]
        'deletion_vector_a b.bin'
    """
    return storage.resolve(path)


# ------------------------------------------------------------------------------------ file writer
@dataclass
class VectorFileWriter:
    """Collects vectors for one ``deletion_vector_<uuid>.bin`` and hands out their descriptors.

    ``prefix`` is the optional random directory prefix (none by default, as Spark writes them).

    Example:
        >>> w = VectorFileWriter(file_uuid=uuid.UUID("61d16c75-6994-46b7-a15b-8b538852e50e"))
        >>> w.add(BitMap([0, 9])).to_json_body()
        {'storageType': 'u', 'pathOrInlineDv': 'vBn[lx{q8@P<9BNH/isA', 'offset': 1, 'sizeInBytes': 36, 'cardinality': 2}
        >>> w.add(BitMap([1])).offset, len(w.payload()), w.key
        (45, 87, 'deletion_vector_61d16c75-6994-46b7-a15b-8b538852e50e.bin')
    """

    file_uuid: uuid.UUID = field(default_factory=uuid.uuid4)
    prefix: str = ""
    _chunks: list[bytes] = field(default_factory=lambda: [bytes([FORMAT_VERSION])])
    _size: int = 1

    @property
    def key(self) -> str:
        """Storage key of the file, relative to the table root."""
        name = f"{FILE_PREFIX}{self.file_uuid}.bin"
        return f"{self.prefix}/{name}" if self.prefix else name

    @property
    def count(self) -> int:
        """How many vectors were added."""
        return (len(self._chunks) - 1) // 3

    def add(self, bitmap: BitMap) -> DeletionVectorDescriptor:
        """Append one vector; its descriptor (storage type ``u``, offset of its size field)."""
        data = serialize_bitmap(bitmap)
        offset = self._size
        self._chunks += [struct.pack(">I", len(data)), data, struct.pack(">I", zlib.crc32(data) & 0xFFFFFFFF)]
        self._size += 8 + len(data)
        return DeletionVectorDescriptor("u", self.prefix + encode_uuid(self.file_uuid), offset, len(data), len(bitmap))

    def payload(self) -> bytes:
        """The file's bytes."""
        return b"".join(self._chunks)

    def write(self, storage: TableStorage) -> None:
        """Write the file under the table root (never overwriting: the UUID is fresh).

        "Already exists" is the answer to a retried put whose first try landed (an error or a lost
        response after the write): the file is read back and accepted when it holds our bytes.
        """
        payload = self.payload()
        if storage.put_if_absent(self.key, payload):
            return
        try:
            ours = storage.read(self.key) == payload
        except FileNotFoundError:
            ours = False
        if not ours:
            raise CorruptDataError(f"deletion vector file {self.key} already exists; refusing to overwrite it")


def build_descriptors(
    bitmaps: Iterable[BitMap], *, inline_max_bytes: int = DEFAULT_INLINE_MAX_BYTES, prefix: str = ""
) -> tuple[list[DeletionVectorDescriptor], VectorFileWriter | None]:
    """Descriptors for vectors: inline when at most ``inline_max_bytes`` serialized, else in one new
    vector file (returned unwritten, or None when every vector went inline).

    Example:
        >>> ds, w = build_descriptors([BitMap([1]), BitMap(range(0, 20000, 2))])
        >>> [d.storage_type for d in ds], w is not None and w.count
        (['i', 'u'], 1)
    """
    writer: VectorFileWriter | None = None
    out = []
    for bm in bitmaps:
        if len(serialize_bitmap(bm)) <= inline_max_bytes:
            out.append(inline_descriptor(bm))
        else:
            writer = writer or VectorFileWriter(prefix=prefix)
            out.append(writer.add(bm))
    return out, writer


def keep_mask(deleted: BitMap, num_rows: int) -> np.ndarray:
    """Boolean keep-mask (True = live row) of a file with ``num_rows`` rows.

    Example:
        >>> keep_mask(BitMap([1, 3]), 5).tolist()
        [True, False, True, False, True]
    """
    mask = np.ones(num_rows, dtype=bool)
    if len(deleted):
        idx = np.frombuffer(deleted.to_array(), dtype=np.uint32)
        mask[idx[idx < num_rows]] = False
    return mask


def bitmap_from_positions(positions: np.ndarray) -> BitMap:
    """A vector from an array of row indexes.

    Example:
        >>> sorted(bitmap_from_positions(np.array([4, 2])))
        [2, 4]
    """
    if not len(positions):
        return BitMap()
    return BitMap(array.array("I", np.ascontiguousarray(positions, dtype=np.uint32).tobytes()))


__all__ = [
    "DEFAULT_INLINE_MAX_BYTES",
    "VectorFileWriter",
    "bitmap_from_positions",
    "build_descriptors",
    "decode_uuid",
    "encode_uuid",
    "file_key",
    "inline_descriptor",
    "keep_mask",
    "parse_bitmap",
    "read_deletion_vector",
    "read_deletion_vectors",
    "serialize_bitmap",
    "z85_decode",
    "z85_encode",
]
