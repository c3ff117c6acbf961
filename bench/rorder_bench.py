"""Benchmark ``rorder`` against a plain copy, delta-rs Z-order and the original deltaextras.

One script, one run: every figure is a ratio to baselines measured in the same run, on the same
machine, with the same workload. See ``bench/README.md`` for what is measured and how.

Usage::

    python bench/rorder_bench.py                   # x1 (5 paired rounds) and x10 (1 round)
    python bench/rorder_bench.py --quick           # small smoke run, a minute or two
    python bench/rorder_bench.py --scale 1 --repeat 3 --json out.json
    python bench/rorder_bench.py --quick --scale 10 --partitions 4 --workers 2 --contenders copy,ours,spawn
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import time
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

import _measure
import _workload

HERE = Path(__file__).resolve().parent
CONTENDERS = ("copy", "zorder", "original", "ours", "spawn")
DEFAULT_CONTENDERS = ("copy", "zorder", "original", "ours")
COPY_VARIANTS = tuple(f"{r}-{c}" for r in ("concat", "dataset") for c in ("snappy", "zstd"))
LABELS = {
    "copy": "copy floor (fastest plain copy)",
    "zorder": "delta-rs z-order",
    "original": "original deltaextra 0.0.3",
    "ours": "deltaextras rorder",
    "spawn": "rorder_single in a spawn pool",
}
BY = "node_id"
SORT_BY = "utc_time"
ORIGINAL_REQUIREMENTS = ["deltaextra==0.0.3", "deltalake==0.20.0", "pyarrow<18", "fsspec"]
MB = 1 << 20
RSS_CEILING_MB = 512.0

# Targets for deltaextras rorder (ours), checked on the medians of this run.
WALL_X_COPY_MAX = 1.0  # at scale 1
WALL_X_COPY_MAX_LARGE = 1.5  # at the larger scales
RSS_X_COPY_MAX = 1.0
RSS_X_SCALE1_MAX = 1.2
READ_AMP_MAX = 1.05
OUTPUT_X_ZORDER_MAX = 0.75
ARROW_X_BUDGET_MAX = 1.5  # text cases: Arrow's peak allocation against memory_budget
DUPLICATE_SHARE = 0.10
TEXT_BUDGET_MB = 16


@dataclass
class RunRecord:
    """One contender's run in one round."""

    contender: str
    round: int
    position: int
    ok: bool
    error: str | None = None
    wall_s: float | None = None
    peak_rss_bytes: int | None = None
    sampled_rss_bytes: int | None = None
    kernel_maxrss_bytes: int | None = None
    output_bytes: int | None = None
    output_files: int | None = None
    output_row_groups: int | None = None
    read_amp: float | None = None
    content_ok: bool | None = None
    variant: str | None = None  # the copy: which plain copy (reader-codec); for the floor, the fastest


@dataclass
class Summary:
    """Medians of one contender at one scale."""

    contender: str
    runs: int
    error: str | None = None
    wall_s: float | None = None
    wall_x_copy: float | None = None
    peak_rss_mb: float | None = None
    max_peak_rss_mb: float | None = None
    rss_x_copy: float | None = None
    read_amp: float | None = None
    output_mb: float | None = None
    output_x_zorder: float | None = None
    output_files: int | None = None
    output_row_groups: int | None = None
    content_ok: bool | None = None
    floor_variants: dict[str, int] | None = None  # the copy floor: how often each plain copy was fastest


# ----------------------------------------------------------------------------- contenders
def _last_line(text: str) -> str:
    lines = [line.strip() for line in text.strip().splitlines() if line.strip()]
    return lines[-1][:300] if lines else "(no output)"


def check_ours() -> str | None:
    """``None`` when ``from deltaextras import rorder`` works in this interpreter, else the reason."""
    probe = subprocess.run(
        [sys.executable, "-c", "from deltaextras import rorder"], capture_output=True, text=True, check=False
    )
    if probe.returncode != 0:
        return f"deltaextras.rorder is not importable: {_last_line(probe.stderr)}"
    return None


def ensure_original(venv: Path, log: Path) -> tuple[Path | None, str | None]:
    """The interpreter of the original's own venv (created on first use), or ``None`` and the reason."""
    python = venv / "bin" / "python"
    check = [
        str(python),
        "-c",
        "import deltaextras.rorder_setup, deltalake, fsspec, pyarrow; print(deltalake.__version__, "
        "pyarrow.__version__)",
    ]
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    if python.exists() and subprocess.run(check, capture_output=True, env=env, check=False).returncode == 0:
        return python, None
    print(f"setting up {venv} ({' '.join(ORIGINAL_REQUIREMENTS)}) ...", flush=True)
    log.parent.mkdir(parents=True, exist_ok=True)
    with log.open("w") as out:
        steps = [
            [sys.executable, "-m", "venv", "--clear", str(venv)],
            [str(python), "-m", "pip", "install", "--disable-pip-version-check", *ORIGINAL_REQUIREMENTS],
        ]
        for step in steps:
            try:
                done = subprocess.run(step, stdout=out, stderr=subprocess.STDOUT, env=env, timeout=1200, check=False)
            except (OSError, subprocess.TimeoutExpired) as exc:
                return None, f"could not set up {venv}: {exc}"
            if done.returncode != 0:
                return None, f"could not set up {venv}: '{' '.join(step[:4])} ...' failed (see {log})"
    probe = subprocess.run(check, capture_output=True, text=True, env=env, check=False)
    if probe.returncode != 0:
        return None, f"the original does not import in {venv}: {_last_line(probe.stderr)}"
    return python, None


def warm_up(runnable: list[str], original_python: Path | None) -> None:
    """Import each contender's libraries once, untimed, so the first timed run does not pay a cold cache.

    Every contender runs as installed: pip byte-compiles the packages it installs, but deltaextras is
    usually installed editable here, and where ``PYTHONDONTWRITEBYTECODE`` is set every process would
    compile its modules from source again (about 50 ms). So its package is byte-compiled first, as a
    wheel install leaves it; a process reads the compiled files whatever that variable says.
    """
    if {"ours", "spawn"} & set(runnable):
        package = "import deltaextras, os; print(os.path.dirname(deltaextras.__file__))"
        where = subprocess.run([sys.executable, "-c", package], capture_output=True, text=True, check=False)
        if where.returncode == 0 and where.stdout.strip():
            subprocess.run([sys.executable, "-m", "compileall", "-q", where.stdout.strip()], check=False)
    imports = {
        "copy": (sys.executable, "import pyarrow.dataset, pyarrow.parquet"),
        "zorder": (sys.executable, "import deltalake"),
        "ours": (sys.executable, "from deltaextras import rorder"),
        "spawn": (sys.executable, "from deltaextras import plan_messages, rorder_single"),
        "original": (str(original_python), "import deltaextras.rorder_setup"),
    }
    for c in runnable:
        python, code = imports[c]
        subprocess.run([python, "-c", code], capture_output=True, check=False)


@dataclass
class Context:
    """What every run of one invocation shares."""

    workdir: Path
    original_python: Path | None
    keep_sleep: bool
    keep_runs: bool
    timeout: float
    partitions: int = 1  # of the scale tables (the duplicates and text cases have one)
    workers: int = 1  # max_workers of ours, processes of spawn


def run_copies(source: Path, expected: _measure.Digest, ctx: Context, rnd: int, pos: int) -> list[RunRecord]:
    """Every plain copy once (their order rotating by round), then the floor: a record of the fastest."""
    shift = rnd % len(COPY_VARIANTS)
    records = [
        run_one("copy", source, expected, ctx, rnd, pos, variant=v)
        for v in COPY_VARIANTS[shift:] + COPY_VARIANTS[:shift]
    ]
    good = [r for r in records if r.ok and r.content_ok and r.wall_s is not None]
    if not good:
        floor = RunRecord("copy", rnd, pos, ok=False, error=records[0].error or "every plain copy failed")
    else:
        best = min(good, key=lambda r: r.wall_s or 0.0)
        floor = RunRecord(**{**asdict(best), "contender": "copy"})
    return [*records, floor]


def run_one(
    contender: str,
    source: Path,
    expected: _measure.Digest,
    ctx: Context,
    rnd: int,
    pos: int,
    *,
    variant: str | None = None,
    extra: list[str] | None = None,
    expected_ours: _measure.Digest | None = None,
) -> RunRecord:
    """Copy the source table afresh, run one contender as a whole process, then measure its output."""
    run_dir = ctx.workdir / "runs" / contender
    if run_dir.exists():
        shutil.rmtree(run_dir)
    table = run_dir / "table"
    shutil.copytree(source, table)
    env = dict(os.environ)
    script = str(HERE / "_run_contender.py")
    out_file = run_dir / "copy.parquet"
    if contender == "copy":
        files = [
            [p for p, _ in _measure.delta_partition_files(table, _workload.PARTITION_COLUMN, value)]
            for value in range(_workload.PARTITION_VALUE, _workload.PARTITION_VALUE + ctx.partitions)
        ]
        listing = run_dir / "files.json"
        listing.write_text(json.dumps(files))
        assert variant is not None
        cmd = [sys.executable, script, "copy", str(listing), str(out_file), *variant.split("-")]
    elif contender == "zorder":
        cmd = [sys.executable, script, "zorder", str(table), BY]
    elif contender in ("ours", "spawn"):
        cmd = [sys.executable, script, contender, str(table), SORT_BY, str(ctx.workers), *(extra or [])]
    else:
        assert ctx.original_python is not None
        cmd = [str(ctx.original_python), str(HERE / "_run_original.py"), str(table), SORT_BY]
        if ctx.keep_sleep:
            cmd.append("--keep-sleep")
        env.pop("PYTHONPATH", None)
    proc = _measure.run_measured(cmd, cwd=str(run_dir), env=env, timeout=ctx.timeout)
    record = RunRecord(
        f"copy:{variant}" if contender == "copy" else contender,
        rnd,
        pos,
        variant=variant,
        ok=proc.ok,
        wall_s=proc.wall_s,
        peak_rss_bytes=proc.peak_rss_bytes,
        sampled_rss_bytes=proc.sampled_rss_bytes,
        kernel_maxrss_bytes=proc.kernel_maxrss_bytes,
    )
    if not proc.ok:
        record.error = f"exit {proc.returncode}: {_last_line(proc.stderr_tail)}"
    else:
        try:
            want = expected_ours if contender == "ours" and expected_ours is not None else expected
            _measure_output(record, contender, table, out_file, want, ctx.partitions)
        except Exception as exc:  # a broken output is a result, not a crash of the bench
            record.ok = False
            record.error = f"output check failed: {type(exc).__name__}: {str(exc)[:300]}"
    if not ctx.keep_runs:
        shutil.rmtree(run_dir, ignore_errors=True)
    return record


def _measure_output(
    record: RunRecord, contender: str, table: Path, out_file: Path, expected: _measure.Digest, partitions: int = 1
) -> None:
    """Size, row groups and read amplification of partition 0's output; content digest of every partition's."""
    from deltaextras.ops.maintenance.inspect import (
        parquet_read_amplification,
        parquet_row_group_table,
        read_amplification,
        row_group_table,
    )

    partition = {_workload.PARTITION_COLUMN: _workload.PARTITION_VALUE}
    if contender == "copy":
        record.output_bytes = out_file.stat().st_size
        record.output_files = 1
        record.output_row_groups = parquet_row_group_table([out_file], BY).num_rows
        record.read_amp = parquet_read_amplification([out_file], BY)
        outs = [out_file, *(Path(f"{out_file}.{i}") for i in range(1, partitions))]
        digest = _measure.parquet_digest(outs, _workload.DATA_COLUMNS)
    else:
        files = _measure.delta_partition_files(table, _workload.PARTITION_COLUMN, _workload.PARTITION_VALUE)
        record.output_bytes = sum(size for _, size in files)
        record.output_files = len(files)
        record.output_row_groups = row_group_table(str(table), BY, partition=partition).num_rows
        record.read_amp = read_amplification(str(table), BY, partition=partition)
        digest = _measure.delta_digest(table, _workload.DATA_COLUMNS)
    record.content_ok = digest == expected
    if not record.content_ok:
        record.error = f"content differs from the input: {digest} != {expected}"


def _print_run(name: str, rnd: int, repeat: int, rec: RunRecord) -> None:
    status = "ok" if rec.ok and rec.content_ok else f"FAILED ({rec.error})"
    label = f"floor = {rec.variant}" if rec.contender == "copy" else rec.contender
    print(
        f"  [{name} round {rnd + 1}/{repeat}] {label:22s} "
        f"{_fmt(rec.wall_s)} s, {_fmt((rec.peak_rss_bytes or 0) / MB, 0)} MB peak, "
        f"read amp {_fmt(rec.read_amp, 3)}, "
        f"output {_fmt((rec.output_bytes or 0) / MB, 1)} MB: {status}",
        flush=True,
    )


def _with_variants(contenders: list[str]) -> list[str]:
    """The contenders with every plain copy listed after the floor."""
    out: list[str] = []
    for c in contenders:
        out.append(c)
        if c == "copy":
            out.extend(f"copy:{v}" for v in COPY_VARIANTS)
    return out


# ----------------------------------------------------------------------------- summaries
def _median(values: list[float]) -> float | None:
    return statistics.median(values) if values else None


def summarize(records: list[RunRecord], contenders: list[str], unavailable: dict[str, str]) -> dict[str, Summary]:
    """Medians per contender; ``× copy`` ratios are medians of per-round ratios (paired)."""
    by_round: dict[int, dict[str, RunRecord]] = {}
    for r in records:
        by_round.setdefault(r.round, {})[r.contender] = r
    out: dict[str, Summary] = {}
    for c in contenders:
        if c in unavailable:
            out[c] = Summary(c, 0, error=unavailable[c])
            continue
        mine = [r for r in records if r.contender == c]
        good = [r for r in mine if r.ok and r.content_ok]
        s = Summary(c, len(good))
        failed = [r for r in mine if not (r.ok and r.content_ok)]
        if failed:
            s.error = failed[0].error or "failed"
            s.content_ok = False if any(r.content_ok is False for r in failed) else None
        if not good:
            out[c] = s
            continue
        s.wall_s = _median([r.wall_s for r in good if r.wall_s is not None])
        rss = [r.peak_rss_bytes / MB for r in good if r.peak_rss_bytes is not None]
        s.peak_rss_mb, s.max_peak_rss_mb = _median(rss), max(rss)
        s.read_amp = _median([r.read_amp for r in good if r.read_amp is not None])
        s.output_mb = _median([r.output_bytes / MB for r in good if r.output_bytes is not None])
        s.output_files = good[-1].output_files
        if c == "copy":
            s.floor_variants = {}
            for r in good:
                s.floor_variants[r.variant or "?"] = s.floor_variants.get(r.variant or "?", 0) + 1
        s.output_row_groups = good[-1].output_row_groups
        if s.content_ok is None:
            s.content_ok = all(r.content_ok for r in good)
        wall_ratios, rss_ratios = [], []
        for rnd in by_round.values():
            base, me = rnd.get("copy"), rnd.get(c)
            if base and me and base.ok and me.ok and me.content_ok and base.wall_s and base.peak_rss_bytes:
                wall_ratios.append((me.wall_s or 0) / base.wall_s)
                rss_ratios.append((me.peak_rss_bytes or 0) / base.peak_rss_bytes)
        s.wall_x_copy = _median(wall_ratios)
        s.rss_x_copy = _median(rss_ratios)
        out[c] = s
    z = out.get("zorder")
    for s in out.values():
        if s.output_mb is not None and z is not None and z.output_mb:
            s.output_x_zorder = s.output_mb / z.output_mb
    return out


def _fmt(value: float | None, digits: int = 2, suffix: str = "") -> str:
    if value is None:
        return "n/a"
    if value != value:  # nan
        return "nan"
    return f"{value:.{digits}f}{suffix}"


def print_table(title: str, summaries: dict[str, Summary]) -> None:
    """The per-scale table."""
    header = [
        "contender",
        "wall s",
        "wall × copy",
        "peak RSS MB",
        "RSS × copy",
        "read amp",
        "output MB",
        "output × z-order",
        "content ok",
    ]
    rows = []
    for s in summaries.values():
        ok = "n/a" if s.content_ok is None else ("yes" if s.content_ok else "NO")
        rows.append(
            [
                _label(s.contender),
                _fmt(s.wall_s),
                _fmt(s.wall_x_copy, suffix="×"),
                _fmt(s.peak_rss_mb, 0),
                _fmt(s.rss_x_copy, suffix="×"),
                _fmt(s.read_amp, 3),
                _fmt(s.output_mb, 1),
                _fmt(s.output_x_zorder, suffix="×"),
                ok,
            ]
        )
    widths = [max(len(str(r[i])) for r in [header, *rows]) for i in range(len(header))]
    print(f"\n{title}")
    print(" | ".join(h.ljust(w) for h, w in zip(header, widths, strict=True)))
    print("-+-".join("-" * w for w in widths))
    for r in rows:
        print(" | ".join(str(v).ljust(w) for v, w in zip(r, widths, strict=True)))
    for s in summaries.values():
        if s.error:
            print(f"  {_label(s.contender)}: n/a or failed: {s.error}")
        if s.floor_variants:
            shown = ", ".join(f"{v} ({n} of {s.runs})" for v, n in sorted(s.floor_variants.items()))
            print(f"  copy floor = the fastest plain copy of each round: {shown}")


def _label(contender: str) -> str:
    if contender.startswith("copy:"):
        return f"  plain copy {contender[5:]}"
    return LABELS[contender]


def evaluate_targets(scales: dict[str, dict[str, Any]], scale1: str | None) -> list[dict[str, Any]]:
    """Pass/fail of each target; ``None`` (n/a) when a figure is missing."""
    targets: list[dict[str, Any]] = []

    def add(name: str, value: float | None, limit: float, detail: str = "") -> None:
        passed = None if value is None or value != value else value <= limit
        targets.append({"target": name, "value": value, "limit": limit, "passed": passed, "detail": detail})

    ours1 = scales[scale1]["summary"]["ours"] if scale1 else None
    if ours1 is not None:
        add(f"ours wall ≤ {WALL_X_COPY_MAX}× copy floor ({scale1})", ours1.wall_x_copy, WALL_X_COPY_MAX)
        add(f"ours peak RSS ≤ copy's ({scale1})", ours1.rss_x_copy, RSS_X_COPY_MAX)
    for name, scale in scales.items():
        ours = scale["summary"]["ours"]
        if name != scale1:
            add(f"ours wall ≤ {WALL_X_COPY_MAX_LARGE}× copy floor ({name})", ours.wall_x_copy, WALL_X_COPY_MAX_LARGE)
        if name != scale1 and ours1 is not None:
            ratio = ours.peak_rss_mb / ours1.peak_rss_mb if ours.peak_rss_mb is not None and ours1.peak_rss_mb else None
            scale["ours_rss_x_scale1"] = ratio
            add(f"ours peak RSS at {name} ≤ {RSS_X_SCALE1_MAX}× ours at {scale1}", ratio, RSS_X_SCALE1_MAX)
        add(
            f"ours peak RSS ≤ {RSS_CEILING_MB:.0f} MB, every run ({name})",
            ours.max_peak_rss_mb,
            RSS_CEILING_MB,
        )
        add(f"ours read amplification ≤ {READ_AMP_MAX} ({name})", ours.read_amp, READ_AMP_MAX)
        add(
            f"ours output ≤ {OUTPUT_X_ZORDER_MAX}× z-order bytes ({name})",
            ours.output_x_zorder,
            OUTPUT_X_ZORDER_MAX,
        )
        targets.append(
            {
                "target": f"ours content equals the input ({name})",
                "value": ours.content_ok,
                "limit": True,
                "passed": ours.content_ok,
                "detail": "",
            }
        )
    return targets


def print_targets(targets: list[dict[str, Any]], quick: bool) -> None:
    """Pass/fail lines."""
    print("\nTargets" + (" (quick workload: indicative only)" if quick else ""))
    for t in targets:
        verdict = {True: "PASS", False: "FAIL", None: "n/a "}[t["passed"]]
        value = t["value"]
        if isinstance(value, bool):
            print(f"  [{verdict}] {t['target']}: {'yes' if value else 'no'}")
            continue
        shown = "n/a" if value is None else f"{value:.3f}"
        print(f"  [{verdict}] {t['target']}: {shown} (limit {t['limit']})")


# ----------------------------------------------------------------------------- main
def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    """Command-line options."""
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--scale", type=int, action="append", help="workload scale (repeatable; default 1 and 10)")
    p.add_argument("--repeat", type=int, help="paired rounds per scale (default 5 at scale 1, 1 above)")
    p.add_argument("--quick", action="store_true", help="a much smaller workload, one round: a smoke test")
    p.add_argument(
        "--contenders",
        default=",".join(DEFAULT_CONTENDERS),
        help=f"comma-separated subset of {','.join(CONTENDERS)} (default {','.join(DEFAULT_CONTENDERS)})",
    )
    p.add_argument(
        "--partitions", type=int, default=1, help="partitions in the table, each a copy of the workload (default 1)"
    )
    p.add_argument("--workers", type=int, default=1, help="partitions rewritten at once by ours and spawn (default 1)")
    p.add_argument("--seed", type=int, default=0, help="workload seed (default 0)")
    p.add_argument("--workdir", type=Path, default=HERE / ".work", help="where tables are built and copied")
    p.add_argument("--rebuild", action="store_true", help="rebuild cached workload tables")
    p.add_argument("--original-venv", type=Path, default=HERE / ".venv-original", help="venv of the original")
    p.add_argument("--original-keep-sleep", action="store_true", help="keep the original's 5 s sleep after its commit")
    p.add_argument("--keep-runs", action="store_true", help="keep each run's output table (last round only)")
    p.add_argument("--timeout", type=float, default=1800.0, help="seconds before a run is killed")
    p.add_argument("--json", type=Path, help="write every figure to this JSON file")
    p.add_argument("--no-cases", action="store_true", help="skip the duplicates and text/binary cases (scale 1)")
    p.add_argument("--case-repeat", type=int, default=3, help="paired rounds of the duplicates case (default 3)")
    return p.parse_args(argv)


def _versions() -> dict[str, str]:
    import deltalake
    import pyarrow

    return {
        "python": platform.python_version(),
        "deltalake": deltalake.__version__,
        "pyarrow": pyarrow.__version__,
    }


def run_duplicates_case(
    base: _workload.Workload, unique: _measure.Digest, ctx: Context, args: argparse.Namespace
) -> dict[str, Any]:
    """The scale-1 partition with 10 % of its rows appended again: the copy floor against ``rorder``
    with ``unique_by`` (which must drop exactly the re-appended rows). One partition, one worker."""
    ctx = replace(ctx, partitions=1, workers=1)
    workload = _workload.with_duplicates(base, DUPLICATE_SHARE)
    source = _workload.build(workload, args.workdir / "tables", rebuild=args.rebuild)
    expected = _measure.delta_digest(source, _workload.DATA_COLUMNS)
    repeat = args.case_repeat
    print(
        f"\n== {workload.name}: {workload.rows:,} rows ({workload.duplicates:,} appended twice); "
        f"ours with unique_by={SORT_BY}; {repeat} round(s)",
        flush=True,
    )
    records: list[RunRecord] = []
    for rnd in range(repeat):
        for contender in ("copy", "ours") if rnd % 2 == 0 else ("ours", "copy"):
            if contender == "copy":
                recs = run_copies(source, expected, ctx, rnd, 0)
            else:
                recs = [run_one("ours", source, expected, ctx, rnd, 1, extra=[SORT_BY], expected_ours=unique)]
            for rec in recs:
                records.append(rec)
                _print_run(workload.name, rnd, repeat, rec)
    summary = summarize(records, _with_variants(["copy", "ours"]), {})
    print_table(f"{workload.name}: medians of {repeat} paired round(s); ours content = the unique rows", summary)
    return {
        "workload": {**asdict(workload), "rows": workload.rows},
        "runs": [asdict(r) for r in records],
        "summary": summary,
    }


def run_text_cases(ctx: Context, args: argparse.Namespace) -> dict[str, Any]:
    """String- and binary-heavy partitions (one repeated 200-byte value, dictionary-encoded in
    Parquet) rewritten under a small ``memory_budget``: Arrow's peak allocation against the budget."""
    budget = TEXT_BUDGET_MB * MB
    print(f"\n== text and binary columns: memory_budget {TEXT_BUDGET_MB} MiB, Arrow pool peak", flush=True)
    out: dict[str, Any] = {}
    for kind in ("string", "binary"):
        source = _workload.build_text(kind, args.workdir / "tables", rebuild=args.rebuild)
        run_dir = ctx.workdir / "runs" / f"text-{kind}"
        if run_dir.exists():
            shutil.rmtree(run_dir)
        shutil.copytree(source, run_dir / "table")
        script = str(HERE / "_run_contender.py")
        cmd = [sys.executable, script, "ours-budget", str(run_dir / "table"), SORT_BY, str(budget)]
        proc = _measure.run_measured(cmd, cwd=str(run_dir), timeout=ctx.timeout)
        row: dict[str, Any] = {"ok": proc.ok, "wall_s": proc.wall_s, "peak_rss_mb": proc.peak_rss_bytes / MB}
        if proc.ok:
            figures = json.loads(proc.stdout_tail.strip().splitlines()[-1])
            row["arrow_peak_mb"] = figures["arrow_peak_bytes"] / MB
            row["x_budget"] = figures["arrow_peak_bytes"] / budget
            from deltalake import DeltaTable

            rows = DeltaTable(str(run_dir / "table")).count()
            row["rows_ok"] = rows == _workload.TEXT_ROWS
        else:
            row["error"] = _last_line(proc.stderr_tail)
        if not ctx.keep_runs:
            shutil.rmtree(run_dir, ignore_errors=True)
        out[kind] = row
        print(
            f"  {kind:6s}-heavy: {_workload.TEXT_ROWS:,} rows, {_fmt(row['wall_s'])} s, "
            f"Arrow peak {_fmt(row.get('arrow_peak_mb'), 1)} MiB = {_fmt(row.get('x_budget'))}× the budget, "
            f"process peak RSS {_fmt(row['peak_rss_mb'], 0)} MB, rows ok: {row.get('rows_ok', 'n/a')}"
            + (f" FAILED: {row['error']}" if "error" in row else ""),
            flush=True,
        )
    return out


def main(argv: list[str] | None = None) -> int:
    """Run the benchmark; exit status 0 unless the bench itself broke (targets never change it)."""
    args = parse_args(argv)
    scales = sorted(set(args.scale or [1, 10]))
    contenders = [c.strip() for c in args.contenders.split(",") if c.strip()]
    unknown = [c for c in contenders if c not in CONTENDERS]
    if unknown:
        print(f"unknown contenders: {unknown}; choose from {CONTENDERS}", file=sys.stderr)
        return 2
    if "copy" not in contenders:
        contenders.insert(0, "copy")  # every ratio is to the copy
    args.workdir.mkdir(parents=True, exist_ok=True)

    unavailable: dict[str, str] = {}
    original_python: Path | None = None
    for mine in ("ours", "spawn"):
        if mine in contenders and (reason := check_ours()):
            unavailable[mine] = reason
    if "original" in contenders:
        original_python, reason = ensure_original(args.original_venv, args.workdir / "venv-original.log")
        if reason:
            unavailable["original"] = reason
    ctx = Context(
        args.workdir,
        original_python,
        args.original_keep_sleep,
        args.keep_runs,
        args.timeout,
        partitions=args.partitions,
        workers=args.workers,
    )
    runnable = [c for c in contenders if c not in unavailable]
    warm_up(runnable, original_python)

    load_start = os.getloadavg()
    meta = {
        "started": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "cpus": os.cpu_count(),
        "loadavg_start": load_start,
        "versions": _versions(),
        "quick": args.quick,
        "seed": args.seed,
        "partitions": args.partitions,
        "workers": args.workers,
        "contenders": contenders,
        "unavailable": unavailable,
        "original_keep_sleep": args.original_keep_sleep,
        "rss_method": (
            "max(psutil 20 ms sampled RSS sum over the process tree, GNU time %M of the contender)"
            if _measure.GNU_TIME
            else "psutil 20 ms sampled RSS sum over the process tree"
        ),
        "mb": "2**20 bytes",
    }
    print(f"machine: {os.cpu_count()} CPUs, load average {load_start[0]:.2f} at start; {meta['versions']}")
    for c, reason in unavailable.items():
        print(f"  {LABELS[c]}: n/a ({reason})")

    results: dict[str, dict[str, Any]] = {}
    scale1_name: str | None = None
    for scale in scales:
        workload = _workload.workload_for(scale, args.seed, quick=args.quick)
        if scale == 1:
            scale1_name = workload.name
        repeat = args.repeat or (1 if args.quick or scale > 1 else 5)
        t0 = time.perf_counter()
        source = _workload.build(workload, args.workdir / "tables", rebuild=args.rebuild, partitions=args.partitions)
        build_s = time.perf_counter() - t0
        inputs = _measure.delta_partition_files(source, _workload.PARTITION_COLUMN, _workload.PARTITION_VALUE)
        input_bytes = sum(size for _, size in inputs)
        expected = _measure.delta_digest(source, _workload.DATA_COLUMNS)
        print(
            f"\n== {workload.name}: {workload.rows:,} rows in {len(inputs)} files, {input_bytes / MB:.1f} MB "
            f"per partition, {args.partitions} partition(s), {args.workers} worker(s) "
            f"(ready in {build_s:.1f} s); {repeat} round(s)",
            flush=True,
        )
        records: list[RunRecord] = []
        for rnd in range(repeat):
            shift = rnd % len(runnable)
            order = runnable[shift:] + runnable[:shift]
            for pos, contender in enumerate(order):
                if contender == "copy":
                    recs = run_copies(source, expected, ctx, rnd, pos)
                else:
                    recs = [run_one(contender, source, expected, ctx, rnd, pos)]
                records.extend(recs)
                for rec in recs:
                    _print_run(workload.name, rnd, repeat, rec)
        summary = summarize(records, _with_variants(contenders), unavailable)
        results[workload.name] = {
            "workload": {**asdict(workload), "rows": workload.rows, "files": workload.files},
            "build_s": build_s,
            "input_bytes": input_bytes,
            "input_digest": str(expected),
            "input_digest_obj": expected,
            "repeat": repeat,
            "runs": [asdict(r) for r in records],
            "summary": summary,
        }
        print_table(f"{workload.name}: medians of {repeat} paired round(s)", summary)
        threads, pool = summary.get("ours"), summary.get("spawn")
        if threads and pool and threads.wall_x_copy and pool.wall_x_copy and threads.peak_rss_mb and pool.peak_rss_mb:
            print(
                f"  worker threads / spawn pool ({args.partitions} partitions, {args.workers} workers): wall "
                f"{threads.wall_x_copy / pool.wall_x_copy:.2f}×, peak RSS {threads.peak_rss_mb / pool.peak_rss_mb:.2f}×"
            )

    cases: dict[str, Any] = {}
    if not args.no_cases and 1 in scales and "ours" in runnable and scale1_name is not None:
        base = _workload.workload_for(1, args.seed, quick=args.quick)
        if args.partitions == 1:
            unique = results[scale1_name]["input_digest_obj"]
        else:  # the case has one partition: its unique rows are those of the one-partition table
            single = _workload.build(base, args.workdir / "tables", rebuild=args.rebuild)
            unique = _measure.delta_digest(single, _workload.DATA_COLUMNS)
        cases["duplicates"] = run_duplicates_case(base, unique, ctx, args)
        cases["text"] = run_text_cases(ctx, args)
    for scale in results.values():
        scale.pop("input_digest_obj", None)
    targets = evaluate_targets(results, scale1_name)
    for kind, row in cases.get("text", {}).items():
        value = row.get("x_budget")
        passed = None if value is None else value <= ARROW_X_BUDGET_MAX and bool(row.get("rows_ok"))
        targets.append(
            {
                "target": f"ours Arrow peak ≤ {ARROW_X_BUDGET_MAX}× memory_budget, {kind}-heavy partition",
                "value": value,
                "limit": ARROW_X_BUDGET_MAX,
                "passed": passed,
                "detail": "",
            }
        )
    for name, scale in results.items():
        if "ours_rss_x_scale1" in scale:
            print(f"\nours peak RSS at {name} / at {scale1_name}: {_fmt(scale['ours_rss_x_scale1'])}×")
    print_targets(targets, args.quick)
    meta["loadavg_end"] = os.getloadavg()
    print(f"\nload average at end: {meta['loadavg_end'][0]:.2f}")
    if args.json:
        doc = {
            "meta": meta,
            "scales": {
                name: {**scale, "summary": {c: asdict(s) for c, s in scale["summary"].items()}}
                for name, scale in results.items()
            },
            "cases": {
                k: ({**v, "summary": {c: asdict(s) for c, s in v["summary"].items()}} if "summary" in v else v)
                for k, v in cases.items()
            },
            "targets": targets,
        }
        args.json.write_text(json.dumps(doc, indent=2, default=str))
        print(f"figures written to {args.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
