"""The work message: one partition of one table to rewrite, as JSON (and base64 JSON on queues).

Schema version 2 (version 1 is every message without ``range``; both are read). Keys (all but ``path``
optional):

=====================  ===========================================  ==========================================
key                    type                                         meaning
=====================  ===========================================  ==========================================
message_version        int (1 or 2)                                 schema version; absent = 1 (legacy); 2
                                                                    when ``range`` is present
path                   str                                          table URI (local path, file://, abfss://,
                                                                    az://, s3://)
version                int in [0, 2^63 - 1]                         table version the plan was made at;
                                                                    absent: plan from the current snapshot
partition_name         str or null                                  partition column; absent: the table's
                                                                    only partition column
partition_value        str, int (at most 38 digits), finite float,  partition value; null = the null partition
                       bool or null
files                  list of [path, size] or null (size a long)   the planned inputs; absent: every live
                                                                    file of the partition at ``version``
range                  {column, low, high, nulls} (version 2)       a value-range unit of a clustered or
                                                                    unpartitioned table: its files are the
                                                                    live files at ``version`` whose ``by``
                                                                    statistics overlap low..high (inclusive;
                                                                    nulls: null rows belong to it), see
                                                                    :mod:`deltaextras.ops.rorder.value_ranges`
by                     str                                          row-group column (default: partition
                                                                    column minus ``_range``)
sort_by                str, list of str or [col, order] pairs       order inside a value
unique_by              str or list of str                           de-duplication key
target_file_size       int in [1, 2^63 - 1]                         output file size in bytes
memory_budget          int in [1, 2^63 - 1]                         Arrow bytes held at once
max_footer_bytes       int in [1, 2^63 - 1]                         an output file's footer bound in bytes
                                                                    (default: 16 KiB, 8 KiB tiered)
max_materialize_size   int in [1, 2^63 - 1]                         accepted for compatibility; ignored
max_deleted_rows_ratio number in [0, 1]                             purge threshold for deletion vectors
layout                 "full" or "tiered"                           full rewrite (default) or incremental
                                                                    tiers (:mod:`deltaextras.ops.rorder.tiers`)
min_row_group_bytes    int in [0, 2^63 - 1]                         smaller neighbouring values share a row
                                                                    group (default: 16 KiB tiered, 0 full)
=====================  ===========================================  ==========================================

Unknown keys, wrong types and numbers out of range are rejected with a one-line :class:`MessageError`
naming the key and the limit; every number is bounded before it is converted.

Example:
    >>> m = RorderMessage.from_dict({"path": "/data/t", "version": 3, "partition_value": 0,
    ...                              "sort_by": "utc_time"})
    >>> m.partition_value, m.options.sort_by
    ('0', (('utc_time', 'ascending'),))
    >>> RorderMessage.decode(m.encode()) == m
    True
"""

from __future__ import annotations

import base64
import binascii
import dataclasses
import json
import math
from dataclasses import dataclass, field
from typing import Any

from ...errors import InvalidArgumentError, MessageError, shown
from .options import (  # versions and sizes are Delta/Parquet longs
    MAX_LONG,
    OPTION_KEYS,
    RorderOptions,
)
from .value_ranges import ValueRange

MESSAGE_VERSION = 2
LEGACY_MESSAGE_VERSION = 1  # every message without a value range is written (and read) as version 1
# Azure queue messages hold 64 KiB of base64, i.e. 48 KiB of JSON; a plan lists a unit's files in its
# message while the message stays under this many characters (keeping a margin).
MAX_MESSAGE_JSON = 40_000
# Integer partition values: Delta's widest integral partition type is decimal(38, 0).
MAX_PARTITION_DIGITS = 38
UNREADABLE_JSON = "message is not a readable JSON object (a number with thousands of digits, or nesting too deep)"

_SCALAR = (str, int, float, bool)
_KNOWN = {
    "message_version",
    "path",
    "version",
    "partition_name",
    "partition_value",
    "files",
    *OPTION_KEYS,
    "max_materialize_size",
    "commit",
    "range",
}
# A run of at least this many units of one table commits them through a group commit (measured: bench/README.md)
GROUP_COMMIT_FROM = 16
COMMIT_MODES = ("unit", "group")  # how a worker commits: racing for a version alone, or through a group commit


@dataclass(frozen=True)
class RorderMessage:
    """A validated work message. Build it with :meth:`from_dict` or :meth:`decode`."""

    path: str
    version: int | None = None
    partition_name: str | None = None
    # The partition value as Delta stores it (a string), None for the null partition.
    partition_value: str | None = None
    # Whether the message names a partition at all (False: the table's only unit, or "plan it").
    has_partition: bool = False
    files: tuple[tuple[str, int], ...] | None = None
    options: RorderOptions = field(default_factory=RorderOptions)
    # "group": stage the commit for a group committer (deltaextras.core.group_commit); None/"unit": alone
    commit: str | None = None
    # A value-range unit (a clustered or unpartitioned table), None for a partition or the whole table.
    value_range: ValueRange | None = None

    # ------------------------------------------------------------------ parsing
    @classmethod
    def from_dict(cls, data: Any) -> RorderMessage:
        """Validate a decoded JSON object and build the message.

        Example:
            >>> RorderMessage.from_dict({"path": "s3://b/t", "fles": []})
            Traceback (most recent call last):
            ...
            deltaextras.errors.MessageError: message key 'fles' is not known (known keys: by, commit, files, ...
        """
        if not isinstance(data, dict):
            raise MessageError(f"a message must be a JSON object, got {type(data).__name__}")
        unknown = sorted(set(data) - _KNOWN)
        if unknown:
            raise MessageError(
                f"message key {unknown[0]!r} is not known (known keys: {', '.join(sorted(_KNOWN))}); "
                "fix the producer or upgrade deltaextras"
            )
        mv = data.get("message_version", LEGACY_MESSAGE_VERSION)
        if _not_int(mv) or mv not in (LEGACY_MESSAGE_VERSION, MESSAGE_VERSION):
            raise MessageError(
                f"message_version {shown(mv)} is not supported (this deltaextras reads versions "
                f"{LEGACY_MESSAGE_VERSION} and {MESSAGE_VERSION})"
            )
        value_range = _parse_range(data, mv)
        path = data.get("path")
        if not isinstance(path, str) or not path.strip():
            got = "" if path is None else f", got {_got(path)}"
            raise MessageError(f"message needs 'path': the table URI as a non-empty string{got}")
        version = data.get("version")
        if version is not None and (_not_int(version) or not 0 <= version <= MAX_LONG):
            raise MessageError(
                f"message 'version' must be an integer from 0 to {MAX_LONG} (a Delta version), got {_got(version)}"
            )
        pname = data.get("partition_name")
        if pname is not None and (not isinstance(pname, str) or not pname):
            raise MessageError(f"message 'partition_name' must be a non-empty string, got {shown(pname)}")
        has_partition = "partition_value" in data
        pvalue = data.get("partition_value")
        if pvalue is not None and not isinstance(pvalue, _SCALAR):
            raise MessageError(
                f"message 'partition_value' must be a string, number, boolean or null, got {type(pvalue).__name__}"
            )
        files = data.get("files")
        if files is not None:
            files = _parse_files(files)
        for key in ("target_file_size", "memory_budget", "max_footer_bytes", "max_materialize_size"):
            v = data.get(key)
            if v is not None and (_not_int(v) or not 0 < v <= MAX_LONG):
                raise MessageError(f"message {key!r} must be an integer from 1 to {MAX_LONG} (bytes), got {_got(v)}")
        v = data.get("min_row_group_bytes")
        if v is not None and (_not_int(v) or not 0 <= v <= MAX_LONG):
            raise MessageError(f"message 'min_row_group_bytes' must be an integer from 0 to {MAX_LONG}, got {_got(v)}")
        commit = data.get("commit")
        if commit is not None and commit not in COMMIT_MODES:
            raise MessageError(f"message 'commit' must be one of {', '.join(COMMIT_MODES)}, got {shown(commit)}")
        try:
            options = RorderOptions.from_mapping(
                data if value_range is None or data.get("by") is not None else {**data, "by": value_range.column}
            )
        except InvalidArgumentError as exc:
            raise MessageError(f"message options are invalid: {exc}") from None
        return cls(
            path=path.strip(),
            version=version,
            partition_name=pname,
            partition_value=partition_value_to_str(pvalue),
            has_partition=has_partition,
            files=files,
            options=options,
            commit=commit,
            value_range=value_range,
        )

    @classmethod
    def decode(cls, text: str | bytes) -> RorderMessage:
        """Parse a queue body: JSON, or base64 of JSON (as Azure queues carry it).

        Example:
            >>> RorderMessage.decode('{"path": "/t"}').path
            '/t'
            >>> RorderMessage.decode("not json")
            Traceback (most recent call last):
            ...
            deltaextras.errors.MessageError: message is neither JSON nor base64 of JSON: ...
        """
        data = decode_body(text)
        return cls.from_dict(data)

    # ------------------------------------------------------------------ output
    def to_dict(self) -> dict[str, Any]:
        """The message as a JSON object (keys with no value are left out).

        Example:
            >>> RorderMessage.from_dict({"path": "/t", "version": 1}).to_dict()["version"]
            1
        """
        version = LEGACY_MESSAGE_VERSION if self.value_range is None else MESSAGE_VERSION
        out: dict[str, Any] = {"message_version": version, "path": self.path}
        if self.value_range is not None:
            out["range"] = self.value_range.to_json()
        if self.version is not None:
            out["version"] = self.version
        if self.partition_name is not None:
            out["partition_name"] = self.partition_name
        if self.has_partition:
            out["partition_value"] = self.partition_value
        if self.files is not None:
            out["files"] = [[p, s] for p, s in self.files]
        out.update(self.options.message_fields())
        if self.commit is not None:  # a message that commits alone stays as older releases read it
            out["commit"] = self.commit
        return out

    def to_json(self) -> str:
        """Compact JSON text of :meth:`to_dict`."""
        return json.dumps(self.to_dict(), separators=(",", ":"), sort_keys=True)

    def encode(self) -> str:
        """Base64 of the JSON text, as the Azure Functions queue trigger expects.

        Example:
            >>> RorderMessage.from_dict({"path": "/t"}).encode()[:8]
            'eyJtYXhf'
        """
        return base64.b64encode(self.to_json().encode("utf-8")).decode("ascii")

    def with_files(self, files: tuple[tuple[str, int], ...] | None) -> RorderMessage:
        """A copy with another file list (``None``: the worker plans the partition at ``version``)."""
        return RorderMessage(
            path=self.path,
            version=self.version,
            partition_name=self.partition_name,
            partition_value=self.partition_value,
            has_partition=self.has_partition,
            files=files,
            options=self.options,
            commit=self.commit,
            value_range=self.value_range,
        )

    def with_commit(self, commit: str | None) -> RorderMessage:
        """A copy that commits ``"group"`` (through a group committer) or ``"unit"`` / None (alone).

        Example:
            >>> RorderMessage.from_dict({"path": "/t"}).with_commit("group").to_dict()["commit"]
            'group'
        """
        return dataclasses.replace(self, commit=commit)

    def describe(self) -> str:
        """Short human label: ``table[partition=value]@version``."""
        part = ""
        if self.value_range is not None:
            part = f"[{self.value_range.label}]"
        elif self.has_partition:
            part = f"[{self.partition_name or '?'}={self.partition_value}]"
        at = f"@{self.version}" if self.version is not None else ""
        return f"{self.path}{part}{at}"


def partition_value_to_str(value: Any) -> str | None:
    """Delta partition values are strings in the log; numbers and booleans are spelled as Delta does.

    Example:
        >>> partition_value_to_str(3), partition_value_to_str(True), partition_value_to_str(None)
        ('3', 'true', None)
    """
    if value is None:
        return None
    if isinstance(value, bool):
        return "true" if value else "false"
    _check_partition_value(value)
    return str(value)


def _parse_range(data: dict[str, Any], version: int) -> ValueRange | None:
    """The value-range unit of a version 2 message (None when absent).

    Example:
        >>> _parse_range({"range": {"column": "k", "low": 0, "high": 9}}, 1)
        Traceback (most recent call last):
        ...
        deltaextras.errors.MessageError: message key 'range' needs message_version 2 (got 1)
    """
    if "range" not in data:
        if version == MESSAGE_VERSION:
            raise MessageError(
                f"message_version {MESSAGE_VERSION} is the value-range unit and needs 'range'; a partition's "
                f"message is version {LEGACY_MESSAGE_VERSION}"
            )
        return None
    if version < MESSAGE_VERSION:
        raise MessageError(f"message key 'range' needs message_version {MESSAGE_VERSION} (got {version})")
    if "partition_value" in data or data.get("partition_name") is not None:
        raise MessageError("a message names either a partition or a value 'range', not both")
    value_range = ValueRange.from_json(data["range"])
    by = data.get("by")
    if by is not None and by != value_range.column:
        raise MessageError(f"message 'range' column {value_range.column!r} is not the by column {by!r}")
    return value_range


def _not_int(v: Any) -> bool:
    return isinstance(v, bool) or not isinstance(v, int)


def _got(v: Any) -> str:
    """What a message carried, for an error: the value, or its kind when that says more.

    Example:
        >>> _got("3"), _got(3.5), _got(None), _got(-1)
        ("a string ('3')", 'a number (3.5)', 'null', 'a number (-1)')
    """
    if v is None:
        return "null"
    if isinstance(v, bool):
        return f"a boolean ({'true' if v else 'false'})"
    if isinstance(v, str):
        return f"a string ({shown(v, 40)})"
    if isinstance(v, (int, float)):
        return f"a number ({shown(v)})"
    if isinstance(v, (list, tuple)):
        return "a list"
    if isinstance(v, dict):
        return "an object"
    return shown(v)


def _check_partition_value(v: Any) -> None:
    """Numbers are bounded before they are spelled: Python refuses to print an int of 4300+ digits.

    Example:
        >>> _check_partition_value(10**40)
        Traceback (most recent call last):
        ...
        deltaextras.errors.MessageError: message 'partition_value' must be an integer of at most 38 digits ...
    """
    if isinstance(v, bool):
        return
    if isinstance(v, int) and abs(v) >= 10**MAX_PARTITION_DIGITS:
        raise MessageError(
            f"message 'partition_value' must be an integer of at most {MAX_PARTITION_DIGITS} digits "
            f"(Delta's widest integral partition type, decimal(38, 0)), got {shown(v)}"
        )
    if isinstance(v, float) and not math.isfinite(v):
        raise MessageError(
            f"message 'partition_value' must be a finite number, got {shown(v)}; send a NaN or infinite "
            "partition value as the string Delta's log holds for it"
        )


def _parse_files(files: Any) -> tuple[tuple[str, int], ...]:
    if not isinstance(files, list):
        raise MessageError("message 'files' must be a list of [path, size_bytes] pairs")
    out = []
    for i, item in enumerate(files):
        if isinstance(item, str):
            out.append((item, -1))
            continue
        if not isinstance(item, (list, tuple)) or len(item) != 2 or not isinstance(item[0], str) or _not_int(item[1]):
            raise MessageError(f"message 'files[{i}]' must be a [path, size_bytes] pair, got {shown(item)}")
        if not 0 <= item[1] <= MAX_LONG:
            raise MessageError(
                f"message 'files[{i}]' size must be an integer from 0 to {MAX_LONG} (bytes), got {shown(item[1])}"
            )
        out.append((item[0], int(item[1])))
    return tuple(out)


def decode_body(body: str | bytes) -> dict[str, Any]:
    """A queue body (JSON, or base64 of JSON) as a JSON object; :class:`MessageError` otherwise.

    Example:
        >>> decode_body(base64.b64encode(b'{"path": "/t"}'))
        {'path': '/t'}
    """
    if isinstance(body, (bytes, bytearray)):
        try:
            body = bytes(body).decode("utf-8")
        except UnicodeDecodeError:
            raise MessageError("message body is not UTF-8 text") from None
    stripped = body.strip()
    if not stripped.startswith(("{", "[")):
        try:
            stripped = base64.b64decode(stripped, validate=True).decode("utf-8").strip()
        except (binascii.Error, ValueError, UnicodeDecodeError):
            raise MessageError(f"message is neither JSON nor base64 of JSON: {body[:60]!r}") from None
    try:
        data = json.loads(stripped)
    except json.JSONDecodeError as exc:
        raise MessageError(f"message is not valid JSON ({exc.msg} at char {exc.pos})") from None
    except (ValueError, RecursionError):
        raise MessageError(UNREADABLE_JSON) from None
    if not isinstance(data, dict):
        raise MessageError(f"a message must be a JSON object, got {type(data).__name__}")
    return data
