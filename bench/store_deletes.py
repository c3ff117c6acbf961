"""Many deletes on a full Azurite container, with a reader beside them: what vacuum does to the store.

Fills one container of a private Azurite with ``--blobs`` small objects, then deletes ``--delete`` of them
through ``TableStorage.delete_many`` (vacuum's path) while another client reads one small object every
second, the way workers read ``_delta_log/_last_checkpoint`` meanwhile. Prints the seconds the deletes
took, whether they all landed, and the reader's median and worst latency and errors. Azurite's cost per
delete grows with the blobs it holds, so this is where sending too much at once shows.

    python bench/store_deletes.py --blobs 30000 --delete 5000     # about 10 minutes
    python bench/store_deletes.py --blobs 3000 --delete 2000      # a minute
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "support"))

from services import Azurite

from deltaextras.core.storage import TableStorage


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--blobs", type=int, default=30_000, help="objects in the container before the deletes")
    p.add_argument("--delete", type=int, default=5_000, help="how many of them to delete")
    a = p.parse_args()
    scratch = Path(tempfile.mkdtemp(prefix="store-deletes-"))
    az = Azurite.start(scratch)
    try:
        az.create_container("deletes")
        options = dict(az.storage_options)
        storage = TableStorage("az://deletes/t", options)
        keys = [f"p={i % 150}/part-{i:06d}.parquet" for i in range(a.blobs)]
        started = time.perf_counter()
        with ThreadPoolExecutor(16) as pool:
            list(pool.map(lambda key: storage.put(key, b"x" * 500), keys))
        storage.put("_delta_log/_last_checkpoint", b"{}")
        print(f"filled {a.blobs:,} objects in {time.perf_counter() - started:.1f} s", flush=True)

        latencies: list[float] = []
        errors: list[str] = []
        stop = threading.Event()

        def reader() -> None:
            other = TableStorage("az://deletes/t", options)
            while not stop.is_set():
                began = time.perf_counter()
                try:
                    other.read("_delta_log/_last_checkpoint")
                    latencies.append(time.perf_counter() - began)
                except Exception as exc:  # a figure, not a failure of the bench
                    errors.append(" ".join(str(exc).split())[:160])
                stop.wait(1.0)

        thread = threading.Thread(target=reader, daemon=True)
        thread.start()
        started = time.perf_counter()
        outcome = "all deleted"
        try:
            storage.delete_many(keys[: a.delete])
        except Exception as exc:
            outcome = "FAILED: " + " ".join(str(exc).split())[:200]
        took = time.perf_counter() - started
        stop.set()
        thread.join()
        left = sum(1 for key, _ in storage.list("") if key.startswith("p="))
        expected = a.blobs - a.delete
        print(f"deleted {a.delete:,} of {a.blobs:,} in {took:.1f} s: {outcome}; {left:,} left ({expected:,} expected)")
        if latencies:
            print(
                f"reader: {len(latencies)} reads, median {statistics.median(latencies):.2f} s, "
                f"worst {max(latencies):.2f} s, {len(errors)} errors"
            )
        else:
            print(f"reader: no read answered, {len(errors)} errors")
        return 0 if outcome == "all deleted" and left == expected else 1
    finally:
        az.stop()
        shutil.rmtree(scratch, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
