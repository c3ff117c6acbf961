"""The deletion vector codec against the protocol's bytes: Z85, RoaringBitmapArray, vector files with
several vectors and offsets, inline vectors, and the golden file of the ``table-with-dv-small`` fixture."""

from __future__ import annotations

import itertools
import json
import struct
import uuid
import zlib
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pyroaring import BitMap, BitMap64
from services import fixtures_dir

from deltaextras.core.dv import (
    VectorFileWriter,
    bitmap_from_positions,
    build_descriptors,
    decode_uuid,
    encode_uuid,
    file_key,
    inline_descriptor,
    keep_mask,
    parse_bitmap,
    read_deletion_vector,
    read_deletion_vectors,
    read_inline,
    serialize_bitmap,
    z85_decode,
    z85_encode,
)
from deltaextras.core.storage import TableStorage
from deltaextras.errors import CorruptDataError, UnsupportedFeatureError

GOLDEN_TABLE = "table-with-dv-small"
GOLDEN_UUID = uuid.UUID("61d16c75-6994-46b7-a15b-8b538852e50e")


def _golden() -> tuple[Path, dict, bytes]:
    root = fixtures_dir() / GOLDEN_TABLE
    commit = (root / "_delta_log" / "00000000000000000001.json").read_text().splitlines()
    add = next(json.loads(line)["add"] for line in commit if '"add"' in line)
    return root, add["deletionVector"], (root / f"deletion_vector_{GOLDEN_UUID}.bin").read_bytes()


def test_z85_reference_vector_and_uuid() -> None:
    assert z85_encode(bytes.fromhex("864FD26FB559F75B")) == "HelloWorld"
    assert z85_decode("HelloWorld") == bytes.fromhex("864FD26FB559F75B")
    _, descriptor, _ = _golden()
    assert decode_uuid(descriptor["pathOrInlineDv"]) == GOLDEN_UUID
    assert encode_uuid(GOLDEN_UUID) == descriptor["pathOrInlineDv"]


@settings(max_examples=200, deadline=None)
@given(st.binary(max_size=64))
def test_z85_round_trip_with_padding(data: bytes) -> None:
    text = z85_encode(data)
    assert len(text) == -(-len(data) // 4) * 5
    assert z85_decode(text, len(data)) == data


def test_z85_rejects_bad_text() -> None:
    with pytest.raises(CorruptDataError):
        z85_decode("Hell")
    with pytest.raises(CorruptDataError):
        z85_decode("Hell~")


def test_golden_vector_file_bytes() -> None:
    """The file we write for rows {0, 9} is the fixture's file, byte for byte, and so is the descriptor."""
    _, descriptor, golden = _golden()
    writer = VectorFileWriter(file_uuid=GOLDEN_UUID)
    assert writer.add(BitMap([0, 9])).to_json_body() == descriptor
    assert writer.payload() == golden
    assert writer.key == f"deletion_vector_{GOLDEN_UUID}.bin"


def test_golden_vector_reads_back() -> None:
    root, descriptor, _ = _golden()
    assert file_key(descriptor) == f"deletion_vector_{GOLDEN_UUID}.bin"
    assert list(read_deletion_vector(TableStorage(root), descriptor)) == [0, 9]


def test_bitmap_bytes_follow_the_format() -> None:
    data = serialize_bitmap(BitMap([0, 9]))
    magic, buckets, key = struct.unpack_from("<IqI", data)
    assert (magic, buckets, key) == (1681511377, 1, 0)
    # the rest is the portable 32-bit serialization, which a 64-bit portable reader agrees with
    assert BitMap64.deserialize(data[4:]) == BitMap64([0, 9])
    assert data[16:] == BitMap([0, 9]).serialize()


@settings(max_examples=100, deadline=None)
@given(st.sets(st.integers(min_value=0, max_value=3_000_000), max_size=300))
def test_bitmap_round_trip(rows: set[int]) -> None:
    bm = BitMap(rows)
    assert parse_bitmap(serialize_bitmap(bm)) == bm


def test_bitmap_runs_are_compact() -> None:
    bm = BitMap(range(100_000, 900_000))
    assert len(serialize_bitmap(bm)) < 300  # 800,000 rows in runs, not 100 kB of bitmap
    assert parse_bitmap(serialize_bitmap(bm)) == bm


def test_parse_accepts_multi_bucket_layout_of_bucket_zero() -> None:
    """A writer may emit empty buckets or use a 64-bit library: bucket 0 still reads."""
    data = struct.pack("<I", 1681511377) + BitMap64([1, 2, 3]).serialize()
    assert parse_bitmap(data) == BitMap([1, 2, 3])
    beyond = struct.pack("<I", 1681511377) + BitMap64([1, 2**33]).serialize()
    with pytest.raises(UnsupportedFeatureError):
        parse_bitmap(beyond)


def test_parse_rejects_bad_magic() -> None:
    with pytest.raises(CorruptDataError):
        parse_bitmap(b"\x00" * 20)


def test_protocol_inline_example() -> None:
    """PROTOCOL.md "JSON Example 3 — Inline" (the older native layout) decodes to its documented rows."""
    text = "wi5b=000010000siXQKl0rr91000f55c8Xg0@@D72lkbi5=-{L"
    d = {"storageType": "i", "pathOrInlineDv": text, "sizeInBytes": 40, "cardinality": 6}
    assert list(read_inline(d)) == [3, 4, 7, 11, 18, 29]
    assert read_deletion_vectors(TableStorage(fixtures_dir() / GOLDEN_TABLE), [d])[0] == BitMap([3, 4, 7, 11, 18, 29])


def test_inline_round_trip_unaligned() -> None:
    d = inline_descriptor(BitMap([1])).to_json_body()
    assert d["sizeInBytes"] % 4 != 0 and "offset" not in d
    assert list(read_inline(d)) == [1]


def test_several_vectors_in_one_file(tmp_path: Path) -> None:
    storage = TableStorage(tmp_path)
    writer = VectorFileWriter(prefix="ab")
    vectors = [BitMap([0, 9]), BitMap(range(0, 50_000, 3)), BitMap([7])]
    descriptors = [writer.add(v).to_json_body() for v in vectors]
    writer.write(storage)
    assert (tmp_path / "ab" / f"deletion_vector_{writer.file_uuid}.bin").exists()
    assert descriptors[0]["offset"] == 1
    for a, b in itertools.pairwise(descriptors):
        assert b["offset"] == a["offset"] + 4 + a["sizeInBytes"] + 4
    assert read_deletion_vectors(storage, [descriptors[2], None, descriptors[0], descriptors[1]]) == [
        vectors[2],
        BitMap(),
        vectors[0],
        vectors[1],
    ]
    # each vector's CRC-32 (big endian) follows its bytes
    blob = writer.payload()
    d = descriptors[1]
    data = blob[d["offset"] + 4 : d["offset"] + 4 + d["sizeInBytes"]]
    assert struct.unpack_from(">I", blob, d["offset"] + 4 + d["sizeInBytes"])[0] == zlib.crc32(data)


def test_damaged_vectors_are_refused(tmp_path: Path) -> None:
    storage = TableStorage(tmp_path)
    writer = VectorFileWriter()
    d = writer.add(BitMap([1, 2, 3])).to_json_body()
    blob = bytearray(writer.payload())
    blob[20] ^= 0xFF
    storage.put(writer.key, bytes(blob))
    with pytest.raises(CorruptDataError, match="CRC"):
        read_deletion_vector(storage, d)
    storage.put(writer.key, writer.payload())
    with pytest.raises(CorruptDataError, match="holds 3 rows"):
        read_deletion_vector(storage, {**d, "cardinality": 4})
    with pytest.raises(CorruptDataError, match="bytes"):
        read_deletion_vector(storage, {**d, "sizeInBytes": d["sizeInBytes"] + 1})
    with pytest.raises(CorruptDataError, match="missing"):
        read_deletion_vector(storage, {**d, "pathOrInlineDv": encode_uuid(uuid.uuid4())})


def test_build_descriptors_inline_threshold() -> None:
    small, large = BitMap([5]), BitMap(range(0, 40_000, 2))
    ds, writer = build_descriptors([small, large, small], inline_max_bytes=64)
    assert [d.storage_type for d in ds] == ["i", "u", "i"]
    assert writer is not None and writer.count == 1
    ds, writer = build_descriptors([small], inline_max_bytes=0)
    assert ds[0].storage_type == "u" and writer is not None


def test_masks_and_positions() -> None:
    bm = bitmap_from_positions(np.array([9, 0, 4], dtype=np.int64))
    assert list(bm) == [0, 4, 9]
    assert keep_mask(bm, 10).sum() == 7
    assert not keep_mask(bm, 10)[9]


def test_vector_file_that_already_landed_is_accepted(tmp_path: Path) -> None:
    """A retried put answers "already exists" when its first try landed: the same bytes are ours."""
    writer = VectorFileWriter()
    writer.add(BitMap([1, 2]))
    TableStorage(tmp_path).put_if_absent(writer.key, writer.payload())  # the first try, landed
    writer.write(TableStorage(tmp_path))
    other = VectorFileWriter(file_uuid=writer.file_uuid)
    other.add(BitMap([3]))
    with pytest.raises(CorruptDataError, match="already exists"):
        other.write(TableStorage(tmp_path))
