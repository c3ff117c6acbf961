"""Azurite for local runs of the function app: find the one the settings point at or start it (with the
flags the Azure SDKs need), create the tables' containers and a demo table, and say what is missing.

The endpoints come from the queue connection (``DELTAEXTRAS_STORAGE``): ``UseDevelopmentStorage=true``
means blob 10000, queue 10001 and table 10002 on 127.0.0.1; a full connection string names its own
``BlobEndpoint``/``QueueEndpoint``. Only loopback addresses are used.

Example:
    >>> e = AzuriteEndpoints.from_connection_string("UseDevelopmentStorage=true")
    >>> e.blob_port, e.queue_port, e.table_port
    (10000, 10001, 10002)
    >>> azurite_command("azurite", e, "/tmp/az")[:6]
    ['azurite', '--silent', '--skipApiVersionCheck', '--disableTelemetry', '--loose', '--location']
"""

from __future__ import annotations

import contextlib
import logging
import os
import shutil
import socket
import subprocess
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from ...errors import InvalidArgumentError, StorageError, TableNotFoundError

log = logging.getLogger(__name__)

HOST = "127.0.0.1"
ACCOUNT = "devstoreaccount1"
# Azurite's documented development account key (public; it only opens the local emulator).
ACCOUNT_KEY = "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw=="
# --skipApiVersionCheck: the SDKs speak newer service versions than Azurite announces;
# --loose: accept headers Azurite does not implement instead of failing the request.
FLAGS = ("--silent", "--skipApiVersionCheck", "--disableTelemetry", "--loose")
DEMO_NODES, DEMO_BATCHES, DEMO_RANGES = 30, 12, 3
_LOOPBACK = {"127.0.0.1", "localhost", "::1"}


@dataclass(frozen=True)
class AzuriteEndpoints:
    """Where Azurite's blob, queue and table services listen (loopback only)."""

    blob_port: int = 10000
    queue_port: int = 10001
    table_port: int = 10002

    @classmethod
    def from_connection_string(cls, conn: str | None) -> AzuriteEndpoints:
        """The endpoints of an Azurite connection string; :class:`InvalidArgumentError` for anything else."""
        text = (conn or "").strip()
        if not text or text.lower().startswith("usedevelopmentstorage"):
            return cls()
        parts = {k.strip().lower(): v.strip() for k, _, v in (p.partition("=") for p in text.split(";")) if k}
        ports = {}
        for service, default in (("blob", 10000), ("queue", 10001), ("table", 10002)):
            url = parts.get(f"{service}endpoint")
            if not url:
                ports[service] = default
                continue
            split = urlsplit(url)
            if split.hostname not in _LOOPBACK:
                raise InvalidArgumentError(
                    f"the {service} endpoint {url} is not on this machine; --demo runs against a local Azurite "
                    "only (set DELTAEXTRAS_STORAGE to UseDevelopmentStorage=true)"
                )
            ports[service] = split.port or default
        return cls(ports["blob"], ports["queue"], ports["table"])

    @property
    def blob_endpoint(self) -> str:
        return f"http://{HOST}:{self.blob_port}/{ACCOUNT}"

    @property
    def connection_string(self) -> str:
        """A full connection string for the Azure SDKs."""
        return (
            f"DefaultEndpointsProtocol=http;AccountName={ACCOUNT};AccountKey={ACCOUNT_KEY};"
            f"BlobEndpoint={self.blob_endpoint};QueueEndpoint=http://{HOST}:{self.queue_port}/{ACCOUNT};"
            f"TableEndpoint=http://{HOST}:{self.table_port}/{ACCOUNT};"
        )

    def listening(self) -> bool:
        """Whether the blob and queue ports accept connections."""
        return all(_port_open(p) for p in (self.blob_port, self.queue_port))


def _port_open(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.settimeout(0.5)
        if s.connect_ex((HOST, port)) != 0:
            return False
        return s.getsockname() != s.getpeername()  # not a socket connected to itself


def find_azurite(app_root: str | os.PathLike[str] = ".") -> str:
    """The azurite executable: ``$AZURITE_BIN``, ``<app_root>/node_modules/.bin/azurite`` or ``PATH``."""
    env = os.environ.get("AZURITE_BIN")
    if env:
        if not Path(env).is_file():
            raise InvalidArgumentError(f"AZURITE_BIN={env} does not exist")
        return env
    local = Path(app_root) / "node_modules" / ".bin" / "azurite"
    if local.is_file():
        return str(local)
    found = shutil.which("azurite")
    if found:
        return found
    raise InvalidArgumentError(
        "Azurite is not installed: run `npm install --no-save azurite@3.37.0` in the app folder "
        "(or set AZURITE_BIN to its executable)"
    )


def azurite_command(binary: str, endpoints: AzuriteEndpoints, location: str | os.PathLike[str]) -> list[str]:
    """The Azurite command line: loopback only, data under ``location``."""
    return [
        binary,
        *FLAGS,
        "--location",
        str(location),
        "--blobHost",
        HOST,
        "--blobPort",
        str(endpoints.blob_port),
        "--queueHost",
        HOST,
        "--queuePort",
        str(endpoints.queue_port),
        "--tableHost",
        HOST,
        "--tablePort",
        str(endpoints.table_port),
    ]


@contextlib.contextmanager
def azurite_running(endpoints: AzuriteEndpoints, app_root: str | os.PathLike[str] = ".") -> Iterator[bool]:
    """Use the Azurite already listening on ``endpoints``, or start one (data in ``<app_root>/.azurite``)
    and stop it on exit. Yields whether it was started here."""
    if endpoints.listening():
        check_api_version(endpoints)
        yield False
        return
    location = Path(app_root).resolve() / ".azurite"
    location.mkdir(parents=True, exist_ok=True)
    cmd = azurite_command(find_azurite(app_root), endpoints, location)
    print(f"starting Azurite (blob {endpoints.blob_port}, queue {endpoints.queue_port}), data in {location}")
    log_path = location / "azurite.log"
    start = log_path.stat().st_size if log_path.exists() else 0
    with open(log_path, "ab") as out:
        proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
    try:
        # Wait for Azurite to say so: probing a port that is not yet listening can connect the probe to
        # itself (TCP simultaneous open on an ephemeral port) and take the port from under Azurite.
        deadline = time.monotonic() + 30
        while _read_from(log_path, start).count("successfully listening") < 3:
            if proc.poll() is not None:
                raise StorageError(f"Azurite exited at start (code {proc.returncode}); see {log_path}")
            if time.monotonic() > deadline:
                raise StorageError(f"Azurite did not listen within 30 s; see {log_path}")
            time.sleep(0.2)
        yield True
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def _read_from(path: Path, offset: int) -> str:
    with open(path, "rb") as f:
        f.seek(offset)
        return f.read().decode("utf-8", errors="replace")


def check_api_version(endpoints: AzuriteEndpoints) -> None:
    """One call to the blob service: an Azurite started without ``--skipApiVersionCheck`` refuses the SDK."""
    from azure.core.exceptions import HttpResponseError
    from azure.storage.blob import BlobServiceClient

    try:
        BlobServiceClient.from_connection_string(endpoints.connection_string).get_service_properties()
    except HttpResponseError as exc:
        if "API version" in str(exc):
            raise InvalidArgumentError(
                f"the Azurite on {HOST}:{endpoints.blob_port} refuses this SDK's API version; restart it with "
                f"{' '.join(FLAGS)}"
            ) from None
        raise StorageError(f"Azurite on {HOST}:{endpoints.blob_port} answered {exc.status_code}") from None


def container_of(uri: str) -> tuple[str, str]:
    """(container, path inside it) of an ``az://``, ``abfs[s]://`` or ``azure://`` table URI.

    Example:
        >>> container_of("az://lake/sensors"), container_of("abfss://lake@acct.dfs.core.windows.net/a/b")
        (('lake', 'sensors'), ('lake', 'a/b'))
    """
    split = urlsplit(uri)
    container = split.netloc.split("@", 1)[0] if "@" in split.netloc else split.netloc
    return container, split.path.strip("/")


def check_tables(endpoints: AzuriteEndpoints, uris: list[str]) -> None:
    """Name what is missing for each table on this Azurite: its container, or its ``_delta_log``."""
    from azure.storage.blob import BlobServiceClient

    service = BlobServiceClient.from_connection_string(endpoints.connection_string)
    for uri in uris:
        container, path = container_of(uri)
        client = service.get_container_client(container)
        if not client.exists():
            raise TableNotFoundError(
                f"container {container!r} of {uri} does not exist on Azurite ({endpoints.blob_endpoint}); "
                "create it, or run `deltaextras local-run --demo`, which creates it and a demo table"
            )
        if next(iter(client.list_blobs(name_starts_with=f"{path}/_delta_log/", results_per_page=1)), None) is None:
            raise TableNotFoundError(
                f"no Delta table at {uri}: container {container!r} has no {path}/_delta_log/; write the table "
                "first, or run `deltaextras local-run --demo`, which creates a demo table there"
            )


def create_demo_table(endpoints: AzuriteEndpoints, uri: str, storage_options: Mapping[str, str]) -> bool:
    """Create the container and, if there is no table yet, the sensor demo table; True if created."""
    import numpy as np
    from azure.core.exceptions import ResourceExistsError
    from azure.storage.blob import BlobServiceClient
    from deltalake import write_deltalake

    from ..demo import sensor_batch

    container, path = container_of(uri)
    client = BlobServiceClient.from_connection_string(endpoints.connection_string).get_container_client(container)
    with contextlib.suppress(ResourceExistsError):
        client.create_container()
    if next(iter(client.list_blobs(name_starts_with=f"{path}/_delta_log/", results_per_page=1)), None) is not None:
        return False
    rng = np.random.default_rng(42)
    for step in range(DEMO_BATCHES):
        write_deltalake(
            uri,
            sensor_batch(step, DEMO_NODES, DEMO_RANGES, rng),
            partition_by=["node_id_range"],
            mode="append",
            storage_options=dict(storage_options),
        )
    return True


def demo_storage_options(endpoints: AzuriteEndpoints) -> dict[str, str]:
    """deltalake ``storage_options`` for tables on this Azurite.

    Example:
        >>> demo_storage_options(AzuriteEndpoints())["azure_storage_endpoint"]
        'http://127.0.0.1:10000/devstoreaccount1'
    """
    return {
        "azure_storage_account_name": ACCOUNT,
        "azure_storage_account_key": ACCOUNT_KEY,
        "azure_storage_endpoint": endpoints.blob_endpoint,
        "azure_allow_http": "true",
    }


def is_emulated(storage_options: Mapping[str, Any]) -> bool:
    """Whether a table's storage options point at a local emulator."""
    opts = {k.lower(): str(v).lower() for k, v in storage_options.items()}
    if opts.get("azure_storage_use_emulator") == "true" or opts.get("use_emulator") == "true":
        return True
    endpoint = opts.get("azure_storage_endpoint") or opts.get("endpoint") or ""
    return urlsplit(endpoint).hostname in _LOOPBACK
