"""The function app's configuration: which tables to maintain, with which options, on which queue.

Everything comes from app settings (environment variables, see :mod:`deltaextras.app.settings`).
``DELTAEXTRAS_TABLES`` is a JSON list; each entry is a table URI, or an object::

    {"uri": "abfss://lake@acct.dfs.core.windows.net/sensors",  # required ("path" is accepted too)
     "name": "sensors",                   # optional short name (CLI, logs)
     "by": "node_id",                     # row-group column; default: partition column minus _range
     "sort_by": ["utc_time"],             # str, list of str or [col, "descending"] pairs
     "unique_by": ["node_id", "utc_time"],
     "target_file_size": 134217728,       # bytes
     "memory_budget": 201326592,          # bytes of Arrow data held at once
     "max_deleted_rows_ratio": 0.05,
     "max_footer_bytes": 8192,            # bytes: an output file's Parquet footer stays under this
     "layout": "tiered",                  # "full" (default): rewrite a partition whole; "tiered": incremental
     "min_row_group_bytes": 16384,        # smaller neighbouring values share a row group (0: one per value)
     "storage_options": {}}               # merged over DELTAEXTRAS_STORAGE_OPTIONS for this table

The list is also the worker's allow-list: a message whose ``path`` is not one of these tables is
refused (dead-lettered), so a forged message cannot make the app write anywhere else.

Storage options of a table, lowest precedence first: managed-identity defaults for Azure URIs when no
credential is configured (``azure_client_id`` from ``AZURE_CLIENT_ID``, ``azure_msi_endpoint`` from the
platform's ``IDENTITY_ENDPOINT``), then ``DELTAEXTRAS_STORAGE_OPTIONS``, then the entry's own
``storage_options``.

Example:
    >>> env = {"DELTAEXTRAS_TABLES": '[{"uri": "s3://lake/sensors/", "sort_by": "utc_time"}]'}
    >>> config = AppConfig.from_env(env)
    >>> config.tables[0].uri, config.tables[0].options.sort_by, config.queue
    ('s3://lake/sensors', (('utc_time', 'ascending'),), 'deltaextras-rorder')
    >>> config.table("s3://lake/sensors").name
    'sensors'
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from ..core.storage import normalize_uri
from ..errors import AccessDeniedError, InvalidArgumentError
from ..ops.rorder.message import GROUP_COMMIT_FROM
from ..ops.rorder.options import RorderOptions
from . import settings

_ENTRY_KEYS = {
    "uri",
    "path",
    "name",
    "by",
    "sort_by",
    "unique_by",
    "target_file_size",
    "memory_budget",
    "max_deleted_rows_ratio",
    "max_footer_bytes",
    "layout",
    "min_row_group_bytes",
    "storage_options",
    "group_commit_from",
}
_AZURE_SCHEMES = ("abfs", "abfss", "az", "azure", "adl")
# Any of these (lower-cased) in a table's storage options means "a credential is configured":
# no managed-identity defaults are added then.
_AZURE_CREDENTIAL_HINTS = (
    "account_key",
    "access_key",
    "sas",
    "token",
    "client_secret",
    "federated_token_file",
    "use_azure_cli",
    "use_emulator",
    "skip_signature",
)


def table_key(uri: str) -> str:
    """The form under which table URIs are compared (allow-list, lookups).

    Trailing slashes go, the scheme and the account/bucket part are lower-cased, ``s3a://`` is ``s3://``.

    Example:
        >>> table_key("S3A://Lake/Sensors/")
        's3://lake/Sensors'
    """
    text = normalize_uri(uri)
    if "://" not in text:
        return text
    scheme, rest = text.split("://", 1)
    host, sep, path = rest.partition("/")
    scheme = scheme.lower()
    if scheme == "s3a":
        scheme = "s3"
    return f"{scheme}://{host.lower()}{sep}{path}"


def is_azure_uri(uri: str) -> bool:
    """Whether a table URI points at Azure storage.

    Example:
        >>> is_azure_uri("abfss://c@acct.dfs.core.windows.net/t"), is_azure_uri("s3://b/t")
        (True, False)
    """
    return uri.split("://", 1)[0].lower() in _AZURE_SCHEMES if "://" in uri else False


def managed_identity_options(env: Mapping[str, str]) -> dict[str, str]:
    """object_store options for the app's managed identity on Azure Functions / App Service.

    object_store asks the instance metadata endpoint (169.254.169.254) by default; Functions and App
    Service serve tokens at ``IDENTITY_ENDPOINT`` instead (object_store sends the ``IDENTITY_HEADER``
    secret itself). ``AZURE_CLIENT_ID`` selects the user-assigned identity.

    Example:
        >>> managed_identity_options({"AZURE_CLIENT_ID": "1234", "IDENTITY_ENDPOINT": "http://localhost:8081/msi/token"})
        {'azure_client_id': '1234', 'azure_msi_endpoint': 'http://localhost:8081/msi/token'}
    """
    out: dict[str, str] = {}
    if env.get("AZURE_CLIENT_ID"):
        out["azure_client_id"] = env["AZURE_CLIENT_ID"]
    if env.get("IDENTITY_ENDPOINT"):
        out["azure_msi_endpoint"] = env["IDENTITY_ENDPOINT"]
    return out


@dataclass(frozen=True)
class TableConfig:
    """One table the app maintains: where it is, how it is rewritten, how storage is reached."""

    uri: str
    options: RorderOptions = field(default_factory=RorderOptions)
    storage_options: dict[str, str] = field(default_factory=dict)
    name: str = ""
    # a run that sends at least this many messages for the table commits them through a group commit (0: never)
    group_commit_from: int = GROUP_COMMIT_FROM

    def commit_mode(self, messages: int) -> str | None:
        """How the workers of a run of ``messages`` units commit: ``"group"``, or None (each alone).

        Example:
            >>> t = TableConfig("s3://b/t", group_commit_from=64)
            >>> t.commit_mode(63), t.commit_mode(64), TableConfig("s3://b/t", group_commit_from=0).commit_mode(999)
            (None, 'group', None)
        """
        return "group" if self.group_commit_from and messages >= self.group_commit_from else None

    def message_defaults(self) -> dict[str, Any]:
        """Message keys carrying this table's options (a message's own keys take precedence).

        Example:
            >>> TableConfig("s3://b/t", RorderOptions.build(unique_by="k")).message_defaults()["unique_by"]
            ['k']
        """
        return self.options.message_fields()

    def plan_kwargs(self) -> dict[str, Any]:
        """Keyword arguments of :func:`deltaextras.ops.rorder.plan.plan_units` for this table."""
        o = self.options
        return {
            "by": o.by,
            "sort_by": [list(p) for p in o.sort_by] or None,
            "unique_by": list(o.unique_by) or None,
            "target_file_size": o.target_file_size,
            "memory_budget": o.memory_budget,
            "max_deleted_rows_ratio": o.max_deleted_rows_ratio,
            "layout": o.layout,
            "max_footer_bytes": o.max_footer_bytes,
            "min_row_group_bytes": o.min_row_group_bytes,
            "storage_options": dict(self.storage_options) or None,
        }


@dataclass(frozen=True)
class AppConfig:
    """The tables, the work queue and the dead-letter queue of one function app."""

    tables: tuple[TableConfig, ...]
    queue: str = settings.DEFAULT_QUEUE
    poison_queue: str = settings.DEFAULT_QUEUE + "-poison"

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> AppConfig:
        """Read the app settings (``os.environ`` by default).

        Example:
            >>> AppConfig.from_env({"DELTAEXTRAS_TABLES": "[]"})
            Traceback (most recent call last):
            ...
            deltaextras.errors.InvalidArgumentError: DELTAEXTRAS_TABLES lists no table; ...
        """
        env = os.environ if env is None else env
        raw = settings.get("DELTAEXTRAS_TABLES", env) or ""
        global_options = _json_object(
            settings.get("DELTAEXTRAS_STORAGE_OPTIONS", env) or "{}", "DELTAEXTRAS_STORAGE_OPTIONS"
        )
        queue = settings.get("DELTAEXTRAS_QUEUE", env) or settings.DEFAULT_QUEUE
        poison = env.get("DELTAEXTRAS_POISON_QUEUE") or f"{queue}-poison"
        tables = tuple(_table(entry, i, global_options, env) for i, entry in enumerate(_json_list(raw)))
        if not tables:
            raise InvalidArgumentError(
                "DELTAEXTRAS_TABLES lists no table; set it to a JSON list such as "
                '[{"uri": "abfss://container@account.dfs.core.windows.net/table"}]'
            )
        seen: dict[str, str] = {}
        for t in tables:
            key = table_key(t.uri)
            if key in seen:
                raise InvalidArgumentError(f"DELTAEXTRAS_TABLES lists {t.uri} twice")
            seen[key] = t.uri
        return cls(tables=tables, queue=queue, poison_queue=poison)

    def find(self, name_or_uri: str) -> TableConfig | None:
        """The configured table with this URI (in any spelling :func:`table_key` equates) or name."""
        try:
            key = table_key(name_or_uri)
        except (OSError, ValueError, InvalidArgumentError):
            key = name_or_uri
        for t in self.tables:
            if table_key(t.uri) == key or t.name == name_or_uri:
                return t
        return None

    def table(self, path: str) -> TableConfig:
        """The configured table a message names; :class:`AccessDeniedError` if it is not configured."""
        found = self.find(path)
        if found is None:
            known = ", ".join(t.uri for t in self.tables)
            raise AccessDeniedError(
                f"table {path} is not in DELTAEXTRAS_TABLES (the allow-list); refusing to touch it. "
                f"Configured: {known[:300]}"
            )
        return found

    def describe(self) -> dict[str, Any]:
        """A log-safe summary (storage secrets masked)."""
        from ..core.storage import redact

        return {
            "queue": self.queue,
            "poison_queue": self.poison_queue,
            "tables": [
                {"uri": t.uri, "name": t.name, **t.options.to_json(), "storage_options": redact(t.storage_options)}
                for t in self.tables
            ],
        }


def settings_markdown() -> str:
    """The app settings of :mod:`deltaextras.app.settings` as a Markdown table (the README's and
    docs/function-app.md's settings table is this text).

    Example:
        >>> settings_markdown().splitlines()[0]
        '| Setting | Default | Platforms | Meaning |'
    """
    rows = ["| Setting | Default | Platforms | Meaning |", "| --- | --- | --- | --- |"]
    for s in settings.SETTINGS:
        default = "**required**" if s.required else ("(none)" if s.default is None else f"`{s.default}`")
        doc = s.doc.replace("|", "\\|").replace("<", "&lt;").replace(">", "&gt;")
        rows.append(f"| `{s.name}` | {default} | {', '.join(s.platforms)} | {doc} |")
    return "\n".join(rows)


# ----------------------------------------------------------------------------- parsing
def _json_list(raw: str) -> list[Any]:
    try:
        value = json.loads(raw)
    except json.JSONDecodeError as exc:
        raise InvalidArgumentError(f"DELTAEXTRAS_TABLES is not valid JSON ({exc.msg} at char {exc.pos})") from None
    if isinstance(value, (dict, str)):
        value = [value]
    if not isinstance(value, list):
        raise InvalidArgumentError("DELTAEXTRAS_TABLES must be a JSON list of table URIs or objects")
    return value


def _json_object(raw: str, name: str) -> dict[str, str]:
    try:
        value = json.loads(raw)
    except json.JSONDecodeError as exc:
        raise InvalidArgumentError(f"{name} is not valid JSON ({exc.msg} at char {exc.pos})") from None
    if not isinstance(value, dict):
        raise InvalidArgumentError(f"{name} must be a JSON object of storage options")
    return {str(k): str(v) for k, v in value.items()}


def _table(entry: Any, index: int, global_options: dict[str, str], env: Mapping[str, str]) -> TableConfig:
    where = f"DELTAEXTRAS_TABLES[{index}]"
    if isinstance(entry, str):
        entry = {"uri": entry}
    if not isinstance(entry, dict):
        raise InvalidArgumentError(f"{where} must be a table URI or an object with 'uri'")
    unknown = sorted(set(entry) - _ENTRY_KEYS)
    if unknown:
        raise InvalidArgumentError(f"{where} has unknown key {unknown[0]!r} (known: {', '.join(sorted(_ENTRY_KEYS))})")
    uri = entry.get("uri", entry.get("path"))
    if not isinstance(uri, str) or not uri.strip():
        raise InvalidArgumentError(f"{where} needs 'uri': the table URI as a non-empty string")
    uri = normalize_uri(uri)
    try:
        options = RorderOptions.from_mapping(entry)
    except InvalidArgumentError as exc:
        raise InvalidArgumentError(f"{where} ({uri}): {exc}") from None
    own = entry.get("storage_options") or {}
    if not isinstance(own, dict):
        raise InvalidArgumentError(f"{where}: 'storage_options' must be an object")
    merged = {**global_options, **{str(k): str(v) for k, v in own.items()}}
    if is_azure_uri(uri) and not _has_azure_credential(merged):
        merged = {**managed_identity_options(env), **merged}
    name = entry.get("name") or uri.rstrip("/").rsplit("/", 1)[-1]
    if not isinstance(name, str):
        raise InvalidArgumentError(f"{where}: 'name' must be a string")
    group = entry.get("group_commit_from", GROUP_COMMIT_FROM)
    if isinstance(group, bool) or not isinstance(group, int) or group < 0:
        raise InvalidArgumentError(
            f"{where}: 'group_commit_from' must be a non-negative integer (0: never), got {group!r}"
        )
    return TableConfig(uri=uri, options=options, storage_options=merged, name=name, group_commit_from=group)


def _has_azure_credential(options: Mapping[str, str]) -> bool:
    keys = [k.lower() for k in options]
    return any(h in k for k in keys for h in _AZURE_CREDENTIAL_HINTS)
