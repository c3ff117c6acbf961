"""Child process of the crash suite: the queue worker on one message, stopped dead at a chosen step.

``python reliability_driver.py SPEC`` where SPEC is a JSON file with:

* ``tables``: the ``DELTAEXTRAS_TABLES`` value (a list; storage options inside each entry);
* ``body``: the queue message body, as the queue delivers it;
* ``step``: where to stop --
  ``after_output`` (after ``after_outputs`` output files are complete on storage),
  ``after_rewrite`` (every output file written, nothing committed),
  ``mid_log`` (inside the put of the log entry: the parent kills this process while the put runs),
  ``after_commit`` (the log entry is committed, the message not yet acknowledged), or ``none``;
* ``after_outputs``: for ``after_output``;
* ``pad_bytes``: for ``mid_log``, extra bytes carried in the entry's ``commitInfo`` so that the put
  takes long enough to be interrupted;
* ``events``: a file this process appends JSON lines to, flushed at once:
  ``{"event": "output", "key": ...}`` per output file, ``{"event": "put", "key": ..., "bytes": n}`` when
  the log entry's put starts, ``{"event": "put_done"}`` when it returned, and ``{"event": "acked", ...}``
  when the worker returned (the queue edge would acknowledge the message then).

Stops are hard: ``os._exit(137)`` from the hook (no ``finally``, no ``atexit``, no cleanup), or SIGKILL
from the parent for ``mid_log``. The worker is :func:`deltaextras.app.work.handle`, the body of both the
Azure Functions queue trigger and the Lambda SQS handler.
"""

from __future__ import annotations

import json
import os
import sys
import time
from typing import Any

HARD_EXIT = 137


class Events:
    """Append-only JSON lines, each flushed before the next step runs."""

    def __init__(self, path: str) -> None:
        self._fh = open(path, "a", encoding="utf-8")  # noqa: SIM115 (lives until the process ends)

    def emit(self, event: str, **fields: Any) -> None:
        """Write one event line and flush it to the OS."""
        self._fh.write(json.dumps({"event": event, **fields}) + "\n")
        self._fh.flush()
        os.fsync(self._fh.fileno())


def pad_commit(data: bytes, pad: int) -> bytes:
    """The log entry with ``pad`` bytes of filler in its ``commitInfo`` (readers ignore unknown fields)."""
    first, rest = data.split(b"\n", 1)
    action = json.loads(first)
    action["commitInfo"]["deltaextrasTestPadding"] = "x" * pad
    return json.dumps(action, separators=(",", ":")).encode("utf-8") + b"\n" + rest


def main(spec_path: str) -> int:
    """Run the worker once with the spec's stop; returns the exit code if it was not stopped."""
    with open(spec_path, encoding="utf-8") as fh:
        spec = json.load(fh)
    from deltaextras.app import work
    from deltaextras.app.config import AppConfig
    from deltaextras.core.storage import TableStorage

    events = Events(spec["events"])
    step = spec["step"]
    config = AppConfig.from_env({"DELTAEXTRAS_TABLES": json.dumps(spec["tables"])})
    written: list[str] = []

    def after_output(output: Any) -> None:
        written.append(output.key)
        events.emit("output", key=output.key)
        if step == "after_output" and len(written) >= int(spec["after_outputs"]):
            os._exit(HARD_EXIT)

    def after_rewrite(_outputs: Any) -> None:
        if step == "after_rewrite":
            os._exit(HARD_EXIT)

    def after_commit(_version: int) -> None:
        if step == "after_commit":
            os._exit(HARD_EXIT)

    if step == "mid_log":
        original = TableStorage.put_if_absent
        pad = int(spec.get("pad_bytes") or 0)

        def put_if_absent(self: TableStorage, key: str, data: bytes) -> bool:
            if not key.startswith("_delta_log/") or not key.endswith(".json"):
                return original(self, key, data)
            data = pad_commit(data, pad) if pad else data
            events.emit("put", key=key, bytes=len(data))
            done = original(self, key, data)
            events.emit("put_done", created=done)
            time.sleep(600)  # the parent kills us; never acknowledge
            return done

        TableStorage.put_if_absent = put_if_absent  # type: ignore[method-assign]

    hooks = {"after_output": after_output, "after_rewrite": after_rewrite, "after_commit": after_commit}
    outcome = work.handle(spec["body"], config, message_id="crash-1", dequeue_count=1, hooks=hooks)
    events.emit("acked", status=outcome.status, reason=outcome.reason)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
