"""Queue trigger (queue: app setting DELTAEXTRAS_QUEUE): rewrite and commit one partition. Transient
failures raise (the host retries); permanent ones go to the dead-letter output with their reason.
The logic is in deltaextras.work."""

from pathlib import Path

import azure.functions as func

from deltaextras.app.edges.functions import run_worker

APP_ROOT = Path(__file__).resolve().parent.parent


def main(msg: func.QueueMessage, deadletter: func.Out[str]) -> None:
    run_worker(msg, deadletter, app_root=APP_ROOT)
