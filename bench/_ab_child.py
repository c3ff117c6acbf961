"""Child process of ``bench/ab.py``: one workload, run once by whichever ``deltaextras`` is first on the path.

It calls only the public API that older releases have too (``rorder``, ``delete``, ``plan_messages``
from the package root), so the same script drives the working tree and an older checkout. It prints
one JSON line: the files ``deltaextras`` and the called function were imported from (the parent
checks them), the seconds of the call itself, and what the call reported. Usage::

    python _ab_child.py import TABLE_DIR          # import deltaextras + a first rorder, both timed
    python _ab_child.py rorder TABLE_DIR          # rorder(sort_by="utc_time", max_workers=1)
    python _ab_child.py delete TABLE_DIR PREDICATE
    python _ab_child.py plan TABLE_DIR            # plan_messages

Exit status 3 (and one line on stderr) when the imported ``deltaextras`` lacks a name the workload calls.
"""

from __future__ import annotations

import json
import sys
import time
from typing import Any

MISSING = 3
SORT_BY = "utc_time"


def _public(name: str) -> Any:
    """``deltaextras.<name>``; exits with ``MISSING`` when this checkout does not have it."""
    import deltaextras

    try:
        return getattr(deltaextras, name)
    except AttributeError:
        print(f"this checkout's deltaextras has no public {name}", file=sys.stderr)
        raise SystemExit(MISSING) from None


def _origin(fn: Any) -> dict[str, str]:
    import deltaextras

    return {"package": deltaextras.__file__ or "", "module": sys.modules[fn.__module__].__file__ or ""}


def _statuses(report: Any) -> dict[str, Any]:
    statuses = [p.status for p in report]
    if not statuses or any(s != "committed" for s in statuses):
        raise SystemExit(f"rorder did not commit every unit: {statuses}")
    return {"units": len(statuses)}


def run(kind: str, path: str, *rest: str) -> dict[str, Any]:
    """Run workload ``kind`` on ``path`` once; its origin, the seconds of the call and what it reported."""
    if kind == "import":
        started = time.perf_counter()
        fn = _public("rorder")
        detail = _statuses(fn(path, sort_by=SORT_BY, max_workers=1))
    elif kind == "rorder":
        fn = _public("rorder")
        started = time.perf_counter()
        detail = _statuses(fn(path, sort_by=SORT_BY, max_workers=1))
    elif kind == "delete":
        fn = _public("delete")
        started = time.perf_counter()
        detail = {"rows_deleted": fn(path, rest[0]).rows_deleted}
    elif kind == "plan":
        fn = _public("plan_messages")
        started = time.perf_counter()
        detail = {"messages": len(fn(path))}
    else:
        raise SystemExit(f"unknown workload {kind}")
    call_s = time.perf_counter() - started
    return {**_origin(fn), "call_s": call_s, **detail}


if __name__ == "__main__":
    print(json.dumps(run(*sys.argv[1:])))
