"""Fan-out at scale: N tiny units rewritten, then all released at once to commit, on Azurite and moto S3.

Each unit is one partition of two tiny files; ``rorder_single`` runs it on its own thread (as a queue
worker would), and a barrier in the ``after_rewrite`` hook releases every commit at the same moment, so
the commit phase is measured alone: from the release to the last unit's report. Two modes, side by
side in the same run and on tables built the same way:

* ``unit``: each unit races for the next log version alone (the per-unit commit);
* ``group``: each unit stages its commit and a committer elected among the waiting workers publishes
  many per version (:mod:`deltaextras.core.group_commit`).

Printed per backend, mode and N: units committed / failed, commit-phase seconds, log versions added,
and the ratio of the commit phase at the largest N to the smallest (linear growth: ratio <= N ratio).

Usage::

    python bench/fanout_bench.py [--quick] [--sizes 128,512,1024] [--backends azurite,s3]
                                 [--modes unit,group] [--unit-max 128] [--unit-cap 180] [--workdir DIR]

``--quick``: N = 16 and 64, Azurite only. ``--unit-max``: above this N, per-unit commits (their log
reads grow with N squared) run in a child process stopped ``--unit-cap`` seconds (default 180) after
the release; what finished by then is printed (committed / failed / unfinished).
"""

from __future__ import annotations

import argparse
import json
import logging
import shutil
import signal
import sys
import threading
import time
import uuid
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
sys.path.insert(0, str(REPO / "tests" / "support"))


BUILD_TIMEOUT = 600  # seconds a table build may take


def build_table(uri: str, options: dict[str, str], units: int) -> None:
    """``units`` partitions of two files each (three rows per file, ``k`` out of order)."""
    import pyarrow as pa
    from deltalake import write_deltalake

    for b in range(2):
        k = [u * 10 + (3 - j) for u in range(units) for j in range(3)]
        part = [u for u in range(units) for _ in range(3)]
        write_deltalake(
            uri,
            pa.table({"k": k, "k_range": part, "b": [b] * len(k)}),
            partition_by=["k_range"],
            mode="append",
            storage_options=options,
        )


def run(uri: str, options: dict[str, str], mode: str, progress: bool = False) -> dict[str, Any]:
    """Rewrite every unit on its own thread, release the commits together, measure the commit phase."""
    from deltalake import DeltaTable

    from deltaextras.ops.rorder.rorder import plan_messages, rorder_single

    messages = plan_messages(uri, storage_options=options)
    before = DeltaTable(uri, storage_options=options).version()
    barrier = threading.Barrier(len(messages))
    released: list[float] = []
    ends: list[float] = [0.0] * len(messages)
    results: list[Any] = [None] * len(messages)

    def release(_outputs: Any) -> None:
        if barrier.wait() == 0:
            released.append(time.monotonic())
            logging.getLogger("fanout").info("released")
            if progress:
                print(json.dumps({"released": True}), flush=True)

    def work(i: int, message: dict[str, Any]) -> None:
        try:
            results[i] = rorder_single(
                {**message, "commit": mode}, storage_options=options, hooks={"after_rewrite": release}
            )
        except Exception as exc:  # counted as a failure
            results[i] = exc
        ends[i] = time.monotonic()
        if progress and released:
            status = "failed" if isinstance(results[i], Exception) else getattr(results[i], "status", "?")
            print(json.dumps({"unit": i, "status": status, "at": round(ends[i] - released[0], 2)}), flush=True)

    threads = [threading.Thread(target=work, args=(i, m), daemon=True) for i, m in enumerate(messages)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    committed = sum(1 for r in results if getattr(r, "status", None) == "committed")
    failures = [f"{type(r).__name__}: {r}"[:200] for r in results if isinstance(r, Exception)]
    after = DeltaTable(uri, storage_options=options).version()
    return {
        "units": len(messages),
        "committed": committed,
        "failed": len(failures),
        "first_failure": failures[0] if failures else None,
        "commit_seconds": round(max(ends) - released[0], 2) if released else None,
        "versions_added": after - before,
    }


def build_isolated(root: str, options: dict[str, str], mode: str, units: int) -> str:
    """A fresh table of ``units`` partitions, built by a child process (the bench's own deltalake client
    never meets an emulator still busy with a stopped child's requests); a build that fails or hangs is
    tried once more under a new name. Returns the table's URI."""
    import subprocess

    for attempt in range(2):
        uri = f"{root}/{mode}-{units}-{uuid.uuid4().hex[:6]}"
        cmd = [sys.executable, __file__, "--build", json.dumps([uri, options, units])]
        try:
            subprocess.run(cmd, check=True, timeout=BUILD_TIMEOUT, capture_output=True)
            return uri
        except (subprocess.CalledProcessError, subprocess.TimeoutExpired) as exc:
            print(f"building {uri} failed ({type(exc).__name__}); {'trying again' if not attempt else 'giving up'}")
            time.sleep(5)
    raise SystemExit(f"could not build a table of {units} units at {root}")


def run_capped(uri: str, options: dict[str, str], mode: str, cap: float) -> dict[str, Any]:
    """``run`` in a child process stopped after ``cap`` seconds: what finished by then is reported
    (committed / failed / seconds), the rest as unfinished."""
    import subprocess

    from deltalake import DeltaTable

    before = DeltaTable(uri, storage_options=options).version()
    child = subprocess.Popen(
        [sys.executable, __file__, "--child", json.dumps([uri, options, mode])],
        stdout=subprocess.PIPE,
        text=True,
    )
    units: list[dict[str, Any]] = []
    final: dict[str, Any] | None = None
    timer = threading.Timer(cap, child.kill)  # started at the release, not while the child rewrites
    assert child.stdout is not None
    for line in child.stdout:
        try:
            body = json.loads(line)
        except ValueError:
            continue
        if body.get("released"):
            timer.start()
        elif "unit" in body:
            units.append(body)
        else:
            final = body
    child.wait()
    timer.cancel()
    if final is not None:
        return final
    total = int(uri.rsplit("-", 2)[-2])
    return {
        "units": total,
        "committed": sum(1 for u in units if u["status"] == "committed"),
        "failed": sum(1 for u in units if u["status"] == "failed"),
        "unfinished": total - len(units),
        "first_failure": None,
        "commit_seconds": f">{cap:g} (stopped)",
        "versions_added": DeltaTable(uri, storage_options=options).version() - before,
    }


def _or_na(value: Any) -> Any:
    return "n/a" if value is None else value


def services(backends: list[str], workdir: Path) -> dict[str, tuple[Any, str, dict[str, str]]]:
    from services import Azurite, MotoServer

    out: dict[str, tuple[Any, str, dict[str, str]]] = {}
    if "azurite" in backends:
        az = Azurite.start(workdir / "azurite")
        az.create_container("fanout")
        out["azurite"] = (az, "az://fanout", dict(az.storage_options))
    if "s3" in backends:
        s3 = MotoServer.start(workdir / "moto")
        s3.create_bucket("fanout")
        out["s3"] = (s3, "s3://fanout", dict(s3.storage_options))
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--sizes", default="128,512,1024")
    parser.add_argument("--backends", default="azurite,s3")
    parser.add_argument("--modes", default="unit,group")
    parser.add_argument("--unit-max", type=int, default=128)
    parser.add_argument("--unit-cap", type=float, default=180.0)
    parser.add_argument("--workdir", default=str(HERE / ".work" / "fanout"))
    parser.add_argument("--child", help=argparse.SUPPRESS)
    parser.add_argument("--build", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.build:
        uri, options, units = json.loads(args.build)
        build_table(uri, options, units)
        return
    if args.child:
        uri, options, mode = json.loads(args.child)
        print(json.dumps(run(uri, options, mode, progress=True)), flush=True)
        return
    sizes = [16, 64] if args.quick else [int(s) for s in args.sizes.split(",")]
    backends = ["azurite"] if args.quick else args.backends.split(",")
    modes = args.modes.split(",")
    workdir = Path(args.workdir)
    shutil.rmtree(workdir, ignore_errors=True)
    workdir.mkdir(parents=True)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # stop the emulators on the way out
    started = services(backends, workdir)
    rows: list[dict[str, Any]] = []
    try:
        for backend, (_svc, root, options) in started.items():
            # Group commits first: the capped per-unit runs end with a stopped child whose requests the
            # emulator may still be serving.
            for mode in sorted(modes, key=lambda m: m != "group"):
                for n in sizes:
                    uri = build_isolated(root, options, mode, n)
                    if mode == "unit" and n > args.unit_max:  # O(N^2) log reads: stopped after --unit-cap
                        row = {
                            "backend": backend,
                            "mode": mode,
                            "n": n,
                            **run_capped(uri, options, mode, args.unit_cap),
                        }
                    else:
                        row = {"backend": backend, "mode": mode, "n": n, **run(uri, options, mode)}
                    rows.append(row)
                    print(json.dumps(row), flush=True)
    finally:
        for svc, _root, _options in started.values():
            svc.stop()
    print()
    print("| backend | mode | N | committed | failed | unfinished | commit phase (s) | log versions added |")
    print("|---|---|---|---|---|---|---|---|")
    for r in rows:
        print(
            f"| {r['backend']} | {r['mode']} | {r['n']} | {r['committed']} | {r['failed']} | "
            f"{r.get('unfinished', 0)} | {r['commit_seconds']} | {_or_na(r['versions_added'])} |"
        )
    for backend in started:
        for mode in modes:
            mine = sorted(
                (
                    r
                    for r in rows
                    if r["backend"] == backend and r["mode"] == mode and isinstance(r["commit_seconds"], float)
                ),
                key=lambda r: r["n"],
            )
            if len(mine) >= 2 and mine[0]["commit_seconds"]:
                lo, hi = mine[0], mine[-1]
                print(
                    f"{backend} {mode}: commit phase at N={hi['n']} / N={lo['n']} = "
                    f"{hi['commit_seconds'] / lo['commit_seconds']:.2f} (N ratio {hi['n'] / lo['n']:g})"
                )


if __name__ == "__main__":
    main()
