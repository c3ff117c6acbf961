"""What a Parquet footer of rorder's layout is made of: the same row groups written again with writer
variants (statistics on fewer columns, none, no stored Arrow schema), footer bytes per variant.

Reads the rorder layout that ``query_bench.py`` built (``--table`` to name another); needs no emulator.

Usage::

    python bench/footer_sizes.py                      # bench/.work/query/x1-v2/rorder
    python bench/footer_sizes.py --table PATH --by node_id
"""

from __future__ import annotations

import argparse
import io
from pathlib import Path

import pyarrow.parquet as pq
from deltalake import DeltaTable

from deltaextras.ops.rorder.rewrite.layout import writer_properties

HERE = Path(__file__).resolve().parent


def footer_bytes(groups: list, schema: object, props: dict) -> tuple[int, int]:
    """(footer bytes, file bytes) of ``groups`` written as one row group each with ``props``."""
    buf = io.BytesIO()
    with pq.ParquetWriter(buf, schema, **props) as w:
        for g in groups:
            w.write_table(g)
    data = buf.getvalue()
    return pq.ParquetFile(io.BytesIO(data)).metadata.serialized_size, len(data)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--table", default=str(HERE / ".work" / "query" / "x1-v2" / "rorder"))
    ap.add_argument("--by", default="node_id")
    args = ap.parse_args(argv)
    path = DeltaTable(args.table).file_uris()[0].removeprefix("file://")
    pf = pq.ParquetFile(path)
    md = pf.metadata
    groups = [pf.read_row_group(i) for i in range(md.num_row_groups)]
    schema = groups[0].schema
    base = writer_properties(schema, groups[0], by=args.by)
    keep = [args.by, *[c for c in schema.names if c != args.by][:1]]
    print(f"{path}: {md.num_row_groups} row groups x {md.num_columns} columns, footer {md.serialized_size:,} B")
    for label, over in [
        ("as rorder writes it", {}),
        (f"statistics on {', '.join(keep)} only", {"write_statistics": keep}),
        ("no ARROW:schema", {"store_schema": False}),
        ("no statistics at all", {"write_statistics": False}),
    ]:
        size, total = footer_bytes(groups, schema, {**base, **over})
        print(
            f"  {label:<38} footer {size / 1024:6.1f} KiB ({size / md.num_row_groups:4.0f} B per row group), "
            f"file {total / 2**20:.2f} MiB"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
