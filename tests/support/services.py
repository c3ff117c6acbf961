"""Real local services for the tests: Azurite, moto server and a Sail Spark Connect server.

Each service runs as a child process on free loopback ports, is polled until it accepts connections,
and is stopped (terminate, then kill) by :meth:`Service.stop`. Nothing here skips: a service that
cannot start raises :class:`ServiceError` with the command and the tail of its log.

Storage options (checked against deltalake 1.6.6 and obstore 0.12.1)
---------------------------------------------------------------------
Azurite on a non-default port, deltalake (``az://<container>/<path>``,
``abfs[s]://<container>@devstoreaccount1.dfs.core.windows.net/<path>``, ``abfs://<container>/<path>``
and ``azure://<container>/<path>`` all work)::

    {"azure_storage_account_name": "devstoreaccount1",
     "azure_storage_account_key": AZURITE_KEY,
     "azure_storage_endpoint": "http://127.0.0.1:<blob port>/devstoreaccount1",
     "azure_allow_http": "true"}

The endpoint must carry the account as its first path segment (path-style URLs). Short aliases
(``account_name``, ``account_key``, ``endpoint``, ``allow_http``) work too. ``use_emulator=true``
does *not* combine with a custom port: object_store then ignores ``endpoint`` and takes the URL from
the process environment variable ``AZURITE_BLOB_STORAGE_URL`` (default ``http://127.0.0.1:10000``).

moto S3, deltalake (``s3://<bucket>/<path>``)::

    {"AWS_ENDPOINT_URL": "http://127.0.0.1:<port>", "AWS_ALLOW_HTTP": "true",
     "AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing", "AWS_REGION": "us-east-1"}

No ``AWS_S3_ALLOW_UNSAFE_RENAME`` and no ``conditional_put`` is needed: deltalake 1.6.6 writes each
commit with ``If-None-Match: *`` (8 concurrent appenders all landed, moto answering 412 to the losers).

obstore takes the same dict through ``obstore.store.from_url(uri, config=..., client_options=...)``
with one difference: HTTP *client* options (``allow_http``, ``timeout``, ``connect_timeout``, ...,
also in their ``aws_``/``azure_`` prefixed forms such as ``AWS_ALLOW_HTTP`` or ``azure_allow_http``)
must go in ``client_options`` under their bare name; inside ``config`` they make obstore raise
``pyo3_runtime.PanicException`` ("Expected config prefix to start with azure_"), which derives from
``BaseException``, not ``Exception``. deltalake-only keys (``AWS_S3_ALLOW_UNSAFE_RENAME``,
``AWS_S3_LOCKING_PROVIDER``, ...) raise ``UnknownConfigurationKeyError`` and must be dropped. Keys are
case-insensitive in both libraries. :func:`obstore_options` does this split. With it,
``obstore.put(store, path, data, mode="create")`` raises ``obstore.exceptions.AlreadyExistsError`` on
the second write on Azurite, moto and a local directory (``file://`` URIs need the directory to exist).

Sail
----
``python -m pysail spark server --ip 127.0.0.1 --port P`` (the ``sail`` script runs the same code).
The server reads ``az://``/``abfss://`` and ``s3://`` tables when its own environment carries
``AZURE_STORAGE_ACCOUNT_NAME/_ACCOUNT_KEY/_ENDPOINT`` + ``AZURE_ALLOW_HTTP`` or the ``AWS_*`` variables
above (:attr:`Azurite.env`, :attr:`MotoServer.env`). On the client, pyspark-client exits the process
looking for ``SPARK_HOME`` when ``__main__`` has no ``__file__`` (``python -c``, pytest-xdist workers):
:func:`prepare_spark_client` sets it. ``builder.remote(url).getOrCreate()`` returns an existing session
even for another ``url``; :meth:`SailServer.session` uses ``create()``.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parents[2]
HOST = "127.0.0.1"

AZURITE_ACCOUNT = "devstoreaccount1"
AZURITE_KEY = "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw=="
AWS_REGION = "us-east-1"
AWS_DUMMY_KEY = "testing"

START_TIMEOUT = 60.0
STOP_TIMEOUT = 10.0


class ServiceError(RuntimeError):
    """A local service could not be started or did not become ready."""


def free_port() -> int:
    """A TCP port on 127.0.0.1 that is free right now (bound once with port 0, then released)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((HOST, 0))
        return int(sock.getsockname()[1])


def port_open(port: int, host: str = HOST) -> bool:
    """Whether something accepts TCP connections on ``host:port``."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.settimeout(0.5)
        return sock.connect_ex((host, port)) == 0


def obstore_options(storage_options: Mapping[str, str]) -> tuple[dict[str, str], dict[str, str]]:
    """Split deltalake-style ``storage_options`` into obstore's ``(config, client_options)``: the
    library's own rule (:func:`deltaextras.core.storage.split_storage_options`), so the tests exercise it."""
    from deltaextras.core.storage import split_storage_options

    return split_storage_options(storage_options)


def open_obstore(uri: str, storage_options: Mapping[str, str]) -> Any:
    """An obstore store rooted at ``uri`` (a local directory or an ``az://`` / ``s3://`` URI)."""
    from obstore.store import LocalStore, from_url

    if "://" not in uri:
        return LocalStore(prefix=uri, mkdir=True)
    config, client = obstore_options(storage_options)
    return from_url(uri, config=config or None, client_options=client or None)


def emulator_root(request: Any, container: str) -> tuple[str, str, dict[str, str], int]:
    """For a fixture parametrized with "azurite" or "s3": (that backend, the root URI of a container or
    bucket named ``container`` on it, its direct storage options, the emulator's port)."""
    if request.param == "azurite":
        az = request.getfixturevalue("azurite")
        az.create_container(container)
        return "azurite", f"az://{container}", dict(az.storage_options), az.blob_port
    s3 = request.getfixturevalue("moto")
    s3.create_bucket(container)
    return "s3", f"s3://{container}", dict(s3.storage_options), s3.port


def fixtures_dir() -> Path:
    """Where the delta-rs fixture tables live: ``$DELTAEXTRAS_FIXTURES`` or ``<repo>/../shared/...``."""
    env = os.environ.get("DELTAEXTRAS_FIXTURES")
    if env:
        return Path(env)
    return REPO_ROOT.parent / "shared" / "fixtures" / "delta-rs"


@dataclass
class Backend:
    """Where a test's tables live: ``name`` is ``local``, ``azurite`` or ``s3``."""

    name: str
    root: str
    storage_options: dict[str, str] = field(default_factory=dict)

    def new_table_uri(self) -> str:
        """A fresh, empty table location (a new, empty directory for ``local``)."""
        if self.name == "local":
            path = Path(self.root) / uuid.uuid4().hex
            path.mkdir(parents=True)
            return str(path)
        return f"{self.root}/{uuid.uuid4().hex}"

    def obstore_store(self, uri: str) -> Any:
        """An obstore store rooted at ``uri`` with this backend's options."""
        return open_obstore(uri, self.storage_options)


class Service:
    """One child process with a log file; :meth:`stop` terminates it, then kills it."""

    name = "service"

    def __init__(self, workdir: Path) -> None:
        self.workdir = workdir
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.log_path = workdir / f"{self.name}.log"
        self.process: subprocess.Popen[bytes] | None = None
        self.command: list[str] = []

    def _spawn(self, command: Sequence[str], env: Mapping[str, str] | None = None) -> None:
        self.command = list(command)
        full_env = dict(os.environ)
        full_env.update(env or {})
        with open(self.log_path, "ab") as log:
            try:
                self.process = subprocess.Popen(
                    self.command,
                    cwd=self.workdir,
                    env=full_env,
                    stdin=subprocess.DEVNULL,
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    start_new_session=True,
                )
            except OSError as exc:
                raise ServiceError(f"{self.name}: cannot run {self.command!r}: {exc}") from exc
        atexit.register(self.stop)

    def log_tail(self, lines: int = 40) -> str:
        """The last lines the service printed."""
        try:
            text = self.log_path.read_text(errors="replace")
        except OSError:
            return ""
        return "\n".join(text.splitlines()[-lines:])

    def _wait_for_ports(self, ports: Sequence[int], timeout: float = START_TIMEOUT) -> None:
        deadline = time.monotonic() + timeout
        pending = list(ports)
        while pending:
            assert self.process is not None
            code = self.process.poll()
            if code is not None:
                raise ServiceError(
                    f"{self.name} exited with code {code} before listening on {pending}\n"
                    f"command: {' '.join(self.command)}\nlog ({self.log_path}):\n{self.log_tail()}"
                )
            pending = [p for p in pending if not port_open(p)]
            if not pending:
                return
            if time.monotonic() > deadline:
                self.stop()
                raise ServiceError(
                    f"{self.name} did not listen on {pending} within {timeout:.0f}s\n"
                    f"command: {' '.join(self.command)}\nlog ({self.log_path}):\n{self.log_tail()}"
                )
            time.sleep(0.1)

    def running(self) -> bool:
        """Whether the child process is alive."""
        return self.process is not None and self.process.poll() is None

    def stop(self) -> None:
        """Terminate the process group this service started, then kill it if it lingers."""
        proc = self.process
        if proc is None or proc.poll() is not None:
            return
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=STOP_TIMEOUT)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=STOP_TIMEOUT)


def _start_with_retries(factory: Any, attempts: int = 3) -> Any:
    """Call ``factory()`` until a service starts; a port taken in between gets a fresh try."""
    last: ServiceError | None = None
    for _ in range(attempts):
        try:
            return factory()
        except ServiceError as exc:
            last = exc
    assert last is not None
    raise last


# --------------------------------------------------------------------------------------------- Azurite
def find_azurite() -> str:
    """The azurite executable: ``$AZURITE_BIN``, ``<repo>/node_modules/.bin/azurite`` or ``PATH``."""
    env = os.environ.get("AZURITE_BIN")
    if env:
        if not Path(env).is_file():
            raise ServiceError(f"AZURITE_BIN={env} does not exist")
        return env
    local = REPO_ROOT / "node_modules" / ".bin" / "azurite"
    if local.is_file():
        return str(local)
    found = shutil.which("azurite")
    if found:
        return found
    raise ServiceError(
        "azurite not found: set AZURITE_BIN, or run `npm install --no-save azurite@3.37.0` in the repo "
        "(bash .ci/run does)"
    )


class Azurite(Service):
    """Azurite blob, queue and table services on free ports."""

    name = "azurite"

    def __init__(self, workdir: Path) -> None:
        super().__init__(workdir)
        self.blob_port = free_port()
        self.queue_port = free_port()
        self.table_port = free_port()

    @classmethod
    def start(cls, workdir: Path) -> Azurite:
        """Start Azurite and wait until all three services listen."""

        binary = find_azurite()

        def attempt() -> Azurite:
            svc = cls(workdir)
            data = workdir / f"data-{svc.blob_port}"
            data.mkdir(parents=True, exist_ok=True)
            svc._spawn(
                [
                    binary,
                    "--silent",
                    "--skipApiVersionCheck",
                    "--disableTelemetry",
                    "--location",
                    str(data),
                    "--blobHost",
                    HOST,
                    "--blobPort",
                    str(svc.blob_port),
                    "--queueHost",
                    HOST,
                    "--queuePort",
                    str(svc.queue_port),
                    "--tableHost",
                    HOST,
                    "--tablePort",
                    str(svc.table_port),
                ]
            )
            svc._wait_for_ports([svc.blob_port, svc.queue_port, svc.table_port])
            return svc

        return _start_with_retries(attempt)

    @property
    def blob_endpoint(self) -> str:
        """Path-style blob endpoint, account included."""
        return f"http://{HOST}:{self.blob_port}/{AZURITE_ACCOUNT}"

    @property
    def queue_endpoint(self) -> str:
        """Path-style queue endpoint, account included."""
        return f"http://{HOST}:{self.queue_port}/{AZURITE_ACCOUNT}"

    @property
    def table_endpoint(self) -> str:
        """Path-style table endpoint, account included."""
        return f"http://{HOST}:{self.table_port}/{AZURITE_ACCOUNT}"

    @property
    def connection_string(self) -> str:
        """Connection string for azure-storage-blob/queue/table and azure-functions."""
        return (
            f"DefaultEndpointsProtocol=http;AccountName={AZURITE_ACCOUNT};AccountKey={AZURITE_KEY};"
            f"BlobEndpoint={self.blob_endpoint};QueueEndpoint={self.queue_endpoint};"
            f"TableEndpoint={self.table_endpoint};"
        )

    @property
    def storage_options(self) -> dict[str, str]:
        """deltalake ``storage_options`` for ``az://`` / ``abfs[s]://`` tables on this Azurite."""
        return {
            "azure_storage_account_name": AZURITE_ACCOUNT,
            "azure_storage_account_key": AZURITE_KEY,
            "azure_storage_endpoint": self.blob_endpoint,
            "azure_allow_http": "true",
        }

    @property
    def env(self) -> dict[str, str]:
        """Environment variables that point object_store-based processes (Sail) at this Azurite."""
        return {
            "AZURE_STORAGE_ACCOUNT_NAME": AZURITE_ACCOUNT,
            "AZURE_STORAGE_ACCOUNT_KEY": AZURITE_KEY,
            "AZURE_STORAGE_ENDPOINT": self.blob_endpoint,
            "AZURE_ALLOW_HTTP": "true",
        }

    def blob_service_client(self) -> Any:
        """An ``azure.storage.blob.BlobServiceClient`` for this Azurite."""
        from azure.storage.blob import BlobServiceClient

        return BlobServiceClient.from_connection_string(self.connection_string)

    def queue_service_client(self) -> Any:
        """An ``azure.storage.queue.QueueServiceClient`` for this Azurite."""
        from azure.storage.queue import QueueServiceClient

        return QueueServiceClient.from_connection_string(self.connection_string)

    def create_container(self, name: str) -> str:
        """Create a blob container (3-63 chars, lowercase) if it does not exist; returns its name."""
        from azure.core.exceptions import ResourceExistsError

        with contextlib.suppress(ResourceExistsError):
            self.blob_service_client().create_container(name)
        return name

    def create_queue(self, name: str) -> str:
        """Create a storage queue if it does not exist; returns its name."""
        from azure.core.exceptions import ResourceExistsError

        with contextlib.suppress(ResourceExistsError):
            self.queue_service_client().create_queue(name)
        return name


# ------------------------------------------------------------------------------------------------ moto
class MotoServer(Service):
    """moto server (S3, SQS, DynamoDB, ...) on a free port."""

    name = "moto"

    def __init__(self, workdir: Path) -> None:
        super().__init__(workdir)
        self.port = free_port()

    @classmethod
    def start(cls, workdir: Path) -> MotoServer:
        """Start ``python -m moto.server`` and wait until it listens."""

        def attempt() -> MotoServer:
            svc = cls(workdir)
            svc._spawn([sys.executable, "-m", "moto.server", "-H", HOST, "-p", str(svc.port)])
            svc._wait_for_ports([svc.port])
            return svc

        return _start_with_retries(attempt)

    @property
    def endpoint(self) -> str:
        """The endpoint URL for every moto service."""
        return f"http://{HOST}:{self.port}"

    @property
    def storage_options(self) -> dict[str, str]:
        """deltalake ``storage_options`` for ``s3://`` tables on this moto server."""
        return {
            "AWS_ENDPOINT_URL": self.endpoint,
            "AWS_ALLOW_HTTP": "true",
            "AWS_ACCESS_KEY_ID": AWS_DUMMY_KEY,
            "AWS_SECRET_ACCESS_KEY": AWS_DUMMY_KEY,
            "AWS_REGION": AWS_REGION,
        }

    @property
    def env(self) -> dict[str, str]:
        """Environment variables pointing AWS SDKs (and Sail) at this moto server."""
        return dict(self.storage_options)

    def boto3_client(self, service: str) -> Any:
        """A boto3 client (``"s3"``, ``"sqs"``, ``"dynamodb"``, ...) bound to this moto server."""
        import boto3

        return boto3.client(
            service,
            endpoint_url=self.endpoint,
            aws_access_key_id=AWS_DUMMY_KEY,
            aws_secret_access_key=AWS_DUMMY_KEY,
            region_name=AWS_REGION,
        )

    def create_bucket(self, name: str) -> str:
        """Create an S3 bucket if it does not exist; returns its name."""
        s3 = self.boto3_client("s3")
        with contextlib.suppress(s3.exceptions.BucketAlreadyOwnedByYou):
            s3.create_bucket(Bucket=name)
        return name


# ------------------------------------------------------------------------------------------------ Sail
def sail_command() -> list[str]:
    """How to run the Sail CLI: ``python -m pysail`` of this interpreter."""
    return [sys.executable, "-m", "pysail"]


def prepare_spark_client() -> None:
    """Make ``pyspark.sql.connect`` importable from any ``__main__``.

    pyspark-client looks for ``SPARK_HOME`` (and exits the process when it finds none) if the main
    module has neither ``__spec__`` nor ``__file__`` -- ``python -c`` and pytest-xdist workers.
    """
    if "SPARK_HOME" not in os.environ:
        import pyspark

        os.environ["SPARK_HOME"] = str(Path(pyspark.__file__).resolve().parent)


class SailServer(Service):
    """A Sail Spark Connect server on a free port."""

    name = "sail"

    def __init__(self, workdir: Path) -> None:
        super().__init__(workdir)
        self.port = free_port()

    @classmethod
    def start(cls, workdir: Path, env: Mapping[str, str] | None = None) -> SailServer:
        """Start ``sail spark server``; ``env`` adds variables (``AWS_ENDPOINT_URL``, ...) to its own."""
        # the tests and benches keep a session for their whole run, and Sail ends one left idle longer than
        # `spark.session_timeout_secs` (900 s by default): a week here, unless the environment sets it
        timeout = os.environ.get("SAIL_SPARK__SESSION_TIMEOUT_SECS", "604800")
        env = {"SAIL_SPARK__SESSION_TIMEOUT_SECS": timeout, **(env or {})}

        def attempt() -> SailServer:
            svc = cls(workdir)
            svc._spawn(
                [*sail_command(), "spark", "server", "--ip", HOST, "--port", str(svc.port)],
                env=env,
            )
            svc._wait_for_ports([svc.port])
            return svc

        return _start_with_retries(attempt)

    @property
    def remote(self) -> str:
        """The Spark Connect URL."""
        return f"sc://{HOST}:{self.port}"

    def session(self) -> Any:
        """A new ``pyspark.sql.SparkSession`` connected to this server.

        ``builder.remote(url).getOrCreate()`` hands back the process's existing Connect session even
        when ``url`` names another server, so this uses ``create()``.
        """
        prepare_spark_client()
        from pyspark.sql import SparkSession

        return SparkSession.builder.remote(self.remote).create()
