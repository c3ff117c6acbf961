"""Manual reruns: put work messages for chosen partitions (or every partition that needs work) on the
work queue, outside the orchestrator's schedule.

* ``--partition V`` writes the message an operator would write by hand, ``{"path": ..., "partition_value":
  V}``, once the table shows live files in that partition (a partition without any has nothing to
  rewrite: refused in one line, nothing sent); the worker plans that partition from the then current
  snapshot with the table's configured options (options given on the command line go into the message and
  win). The queue is asked first: a queue that cannot be reached or does not exist fails in one line
  within seconds, nothing sent.
* ``--all`` plans the table now and sends one message per partition that is not in layout, exactly as
  the orchestrator does.

Messages go to the Azure queue ``DELTAEXTRAS_QUEUE`` over the ``DELTAEXTRAS_STORAGE`` connection, or
to SQS when ``--sqs-url`` or ``DELTAEXTRAS_QUEUE_URL`` is given; ``--print`` only prints them (base64
JSON, the body ``az storage message put`` needs; ``--json`` prints plain JSON, for SQS).

Example:
    >>> [json.loads(b) for b in build_messages("abfss://lake@acct.dfs.core.windows.net/sensors", partitions=["3"])]
    [{'path': 'abfss://lake@acct.dfs.core.windows.net/sensors', 'partition_value': '3'}]
"""

from __future__ import annotations

import argparse
import base64
import json
import os
import sys
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from ..core.storage import normalize_uri
from ..errors import InvalidArgumentError
from ..ops.rorder.message import RorderMessage, partition_value_to_str
from ..ops.rorder.options import parse_sort_item
from ..ops.rorder.plan import plan_units
from . import preflight
from .config import AppConfig, TableConfig

Send = Callable[[Sequence[str]], Any]


def _option_keys(options: Mapping[str, Any] | None) -> dict[str, Any]:
    return {k: v for k, v in (options or {}).items() if v is not None}


def resolve_table(table: str, env: Mapping[str, str] | None = None, *, required: bool = False) -> TableConfig | None:
    """The configured table named (by URI or name) ``table``; None when ``DELTAEXTRAS_TABLES`` is unset
    (unless ``required``: a message for a queue needs the worker's allow-list to hold its table).

    Raises :class:`InvalidArgumentError` when tables are configured but this one is not: the worker
    would refuse its messages.
    """
    env = os.environ if env is None else env
    if not env.get("DELTAEXTRAS_TABLES"):
        if required:
            raise InvalidArgumentError(
                f"DELTAEXTRAS_TABLES is not set, so the worker would refuse (dead-letter) a message for {table}; "
                "set it as the function app has it (or run where local.settings.json holds it), or --print"
            )
        return None
    config = AppConfig.from_env(env)
    found = config.find(table)
    if found is None:
        raise InvalidArgumentError(
            f"{table} is not in DELTAEXTRAS_TABLES; the worker would refuse (dead-letter) its messages. "
            f"Configured: {', '.join(t.name + '=' + t.uri for t in config.tables)[:300]}"
        )
    return found


def build_messages(
    table: str,
    *,
    partitions: Sequence[Any] | None = None,
    all_partitions: bool = False,
    partition_name: str | None = None,
    options: Mapping[str, Any] | None = None,
    storage_options: Mapping[str, str] | None = None,
    env: Mapping[str, str] | None = None,
    require_configured: bool = False,
) -> list[str]:
    """The message bodies (JSON text) for the chosen partitions of ``table``.

    ``options`` (``by``, ``sort_by``, ``unique_by``, ``target_file_size``, ``memory_budget``,
    ``max_deleted_rows_ratio``, ``layout``) go into the messages; with ``all_partitions`` they also drive the plan,
    over the table's configured ones.
    """
    if bool(partitions) == bool(all_partitions):
        raise InvalidArgumentError("name partitions (--partition V, repeatable) or --all, not both or neither")
    configured = resolve_table(table, env, required=require_configured)
    uri = configured.uri if configured else normalize_uri(table)
    extra = _option_keys(options)
    if all_partitions:
        kwargs: dict[str, Any] = configured.plan_kwargs() if configured else {}
        kwargs.update(extra)
        if storage_options is not None:
            kwargs["storage_options"] = {**(kwargs.get("storage_options") or {}), **storage_options}
        return [m.to_json() for m in plan_units(uri, **kwargs).messages()]
    bodies = []
    for value in partitions or []:
        data: dict[str, Any] = {"path": uri, "partition_value": partition_value_to_str(value)}
        if partition_name:
            data["partition_name"] = partition_name
        data.update(extra)
        RorderMessage.from_dict(data)  # validate before anything is sent
        bodies.append(json.dumps(data, separators=(",", ":")))
    return bodies


def _check_partitions(
    uri: str,
    configured: TableConfig | None,
    partitions: Sequence[Any],
    storage_options: Mapping[str, str] | None,
) -> None:
    """Refuses a partition that holds no live file at the table's current version: a worker would find
    nothing to rewrite in it (a typo, or a range no node reaches). The table is planned for those
    partitions only, as the worker will."""
    kwargs: dict[str, Any] = configured.plan_kwargs() if configured else {}
    if storage_options is not None:
        kwargs["storage_options"] = {**(kwargs.get("storage_options") or {}), **storage_options}
    plan_units(uri, partitions=list(partitions), **kwargs)


def open_sender(
    env: Mapping[str, str] | None = None, *, queue: str | None = None, sqs_url: str | None = None, check: bool = False
) -> Send:
    """The ``send`` callable for the configured queue: SQS when a queue URL is given or set, else Azure.
    ``check``: ask the queue first, with few retries, and fail in one line when it cannot be reached or
    does not exist (nothing is sent then)."""
    env = os.environ if env is None else env
    url = sqs_url or (None if queue else env.get("DELTAEXTRAS_QUEUE_URL"))
    sender: Any
    if url:
        from .edges.sqs import SqsSender

        sender = SqsSender.from_env(url, env)
    else:
        from . import settings
        from .edges.azure_queue import QueueSender

        name = queue or settings.get("DELTAEXTRAS_QUEUE", env) or settings.DEFAULT_QUEUE
        sender = QueueSender.from_env(name, env, quick=check)
    if check:
        sender.check()
    return sender.send_batch  # type: ignore[no-any-return]


def enqueue(
    table: str,
    *,
    partitions: Sequence[Any] | None = None,
    all_partitions: bool = False,
    send: Send | None = None,
    partition_name: str | None = None,
    options: Mapping[str, Any] | None = None,
    storage_options: Mapping[str, str] | None = None,
    env: Mapping[str, str] | None = None,
) -> list[str]:
    """Build the messages (see :func:`build_messages`) and send them; returns the bodies sent.

    ``send`` defaults to :func:`open_sender` (Azure queue or SQS from the app settings).
    """
    bodies = build_messages(
        table,
        partitions=partitions,
        all_partitions=all_partitions,
        partition_name=partition_name,
        options=options,
        storage_options=storage_options,
        env=env,
        require_configured=send is None,
    )
    if bodies:
        (send or open_sender(env))(bodies)
    return bodies


# ----------------------------------------------------------------------------- command line
def add_parser(subparsers: Any) -> None:
    """Register ``deltaextras enqueue``."""
    p = subparsers.add_parser(
        "enqueue",
        help="put work messages for chosen partitions (or --all that need work) on the work queue",
        description=__doc__.split("Example:")[0] if __doc__ else None,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("table", help="table URI, or the name of a table in DELTAEXTRAS_TABLES")
    which = p.add_mutually_exclusive_group(required=True)
    which.add_argument("--partition", action="append", metavar="VALUE", help="partition value (repeatable)")
    which.add_argument("--all", action="store_true", help="plan now; one message per partition that needs work")
    p.add_argument("--partition-name", help="partition column (default: the table's _range column)")
    p.add_argument(
        "--settings",
        help="local.settings.json to read app settings from, as local-run does (default: ./local.settings.json "
        "when it exists; variables already set win)",
    )
    p.add_argument("--queue", help="Azure queue name (default: DELTAEXTRAS_QUEUE)")
    p.add_argument("--sqs-url", help="send to this SQS queue (default: DELTAEXTRAS_QUEUE_URL when set)")
    p.add_argument("--print", action="store_true", help="print the messages instead of sending (base64 JSON)")
    p.add_argument("--json", action="store_true", help="with --print: plain JSON lines instead of base64")
    p.add_argument("--storage-option", action="append", metavar="KEY=VALUE", help="storage option for --all")
    p.add_argument("--by", help="row-group column")
    p.add_argument("--sort-by", action="append", metavar="COL[:desc]", help="order inside a value (repeatable)")
    p.add_argument("--unique-by", action="append", metavar="COL", help="de-duplication key column (repeatable)")
    p.add_argument(
        "--target-file-size", type=preflight.size, metavar="SIZE", help="output file size (10MB, 128MiB, bytes)"
    )
    p.add_argument("--layout", choices=("full", "tiered"), help="full rewrite or incremental tiers")
    p.set_defaults(func=_main)


def _main(args: argparse.Namespace) -> int:
    sort_by = None
    if args.sort_by:
        sort_by = [list(parse_sort_item(item)) for item in args.sort_by]
    options = {
        "by": args.by,
        "sort_by": sort_by,
        "unique_by": args.unique_by,
        "target_file_size": args.target_file_size,
        "layout": args.layout,
    }
    storage_options = None
    if args.storage_option:
        storage_options = {}
        for item in args.storage_option:
            key, sep, value = item.partition("=")
            if not sep:
                raise InvalidArgumentError(f"--storage-option {item!r} must be KEY=VALUE")
            storage_options[key] = value
    from .edges.local_host import app_settings, app_settings_for

    with app_settings(app_settings_for(".", args.settings)):
        bodies = build_messages(
            args.table,
            partitions=args.partition,
            all_partitions=args.all,
            partition_name=args.partition_name,
            options=options,
            storage_options=storage_options,
            require_configured=not args.print,
        )
        # the queue first (its client library may be missing, its service down), then the table
        send = None if args.print or not bodies else open_sender(queue=args.queue, sqs_url=args.sqs_url, check=True)
        if args.partition and not args.partition_name:
            configured = resolve_table(args.table)
            uri = configured.uri if configured else normalize_uri(args.table)
            _check_partitions(uri, configured, args.partition, storage_options)
        if args.print:
            for body in bodies:
                print(body if args.json else base64.b64encode(body.encode("utf-8")).decode("ascii"))
            return 0
        if send is not None:
            send(bodies)
    print(f"{len(bodies)} message(s) sent", file=sys.stderr)
    return 0
