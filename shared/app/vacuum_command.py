"""``deltaextras vacuum TABLE``: the command line of :func:`deltaextras.vacuum`."""

from __future__ import annotations

import json
import sys
from typing import Any

from ..errors import InvalidArgumentError
from ..ops.maintenance.vacuum import VacuumReport, vacuum
from . import settings


def add_parser(subparsers: Any) -> None:
    """Register ``deltaextras vacuum TABLE``.

    Example:
        >>> import argparse
        >>> sub = argparse.ArgumentParser(prog="deltaextras").add_subparsers()
        >>> add_parser(sub)
        >>> args = sub.choices["vacuum"].parse_args(["/t", "--dry-run"])
        >>> args.dry_run, args.retention_hours, args.func.__name__
        (True, None, 'cmd_vacuum')
    """
    p = subparsers.add_parser(
        "vacuum",
        help="delete data and deletion vector files no version within the retention needs",
        description=(
            "deltalake's vacuum (data files of expired remove actions), then the deletion vector files it "
            "leaves behind. Files used by any version within the retention are kept."
        ),
    )
    p.add_argument("table", help="table URI: a local path, file://, abfss://, az:// or s3://")
    p.add_argument(
        "--retention-hours",
        type=float,
        metavar="HOURS",
        help="keep what versions of the last HOURS need (default: the table's delta.deletedFileRetentionDuration, 168)",
    )
    p.add_argument("--dry-run", action="store_true", help="list what would be deleted, delete nothing")
    p.add_argument(
        "--yes",
        action="store_true",
        help="delete without asking when --retention-hours is under the table's retention (needed when stdin is "
        "not a terminal)",
    )
    p.add_argument(
        "-v", "--verbose", dest="list_files", action="store_true", help="list every file, not only the count"
    )
    p.add_argument("--storage-option", action="append", metavar="KEY=VALUE", help="deltalake storage option")
    p.add_argument("--json", action="store_true", help="print the report as JSON")
    p.set_defaults(func=cmd_vacuum)


def cmd_vacuum(args: Any) -> int:
    """Run ``deltaextras vacuum``: a retention under the table's own asks first (``--yes`` skips the question;
    without a terminal to ask on, it is refused); prints the count and size, ``--verbose`` every file."""
    options = settings.storage_options(args.storage_option)
    if not args.dry_run and not args.yes and args.retention_hours is not None:
        planned = vacuum(args.table, retention_hours=args.retention_hours, dry_run=True, storage_options=options)
        risky = planned.retention_hours < planned.default_retention_hours
        if risky and (planned.data_files or planned.vector_files) and not _confirm(planned):
            print("nothing deleted", file=sys.stderr)
            return 1
    report = vacuum(args.table, retention_hours=args.retention_hours, dry_run=args.dry_run, storage_options=options)
    if args.json:
        print(json.dumps(report.to_dict(), indent=2))
        return 0
    print(report.line())
    keys = report.data_files + report.vector_files
    if args.list_files or getattr(args, "verbose", 0):
        for key in keys:
            print(f"  {key}")
    elif keys:
        print("  (--verbose lists them)")
    return 0


def _confirm(planned: VacuumReport) -> bool:
    """Ask on the terminal before deleting files that versions within the table's retention may still need."""
    count = len(planned.data_files) + len(planned.vector_files)
    risk = (
        f"--retention-hours {planned.retention_hours:g} is under the table's retention "
        f"({planned.default_retention_hours:g} h): readers and writers of versions of the last "
        f"{planned.default_retention_hours:g} h may still need the {count} file(s) ({planned.bytes / 2**20:.2f} MiB)"
    )
    if not sys.stdin.isatty():
        raise InvalidArgumentError(f"{risk}; pass --yes to delete them without asking, or --dry-run to list them")
    print(f"{planned.line()}\n{risk}.", file=sys.stderr)
    answer = input("delete them? [y/N] ")
    return answer.strip().lower() in ("y", "yes")
