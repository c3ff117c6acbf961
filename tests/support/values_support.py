"""Races with ``rorder`` staged without timing: rorder plans and rewrites, then each winner commits just
before its next commit attempt (the public ``before_commit`` hook). A winner may be our DELETE, an append,
or :func:`winner_delete` — a writer that read the table earlier (as Spark's DELETE does under
WriteSerializable, it does not look at files appended since) and commits deletion vectors on the files it
read."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable
from typing import Any

from pyroaring import BitMap

from deltaextras import rorder_single
from deltaextras.core.actions import CommitInfo, encode_commit
from deltaextras.core.dv import inline_descriptor, read_deletion_vector
from deltaextras.core.log import commit_key
from deltaextras.core.snapshot import TableSnapshot, open_data_file
from deltaextras.errors import DeltaExtrasError
from deltaextras.expr.predicate import matches, parse
from deltaextras.ops.rorder.rorder import plan_messages


def live_paths(uri: str) -> set[str]:
    """The log paths of the live files now (what a writer reading now would see)."""
    return {f.path for f in TableSnapshot.load(uri).files}


def winner_delete(uri: str, paths: Iterable[str], predicate: str) -> int:
    """Delete the rows matching ``predicate`` from the live files among ``paths`` only (the files the
    winner read), as deletion vectors in one commit; returns the rows deleted."""
    snap = TableSnapshot.load(uri)
    wanted = set(paths)
    actions: list[Any] = [CommitInfo(operation="DELETE", is_blind_append=False)]
    deleted = 0
    for f in snap.files:
        if f.path not in wanted:
            continue
        table = open_data_file(snap.storage, f, pre_buffer=False).read()
        old = read_deletion_vector(snap.storage, f.dv)
        hit = BitMap(i for i, m in enumerate(matches(parse(predicate), table).to_pylist()) if m) - old
        if not len(hit):
            continue
        deleted += len(hit)
        add = dataclasses.replace(f.add, deletion_vector=inline_descriptor(old | hit), data_change=True)
        actions += [f.add.retire(1, data_change=True), add]
    if deleted:
        assert snap.storage.put_if_absent(commit_key(snap.version + 1), encode_commit(actions))
    return deleted


def race(uri: str, winners: list[Callable[[], Any]], **plan: Any) -> tuple[list[Any], list[Any]]:
    """Plan every partition; rewrite each, the winners (in order) committing before the first commit
    attempt of the first partition. Returns rorder's reports (or the error a partition raised) and the
    winners' results."""
    pending = list(winners)
    done: list[Any] = []

    def before_commit(_version: int) -> None:
        while pending:
            done.append(pending.pop(0)())

    reports: list[Any] = []
    for message in plan_messages(uri, **plan):
        try:
            reports.append(rorder_single(message, hooks={"before_commit": before_commit}))
        except DeltaExtrasError as exc:  # a refused carry: the test decides whether it may happen
            reports.append(exc)
    while pending:  # nothing to rewrite: the winners still commit, after
        done.append(pending.pop(0)())
    return reports, done
