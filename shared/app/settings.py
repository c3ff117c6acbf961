"""App settings (environment variables) read by the function app and the Lambda adapter.

This module is the single list of settings: the README table, ``local.settings.json.example`` and the
infrastructure templates are checked against it by the tests.

Example:
    >>> [s.name for s in SETTINGS if s.required]
    ['DELTAEXTRAS_TABLES']
    >>> get("DELTAEXTRAS_QUEUE", env={})
    'deltaextras-rorder'
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass

from ..errors import InvalidArgumentError

DEFAULT_QUEUE = "deltaextras-rorder"


@dataclass(frozen=True)
class Setting:
    """One app setting: its name, default (``None``: no default) and what it is for."""

    name: str
    default: str | None
    required: bool
    doc: str
    platforms: tuple[str, ...] = ("azure", "aws")


SETTINGS: tuple[Setting, ...] = (
    Setting(
        "DELTAEXTRAS_TABLES",
        None,
        True,
        'JSON list of tables to maintain: [{"uri": "abfss://c@acct.dfs.core.windows.net/t", "by": '
        '"node_id", "sort_by": ["utc_time"], "unique_by": ["utc_time"], "target_file_size": 134217728}]. '
        "It is also the allow-list: the worker refuses messages for any other table.",
    ),
    Setting("DELTAEXTRAS_QUEUE", DEFAULT_QUEUE, False, "Work queue name (Azure queue or SQS queue name)."),
    Setting(
        "DELTAEXTRAS_POISON_QUEUE",
        DEFAULT_QUEUE + "-poison",
        False,
        "Dead-letter queue for permanent failures (the Functions host's '<queue>-poison' convention).",
        ("azure",),
    ),
    Setting(
        "DELTAEXTRAS_SCHEDULE",
        "0 0 * * * *",
        False,
        "Orchestrator timer, NCRONTAB with seconds (hourly by default).",
        ("azure",),
    ),
    Setting(
        "DELTAEXTRAS_STORAGE",
        None,
        False,
        "Queue storage connection prefix: either a connection string in DELTAEXTRAS_STORAGE "
        "(Azurite) or identity-based DELTAEXTRAS_STORAGE__queueServiceUri (+ __credential, __clientId).",
        ("azure",),
    ),
    Setting(
        "DELTAEXTRAS_STORAGE_OPTIONS",
        "{}",
        False,
        "JSON object of extra storage options for the tables (deltalake/object_store keys); "
        "prefer managed identity to secrets here.",
    ),
    Setting(
        "AZURE_CLIENT_ID",
        None,
        False,
        "Client ID of the user-assigned managed identity used for table and queue access.",
        ("azure",),
    ),
    Setting(
        "DELTAEXTRAS_QUEUE_URL",
        None,
        False,
        "SQS work queue URL (the orchestrator sends here).",
        ("aws",),
    ),
    Setting(
        "DELTAEXTRAS_DLQ_URL",
        None,
        False,
        "SQS dead-letter queue URL for permanent failures.",
        ("aws",),
    ),
)

_BY_NAME = {s.name: s for s in SETTINGS}


def get(name: str, env: Mapping[str, str] | None = None) -> str | None:
    """Read a setting from the environment, falling back to its default.

    Example:
        >>> get("DELTAEXTRAS_SCHEDULE", env={"DELTAEXTRAS_SCHEDULE": "0 */5 * * * *"})
        '0 */5 * * * *'
    """
    setting = _BY_NAME.get(name)
    if setting is None:
        raise InvalidArgumentError(f"{name} is not a deltaextras app setting")
    env = os.environ if env is None else env
    value = env.get(name)
    if value is None or value == "":
        if setting.required:
            raise InvalidArgumentError(f"app setting {name} is required: {setting.doc}")
        return setting.default
    return value


def storage_options(items: list[str] | None = None, env: Mapping[str, str] | None = None) -> dict[str, str] | None:
    """Storage options for a command: ``DELTAEXTRAS_STORAGE_OPTIONS`` (JSON) overlaid with ``KEY=VALUE`` items.

    Example:
        >>> env = {"DELTAEXTRAS_STORAGE_OPTIONS": '{"AWS_REGION": "us-east-1"}'}
        >>> storage_options(["AWS_REGION=eu-west-1"], env=env)
        {'AWS_REGION': 'eu-west-1'}
        >>> storage_options(None, env={}) is None
        True
    """
    import json

    opts: dict[str, str] = {}
    raw = get("DELTAEXTRAS_STORAGE_OPTIONS", env)
    if raw:
        try:
            loaded = json.loads(raw)
        except json.JSONDecodeError as exc:
            raise InvalidArgumentError(f"DELTAEXTRAS_STORAGE_OPTIONS is not JSON: {exc.msg}") from None
        if not isinstance(loaded, dict):
            raise InvalidArgumentError("DELTAEXTRAS_STORAGE_OPTIONS must be a JSON object of strings")
        opts.update({str(k): str(v) for k, v in loaded.items()})
    for item in items or []:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise InvalidArgumentError(f"--storage-option {item!r} must be KEY=VALUE")
        opts[key] = value
    return opts or None
