"""How small the rorder workload's float column gets under each Parquet codec and encoding.

The ×1 partition's ``data_values`` (3.04 M doubles of normal noise) is written alone, once per setting,
to memory; the sizes say what the output-size target can and cannot reach with the encodings Apache
Spark's vectorized reader accepts (plain, dictionary), against ``BYTE_STREAM_SPLIT`` which it refuses.
A benchmark aid, not a test.

Usage::

    python bench/float_codecs.py            # about ten seconds
    python bench/float_codecs.py --brotli   # and brotli 11 (a minute; not a Spark default codec)
"""

from __future__ import annotations

import argparse
import io
import time
from pathlib import Path

import _workload
import pyarrow as pa
import pyarrow.parquet as pq

HERE = Path(__file__).resolve().parent
MB = 1 << 20

SETTINGS: list[tuple[str, str, int | None]] = [
    ("PLAIN", "zstd", None),
    ("PLAIN", "zstd", 3),
    ("PLAIN", "zstd", 9),
    ("PLAIN", "zstd", 19),
    ("PLAIN", "gzip", 9),
    ("PLAIN", "snappy", None),
    ("BYTE_STREAM_SPLIT", "zstd", None),
]


def main() -> None:
    """Print one line per setting: bytes and seconds."""
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--brotli", action="store_true")
    p.add_argument("--workdir", type=Path, default=HERE / ".work")
    args = p.parse_args()
    source = _workload.build(_workload.workload_for(1, 0), args.workdir / "tables")
    files = sorted((source / f"{_workload.PARTITION_COLUMN}={_workload.PARTITION_VALUE}").glob("*.parquet"))
    column = pa.concat_tables([pq.read_table(f, columns=["data_values"]) for f in files]).combine_chunks()
    print(f"data_values: {column.num_rows:,} doubles, {column.nbytes / MB:.2f} MiB in Arrow")
    settings = SETTINGS + ([("PLAIN", "brotli", 11)] if args.brotli else [])
    for encoding, codec, level in settings:
        buf = io.BytesIO()
        started = time.perf_counter()
        pq.write_table(
            column,
            buf,
            compression=codec,
            compression_level=level,
            use_dictionary=False,
            column_encoding={"data_values": encoding},
        )
        seconds = time.perf_counter() - started
        shown = f"{codec} {level if level is not None else 'default'}"
        print(f"  {encoding:18s} {shown:14s} {len(buf.getvalue()) / MB:6.2f} MiB  {seconds:.2f} s")


if __name__ == "__main__":
    main()
