"""Where a table lives and how its bytes are read and written: one object store per table root.

Local paths, ``file://``, Azure (``abfs[s]://container@account.dfs.core.windows.net/path``,
``az://container/path``) and S3 (``s3://bucket/path``, ``s3a://``) are resolved here and nowhere
else. I/O goes through obstore (the Rust ``object_store`` crate that delta-rs uses too), so the
``storage_options`` users already pass to deltalake work unchanged, and ``put_if_absent`` is an atomic
create on every backend: ``O_EXCL``-style hard link locally, ``If-None-Match: *`` on Azure and S3.

Example:
    >>> import tempfile
    >>> st = TableStorage(tempfile.mkdtemp())
    >>> st.put_if_absent("_delta_log/00000000000000000000.json", b"{}")
    True
    >>> st.put_if_absent("_delta_log/00000000000000000000.json", b"{}")
    False
"""

from __future__ import annotations

import io
import os
import re
import time
from collections.abc import Iterator, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlparse

import obstore
from obstore.exceptions import AlreadyExistsError, NotFoundError, PermissionDeniedError, UnauthenticatedError
from obstore.store import LocalStore, from_url

from ..errors import (
    AccessDeniedError,
    InvalidArgumentError,
    StorageError,
    TableNotFoundError,
    UnsupportedFeatureError,
    shown,
)
from .delete_pace import DeletePace

# object_store HTTP client options: obstore takes them (bare, without an aws_/azure_ prefix) in
# ``client_options``; inside ``config`` they make it panic.
_CLIENT_KEYS = {
    "allow_http",
    "allow_invalid_certificates",
    "connect_timeout",
    "default_content_type",
    "http1_only",
    "http2_keep_alive_interval",
    "http2_keep_alive_timeout",
    "http2_keep_alive_while_idle",
    "http2_only",
    "pool_idle_timeout",
    "pool_max_idle_per_host",
    "proxy_url",
    "proxy_ca_certificate",
    "proxy_excludes",
    "randomize_addresses",
    "read_timeout",
    "root_certificate",
    "timeout",
    "user_agent",
}
# deltalake-only options that object_store rejects (log store, locking and retry settings).
_DELTA_ONLY = {
    "aws_s3_allow_unsafe_rename",
    "aws_s3_locking_provider",
    "delta_dynamo_table_name",
    "dynamo_lock_table_name",
    "dynamo_lock_owner_name",
    "dynamo_lock_partition_key_value",
    "dynamo_lock_refresh_period_millis",
    "dynamo_lock_additional_time_to_wait_millis",
    "aws_s3_pool_idle_timeout_seconds",
    "aws_sts_pool_idle_timeout_seconds",
    "aws_s3_get_internal_server_error_retries",
    "aws_endpoint_url_dynamodb",
    "aws_endpoint_url_sts",
    "conditional_put",
    "aws_conditional_put",
    "max_retries",
    "retry_timeout",
    "mount_allow_unsafe_rename",
}
_SECRET_HINTS = ("key", "secret", "token", "sas", "password", "signature", "connection")


def normalize_uri(uri: str | os.PathLike[str]) -> str:
    """The table URI without a trailing slash; local paths become absolute paths.

    Example:
        >>> normalize_uri("s3a://bucket/t/")
        's3a://bucket/t'
        >>> normalize_uri("file:///tmp/t/")
        '/tmp/t'
        >>> normalize_uri("~nosuchuser/t")
        Traceback (most recent call last):
        ...
        deltaextras.errors.InvalidArgumentError: table path '~nosuchuser/t' is not a usable local path ...
    """
    text = os.fspath(uri).strip()
    if text.startswith("file://"):
        text = unquote(urlparse(text).path)
    if "://" not in text:
        try:
            return str(Path(text).expanduser().resolve())
        except (RuntimeError, ValueError, OSError) as exc:  # "~user" unknown, NUL byte, loops
            raise InvalidArgumentError(f"table path {shown(text)} is not a usable local path ({exc})") from None
    return text.rstrip("/")


def is_local(uri: str) -> bool:
    """Whether a (normalized) URI is a local path."""
    return "://" not in uri


def redact(options: Mapping[str, str] | None) -> dict[str, str]:
    """Storage options with secret-looking values masked, fit for logs.

    Example:
        >>> redact({"account_name": "a", "account_key": "xyz"})
        {'account_name': 'a', 'account_key': '***'}
    """
    return {k: ("***" if any(h in k.lower() for h in _SECRET_HINTS) else v) for k, v in (options or {}).items()}


def split_storage_options(options: Mapping[str, str]) -> tuple[dict[str, str], dict[str, str]]:
    """deltalake-style storage options → obstore ``(config, client_options)``.

    Example:
        >>> split_storage_options({"AWS_ENDPOINT_URL": "http://h:1", "AWS_ALLOW_HTTP": "true",
        ...                 "AWS_S3_ALLOW_UNSAFE_RENAME": "true"})
        ({'aws_endpoint_url': 'http://h:1'}, {'allow_http': 'true'})
    """
    config: dict[str, str] = {}
    client: dict[str, str] = {}
    for key, value in options.items():
        low = key.lower()
        if low in _DELTA_ONLY:
            continue
        bare = low
        for prefix in ("aws_", "azure_", "google_"):
            if low.startswith(prefix):
                bare = low[len(prefix) :]
                break
        if bare in _CLIENT_KEYS:
            client[bare] = str(value)
        else:
            config[low] = str(value)
    return config, client


def check_commit_protocol(uri: str, options: Mapping[str, str]) -> None:
    """Refuse S3 tables whose writers coordinate commits through a DynamoDB lock table.

    Example:
        >>> check_commit_protocol("s3://b/t", {"AWS_S3_LOCKING_PROVIDER": "dynamodb"})
        Traceback (most recent call last):
        ...
        deltaextras.errors.UnsupportedFeatureError: the S3 table s3://b/t is configured ...
    """
    lowered = {k.lower(): v for k, v in options.items()}
    merged = {k.lower(): v for k, v in os.environ.items() if k.lower() == "aws_s3_locking_provider"}
    merged.update(lowered)
    if str(merged.get("aws_s3_locking_provider", "")).lower() == "dynamodb":
        raise UnsupportedFeatureError(
            f"the S3 table {uri} is configured for the DynamoDB log store (AWS_S3_LOCKING_PROVIDER=dynamodb); "
            "deltaextras commits with S3 conditional writes (If-None-Match) only. Move every writer of this "
            "table to conditional puts (delta-rs >= 0.22 without the locking provider, Spark S3 log store with "
            "conditional writes) and drop the option"
        )


DELETE_BATCH = 128  # the most keys per batched delete (Azure allows 256 per blob batch, S3 1,000)
DELETE_THREADS = 8  # the most batches in flight (fewer while the store answers slowly: DeletePace)
# A delete is a POST on Azure and S3 (a batch, even of one key), which the client does not retry after a
# transport error ("error sending request" on a connection the server closed): such a failure, one the
# client did not already retry ("after N retries"), is tried again here.
DELETE_ATTEMPTS = 3
_CLIENT_RETRIED = re.compile(r"after \d+ retries")


def _modified_ms(meta: Any) -> int:
    """An object's last-modified time from listing metadata, in ms since the epoch."""
    return int(meta["last_modified"].timestamp() * 1000)


def table_key(storage: TableStorage, table_id: str) -> str:
    """The key of state kept across calls about one table: its location with its storage options
    (:attr:`TableStorage.location_key`) and its identity, the ``metaData.id`` every version of the table
    carries. A table deleted and created again at the same path has a new id, so it starts clean.

    Example:
        >>> import tempfile
        >>> storage = TableStorage(tempfile.mkdtemp())
        >>> table_key(storage, "a") == table_key(storage, "b")
        False
    """
    return storage.location_key + "\n" + table_id


class TableStorage:
    """Byte-level access to everything under one table root.

    Paths are relative to the table root and unescaped (``x=A%2FA/part-0.parquet`` as on storage,
    not as percent-encoded in the log; use :func:`log_path_to_key` for log paths).
    """

    def __init__(self, uri: str | os.PathLike[str], storage_options: Mapping[str, str] | None = None) -> None:
        self.uri = normalize_uri(uri)
        self.storage_options = dict(storage_options or {})
        self.local_root: Path | None = None
        if is_local(self.uri):
            self.local_root = Path(self.uri)
            try:
                found = self.local_root.is_dir()
            except OSError as exc:  # a name too long for the file system, say: no retry cures it
                raise InvalidArgumentError(f"table path {shown(self.uri)} cannot be used: {exc.strerror}") from None
            if not found:
                raise TableNotFoundError(f"no Delta table at {self.uri} (no such directory); check the path")
            self._store: Any = LocalStore(prefix=str(self.local_root))
        else:
            check_commit_protocol(self.uri, self.storage_options)
            config, client = split_storage_options(self.storage_options)
            try:
                self._store = from_url(self.uri, config=config or None, client_options=client or None)
            except (KeyboardInterrupt, SystemExit):
                raise
            except BaseException as exc:
                raise InvalidArgumentError(
                    f"cannot open storage for {self.uri}: {str(exc).splitlines()[0][:200]}; check storage_options"
                ) from None

    normalize = staticmethod(normalize_uri)

    @property
    def location_key(self) -> str:
        """The table's location with the storage options that reach it: two tables at one container path
        in two accounts (or behind two endpoints) have two keys. Keys state a process keeps across calls,
        together with the table's identity (:func:`table_key`).

        Example:
            >>> import tempfile
            >>> root = tempfile.mkdtemp()
            >>> TableStorage(root).location_key == TableStorage(root, {"timeout": "5s"}).location_key
            False
        """
        return self.uri + "\n" + repr(sorted(self.storage_options.items()))

    # ------------------------------------------------------------------ URIs
    @property
    def deltalake_uri(self) -> str:
        """The URI to hand to ``deltalake.DeltaTable``."""
        return self.uri

    def key_of(self, log_path: str) -> str:
        """The storage key of a file path as the log writes it (relative or absolute, URI-encoded)."""
        return log_path_to_key(log_path, self.uri)

    def resolve(self, log_path: str) -> tuple[TableStorage, str]:
        """Storage and key of a path from the log, even outside the table (deletion vectors of storage
        type ``p`` may live anywhere): this storage for a path under the root, else one opened on the
        file's directory with the same options.

        Example:
            >>> import tempfile
            >>> root = tempfile.mkdtemp()
            >>> st = TableStorage(root)
            >>> st.resolve(f"file:{root}/deletion_vector_x.bin") == (st, "deletion_vector_x.bin")
            True
        """
        where = location(log_path, encoded=True)
        if where is None:
            return self, _decoded(log_path, True)
        base = location(self.uri)
        inside = base.contains(where) if base is not None else None
        if inside is not None:
            return self, inside
        parent, _, name = where.path.rpartition("/")
        if where.kind == "file":
            directory = ("//" + where.bucket if where.bucket else "") + "/" + parent
        else:
            directory = _rebuilt(log_path, parent)
        return TableStorage(directory, self.storage_options), name

    def uri_of(self, key: str) -> str:
        """Full URI (or local path) of a key under the root."""
        if self.local_root is not None:
            return str(self.local_root / key)
        return f"{self.uri}/{key}"

    # ------------------------------------------------------------------ reads
    def read(self, key: str) -> bytes:
        """Whole object bytes; :class:`FileNotFoundError` when absent."""
        try:
            return bytes(obstore.get(self._store, key).bytes())
        except (FileNotFoundError, NotFoundError):
            raise FileNotFoundError(key) from None
        except Exception as exc:
            raise self._wrap(exc, f"read {key}") from None

    def read_range(self, key: str, start: int, end: int) -> bytes:
        """Bytes ``[start, end)`` of an object."""
        try:
            return bytes(obstore.get_range(self._store, key, start=start, end=end))
        except Exception as exc:
            raise self._wrap(exc, f"read {key}[{start}:{end}]") from None

    def size(self, key: str) -> int:
        """Object size in bytes."""
        try:
            return int(obstore.head(self._store, key)["size"])
        except (FileNotFoundError, NotFoundError):
            raise FileNotFoundError(key) from None
        except Exception as exc:
            raise self._wrap(exc, f"head {key}") from None

    def exists(self, key: str) -> bool:
        """Whether the object exists."""
        try:
            self.size(key)
            return True
        except FileNotFoundError:
            return False

    def list(self, prefix: str) -> Iterator[tuple[str, int]]:
        """``(key, size)`` of every object under ``prefix`` (recursive)."""
        try:
            for chunk in obstore.list(self._store, prefix=prefix):
                for meta in chunk:
                    yield str(meta["path"]), int(meta["size"])
        except (FileNotFoundError, NotFoundError):
            return
        except Exception as exc:
            raise self._wrap(exc, f"list {prefix}") from None

    def list_modified(self, prefix: str) -> Iterator[tuple[str, int, int]]:
        """``(key, size, last modified in ms since the epoch)`` of every object under ``prefix`` (recursive)."""
        try:
            for chunk in obstore.list(self._store, prefix=prefix):
                for meta in chunk:
                    yield str(meta["path"]), int(meta["size"]), _modified_ms(meta)
        except (FileNotFoundError, NotFoundError):
            return
        except Exception as exc:
            raise self._wrap(exc, f"list {prefix}") from None

    def list_dir(self, prefix: str) -> list[tuple[str, int]]:
        """``(key, size)`` of objects directly under ``prefix`` (one level)."""
        return [(str(m["path"]), int(m["size"])) for m in self._dir_objects(prefix)]

    def list_dir_after(self, prefix: str, after: str) -> list[tuple[str, int]]:
        """``(key, size)`` of objects directly under ``prefix`` whose keys sort after ``after`` (S3 and Azure
        start the listing there: a log of thousands of commits is not listed from its first).

        Example:
            >>> import tempfile
            >>> st = TableStorage(tempfile.mkdtemp())
            >>> for k in ("d/1", "d/2", "d/3", "d/x/4"):
            ...     st.put(k, b"")
            >>> st.list_dir_after("d/", "d/1")
            [('d/2', 0), ('d/3', 0)]
        """
        out: list[tuple[str, int]] = []
        try:
            for chunk in obstore.list(self._store, prefix=prefix, offset=after):
                for meta in chunk:
                    key = str(meta["path"])
                    if "/" not in key[len(prefix) :]:
                        out.append((key, int(meta["size"])))
        except (FileNotFoundError, NotFoundError):
            return []
        except Exception as exc:
            raise self._wrap(exc, f"list {prefix}") from None
        return sorted(out)

    def list_dir_modified(self, prefix: str) -> list[tuple[str, int, int]]:
        """``(key, size, last modified in ms since the epoch)`` of objects directly under ``prefix``."""
        return [(str(m["path"]), int(m["size"]), _modified_ms(m)) for m in self._dir_objects(prefix)]

    def _dir_objects(self, prefix: str) -> list[Any]:
        """The object metadata of a one-level listing of ``prefix`` (none when it is not there)."""
        try:
            return list(obstore.list_with_delimiter(self._store, prefix=prefix)["objects"])
        except (FileNotFoundError, NotFoundError):
            return []
        except Exception as exc:
            raise self._wrap(exc, f"list {prefix}") from None

    def open_input(self, key: str, size: int | None = None) -> Any:
        """A seekable binary file for pyarrow: the local file itself, or ranged reads on object stores."""
        if self.local_root is not None:
            import pyarrow as pa

            # An open file, not a path: pyarrow would resolve a file system for every path it opens.
            return pa.OSFile(str(self.local_root / key))  # FileNotFoundError when missing
        return io.BufferedReader(_RangeReader(self, key, size if size and size > 0 else self.size(key)), 1 << 20)

    # ------------------------------------------------------------------ writes
    def put(self, key: str, data: bytes | str | Path) -> None:
        """Write (or overwrite) an object; ``data`` may be bytes or a local file path to upload."""
        try:
            obstore.put(self._store, key, Path(data) if isinstance(data, (str, Path)) else data)
        except Exception as exc:
            raise self._wrap(exc, f"write {key}") from None

    def put_if_absent(self, key: str, data: bytes) -> bool:
        """Atomically create ``key``; ``False`` (and nothing written) if it already exists."""
        try:
            obstore.put(self._store, key, data, mode="create")
            return True
        except (AlreadyExistsError, FileExistsError):
            return False
        except Exception as exc:
            if "already exists" in str(exc).lower() or "precondition" in str(exc).lower():
                return False
            raise self._wrap(exc, f"create {key}") from None

    def delete(self, key: str) -> None:
        """Delete an object; absent is fine."""
        try:
            obstore.delete(self._store, key)
        except (FileNotFoundError, NotFoundError):
            return
        except Exception as exc:
            raise self._wrap(exc, f"delete {key}") from None

    def delete_many(self, keys: list[str]) -> None:
        """Delete objects, absent ones being fine: in batches where the store can (S3 ``DeleteObjects``, an
        Azure blob batch), at most ``DELETE_BATCH`` keys each and ``DELETE_THREADS`` at once, as many as the
        store answers in time (:class:`~deltaextras.core.delete_pace.DeletePace`: a store slow to answer
        is sent fewer, smaller batches); a batch that fails (it may have partly landed) is settled key by
        key.

        Example:
            >>> import tempfile
            >>> st = TableStorage(tempfile.mkdtemp())
            >>> for k in ("a/1", "a/2"):
            ...     st.put(k, b"x")
            >>> st.delete_many(["a/1", "a/2", "a/absent"]); list(st.list("a/"))
            []
        """
        if not keys:
            return
        pace = DeletePace(batch=DELETE_BATCH, most_lanes=DELETE_THREADS)
        at = 0
        with ThreadPoolExecutor(min(DELETE_THREADS, -(-len(keys) // DELETE_BATCH))) as pool:
            while at < len(keys):
                chunks = []
                for _ in range(pace.lanes):
                    if at < len(keys):
                        chunks.append(keys[at : at + pace.size])
                        at += pace.size
                rounds = list(pool.map(self._delete_batch, chunks))
                pace.update(longest=max(seconds for seconds, _ in rounds), failed=any(f for _, f in rounds))

    def _delete_batch(self, keys: list[str]) -> tuple[float, bool]:
        """Delete ``keys`` as one batch, settled key by key when it fails; (seconds the batch took, whether
        it failed)."""
        started = time.monotonic()
        try:
            obstore.delete(self._store, keys)
            return time.monotonic() - started, False
        except (FileNotFoundError, NotFoundError):  # an absent key (some stores): settle key by key
            took, failed = time.monotonic() - started, False
        except (KeyboardInterrupt, SystemExit):
            raise
        except BaseException:  # a batch cut off, or refused: it may have partly landed
            took, failed = time.monotonic() - started, True
        for key in keys:
            for attempt in range(DELETE_ATTEMPTS):
                try:
                    self.delete(key)
                    break
                except AccessDeniedError:
                    raise
                except StorageError as exc:
                    if attempt + 1 == DELETE_ATTEMPTS or _CLIENT_RETRIED.search(str(exc)):
                        raise
                    time.sleep(0.25 * 2**attempt)
        return took, failed

    # ------------------------------------------------------------------ errors
    def _wrap(self, exc: BaseException, what: str) -> Exception:
        if isinstance(exc, (PermissionDeniedError, UnauthenticatedError)):
            return AccessDeniedError(
                f"storage refused to {what} under {self.uri}: check the identity's data-plane role "
                f"or the storage options ({type(exc).__name__})"
            )
        if isinstance(exc, (FileNotFoundError, NotFoundError)):
            return FileNotFoundError(what)
        text = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        return StorageError(f"storage failed to {what} under {self.uri}: {text[:300]}")


class _RangeReader(io.RawIOBase):
    """Random-access reads of one object through ranged GETs (what pyarrow needs to read Parquet)."""

    def __init__(self, storage: TableStorage, key: str, size: int) -> None:
        super().__init__()
        self._storage, self._key, self._size, self._pos = storage, key, size, 0

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def tell(self) -> int:
        return self._pos

    def seek(self, offset: int, whence: int = io.SEEK_SET) -> int:
        base = {io.SEEK_SET: 0, io.SEEK_CUR: self._pos, io.SEEK_END: self._size}[whence]
        self._pos = max(0, base + offset)
        return self._pos

    def readinto(self, buffer: Any) -> int:
        want = min(len(buffer), self._size - self._pos)
        if want <= 0:
            return 0
        data = self._storage.read_range(self._key, self._pos, self._pos + want)
        n = len(data)
        buffer[:n] = data
        self._pos += n
        return n


_ESCAPED = re.compile(r"%[0-9A-Fa-f]{2}")
_AZURE_SCHEMES = {"abfs", "abfss", "az", "adl", "azure", "wasb", "wasbs"}
_AZURE_HOSTS = (".blob.core.windows.net", ".dfs.core.windows.net")


@dataclass(frozen=True)
class Location:
    """Where an absolute URI points, in one form whatever way it was spelled: the store kind (``file``,
    ``azure``, ``s3``, ``gs``, or the scheme), the container or bucket, and the path inside it
    (no leading or trailing slash, percent-decoded when the URI came from the log).

    Example:
        >>> location("abfss://c@acct.dfs.core.windows.net/t/x") == location("az://c/t/x")
        True
        >>> location("file:/tmp/t") == location("file:///tmp/t") == location("/tmp/t")
        True
    """

    kind: str
    bucket: str
    path: str

    def contains(self, other: Location) -> str | None:
        """The path of ``other`` relative to this location, or None when it lies elsewhere.

        Example:
            >>> location("s3://b/t").contains(location("s3a://b/t/p=1/f.parquet"))
            'p=1/f.parquet'
        """
        if (self.kind, self.bucket) != (other.kind, other.bucket):
            return None
        if not self.path:
            return other.path or None
        if other.path.startswith(self.path + "/"):
            return other.path[len(self.path) + 1 :]
        return None


def location(uri: str, *, encoded: bool = False) -> Location | None:
    """The :class:`Location` of an absolute URI or path; None for a relative path.

    The forms writers put in the Delta log are all understood: ``file:/abs`` (Spark), ``file:///abs``,
    ``file://localhost/abs``, plain ``/abs``, ``abfs[s]://container@account.dfs.core.windows.net/p``,
    ``az://container/p``, ``wasbs://``, ``https://account.blob.core.windows.net/container/p``,
    ``s3://`` / ``s3a://``, ``gs://``. ``encoded`` (log paths are URI-encoded) decodes the path once.

    Example:
        >>> location("file:/tmp/t/x%3D1/f.parquet", encoded=True)
        Location(kind='file', bucket='', path='tmp/t/x=1/f.parquet')
        >>> location("s3a://bucket/t/deletion_vector_1.bin")
        Location(kind='s3', bucket='bucket', path='t/deletion_vector_1.bin')
        >>> location("p=1/f.parquet") is None
        True
    """
    text = uri.strip()
    if text.startswith("/"):
        return Location("file", "", _decoded(text, encoded).strip("/"))
    scheme, sep, rest = text.partition(":")
    if not sep or not re.fullmatch(r"[A-Za-z][A-Za-z0-9+.-]+", scheme):
        return None  # relative (a drive letter or a colon inside a file name is not a scheme)
    scheme = scheme.lower()
    if scheme == "file":
        if rest.startswith("//"):
            host, _, path = rest[2:].partition("/")
            if host not in ("", "localhost"):
                return Location("file", host, _decoded(path, encoded).strip("/"))
            rest = "/" + path
        return Location("file", "", _decoded(rest, encoded).strip("/"))
    parsed = urlparse(text)
    path = _decoded(parsed.path, encoded).strip("/")
    host = parsed.hostname or ""
    if scheme in _AZURE_SCHEMES:
        container = parsed.username or ("" if host.endswith(_AZURE_HOSTS) else parsed.netloc)
        if not container:  # abfss://account.dfs.core.windows.net/container/path
            container, _, path = path.partition("/")
        return Location("azure", container, path)
    if scheme in ("http", "https") and host.endswith(_AZURE_HOSTS):
        container, _, path = path.partition("/")
        return Location("azure", container, path)
    if scheme in ("s3", "s3a", "s3n"):
        return Location("s3", parsed.netloc, path)
    if scheme in ("gs", "gcs"):
        return Location("gs", parsed.netloc, path)
    return Location(scheme, parsed.netloc, path)


def _decoded(path: str, encoded: bool) -> str:
    return unquote(path) if encoded and _ESCAPED.search(path) else path


def log_path_to_key(path: str, root: str | None = None) -> str:
    """A file path as written in the Delta log (URI-encoded; relative, or absolute in any form
    :func:`location` knows) → its storage key under the table ``root``.

    An absolute path outside the root (a shallow clone's files) is refused by name.

    Example:
        >>> log_path_to_key("x=A%252FA/part-0.parquet")
        'x=A%2FA/part-0.parquet'
        >>> log_path_to_key("file:/data/t/p=1/f%20g.parquet", "/data/t")
        'p=1/f g.parquet'
        >>> log_path_to_key("abfss://c@a.dfs.core.windows.net/t/f.parquet", "az://c/t")
        'f.parquet'
    """
    where = location(path, encoded=True)
    if where is None:
        return _decoded(path, True)
    inside = None
    if root is not None:
        base = location(root)
        inside = base.contains(where) if base is not None else None
    if inside is None:
        raise UnsupportedFeatureError(
            f"the log names a data file outside the table ({path[:80]}); shallow clones are not supported"
        )
    return inside


def _rebuilt(uri: str, path: str) -> str:
    """``uri`` with its path replaced by ``path`` (decoded), scheme and authority kept."""
    parsed = urlparse(uri.strip())
    if parsed.scheme in ("http", "https"):  # the container is the first path segment there
        container = unquote(parsed.path).strip("/").split("/", 1)[0]
        path = f"{container}/{path}" if path else container
    return f"{parsed.scheme}://{parsed.netloc}/{path}".rstrip("/")
