"""The ``deltaextras`` command line: ``plan``, ``run``, ``inspect``, ``demo`` (and the commands of the
function app and the deletion-vector DELETE, registered from their modules).

Commands compute; the ``_render_*`` functions print (text or ``--json``).

Example:
    >>> parser = build_parser()
    >>> parser.parse_args(["plan", "/data/t", "--json"]).json
    True
"""

from __future__ import annotations

import argparse
import difflib
import json
import logging
import math
import os
import re
import signal
import sys
import tempfile
import threading
import time
from collections.abc import Sequence
from typing import Any, NoReturn

from ..errors import DeltaExtrasError, InvalidArgumentError, PartitionsFailedError
from ..ops.rorder.options import parse_sort_item
from ..ops.rorder.pool import THREAD_PREFIX, RunInterrupted
from ..ops.rorder.report import PartitionReport, RorderReport
from ..version import __version__
from . import preflight, settings

EXIT_FAILED = 1
EXIT_USAGE = 2


def _storage_options(args: argparse.Namespace) -> dict[str, str] | None:
    return settings.storage_options(getattr(args, "storage_option", None))


def positive_int(text: str) -> int:
    """An argparse type: an integer of at least 1.

    Example:
        >>> positive_int("2")
        2
    """
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {value}")
    return value


class Parser(argparse.ArgumentParser):
    """An argument parser whose errors are one line, ``deltaextras <command>: error: ...``, with the
    command's flag that a mistyped one was probably meant to be."""

    def error(self, message: str) -> NoReturn:
        unknown = re.match(r"unrecognized arguments: (\S+)", message)
        if unknown:
            message = "unrecognized argument " + unknown.group(1) + self.suggestion(unknown.group(1))
        self.exit(EXIT_USAGE, f"{self.prog}: error: {message} (see {self.prog} --help)\n")

    def suggestion(self, flag: str) -> str:
        """``; did you mean --x?`` for the flag of this parser closest to ``flag`` (or '')."""
        if not flag.startswith("-"):
            return ""
        flags = [o for action in self._actions for o in action.option_strings if o.startswith("--")]
        close = difflib.get_close_matches(flag.split("=", 1)[0], flags, n=1, cutoff=0.6)
        return f"; did you mean {close[0]}?" if close else ""


def _common(p: argparse.ArgumentParser) -> None:
    p.add_argument("table", help="table URI: a local path, file://, abfss://, az:// or s3://")
    p.add_argument("--storage-option", action="append", metavar="KEY=VALUE", help="deltalake storage option")


def _options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--by", help="row-group column (default: the partition column minus _range)")
    p.add_argument("--sort-by", action="append", metavar="COL[:desc]", help="order inside a value (repeatable)")
    p.add_argument("--unique-by", action="append", metavar="COL", help="de-duplication key column (repeatable)")
    p.add_argument("--partition", action="append", metavar="VALUE", help="only this partition value (repeatable)")
    p.add_argument(
        "--target-file-size", type=preflight.size, metavar="SIZE", help="output file size (10MB, 128MiB, bytes)"
    )
    p.add_argument(
        "--memory-budget", type=preflight.size, metavar="SIZE", help="Arrow bytes held at once (96MiB, bytes)"
    )
    p.add_argument(
        "--max-footer-bytes",
        type=preflight.size,
        metavar="SIZE",
        help="roll an output file over before its footer passes this (default: 16KiB, 8KiB tiered)",
    )
    p.add_argument(
        "--min-row-group-bytes",
        metavar="SIZE",
        help="smaller neighbouring values share a row group up to this (default: 16KiB tiered, 0 full)",
    )
    p.add_argument("--max-deleted-rows-ratio", type=float, metavar="RATIO")
    p.add_argument(
        "--layout",
        choices=("full", "tiered"),
        help="full: rewrite a partition with new files whole (default); tiered: rewrite only fresh files and "
        "the tiers due for a merge (docs/tiered.md)",
    )


def _option_kwargs(args: argparse.Namespace) -> dict[str, Any]:
    sort_by = None
    if args.sort_by:
        sort_by = [parse_sort_item(item) for item in args.sort_by]
    return {
        "by": args.by,
        "sort_by": sort_by,
        "unique_by": args.unique_by,
        "partitions": args.partition,
        "target_file_size": args.target_file_size,
        "memory_budget": args.memory_budget,
        "max_footer_bytes": args.max_footer_bytes,
        "min_row_group_bytes": args.min_row_group_bytes,
        "max_deleted_rows_ratio": args.max_deleted_rows_ratio,
        "layout": args.layout,
    }


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of every subcommand."""
    parser = Parser(prog="deltaextras", description="Row-group-per-value layout maintenance for Delta Lake tables.")
    parser.add_argument("--version", action="version", version=f"deltaextras {__version__}")
    parser.add_argument(
        "-v",
        "--verbose",
        action="count",
        default=0,
        help="log progress (rewrites: inside each partition; deletes: files scanned); -vv also logs the "
        "storage and cloud libraries (HTTP requests)",
    )
    sub = parser.add_subparsers(dest="command", required=True, parser_class=Parser)

    p = sub.add_parser("plan", help="show which partitions need a rewrite")
    _common(p)
    _options(p)
    p.add_argument("--json", action="store_true", help="print the plan as JSON")
    p.add_argument("--messages", action="store_true", help="print the work messages (JSON lines)")
    p.set_defaults(func=cmd_plan, flag_names=BY_FLAG)

    p = sub.add_parser("run", help="rewrite every partition that needs it")
    _common(p)
    _options(p)
    p.add_argument("--workers", type=positive_int, help="partitions rewritten at once, on threads (default: CPU count)")
    p.add_argument("--json", action="store_true", help="print the report as JSON")
    p.set_defaults(func=cmd_run, flag_names=BY_FLAG)

    p = sub.add_parser("inspect", help="row groups of the live files and point-query read amplification")
    _common(p)
    p.add_argument("--column", help="row-group column (default: the partition column minus _range)")
    p.add_argument("--partition", metavar="VALUE", help="only this partition value")
    p.add_argument("--limit", type=int, default=40, help="row groups to list (0: all)")
    p.add_argument("--json", action="store_true")
    p.add_argument(
        "--plot", metavar="FILE", help="also draw the layout to FILE (.svg, .png or .pdf; needs deltaextras[plot])"
    )
    p.set_defaults(func=cmd_inspect, flag_names={"by=": "--column", "--by": "--column"})

    p = sub.add_parser("demo", help="build the sensor example on local disk, rewrite it, show before/after")
    p.add_argument("--path", help="where to build the table (default: a new temporary directory)")
    p.add_argument("--nodes", type=int, default=150, help="sensors (node_id 0..N-1), at least 1")
    p.add_argument("--batches", type=int, default=48, help="five-minute appends, at least 1")
    p.add_argument("--ranges", type=int, default=3, help="node_id_range partitions, at least 1")
    p.add_argument("--plot", metavar="FILE", help="draw the layout before and after side by side (.svg, .png, .pdf)")
    p.set_defaults(func=cmd_demo)

    for module in ("enqueue", "edges.local_host", "delete_command", "vacuum_command"):
        _register(sub, module)
    return parser


def _register(sub: Any, module: str) -> None:
    """Commands that live beside their feature's module (``add_parser(subparsers)``)."""
    import importlib

    try:
        mod = importlib.import_module(f"{__package__}.{module}")
    except ImportError:
        return
    add = getattr(mod, "add_parser", None)
    if add is not None:
        add(sub)


# ---------------------------------------------------------------------- commands
def cmd_plan(args: argparse.Namespace) -> int:
    from ..ops.rorder.plan import plan_units

    kwargs = _option_kwargs(args)
    preflight.by_is_a_data_column(args.table, args.by, _storage_options(args))
    plan = plan_units(args.table, storage_options=_storage_options(args), **kwargs)
    if args.messages:
        for m in plan.messages():
            print(m.to_json())
    elif args.json:
        print(json.dumps(plan.to_dict(), indent=2))
    else:
        _render_plan(plan)
    return 0


def cmd_run(args: argparse.Namespace) -> int:
    from ..ops.rorder.rorder import rorder

    kwargs = _option_kwargs(args)
    preflight.by_is_a_data_column(args.table, args.by, _storage_options(args))
    started = time.monotonic()
    done: list[PartitionReport] = []

    def progress(report: PartitionReport) -> None:
        done.append(report)
        if not args.json:
            print(f"[{len(done):>4}] {report.line()}", flush=True)

    try:
        report = rorder(
            args.table,
            storage_options=_storage_options(args),
            max_workers=args.workers,
            progress=progress,
            **kwargs,
        )
    except RunInterrupted as exc:
        if args.json and isinstance(exc.report, RorderReport):
            print(json.dumps(exc.report.to_dict(), indent=2, default=str))
        raise
    except PartitionsFailedError as exc:
        report = exc.report if isinstance(exc.report, RorderReport) else RorderReport(done)
    _render_report(report, args.json, time.monotonic() - started)
    return EXIT_FAILED if report.failed else 0


def cmd_inspect(args: argparse.Namespace) -> int:
    from ..core.snapshot import TableSnapshot
    from ..ops.maintenance.features import feature_uses
    from ..ops.maintenance.inspect import partition_column, read_amplification, row_group_table, row_groups_per_value
    from ..ops.rorder.plan import partition_not_found, resolve_unit

    opts = _storage_options(args)
    if args.plot:
        from .plot import require_matplotlib

        require_matplotlib(args.plot)
        preflight.writable_target(args.plot)
    snap = TableSnapshot.load(args.table, opts, for_writing=False)  # reading footers needs no feature support
    unit, column = resolve_unit(snap, args.column)
    partition = {unit: args.partition} if (unit and args.partition is not None) else None
    if partition and unit and args.partition not in (groups := snap.partitions(unit)):
        raise partition_not_found(unit, args.partition, snap.version, groups)
    physical = snap.schema.physical(column)
    table = row_group_table(args.table, physical, partition=partition, storage_options=opts)
    amp = read_amplification(args.table, physical, partition=partition, storage_options=opts)
    figure = None if math.isnan(amp) else amp
    if partition_column(snap, column) is not None:
        meaning = (
            f"{column} is a partition column: readers prune files by partition value, so a point query reads "
            "only files whose every row holds the value (1.00x); data files do not store it, so row groups "
            "carry no min/max for it"
        )
    elif figure is None:
        meaning = f"{column} holds no non-null value in these files: no point query to measure"
    else:
        meaning = f"rows read by a point query on {column} (row groups pruned by min/max) per row holding the value"
    picture = _inspect_picture(args, snap, table, unit, column, figure)
    per_value = row_groups_per_value(table)
    features = feature_uses(snap.protocol, snap.metadata)
    files = (
        {str(v): len(fs) for v, fs in snap.partitions(unit).items() if partition is None or v == args.partition}
        if unit
        else {"(table)": len(snap.files)}
    )
    if args.json:
        groups = [{k: _finite(v) for k, v in r.items()} for r in table.to_pylist()]
        out = {
            "column": column,
            "read_amplification": figure,
            "meaning": meaning,
            "files_per_partition": files,
            "row_groups_per_value": {k: _finite(v) for k, v in per_value.items()},
            "row_groups": groups,
            "features": [f.to_dict() for f in features],
        }
        print(json.dumps(out, default=str, indent=2, allow_nan=False))
        return 0
    rows = table.to_pylist()
    shown = rows if args.limit == 0 else rows[: args.limit]
    print(f"{'row_group':>9}  {'file':<60}  {'min':>20}  {'max':>20}  {'rows':>9}  {'bytes':>10}")
    for r in shown:
        print(
            f"{r['row_group']:>9}  {str(r['file'])[-60:]:<60}  {r['min']!s:>20.20}  {r['max']!s:>20.20}  "
            f"{r['rows']:>9}  {r['bytes']:>10}"
        )
    if len(shown) < len(rows):
        print(f"... {len(rows) - len(shown)} more row groups (--limit 0 lists all)")
    result = "none" if figure is None else f"{figure:.2f}x"
    print(f"{len(rows)} row groups; point-query read amplification on {column}: {result}")
    counts = sorted(files.values())
    if counts and per_value["values"]:
        print(
            f"files per partition: {counts[0]}..{counts[-1]} over {len(counts)} partition(s); row groups a point "
            f"query on {column} reads: at most {per_value['max']}, {per_value['mean']:.2f} on average"
        )
    if figure is None or partition_column(snap, column) is not None:
        print(f"({meaning})")
    if picture is not None:
        print(f"drew {picture.row_groups} row groups of {picture.files} files to {picture.path}")
    for feature in features:
        print(f"feature {feature.line()}")
    return 0


def _inspect_picture(
    args: argparse.Namespace, snap: Any, table: Any, unit: str | None, column: str, figure: float | None
) -> Any:
    """The layout picture of ``inspect --plot`` (None without ``--plot``)."""
    if not args.plot:
        return None
    from .plot import draw_panels, panel_of

    amp_text = "none" if figure is None else f"{figure:.2f}x"
    title = f"{args.table}: {column}, read amplification {amp_text}"
    return draw_panels([panel_of(snap, table, unit, title)], args.plot)


def _finite(value: Any) -> Any:
    """A value fit for strict JSON: infinite and NaN floats (statistics may hold them) as text.

    Example:
        >>> _finite(float("inf")), _finite(2.5)
        ('inf', 2.5)
    """
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)
    return value


def cmd_demo(args: argparse.Namespace) -> int:
    from ..ops.maintenance.inspect import read_amplification
    from ..ops.rorder.rorder import rorder
    from .demo import build_sensor_table

    if args.path and "://" in args.path and not args.path.startswith("file://"):
        raise InvalidArgumentError(
            f"demo builds its table on local disk, not at {args.path}; for the function app on Azurite run "
            "`deltaextras local-run --demo`, which creates az://lake/sensors there"
        )
    for flag, value in (("--nodes", args.nodes), ("--batches", args.batches), ("--ranges", args.ranges)):
        preflight.at_least_one(flag, value)
    if args.plot:
        from .plot import require_matplotlib

        require_matplotlib(args.plot)
        preflight.writable_target(args.plot)
    if args.path and args.path.startswith("file://"):
        args.path = args.path[len("file://") :]
    path = args.path or os.path.join(tempfile.mkdtemp(prefix="deltaextras-demo-"), "sensors")
    if os.path.exists(os.path.join(path, "_delta_log")):
        raise InvalidArgumentError(f"{path} already holds a Delta table; pass another --path")
    print(f"building {args.batches} five-minute appends of {args.nodes} nodes at {path} ...", flush=True)
    build_sensor_table(path, nodes=args.nodes, batches=args.batches, ranges=args.ranges)
    before = _layout_figures(path, read_amplification)
    print(f"before: {before['files']} files, {before['mib']:.2f} MiB, read amplification {before['amp']:.1f}x")
    panels = [_demo_panel(path, f"before: read amplification {before['amp']:.1f}x")] if args.plot else []
    started = time.monotonic()
    report = rorder(path, sort_by="utc_time", unique_by="utc_time", progress=lambda r: print("  " + r.line()))
    after = _layout_figures(path, read_amplification)
    print(f"after:  {after['files']} files, {after['mib']:.2f} MiB, read amplification {after['amp']:.2f}x")
    if args.plot:
        from .plot import draw_panels

        panels.append(_demo_panel(path, f"after rorder: read amplification {after['amp']:.2f}x"))
        picture = draw_panels(panels, args.plot)
        print(f"drew the layout before and after ({picture.row_groups} row groups) to {picture.path}")
    print(f"{report.summary()} in {time.monotonic() - started:.1f}s; try: deltaextras inspect {path}")
    return 0


def _demo_panel(path: str, title: str) -> Any:
    """The demo table's layout as it is now, by partition (for the before/after picture)."""
    from ..core.snapshot import TableSnapshot
    from ..ops.maintenance.inspect import row_group_table
    from .plot import panel_of

    snap = TableSnapshot.load(path, None, for_writing=False)
    return panel_of(snap, row_group_table(path, "node_id"), "node_id_range", title)


def _layout_figures(path: str, read_amplification: Any) -> dict[str, float]:
    import pyarrow as pa
    from deltalake import DeltaTable

    adds = pa.table(DeltaTable(path).get_add_actions(flatten=True))
    return {
        "files": adds.num_rows,
        "mib": sum(adds.column("size_bytes").to_pylist()) / 2**20,
        "amp": read_amplification(path, "node_id"),
    }


# ---------------------------------------------------------------------- rendering
def _render_plan(plan: Any) -> None:
    print(f"{plan.uri} at version {plan.version}: by {plan.by}, units by {_units(plan)}")
    for p in plan.partitions:
        extra = f", {p.deleted_rows} deleted rows" if p.deleted_rows else ""
        print(f"  {p.label:<30} {p.action:<8} {p.file_count:>6} files {p.bytes / 2**20:>9.2f} MiB{extra}  {p.reason}")
    print(f"{len(plan.to_rewrite())} to rewrite, {len(plan.skipped())} skipped")


def _render_report(report: RorderReport, as_json: bool, seconds: float) -> None:
    if as_json:
        print(json.dumps(report.to_dict(), indent=2, default=str))
        return
    # Each partition's line, failures included, was printed as it finished.
    print(f"{report.summary()} in {seconds:.1f}s")


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``deltaextras`` command."""
    parser = build_parser()
    args, extra = parser.parse_known_args(argv)
    if extra:  # one line from the command's own parser, with the flag it probably meant
        command = parser._subparsers._group_actions[0].choices[args.command] if parser._subparsers else parser  # type: ignore[union-attr]
        command.error("unrecognized arguments: " + " ".join(extra))
    previous = _stop_on_sigterm()
    try:
        return _main(parser, args)
    finally:
        _restore(previous)


def _main(parser: argparse.ArgumentParser, args: argparse.Namespace) -> int:
    logging.basicConfig(
        level=logging.INFO if args.verbose else logging.WARNING, format="%(levelname)s %(name)s: %(message)s"
    )
    if args.verbose < 2:
        for name in THIRD_PARTY_LOGGERS:  # azure-core logs every HTTP request and its headers at INFO
            logging.getLogger(name).setLevel(logging.WARNING)
    try:
        with _local_settings(args):
            code = int(args.func(args) or 0)
        sys.stdout.flush()  # a closed pipe shows here, not at interpreter exit
        return code
    except DeltaExtrasError as exc:
        text = preflight.flag_names(str(exc), getattr(args, "flag_names", {}))
        print(f"deltaextras: {type(exc).__name__}: {text}", file=sys.stderr)
        return EXIT_FAILED if not isinstance(exc, InvalidArgumentError) else EXIT_USAGE
    except ModuleNotFoundError as exc:
        extra = _extra_for(exc.name or "")
        if extra is None:
            raise
        print(
            f"deltaextras: {exc.name} is not installed; install deltaextras[{extra}] "
            f"(pip install 'deltaextras[{extra}]')",
            file=sys.stderr,
        )
        return EXIT_FAILED
    except RunInterrupted as exc:
        summary = exc.report.summary() if isinstance(exc.report, RorderReport) else str(exc)
        print(f"deltaextras: interrupted: {summary}; every commit that landed is listed above", file=sys.stderr)
        return _interrupted()
    except KeyboardInterrupt:
        if _partitions_running():  # a second Ctrl-C while commits under way were being waited for
            print(
                "deltaextras: stopped at once; a commit that was under way may or may not have landed "
                "(deltaextras plan shows the table as it is)",
                file=sys.stderr,
            )
        else:
            print("deltaextras: interrupted", file=sys.stderr)
        return _interrupted()
    except BrokenPipeError:  # the reader went away (``| head``): stop quietly, like other tools
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return 141


BY_FLAG = {"by=": "--by"}
# Commands that open a cloud table read the app settings of ./local.settings.json as enqueue does (variables
# already set win): DELTAEXTRAS_STORAGE_OPTIONS reaches an az:// table the same way for every command.
TABLE_COMMANDS = ("plan", "run", "inspect", "delete", "vacuum")


def _local_settings(args: argparse.Namespace) -> Any:
    """The app settings of ``./local.settings.json`` applied for a table command, as ``enqueue`` applies them."""
    import contextlib

    table = str(getattr(args, "table", ""))
    remote = "://" in table and not table.startswith("file://")  # local tables take no storage options
    if args.command not in TABLE_COMMANDS or not remote or not os.path.exists("local.settings.json"):
        return contextlib.nullcontext()
    from .edges.local_host import app_settings, app_settings_for

    return app_settings(app_settings_for("."))


THIRD_PARTY_LOGGERS = ("azure", "urllib3", "botocore", "boto3", "s3transfer", "py4j", "pyspark", "hpack")
# Top-level modules of the optional extras (pyproject.toml), for the one-line "install" hint.
_EXTRAS = {"azure": "azure", "boto3": "aws", "botocore": "aws", "pyspark": "spark"}


def _extra_for(module: str) -> str | None:
    """The extra that provides ``module``, if any.

    Example:
        >>> _extra_for("azure.functions"), _extra_for("boto3"), _extra_for("numpy")
        ('azure', 'aws', None)
    """
    return _EXTRAS.get(module.split(".")[0])


def _partitions_running() -> bool:
    return any(t.name.startswith(THREAD_PREFIX) and t.is_alive() for t in threading.enumerate())


def _interrupted() -> int:
    """Exit status 130 after Ctrl-C, 143 after SIGTERM. Partitions abandoned before their commit may still
    be running on worker threads (they can no longer commit): leave now rather than wait for them at
    interpreter exit."""
    code = 128 + _stopped_by[0]
    if _partitions_running():
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)
    return code


# The signal that stopped the command: SIGINT (Ctrl-C) unless SIGTERM came (a scheduler, a container runtime
# or the Functions host stopping it), which the command line handles as Ctrl-C.
_stopped_by = [int(signal.SIGINT)]


def _on_sigterm(signum: int, _frame: Any) -> None:
    _stopped_by[0] = signum
    raise KeyboardInterrupt


def _stop_on_sigterm() -> Any:
    """SIGTERM handled like Ctrl-C for the command's lifetime (commits under way finish, nothing new
    starts, a summary, exit 143); the handler it replaces, to restore. Only the command line does this:
    the library installs no signal handler."""
    _stopped_by[0] = int(signal.SIGINT)
    try:
        return signal.signal(signal.SIGTERM, _on_sigterm)
    except ValueError:  # not the main thread: leave signals alone
        return None


def _restore(previous: Any) -> None:
    if previous is not None:
        signal.signal(signal.SIGTERM, previous)


if __name__ == "__main__":
    raise SystemExit(main())


def _units(plan: Any) -> str:
    """What cuts a plan's table into units: the partition column, value ranges or nothing."""
    if plan.partition_name:
        return str(plan.partition_name)
    return "value ranges" if any(getattr(p, "value_range", None) for p in plan.partitions) else "(whole table)"
