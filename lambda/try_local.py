"""Try the Lambda adapter on this machine: moto server stands in for S3 and SQS.

    pip install -e ".[aws]" "moto[server]"
    python lambda/try_local.py

It starts ``moto.server`` on a free loopback port, writes the sensor demo table to
``s3://deltaextras-demo/sensors``, creates the work queue and its dead-letter queue, sets the
environment as Lambda would (plus the moto endpoint), calls ``orchestrator_handler`` once with a
scheduled event, then feeds the queue to ``worker_handler`` as the SQS event source mapping does
(batches of ten; ``batchItemFailures`` made visible again, the rest deleted), prints each message's
outcome and stops moto. Nothing outside this process and its moto child is touched.
"""

from __future__ import annotations

import importlib.util
import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
HOST = "127.0.0.1"
BUCKET, TABLE = "deltaextras-demo", "s3://deltaextras-demo/sensors"


def free_port() -> int:
    with socket.socket() as s:
        s.bind((HOST, 0))
        return int(s.getsockname()[1])


def start_moto() -> tuple[subprocess.Popen[bytes], str]:
    port = free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "moto.server", "-H", HOST, "-p", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    endpoint = f"http://{HOST}:{port}"
    deadline = time.monotonic() + 30
    while True:
        with socket.socket() as s:
            s.settimeout(0.5)
            if s.connect_ex((HOST, port)) == 0 and s.getsockname() != s.getpeername():
                return proc, endpoint
        if proc.poll() is not None or time.monotonic() > deadline:
            raise SystemExit("moto server did not start: pip install 'moto[server]'")
        time.sleep(0.2)


def main() -> int:
    """Run the orchestrator once and the worker until the queue is empty; exit 1 if anything failed."""
    try:
        import boto3
        from deltalake import write_deltalake
    except ModuleNotFoundError as exc:
        print(f"{exc.name} is not installed: pip install -e '.[aws]' 'moto[server]'", file=sys.stderr)
        return 1
    import numpy as np

    from deltaextras.app.demo import sensor_batch

    moto, endpoint = start_moto()
    try:
        env = {
            "AWS_ENDPOINT_URL": endpoint,
            "AWS_ALLOW_HTTP": "true",
            "AWS_ACCESS_KEY_ID": "testing",
            "AWS_SECRET_ACCESS_KEY": "testing",
            "AWS_REGION": "us-east-1",
            "AWS_DEFAULT_REGION": "us-east-1",
        }
        os.environ.update(env)
        s3, sqs = boto3.client("s3"), boto3.client("sqs")
        s3.create_bucket(Bucket=BUCKET)
        rng = np.random.default_rng(42)
        for step in range(12):
            write_deltalake(TABLE, sensor_batch(step, 30, 3, rng), partition_by=["node_id_range"], mode="append")
        url = sqs.create_queue(QueueName="deltaextras-rorder", Attributes={"VisibilityTimeout": "60"})["QueueUrl"]
        dlq = sqs.create_queue(QueueName="deltaextras-rorder-dlq")["QueueUrl"]
        os.environ["DELTAEXTRAS_TABLES"] = json.dumps([{"uri": TABLE, "sort_by": "utc_time"}])
        os.environ["DELTAEXTRAS_QUEUE_URL"], os.environ["DELTAEXTRAS_DLQ_URL"] = url, dlq
        print(f"moto at {endpoint}; table {TABLE}; queue {url}")

        handlers = load_handlers()
        summary = handlers.orchestrator_handler({"source": "aws.events", "detail-type": "Scheduled Event"}, None)
        print(f"orchestrator: {summary['partitions_planned']} partition(s) planned, {summary['messages_sent']} sent")
        failures = feed_worker(sqs, url, handlers.worker_handler)
        dead = sqs.get_queue_attributes(QueueUrl=dlq, AttributeNames=["ApproximateNumberOfMessages"])
        dead_count = int(dead["Attributes"]["ApproximateNumberOfMessages"])
        print(f"worker: {failures} failed deliveries, {dead_count} message(s) in the dead-letter queue")
        return 1 if summary["tables_failed"] or dead_count else 0
    finally:
        moto.terminate()
        moto.wait(timeout=10)


def load_handlers() -> Any:
    spec = importlib.util.spec_from_file_location("lambda_handlers", HERE / "lambda_handlers.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def feed_worker(sqs: Any, url: str, handler: Any, rounds: int = 50) -> int:
    """The SQS event source mapping, simplified: returns the number of failed deliveries."""
    from deltaextras.app.edges.local_host import tap_outcomes

    failures = 0
    for _ in range(rounds):
        received = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10, AttributeNames=["All"]).get("Messages", [])
        if not received:
            break
        records = [
            {"messageId": m["MessageId"], "receiptHandle": m["ReceiptHandle"], "body": m["Body"],
             "attributes": m.get("Attributes", {}), "eventSource": "aws:sqs"}
            for m in received
        ]  # fmt: skip
        with tap_outcomes() as tap:
            failed = {f["itemIdentifier"] for f in handler({"Records": records}, None)["batchItemFailures"]}
        for record in tap.records:
            print(f"  {record['table']} {record['partition']}: {record['status']} ({record['reason']})")
        for m in received:
            if m["MessageId"] in failed:
                failures += 1
                sqs.change_message_visibility(QueueUrl=url, ReceiptHandle=m["ReceiptHandle"], VisibilityTimeout=0)
            else:
                sqs.delete_message(QueueUrl=url, ReceiptHandle=m["ReceiptHandle"])
    return failures


if __name__ == "__main__":
    sys.exit(main())
