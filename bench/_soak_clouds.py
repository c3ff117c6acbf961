"""Where the soak's week lives: the storage and the work queue of one function app, on Azurite (the Azure
Functions app, :class:`AzureSide`) or on moto server (the AWS Lambda adapter, :class:`AwsSide`).

Each side creates its container or bucket and its queues, gives the app settings its handlers read, sends,
duplicates and counts messages, lists and reads stored objects, and names the storage options and the
environment that send readers through a counting or fault proxy in front of its storage.

Example:
    >>> AzureSide.backend, AwsSide.backend
    ('azurite', 'moto')
"""

from __future__ import annotations

import base64
import uuid
from typing import Any
from urllib.parse import urlsplit

HOST = "127.0.0.1"


class AzureSide:
    """An Azurite container and Azure Storage queues (the poison queue ``<queue>-poison``)."""

    name = "azure"
    backend = "azurite"

    def __init__(self, azurite: Any) -> None:
        self.service = azurite
        self.container = f"soak-{uuid.uuid4().hex[:8]}"
        azurite.create_container(self.container)
        self.opts = dict(azurite.storage_options)
        self.port = int(urlsplit(azurite.blob_endpoint).port or 0)
        self.queue = f"soak-{uuid.uuid4().hex[:10]}"

    @property
    def root(self) -> str:
        return f"az://{self.container}"

    def app_env(self, tables: str) -> dict[str, str]:
        import json

        return {
            "DELTAEXTRAS_TABLES": tables,
            "DELTAEXTRAS_QUEUE": self.queue,
            "DELTAEXTRAS_POISON_QUEUE": f"{self.queue}-poison",
            "DELTAEXTRAS_SCHEDULE": "0 0 * * * *",
            "DELTAEXTRAS_STORAGE": self.service.connection_string,
            "DELTAEXTRAS_STORAGE_OPTIONS": json.dumps(self.opts),
        }

    cleared = ("AZURE_CLIENT_ID", "IDENTITY_ENDPOINT", "DELTAEXTRAS_QUEUE_URL", "DELTAEXTRAS_DLQ_URL")

    def _client(self, name: str) -> Any:
        from deltaextras.app.edges.azure_queue import ensure_queue, queue_client

        client = queue_client(name, raw=True)
        ensure_queue(client)
        return client

    def send(self, body: str, raw: bool = False) -> None:
        """Send ``body`` as the app's messages are sent (base64), or as it is (``raw``)."""
        self._client(self.queue).send_message(body if raw else base64.b64encode(body.encode()).decode())

    def poison_body(self) -> str:
        return "%% not base64 %%"

    def duplicate_one(self) -> bool:
        """Send a copy of one planned message (a duplicated delivery)."""
        q = self._client(self.queue)
        peeked = q.peek_messages(max_messages=1)
        if peeked:
            q.send_message(peeked[0].content)
        return bool(peeked)

    def pending(self) -> int:
        return int(self._client(self.queue).get_queue_properties().approximate_message_count or 0)

    def count_poison(self) -> int:
        """Messages on the poison queue (then removed, so that every hour counts its own)."""
        q, n = self._client(f"{self.queue}-poison"), 0
        while True:
            page = list(q.receive_messages(messages_per_page=32, max_messages=32, visibility_timeout=30))
            if not page:
                return n
            for m in page:
                q.delete_message(m.id, m.pop_receipt)
                n += 1

    def objects(self, prefix: str) -> list[tuple[str, int]]:
        container = self.service.blob_service_client().get_container_client(self.container)
        return [(b.name, int(b.size)) for b in container.list_blobs(name_starts_with=prefix)]

    def read(self, key: str) -> bytes | None:
        container = self.service.blob_service_client().get_container_client(self.container)
        try:
            return bytes(container.download_blob(key).readall())
        except Exception:
            return None

    def proxied(self, port: int) -> dict[str, str]:
        """deltalake storage options through a proxy on ``port`` in front of the blob endpoint."""
        return {**self.opts, "azure_storage_endpoint": f"http://{HOST}:{port}/devstoreaccount1"}

    def proxied_env(self, port: int) -> dict[str, str]:
        """A Sail server's environment through the same proxy."""
        return {**self.service.env, "AZURE_STORAGE_ENDPOINT": f"http://{HOST}:{port}/devstoreaccount1"}

    def direct_env(self) -> dict[str, str]:
        """A Sail server's environment on Azurite itself."""
        return dict(self.service.env)


class AwsSide:
    """A moto S3 bucket, an SQS work queue with a dead-letter queue (redrive after ``max_receive_count``
    receives, as ``infra/terraform/aws/sqs.tf`` sets it up)."""

    name = "aws"
    backend = "moto"
    max_receive_count = 5

    def __init__(self, moto: Any) -> None:
        import json

        self.service = moto
        self.bucket = moto.create_bucket(f"soak-{uuid.uuid4().hex[:8]}")
        self.opts = dict(moto.storage_options)
        self.port = int(moto.port)
        self.sqs = moto.boto3_client("sqs")
        self.s3 = moto.boto3_client("s3")
        name = f"soak-{uuid.uuid4().hex[:10]}"
        self.dlq = self.sqs.create_queue(QueueName=f"{name}-dlq")["QueueUrl"]
        dlq_arn = self.sqs.get_queue_attributes(QueueUrl=self.dlq, AttributeNames=["QueueArn"])["Attributes"][
            "QueueArn"
        ]
        redrive = json.dumps({"deadLetterTargetArn": dlq_arn, "maxReceiveCount": str(self.max_receive_count)})
        self.url = self.sqs.create_queue(
            QueueName=name, Attributes={"VisibilityTimeout": "300", "RedrivePolicy": redrive}
        )["QueueUrl"]

    @property
    def root(self) -> str:
        return f"s3://{self.bucket}"

    def app_env(self, tables: str) -> dict[str, str]:
        import json

        # As in Lambda: credentials, region (and here the endpoint) come from the environment.
        return {
            **self.service.env,
            "DELTAEXTRAS_TABLES": tables,
            "DELTAEXTRAS_QUEUE_URL": self.url,
            "DELTAEXTRAS_DLQ_URL": self.dlq,
            "DELTAEXTRAS_STORAGE_OPTIONS": json.dumps(self.opts),
        }

    cleared = ("AZURE_CLIENT_ID", "IDENTITY_ENDPOINT", "DELTAEXTRAS_QUEUE", "DELTAEXTRAS_STORAGE")

    def send(self, body: str, raw: bool = False) -> None:
        """SQS bodies are the JSON text itself (``raw`` changes nothing)."""
        self.sqs.send_message(QueueUrl=self.url, MessageBody=body)

    def poison_body(self) -> str:
        return "{not json"

    def duplicate_one(self) -> bool:
        """Receive one planned message, send a copy, and make the original visible again."""
        got = self.sqs.receive_message(QueueUrl=self.url, MaxNumberOfMessages=1, VisibilityTimeout=30).get("Messages")
        if not got:
            return False
        self.sqs.send_message(QueueUrl=self.url, MessageBody=got[0]["Body"])
        self.sqs.change_message_visibility(
            QueueUrl=self.url, ReceiptHandle=got[0]["ReceiptHandle"], VisibilityTimeout=0
        )
        return True

    def pending(self) -> int:
        attrs = self.sqs.get_queue_attributes(
            QueueUrl=self.url, AttributeNames=["ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible"]
        )["Attributes"]
        return int(attrs["ApproximateNumberOfMessages"]) + int(attrs["ApproximateNumberOfMessagesNotVisible"])

    def count_poison(self) -> int:
        """Messages on the dead-letter queue (then removed, so that every hour counts its own)."""
        n = 0
        while True:
            got = self.sqs.receive_message(QueueUrl=self.dlq, MaxNumberOfMessages=10, VisibilityTimeout=30).get(
                "Messages", []
            )
            if not got:
                return n
            for m in got:
                self.sqs.delete_message(QueueUrl=self.dlq, ReceiptHandle=m["ReceiptHandle"])
                n += 1

    def objects(self, prefix: str) -> list[tuple[str, int]]:
        out: list[tuple[str, int]] = []
        for page in self.s3.get_paginator("list_objects_v2").paginate(Bucket=self.bucket, Prefix=prefix):
            out.extend((o["Key"], int(o["Size"])) for o in page.get("Contents", []))
        return out

    def read(self, key: str) -> bytes | None:
        try:
            return bytes(self.s3.get_object(Bucket=self.bucket, Key=key)["Body"].read())
        except Exception:
            return None

    def proxied(self, port: int) -> dict[str, str]:
        return {**self.opts, "AWS_ENDPOINT_URL": f"http://{HOST}:{port}"}

    def proxied_env(self, port: int) -> dict[str, str]:
        return self.proxied(port)

    def direct_env(self) -> dict[str, str]:
        return dict(self.opts)
