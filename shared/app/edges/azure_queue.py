"""Azure Storage queues: the work queue the orchestrator fills and the dead-letter (poison) queue.

The connection is read the way the Functions host reads the queue trigger's ``connection`` setting,
so one set of app settings serves both (prefix ``DELTAEXTRAS_STORAGE``):

* ``DELTAEXTRAS_STORAGE``: a connection string (Azurite: ``UseDevelopmentStorage=true`` or the full
  string with ``QueueEndpoint=...``);
* otherwise identity-based: ``DELTAEXTRAS_STORAGE__queueServiceUri``
  (``https://<account>.queue.core.windows.net``) or ``DELTAEXTRAS_STORAGE__accountName``, with
  ``DELTAEXTRAS_STORAGE__credential=managedidentity`` and ``DELTAEXTRAS_STORAGE__clientId`` for a
  user-assigned identity (``AZURE_CLIENT_ID`` is the fallback); without ``__credential``,
  ``DefaultAzureCredential`` is used (managed identity in Azure, ``az login`` on a workstation).

Messages are base64 text, as ``host.json`` (``messageEncoding: base64``) makes the host expect.

Example:
    >>> describe_connection({"DELTAEXTRAS_STORAGE__accountName": "acct",
    ...                      "DELTAEXTRAS_STORAGE__credential": "managedidentity"})
    'identity https://acct.queue.core.windows.net (managed identity)'
"""

from __future__ import annotations

import contextlib
import logging
import os
from collections.abc import Mapping, Sequence
from typing import Any

from ...errors import InvalidArgumentError, StorageError

log = logging.getLogger(__name__)

CONNECTION = "DELTAEXTRAS_STORAGE"


def _service_uri(env: Mapping[str, str], prefix: str) -> str | None:
    uri = env.get(f"{prefix}__queueServiceUri")
    if uri:
        return uri.rstrip("/")
    account = env.get(f"{prefix}__accountName")
    if account:
        return f"https://{account}.queue.core.windows.net"
    return None


def describe_connection(env: Mapping[str, str] | None = None, prefix: str = CONNECTION) -> str:
    """How the queue connection is configured, without secrets (for logs and errors)."""
    env = os.environ if env is None else env
    conn = env.get(prefix)
    if conn:
        if conn.strip().lower().startswith("usedevelopmentstorage"):
            return "connection string (development storage)"
        parts = dict(p.split("=", 1) for p in conn.split(";") if "=" in p)
        where = parts.get("QueueEndpoint") or parts.get("AccountName") or "?"
        return f"connection string ({where})"
    uri = _service_uri(env, prefix)
    if uri:
        how = (
            "managed identity"
            if env.get(f"{prefix}__credential", "").lower() == "managedidentity"
            else "DefaultAzureCredential"
        )
        return f"identity {uri} ({how})"
    return "not configured"


# An operator's command asks the queue once before it sends, and says within seconds when it cannot reach it
# (the SDK's default policy retries a refused connection for about a minute and a half).
QUICK = {"retry_total": 1, "retry_backoff_factor": 0.2, "connection_timeout": 5, "read_timeout": 10}


def queue_service(env: Mapping[str, str] | None = None, prefix: str = CONNECTION, **client_options: Any) -> Any:
    """A ``QueueServiceClient`` from the app settings (see the module docstring); ``client_options`` go to
    the client (retry policy, timeouts: :data:`QUICK`)."""
    from azure.storage.queue import QueueServiceClient

    env = os.environ if env is None else env
    conn = env.get(prefix)
    if conn:
        return QueueServiceClient.from_connection_string(conn, **client_options)
    uri = _service_uri(env, prefix)
    if not uri:
        raise InvalidArgumentError(
            f"the queue connection is not configured: set {prefix} to a connection string, or "
            f"{prefix}__queueServiceUri (or {prefix}__accountName) for identity-based access"
        )
    client_id = env.get(f"{prefix}__clientId") or env.get("AZURE_CLIENT_ID") or None
    if env.get(f"{prefix}__credential", "").lower() == "managedidentity":
        from azure.identity import ManagedIdentityCredential

        credential: Any = ManagedIdentityCredential(client_id=client_id)
    else:
        from azure.identity import DefaultAzureCredential

        credential = DefaultAzureCredential(managed_identity_client_id=client_id)
    return QueueServiceClient(account_url=uri, credential=credential, **client_options)


def queue_client(
    name: str,
    env: Mapping[str, str] | None = None,
    *,
    prefix: str = CONNECTION,
    raw: bool = False,
    client_options: Mapping[str, Any] | None = None,
) -> Any:
    """A ``QueueClient`` for one queue; messages are base64-encoded on the way out and decoded on the
    way in (``raw=True``: bodies are passed through untouched, as the service stores them)."""
    from azure.storage.queue import TextBase64DecodePolicy, TextBase64EncodePolicy

    service = queue_service(env, prefix, **(client_options or {}))
    if raw:
        return service.get_queue_client(name)
    return service.get_queue_client(
        name, message_encode_policy=TextBase64EncodePolicy(), message_decode_policy=TextBase64DecodePolicy()
    )


def ensure_queue(client: Any) -> None:
    """Create the queue if it does not exist."""
    from azure.core.exceptions import ResourceExistsError

    with contextlib.suppress(ResourceExistsError):
        client.create_queue()


class QueueSender:
    """Sends message bodies (JSON text) to an Azure queue as base64 text.

    ``send_batch`` is the ``send`` callable of :func:`deltaextras.app.dispatch.dispatch`; the queue is
    created on first use if it does not exist (as the host's queue output binding does).
    """

    def __init__(self, client: Any) -> None:
        self.client = client

    @classmethod
    def from_env(
        cls, queue: str, env: Mapping[str, str] | None = None, *, prefix: str = CONNECTION, quick: bool = False
    ) -> QueueSender:
        """A sender for ``queue`` on the connection the app settings describe (``quick``: few retries and
        short timeouts, for an operator's command)."""
        sender = cls(queue_client(queue, env, prefix=prefix, client_options=QUICK if quick else None))
        sender.where = describe_connection(env, prefix)
        return sender

    where = "the configured connection"

    def check(self) -> None:
        """Asks the queue before anything is sent (and creates it when it does not exist, as a send would):
        one line naming the queue and the connection when it cannot be reached (retryable)."""
        from azure.core.exceptions import AzureError, ResourceNotFoundError

        try:
            try:
                self.client.get_queue_properties()
            except ResourceNotFoundError:
                log.info("queue %s does not exist; creating it", self.queue_name)
                ensure_queue(self.client)
        except AzureError as exc:
            raise StorageError(
                f"cannot reach queue {self.queue_name!r} on {self.where}: {_first_line(exc)}; nothing was sent. "
                "Is the storage (Azurite) running?"
            ) from None

    @property
    def queue_name(self) -> str:
        return str(self.client.queue_name)

    def send(self, body: str) -> None:
        """Send one message."""
        from azure.core.exceptions import ResourceNotFoundError

        try:
            self.client.send_message(body)
        except ResourceNotFoundError:
            # Every sender that finds the queue missing creates it (creating is idempotent) and sends
            # again: the dispatcher sends batches from several threads at once.
            log.info("queue %s does not exist; creating it", self.queue_name)
            ensure_queue(self.client)
            self.client.send_message(body)

    def send_batch(self, bodies: Sequence[str]) -> None:
        """Send messages one by one (Azure queues have no batch send); raises on the first failure."""
        for body in bodies:
            self.send(body)


def _first_line(exc: BaseException) -> str:
    return (str(exc).strip().splitlines() or [type(exc).__name__])[0][:200]
