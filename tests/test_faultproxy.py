"""The fault proxy does what the fault tests rely on: untouched requests pass through, and each fault
lets the write land before the client sees a failure (503, a dropped connection, no answer in time)."""

from __future__ import annotations

import uuid

import obstore
import pytest
from faultproxy import FaultProxy, Rule
from services import open_obstore

BUCKET = "proxy-check"


@pytest.mark.parametrize("action", ["503", "drop", "timeout"])
def test_fault_lands_the_write_then_fails_the_client(moto, action: str) -> None:
    moto.create_bucket(BUCKET)
    root = f"s3://{BUCKET}/{uuid.uuid4().hex}"
    direct = open_obstore(root, moto.storage_options)
    with FaultProxy(moto.port) as proxy:
        options = {**moto.storage_options, "AWS_ENDPOINT_URL": f"http://127.0.0.1:{proxy.port}", "timeout": "1s"}
        store = open_obstore(root, options)
        obstore.put(store, "plain.txt", b"ok")  # no rule: passes through
        rule = proxy.add(Rule("PUT", r"/entry\.json$", action, delay=2.0))
        try:
            obstore.put(store, "entry.json", b"ours", mode="create")
            client_saw = "success"
        except Exception as exc:  # object_store's error types differ by cause; the name is enough here
            client_saw = type(exc).__name__
        assert rule.fired == 1
        assert bytes(obstore.get(direct, "entry.json").bytes()) == b"ours", "the write did not land"
        assert bytes(obstore.get(direct, "plain.txt").bytes()) == b"ok"
        puts = [s.outcome for s in proxy.requests("PUT", r"/entry\.json$")]
    assert puts[0].startswith(f"{action} (upstream 200)"), puts
    if action == "timeout":
        # the conditional PUT is not retried after a timeout: the client reports an error
        assert client_saw not in ("success", "AlreadyExistsError"), client_saw
    else:
        # object_store retries; the retry of the create meets the landed write: "already exists"
        assert puts[1:] == ["412"], puts
        assert client_saw == "AlreadyExistsError", client_saw
