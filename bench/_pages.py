"""Where the bytes of a Parquet file lie, so a fetched byte range can be named: footer, page index, or
data pages of a column chunk (walked page by page through the Thrift ``PageHeader``\\ s).

pyarrow exposes column-chunk offsets but not page locations; the page headers are read with a minimal
Thrift compact-protocol decoder (only what skipping a struct needs).

Example:
    >>> import io, pyarrow as pa, pyarrow.parquet as pq
    >>> buf = io.BytesIO()
    >>> pq.write_table(pa.table({"k": list(range(5000))}), buf, data_page_size=512, use_dictionary=False,
    ...                write_batch_size=100)
    >>> spans = file_spans(buf.getvalue())
    >>> len(spans.pages[(0, 0)]) > 1, spans.footer[1] == len(buf.getvalue())
    (True, True)
"""

from __future__ import annotations

import io
import struct
from dataclasses import dataclass, field

import pyarrow.parquet as pq


@dataclass
class FileSpans:
    """Byte spans of one file: ``pages[(row_group, column)]`` = ``[(start, end, is_dictionary)]``."""

    size: int
    footer: tuple[int, int]
    index: tuple[int, int]  # between the last column chunk and the footer: column and offset indexes
    pages: dict[tuple[int, int], list[tuple[int, int, bool]]] = field(default_factory=dict)


class _Reader:
    def __init__(self, data: bytes, pos: int) -> None:
        self.data, self.pos = data, pos

    def byte(self) -> int:
        b = self.data[self.pos]
        self.pos += 1
        return b

    def varint(self) -> int:
        shift = result = 0
        while True:
            b = self.byte()
            result |= (b & 0x7F) << shift
            if not b & 0x80:
                return result
            shift += 7

    def zigzag(self) -> int:
        n = self.varint()
        return (n >> 1) ^ -(n & 1)

    def skip(self, ttype: int) -> None:
        if ttype in (1, 2):
            return
        if ttype == 3:
            self.pos += 1
        elif ttype in (4, 5, 6):
            self.varint()
        elif ttype == 7:
            self.pos += 8
        elif ttype == 8:
            n = self.varint()
            self.pos += n
        elif ttype in (9, 10):
            head = self.byte()
            size, etype = head >> 4, head & 0x0F
            if size == 15:
                size = self.varint()
            for _ in range(size):
                self.skip(etype)
        elif ttype == 11:
            size = self.varint()
            if size:
                kv = self.byte()
                for _ in range(size):
                    self.skip(kv >> 4)
                    self.skip(kv & 0x0F)
        elif ttype == 12:
            self.struct(lambda fid, t: False)
        else:
            raise ValueError(f"unknown thrift compact type {ttype}")

    def struct(self, want: object) -> dict[int, int]:
        """Read a struct; integer fields whose id ``want(fid, type)`` accepts are returned."""
        out: dict[int, int] = {}
        last = 0
        while True:
            head = self.byte()
            if head == 0:
                return out
            delta, ttype = head >> 4, head & 0x0F
            fid = last + delta if delta else self.zigzag()
            last = fid
            if ttype in (5, 6) and want(fid, ttype):  # type: ignore[operator]
                out[fid] = self.zigzag()
            else:
                self.skip(ttype)


def _page_header(data: bytes, pos: int) -> tuple[int, int, int]:
    """(page type, compressed size, header length) of the page header at ``pos``."""
    r = _Reader(data, pos)
    fields = r.struct(lambda fid, t: fid in (1, 3))
    return fields[1], fields[3], r.pos - pos


def file_spans(data: bytes) -> FileSpans:
    """The footer, page-index and page spans of a whole Parquet file held in memory."""
    size = len(data)
    (footer_len,) = struct.unpack("<I", data[-8:-4])
    footer = (size - 8 - footer_len, size)
    meta = pq.ParquetFile(io.BytesIO(data)).metadata
    spans = FileSpans(size, footer, (0, footer[0]))
    chunks_end = 4
    for r in range(meta.num_row_groups):
        rg = meta.row_group(r)
        for c in range(rg.num_columns):
            col = rg.column(c)
            start = col.dictionary_page_offset if col.has_dictionary_page else col.data_page_offset
            end = start + col.total_compressed_size
            chunks_end = max(chunks_end, end)
            pages: list[tuple[int, int, bool]] = []
            pos = start
            while pos < end:
                ptype, compressed, header = _page_header(data, pos)
                pages.append((pos, pos + header + compressed, ptype == 2))  # 2 = DICTIONARY_PAGE
                pos += header + compressed
            spans.pages[(r, c)] = pages
    spans.index = (chunks_end, footer[0])
    return spans


def classify(spans: FileSpans, start: int, length: int) -> dict[str, int]:
    """Bytes of ``[start, start + length)`` that fall in the footer, the page index and column chunks."""
    end = start + length

    def overlap(a: int, b: int) -> int:
        return max(0, min(end, b) - max(start, a))

    footer = overlap(*spans.footer)
    index = overlap(*spans.index)
    return {"footer": footer, "index": index, "chunks": length - footer - index}


def data_pages_touched(spans: FileSpans, ranges: list[tuple[int, int]]) -> dict[tuple[int, int], int]:
    """Per column chunk touched by any ``(start, length)`` range: how many of its data pages overlap."""
    out: dict[tuple[int, int], int] = {}
    for key, pages in spans.pages.items():
        n = 0
        for a, b, is_dict in pages:
            if is_dict:
                continue
            if any(s < b and s + ln > a for s, ln in ranges):
                n += 1
        if n:
            out[key] = n
    return out
