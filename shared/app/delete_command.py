"""``deltaextras delete TABLE --where PREDICATE``: the command line of :func:`deltaextras.delete`."""

from __future__ import annotations

import json
from typing import Any

from ..ops.delete.delete import DEFAULT_INLINE_MAX_BYTES, MODES, delete
from . import settings


def add_parser(subparsers: Any) -> None:
    """Register ``deltaextras delete TABLE --where "..."``.

    Example:
        >>> import argparse
        >>> sub = argparse.ArgumentParser(prog="deltaextras").add_subparsers()
        >>> add_parser(sub)
        >>> args = sub.choices["delete"].parse_args(["/t", "--where", "node_id = 7"])
        >>> args.where, args.mode, args.func.__name__
        ('node_id = 7', 'auto', 'cmd_delete')
    """
    p = subparsers.add_parser(
        "delete",
        help="delete the rows matching a predicate (deletion vectors when the table enables them)",
        description=(
            "Delete rows where the predicate is TRUE. Predicate: comparisons (= != <> < <= > >=), IN, BETWEEN, "
            "LIKE, IS [NOT] NULL, AND/OR/NOT and parentheses on any top-level column; text in single quotes, "
            "DATE '...' and TIMESTAMP '...' literals, NULL compares as unknown (SQL)."
        ),
    )
    p.add_argument("table", help="table URI: a local path, file://, abfss://, az:// or s3://")
    p.add_argument("--where", required=True, metavar="PREDICATE", help='rows to delete, e.g. "node_id IN (3, 7)"')
    p.add_argument("--storage-option", action="append", metavar="KEY=VALUE", help="deltalake storage option")
    p.add_argument(
        "--mode",
        choices=MODES,
        default="auto",
        help="auto: deletion vectors when the table enables them, else rewrite files (default)",
    )
    p.add_argument(
        "--enable-deletion-vectors",
        action="store_true",
        help="first upgrade the table's protocol (reader 3 / writer 7) and set delta.enableDeletionVectors=true",
    )
    p.add_argument(
        "--inline-max-bytes",
        type=int,
        default=DEFAULT_INLINE_MAX_BYTES,
        metavar="BYTES",
        help=f"keep vectors up to this size inline in the log (default {DEFAULT_INLINE_MAX_BYTES}; 0: never)",
    )
    p.add_argument("--json", action="store_true", help="print the report as JSON")
    p.set_defaults(func=cmd_delete)


def cmd_delete(args: Any) -> int:
    """Run ``deltaextras delete``; prints the report, returns the exit code (0)."""
    options = settings.storage_options(args.storage_option)
    if args.enable_deletion_vectors:
        from ..ops.maintenance.upgrade import enable_deletion_vectors

        version = enable_deletion_vectors(args.table, storage_options=options)
        if not args.json:
            print(
                f"deletion vectors enabled at version {version}"
                if version is not None
                else "deletion vectors were already enabled"
            )
    report = delete(
        args.table, args.where, storage_options=options, mode=args.mode, inline_max_bytes=args.inline_max_bytes
    )
    if args.json:
        print(json.dumps(report.to_dict(), indent=2, default=str))
    else:
        print(report.line())
    return 0
