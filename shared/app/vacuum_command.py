"""``deltaextras vacuum TABLE``: the command line of :func:`deltaextras.vacuum`."""

from __future__ import annotations

import json
from typing import Any

from ..ops.vacuum import vacuum
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
    p.add_argument("--storage-option", action="append", metavar="KEY=VALUE", help="deltalake storage option")
    p.add_argument("--json", action="store_true", help="print the report as JSON")
    p.set_defaults(func=cmd_vacuum)


def cmd_vacuum(args: Any) -> int:
    """Run ``deltaextras vacuum``; prints the report, returns the exit code (0)."""
    report = vacuum(
        args.table,
        retention_hours=args.retention_hours,
        dry_run=args.dry_run,
        storage_options=settings.storage_options(args.storage_option),
    )
    if args.json:
        print(json.dumps(report.to_dict(), indent=2))
    else:
        print(report.line())
        for key in report.data_files + report.vector_files:
            print(f"  {key}")
    return 0
