"""The one exception hierarchy of deltaextras.

Every error a caller can act on has its own class. Each carries a one-line message that says what
went wrong and what to do, and a ``retryable`` flag: ``True`` only for failures that a later attempt
of the same work can cure (storage or network trouble, too many concurrent commits). Adapters
(queue workers, Lambda handlers, the CLI) decide between "retry" and "dead-letter" from that flag
alone.

Example:
    >>> from deltaextras.errors import MessageError, DeltaExtrasError
    >>> err = MessageError("message key 'fles' is not known")
    >>> isinstance(err, DeltaExtrasError), err.retryable
    (True, False)
"""

from __future__ import annotations

from typing import Any

# Longest error text: a message quoting hostile input (a 3 kB key, a huge number) stays readable in a
# log line and a dead-letter envelope. Longer texts keep their start (what is wrong) and end (what to do).
MAX_MESSAGE = 480


def one_line(message: object) -> str:
    """The text of an error: whitespace collapsed to single spaces, at most :data:`MAX_MESSAGE` characters.

    Example:
        >>> one_line("bad   key")
        'bad key'
        >>> len(one_line("x" * 5000)) == MAX_MESSAGE
        True
    """
    text = " ".join(str(message).split())
    if len(text) > MAX_MESSAGE:
        head = MAX_MESSAGE * 2 // 3
        text = f"{text[:head]} … {text[-(MAX_MESSAGE - head - 3) :]}"
    return text


def shown(value: Any, limit: int = 80) -> str:
    """``repr`` of a value quoted in an error, cut to ``limit`` characters; never fails (Python refuses
    to print integers of more than 4300 digits).

    Example:
        >>> shown("abc"), shown(10**5000), len(shown(["x" * 500]))
        ("'abc'", 'an integer of about 5001 digits', 80)
    """
    try:
        text = repr(value)
    except ValueError:
        if isinstance(value, int):
            return f"an integer of about {int(value.bit_length() * 0.30103) + 1} digits"
        text = f"<{type(value).__name__}>"
    return text if len(text) <= limit else text[: limit - 1] + "…"


class DeltaExtrasError(Exception):
    """Base class of every error raised on purpose by deltaextras."""

    retryable: bool = False

    def __init__(self, message: str) -> None:
        # One line, always: adapters log and dead-letter the text as it is.
        super().__init__(one_line(message))


# ---------------------------------------------------------------- permanent: the input is wrong
class InvalidArgumentError(DeltaExtrasError):
    """An option is wrong: unknown column, bad ``sort_by`` shape, negative size."""


class MessageError(InvalidArgumentError):
    """A work message is malformed: not JSON, unknown key, wrong type, missing field."""


class TableNotFoundError(DeltaExtrasError):
    """No Delta table at the given location (no ``_delta_log``)."""


class PartitionNotFoundError(InvalidArgumentError):
    """The named partition has no live files in the table."""


class UnsupportedFeatureError(DeltaExtrasError):
    """The table uses a protocol feature deltaextras cannot honour when rewriting; nothing is written."""


class CorruptDataError(DeltaExtrasError):
    """A data file, deletion vector or log entry cannot be read as what the log says it is."""


class DuplicateKeyError(DeltaExtrasError):
    """Rows share the ``unique_by`` key but differ in other columns; nothing is committed."""


class AccessDeniedError(DeltaExtrasError):
    """The table is outside the configured allow-list, or storage refused our credentials."""


# ---------------------------------------------------------------- permanent: the table moved on
class CommitConflictError(DeltaExtrasError):
    """A winning commit removed one of our inputs, changed its deletion vector, or changed the
    table's metadata or protocol: the plan is stale. Nothing was committed; plan again."""


class ConcurrentDeleteReadError(CommitConflictError):
    """A winning commit removed a file this operation read (Delta's ``ConcurrentDeleteReadException``,
    which covers ``ConcurrentDeleteDeleteException`` too: we only remove files we read). The plan is
    stale; nothing was committed. Plan again."""


class ConcurrentTransactionError(CommitConflictError):
    """A winning commit wrote the ``txn`` application id this operation depends on, at an older version
    (Delta's ``ConcurrentTransactionException``): two planners run the same work. Nothing was committed."""


class MetadataChangedError(CommitConflictError):
    """A winning commit changed the table's metadata (schema, partitioning, properties); nothing was
    committed. Run the operation again against the new metadata."""


class ProtocolChangedError(CommitConflictError):
    """A winning commit changed the table's protocol; nothing was committed. Run the operation again."""


class ConcurrentAppendError(CommitConflictError):
    """A winning commit added data this operation should have read (Delta's ``ConcurrentAppendException``:
    under ``WriteSerializable`` files added by a commit that is not a blind append, under ``Serializable``
    every added file, that may hold rows matching the operation's predicate). Nothing was committed.

    Retryable: running the same operation again reads the new version and sees those rows (Delta's
    advice for this exception is the same: retry the operation)."""

    retryable = True


# ---------------------------------------------------------------- transient: try again later
class CommitOutcomeUnknownError(DeltaExtrasError):
    """The put of a log entry failed ambiguously (error after the write, dropped connection, timeout) and
    the entry could not be read back to tell whether it is ours. The files written are kept (vacuum
    removes them if no version names them); running the same work again converges."""

    retryable = True


class StorageError(DeltaExtrasError):
    """Storage or network trouble while reading or writing; the same work may succeed later."""

    retryable = True


class CommitRetriesExhaustedError(DeltaExtrasError):
    """Other writers kept winning the next log version; nothing was committed. Retry later."""

    retryable = True


class InterruptedBeforeCommitError(DeltaExtrasError):
    """The run was interrupted (Ctrl-C) before this partition's commit; nothing of it was committed."""

    retryable = True


class PartitionsFailedError(DeltaExtrasError):
    """Some partitions of a multi-partition run failed (the others finished); ``report`` has them all.

    ``retryable`` is True only when every failure was (a later run can then finish the work).

    Example:
        >>> from types import SimpleNamespace
        >>> report = SimpleNamespace(failed=[SimpleNamespace(retryable=True), SimpleNamespace(retryable=False)])
        >>> PartitionsFailedError("2 failed", report).retryable
        False
    """

    def __init__(self, message: str, report: object = None) -> None:
        super().__init__(message)
        self.report = report
        failed = list(getattr(report, "failed", None) or [])
        self.retryable = bool(failed) and all(bool(getattr(r, "retryable", False)) for r in failed)


def is_retryable(exc: BaseException) -> bool:
    """Whether a failure is worth another attempt of the same work.

    Our own errors say so themselves; an unknown exception from an I/O library (``OSError``,
    ``TimeoutError``, ``ConnectionError``) counts as transient, anything else as permanent.

    Example:
        >>> is_retryable(StorageError("blob read timed out")), is_retryable(ValueError("x"))
        (True, False)
    """
    if isinstance(exc, DeltaExtrasError):
        return exc.retryable
    return isinstance(exc, (OSError, TimeoutError, ConnectionError))


__all__ = [
    "MAX_MESSAGE",
    "AccessDeniedError",
    "CommitConflictError",
    "CommitOutcomeUnknownError",
    "CommitRetriesExhaustedError",
    "ConcurrentAppendError",
    "ConcurrentDeleteReadError",
    "ConcurrentTransactionError",
    "CorruptDataError",
    "DeltaExtrasError",
    "DuplicateKeyError",
    "InterruptedBeforeCommitError",
    "InvalidArgumentError",
    "MessageError",
    "MetadataChangedError",
    "PartitionNotFoundError",
    "PartitionsFailedError",
    "ProtocolChangedError",
    "StorageError",
    "TableNotFoundError",
    "UnsupportedFeatureError",
    "is_retryable",
    "one_line",
    "shown",
]
