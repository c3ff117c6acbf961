"""The function app end to end on Azurite with group commit: the orchestrator plans 100 partitions (at
least ``group_commit_from``), so its messages ask for group commit; sixteen deliveries at a time (one
host instance's batch) run the real worker function with real ``azure.functions`` queue messages.
Every partition is committed once, in far fewer log versions than partitions, the rows are unchanged
and the poison queue stays empty."""

from __future__ import annotations

import json
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from app_support import assert_in_layout, content_checksum, table_version, write_sensor_table
from reliability_support import log_entries
from test_function_app import App, app  # noqa: F401  (the app fixture)

from deltaextras.app.edges.local_host import Function, app_settings

PARTITIONS = 100
BATCH = 16  # the host's default batchSize: deliveries of one instance at once


def test_one_hundred_partitions_commit_through_group_commit(app: App) -> None:  # noqa: F811
    write_sensor_table(app.uri, app.options, partitions=PARTITIONS, appends=2)
    before, v0 = content_checksum(app.uri, app.options), table_version(app.uri, app.options)
    host = app.host()
    assert host.run_timer().orchestrator == "succeeded"

    with app_settings(host.settings):
        fn = Function.load(host.app_root, "worker")
        main, trigger = fn.entry_point(), fn.trigger
        queue, poison = host._queue(trigger), host._queue(trigger, name=app.poison)
        received = _receive(queue)
        bodies = [json.loads(host._decode(m.content)) for m in received]
        assert len(bodies) == PARTITIONS and {b.get("commit") for b in bodies} == {"group"}
        with ThreadPoolExecutor(BATCH) as pool:
            deliveries = list(pool.map(lambda m: host._deliver(fn, main, trigger, queue, poison, m), received))

    assert [d.result for d in deliveries] == ["succeeded"] * PARTITIONS, [d.error for d in deliveries if d.error]
    assert sorted(d.outcome for d in deliveries) == ["committed"] * PARTITIONS
    assert app.peek(app.queue) == [] and app.peek(app.poison) == []
    assert content_checksum(app.uri, app.options) == before
    assert_in_layout(app.uri, app.options, range(PARTITIONS))
    added = table_version(app.uri, app.options) - v0
    assert added <= PARTITIONS // 4, f"{added} log versions for {PARTITIONS} partitions"
    txns: dict[str, int] = {}
    for version, actions in log_entries(app.uri, app.options).items():
        for a in actions:
            if version > v0 and "txn" in a:
                txns[a["txn"]["appId"]] = txns.get(a["txn"]["appId"], 0) + 1
    assert len(txns) == PARTITIONS and set(txns.values()) == {1}, "every partition committed exactly once"


def _receive(client: Any) -> list[Any]:
    out: list[Any] = []
    while True:
        page = list(client.receive_messages(messages_per_page=32, max_messages=32, visibility_timeout=600))
        if not page:
            return out
        out.extend(page)
