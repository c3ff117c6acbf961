"""A/B of the headline workloads: this working tree against an older commit, in alternating whole processes.

``python bench/ab.py --ref REF`` checks REF out into a temporary git worktree (removed at the end, on
Ctrl-C too) and runs each workload for the working tree (the checkout this script lives in, uncommitted
changes included) and for REF, one fresh child process per run, the two sides alternating and the side
that goes first switching every round (``--rounds`` pairs per workload, default 9, after ``--warmup``
untimed pairs, default 1). Each child imports ``deltaextras`` from its own checkout (a
temporary folder holding a ``deltaextras`` link to the checkout's ``shared/``, first on ``PYTHONPATH``)
and reports the files it imported, which are checked. Every run of a workload that writes starts on a
fresh copy of the table (data files hard-linked: nothing rewrites a data file in place; the log copied).

Workloads (``--only``; the tables are built once into ``--cache`` and reused):

* ``w2``: ``rorder`` of rorder_bench's x1 partition (one ``node_id_range`` partition, 150 nodes,
  3,043,200 rows, 289 files), ``sort_by="utc_time"``, one worker;
* ``w2-clustered``: the same files as clustered_bench's table ``CLUSTER BY (node_id)``, no partitions;
* ``w3``: the x10 partition (30,432,000 rows, 289 files); long, so only with ``--w3`` or ``--only w3``;
* ``delete``: delete_bench's one-row delete (``id = 5000001`` out of 10 M rows with 20 float channels,
  one ~1.8 GB file, deletion vectors enabled);
* ``plan``: ``plan_messages`` of plan_bench's 300,000-file table (300 partitions of 1,000 files, 250
  commits, checkpoints); it only reads, so every run reads the cached table;
* ``import``: ``import deltaextras`` plus a first ``rorder`` of a 900-row, three-file partition.

Per run: wall time of the whole process, its CPU seconds (user + system, ``RUSAGE_CHILDREN``), its
peak RSS (kernel high-water mark through GNU ``time``, see ``_measure.py``) and the seconds of the call
inside the process. Per pair: working ÷ REF of each; per workload: the median of the pair ratios and
their range. The rewrite workloads' output is checked against the input's content digest on both sides.

Exit status: 0 when every gated median (``--gate``, default all four) is at most ``1 + --tolerance``
(default 0.05); 1 when one is worse; 2 when a workload fails on the working tree. A workload REF
cannot run (older API, an error) reads ``n/a on REF`` in its row and does not fail the run.

Usage::

    python bench/ab.py --ref main                 # all but w3, 9 rounds
    python bench/ab.py --ref d354a73 --rounds 9 --w3
    python bench/ab.py --ref HEAD --quick --only import,w2
"""

from __future__ import annotations

import argparse
import json
import os
import re
import resource
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
CHILD = HERE / "_ab_child.py"
sys.path.insert(0, str(HERE))

import _measure  # noqa: E402
import _workload  # noqa: E402

WORKLOADS = ("w2", "w2-clustered", "delete", "plan", "import", "w3")  # the order they run in
DEFAULT_WORKLOADS = ("w2", "w2-clustered", "delete", "plan", "import")
MEASURES = ("wall", "cpu", "rss", "call")
LABELS = {"wall": "wall", "cpu": "CPU", "rss": "peak RSS", "call": "call"}
WORKING, REF = "working", "ref"
MISSING_API = 3  # _ab_child.MISSING
TINY = _workload.Workload("ab-tiny", history_steps=4, append_files=2, steps_per_append=1, seed=0)


# --------------------------------------------------------------------------------------------- the two sides
@dataclass(frozen=True)
class Side:
    """One checkout: its name, the ``shared/`` folder it imports, and the PYTHONPATH folder that maps it."""

    name: str
    shared: Path
    path_dir: Path

    def env(self) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONSTARTUP", "PYTHONHOME")}
        env["PYTHONPATH"] = str(self.path_dir)
        return env


def _git(*args: str, cwd: Path = REPO) -> str:
    done = subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(f"git {' '.join(args)} in {cwd} failed: {done.stderr.strip()}")
    return done.stdout.strip()


def _side(name: str, checkout: Path, tmp: Path) -> Side:
    shared = checkout / "shared"
    if not (shared / "__init__.py").is_file():
        raise SystemExit(f"{checkout} has no shared/__init__.py: not a checkout of this project")
    path_dir = tmp / f"path-{name}"
    path_dir.mkdir()
    (path_dir / "deltaextras").symlink_to(shared.resolve(), target_is_directory=True)
    # byte-compile up front, so neither side's first timed run pays for it
    subprocess.run([sys.executable, "-m", "compileall", "-q", str(path_dir / "deltaextras")], check=True)
    return Side(name, shared.resolve(), path_dir)


@contextmanager
def sides(ref: str) -> Iterator[tuple[Side, Side, str]]:
    """The working tree and REF checked out into a temporary worktree; the worktree removed afterwards."""
    commit = _git("rev-parse", "--verify", f"{ref}^{{commit}}")
    tmp = Path(tempfile.mkdtemp(prefix="ab-"))
    tree = tmp / "ref"
    try:
        _git("worktree", "add", "--detach", str(tree), commit)
        yield _side(WORKING, REPO, tmp), _side(REF, tree, tmp), commit
    finally:
        removed = subprocess.run(["git", "worktree", "remove", "--force", str(tree)], cwd=REPO, capture_output=True)
        shutil.rmtree(tmp, ignore_errors=True)
        if removed.returncode != 0:  # interrupted half-way through the add: drop what git registered
            subprocess.run(["git", "worktree", "prune"], cwd=REPO, capture_output=True)


def describe_working() -> str:
    """``<short hash>`` of the working tree's HEAD, and whether its ``shared/`` has uncommitted changes."""
    head = _git("rev-parse", "--short", "HEAD")
    dirty = _git("status", "--porcelain", "--", "shared")
    return f"{head}{' + uncommitted changes to shared/' if dirty else ''}"


# --------------------------------------------------------------------------------------------- workloads
@dataclass
class Workload:
    """One workload: what the child runs (``kind`` and ``args``) on which table, and how a run is checked."""

    name: str
    what: str
    kind: str
    source: Path
    args: tuple[str, ...] = ()
    fresh_copy: bool = True
    check: Callable[[Path, dict[str, Any]], str | None] | None = None


def linked_copy(source: Path, into: Path) -> Path:
    """A fresh copy of a table: data files hard-linked, the log (and anything else small) copied."""
    shutil.copytree(source, into, copy_function=os.link, ignore=shutil.ignore_patterns("_delta_log"))
    shutil.copytree(source / "_delta_log", into / "_delta_log")
    return into


def _rewrite_check(expected: _measure.Digest) -> Callable[[Path, dict[str, Any]], str | None]:
    def check(table: Path, out: dict[str, Any]) -> str | None:
        got = _measure.delta_digest(table, _workload.DATA_COLUMNS)
        return None if got == expected else f"content changed: {got} != {expected}"

    return check


def _report_check(key: str, want: int) -> Callable[[Path, dict[str, Any]], str | None]:
    def check(table: Path, out: dict[str, Any]) -> str | None:
        return None if out.get(key) == want else f"{key} {out.get(key)}, expected {want}"

    return check


def _rewrite(name: str, what: str, source: Path) -> Workload:
    digest = _measure.delta_digest(source, _workload.DATA_COLUMNS)
    return Workload(name, what, "rorder", source, check=_rewrite_check(digest))


def _built(cache: Path, name: str, shape: dict[str, Any], build: Callable[[Path], None]) -> Path:
    """``cache/name``, built by ``build`` unless a marker says it holds ``shape`` already."""
    table, marker = cache / name, cache / f"{name}.json"
    if marker.exists() and json.loads(marker.read_text()) == shape:
        return table
    shutil.rmtree(table, ignore_errors=True)
    started = time.perf_counter()
    print(f"  building {name} ...", flush=True)
    build(table)
    marker.write_text(json.dumps(shape))
    print(f"  built {name} in {time.perf_counter() - started:.0f} s", flush=True)
    return table


def prepare(name: str, cache: Path, quick: bool) -> Workload:
    """Build (or find in the cache) the table of workload ``name``."""
    if name in ("w2", "w3"):
        w = _workload.workload_for(1 if name == "w2" else 10, 0, quick=quick)
        return _rewrite(name, f"rorder, {w.rows:,} rows in {w.files} files", _workload.build(w, cache))
    if name == "w2-clustered":
        import clustered_bench

        w = _workload.workload_for(1, 0, quick=quick)
        partitioned = _workload.build(w, cache)
        shape = {"from": w.name, "format": 1}
        table = _built(cache, f"ab-clustered-{w.name}", shape, lambda t: clustered_bench.clustered_copy(partitioned, t))
        return _rewrite(name, f"rorder, clustered, {w.rows:,} rows in {w.files} files", table)
    if name == "delete":
        rows, channels = (200_000, 2) if quick else (10_000_000, 20)
        shape = {"rows": rows, "channels": channels, "format": 1}

        def make(table: Path) -> None:
            cmd = [sys.executable, str(HERE / "delete_bench.py"), "--child-make", str(table), str(rows), "1"]
            subprocess.run([*cmd, str(channels)], check=True)

        table = _built(cache, f"ab-delete-{rows}x{channels}", shape, make)
        return Workload(
            name,
            f"delete 1 of {rows:,} rows ({channels} channels, one file)",
            "delete",
            table,
            args=(f"id = {rows // 2 + 1}",),
            check=_report_check("rows_deleted", 1),
        )
    if name == "plan":
        import plan_bench

        partitions = 10 if quick else 300
        table = plan_bench.ensure_scale_table(partitions, 1000, cache)
        return Workload(
            name,
            f"plan_messages, {partitions * 1000:,} live files",
            "plan",
            table,
            fresh_copy=False,
            check=_report_check("messages", partitions),
        )
    if name == "import":
        table = _workload.build(TINY, cache)
        wl = _rewrite(name, f"import + first rorder, {TINY.rows} rows in {TINY.files} files", table)
        wl.kind = "import"
        return wl
    raise SystemExit(f"unknown workload {name}; known: {', '.join(WORKLOADS)}")


# --------------------------------------------------------------------------------------------- runs
@dataclass
class Run:
    """One child process: its measures, or why it failed."""

    side: str
    wall: float = 0.0
    cpu: float = 0.0
    rss: float = 0.0  # bytes
    call: float = 0.0
    error: str | None = None
    missing_api: bool = False
    out: dict[str, Any] = field(default_factory=dict)


def _origin_error(side: Side, out: dict[str, Any]) -> str | None:
    """Why the child's imports did not come from ``side``'s checkout, or None when they did."""
    for key in ("package", "module"):
        got = Path(out.get(key) or "/nonexistent").resolve()
        if side.shared not in got.parents:
            return f"imported deltaextras {key} from {out.get(key)}, not from {side.shared}"
    return None


def _short(text: str, limit: int = 160) -> str:
    """The first sentence of an error line, at most ``limit`` characters."""
    first = re.sub(r"^[\w.]+\.(\w+Error)\b", r"\1", text).split("; ")[0]
    return first if len(first) <= limit else first[: limit - 1] + "…"


def run_once(side: Side, wl: Workload, runs_dir: Path, timeout: float) -> Run:
    """One measured child of ``side`` on a fresh copy of the workload's table, its output checked."""
    table = linked_copy(wl.source, runs_dir / f"{wl.name}-{side.name}") if wl.fresh_copy else wl.source
    try:
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        proc = _measure.run_measured(
            [sys.executable, str(CHILD), wl.kind, str(table), *wl.args],
            cwd=str(runs_dir),
            env=side.env(),
            timeout=timeout,
        )
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        run = Run(side.name, wall=proc.wall_s, rss=proc.peak_rss_bytes)
        run.cpu = after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime
        if not proc.ok:
            run.missing_api = proc.returncode == MISSING_API
            lines = proc.stderr_tail.strip().splitlines() or [f"exit status {proc.returncode}"]
            run.error = _short(lines[-1])
            return run
        run.out = json.loads(proc.stdout_tail.strip().splitlines()[-1])
        run.call = float(run.out["call_s"])
        wrong_origin = _origin_error(side, run.out)
        if wrong_origin:
            raise SystemExit(f"{wl.name} on {side.name}: {wrong_origin}")
        if wl.check is not None:
            run.error = wl.check(table, run.out)
        return run
    finally:
        if wl.fresh_copy:
            shutil.rmtree(table, ignore_errors=True)


@dataclass
class Result:
    """The pairs of one workload, or why it stopped."""

    workload: Workload
    pairs: list[dict[str, Run]] = field(default_factory=list)
    ref_error: str | None = None
    working_error: str | None = None

    def ratios(self, measure: str) -> list[float]:
        return [
            getattr(p[WORKING], measure) / getattr(p[REF], measure) for p in self.pairs if getattr(p[REF], measure) > 0
        ]

    def median(self, side: str, measure: str) -> float:
        return statistics.median(getattr(p[side], measure) for p in self.pairs)


def _x(working: float, ref: float) -> str:
    return f"{working / ref:.2f}x" if ref > 0 else "-"


def run_workload(
    wl: Workload, working: Side, ref: Side, rounds: int, runs_dir: Path, *, warmup: int = 0, timeout: float = 3600.0
) -> Result:
    """``warmup`` untimed pairs, then ``rounds`` pairs, the side that goes first switching every round; stops at
    the first failure."""
    res = Result(wl)
    for rnd in range(-warmup, rounds):
        order = (working, ref) if rnd % 2 == 0 else (ref, working)
        pair: dict[str, Run] = {}
        for side in order:
            run = run_once(side, wl, runs_dir, timeout)
            if run.error:
                reason = ("lacks the API: " if run.missing_api else "") + run.error
                if side.name == REF:
                    res.ref_error = reason
                else:
                    res.working_error = reason
                return res
            pair[side.name] = run
        if rnd < 0:
            continue
        res.pairs.append(pair)
        w, r = pair[WORKING], pair[REF]
        print(
            f"  {wl.name} round {rnd + 1}/{rounds} (load {os.getloadavg()[0]:.1f}, {order[0].name} first), "
            "working / REF: "
            f"wall {w.wall:.2f} / {r.wall:.2f} s = {_x(w.wall, r.wall)}, CPU {w.cpu:.2f} / {r.cpu:.2f} s = "
            f"{_x(w.cpu, r.cpu)}, peak RSS {w.rss / 2**20:.0f} / {r.rss / 2**20:.0f} MB = {_x(w.rss, r.rss)}, "
            f"call {w.call:.2f} / {r.call:.2f} s = {_x(w.call, r.call)}",
            flush=True,
        )
    return res


# --------------------------------------------------------------------------------------------- verdict
def worse(ratios: Sequence[float], tolerance: float) -> bool:
    """Whether the median of the working ÷ REF ratios is worse than REF by more than ``tolerance``.

    Example:
        >>> worse([1.02, 1.07, 1.04], 0.05), worse([1.02, 1.07, 1.06], 0.05), worse([], 0.05)
        (False, True, False)
    """
    return bool(ratios) and statistics.median(ratios) > 1.0 + tolerance


def verdict(res: Result, gate: Sequence[str], tolerance: float) -> tuple[str, int]:
    """The verdict column of a workload's row and its exit status (0 ok, 1 worse than REF, 2 failed)."""
    if res.working_error:
        return f"FAILED on the working tree: {res.working_error}", 2
    if res.ref_error:
        return f"n/a on REF: {res.ref_error}", 0
    bad = [m for m in gate if worse(res.ratios(m), tolerance)]
    if bad:
        return "WORSE: " + ", ".join(f"{LABELS[m]} {statistics.median(res.ratios(m)):.2f}x" for m in bad), 1
    return "ok", 0


def _cell(ratios: Sequence[float]) -> str:
    if not ratios:
        return "–"
    return f"{statistics.median(ratios):.2f} ({min(ratios):.2f}–{max(ratios):.2f})"


def _abs(res: Result, side: str) -> str:
    if not res.pairs:
        return "–"
    return (
        f"{res.median(side, 'wall'):.2f} s / {res.median(side, 'cpu'):.2f} s / "
        f"{res.median(side, 'rss') / 2**20:.0f} MB / {res.median(side, 'call'):.2f} s"
    )


def table(results: Sequence[Result], gate: Sequence[str], tolerance: float) -> tuple[str, int]:
    """The Markdown table of every workload and the run's exit status."""
    head = ["workload", "pairs", *(f"{LABELS[m]} ×" for m in MEASURES), "working: wall / CPU / RSS / call"]
    head += ["REF: wall / CPU / RSS / call", "verdict"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    status = 0
    for res in results:
        text, code = verdict(res, gate, tolerance)
        status = max(status, code)
        cells = [res.workload.name, str(len(res.pairs)), *(_cell(res.ratios(m)) for m in MEASURES)]
        cells += [_abs(res, WORKING), _abs(res, REF), text]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines), status


# --------------------------------------------------------------------------------------------- main
def parse(argv: Sequence[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--ref", required=True, help="the commit to compare with (a hash, a branch, a tag)")
    p.add_argument("--rounds", type=int, help="pairs per workload (default 9; 1 with --quick)")
    p.add_argument("--only", help=f"comma-separated workloads out of {','.join(WORKLOADS)}")
    p.add_argument("--warmup", type=int, help="untimed pairs before each workload's rounds (default 1; 0 with --quick)")
    p.add_argument("--w3", action="store_true", help="also run w3 (x10, long)")
    p.add_argument("--quick", action="store_true", help="small workloads and one round: a smoke test")
    p.add_argument("--tolerance", type=float, default=0.05, help="allowed median slowdown (default 0.05: 5 %%)")
    p.add_argument(
        "--gate", default=",".join(MEASURES), help=f"measures that set the exit status ({','.join(MEASURES)})"
    )
    p.add_argument("--cache", default=str(HERE / ".work"), help="where workload tables are built and kept")
    p.add_argument("--timeout", type=float, default=3600.0, help="seconds before a run is killed")
    p.add_argument("--json", help="also write every run's figures here")
    args = p.parse_args(argv)
    if args.rounds is None:
        args.rounds = 1 if args.quick else 9
    if args.warmup is None:
        args.warmup = 0 if args.quick else 1
    chosen = args.only.split(",") if args.only else [*DEFAULT_WORKLOADS, *(["w3"] if args.w3 else [])]
    unknown = [n for n in chosen + args.gate.split(",") if n not in WORKLOADS + MEASURES]
    if unknown:
        p.error(f"unknown workload or measure: {', '.join(unknown)}")
    args.workloads = [n for n in WORKLOADS if n in chosen]
    args.gate = [m for m in MEASURES if m in args.gate.split(",")]
    return args


def _dump(path: str, header: dict[str, Any], results: Sequence[Result]) -> None:
    rows = []
    for res in results:
        pairs = [{s: {**vars(r), "out": r.out} for s, r in p.items()} for p in res.pairs]
        ratios = {m: res.ratios(m) for m in MEASURES}
        rows.append({"workload": res.workload.name, "what": res.workload.what, "pairs": pairs, "ratios": ratios})
        rows[-1].update(ref_error=res.ref_error, working_error=res.working_error)
    Path(path).write_text(json.dumps({**header, "workloads": rows}, indent=1))


def main(argv: Sequence[str] | None = None) -> int:
    args = parse(argv)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # the worktree is removed on SIGTERM too
    cache = Path(args.cache).resolve()
    cache.mkdir(parents=True, exist_ok=True)
    results: list[Result] = []
    with sides(args.ref) as (working, ref, commit):
        header = {
            "working": f"{REPO} ({describe_working()})",
            "ref": f"{args.ref} ({commit[:12]})",
            "rounds": args.rounds,
            "tolerance": args.tolerance,
            "load_start": os.getloadavg()[0],
            "cpus": os.cpu_count(),
        }
        print(
            f"working tree {header['working']} against {header['ref']}; {args.rounds} round(s); "
            f"{os.cpu_count()} CPUs, load average {header['load_start']:.1f}",
            flush=True,
        )
        runs_dir = Path(tempfile.mkdtemp(prefix="ab-runs-", dir=cache))  # beside the tables: hard links work
        try:
            tiny = prepare("import", cache, args.quick)
            for side in (working, ref):  # untimed: warms the page cache and checks where each side imports from
                warm = run_once(side, tiny, runs_dir, args.timeout)
                origin = Path(warm.out.get("package", "-")).resolve() if not warm.error else f"failed: {warm.error}"
                print(f"  {side.name} imports deltaextras from {origin}", flush=True)
            for name in args.workloads:
                wl = prepare(name, cache, args.quick)
                print(f"{name}: {wl.what}", flush=True)
                results.append(
                    run_workload(wl, working, ref, args.rounds, runs_dir, warmup=args.warmup, timeout=args.timeout)
                )
        finally:
            shutil.rmtree(runs_dir, ignore_errors=True)
    text, status = table(results, args.gate, args.tolerance)
    header["load_end"] = os.getloadavg()[0]
    print()
    print(
        f"working tree ÷ {header['ref']}, median (min–max) of {args.rounds} alternating pair(s) of whole processes; "
        f"load average {header['load_start']:.1f} at the start, {header['load_end']:.1f} at the end"
    )
    print(text)
    gated = ", ".join(LABELS[m] for m in args.gate)
    print(f"gate: median ≤ {1 + args.tolerance:.2f}x REF for {gated}; exit status {status}")
    if args.json:
        _dump(args.json, header, results)
    return status


if __name__ == "__main__":
    raise SystemExit(main())
