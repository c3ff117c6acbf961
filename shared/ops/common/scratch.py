"""Local scratch directories (files on their way to the store, spilled passes), and the removal of those a
killed process left behind.

A process killed mid-rewrite (a host's timeout, an out-of-memory kill, a redeploy) cannot remove its
scratch directory, and a spill can hold gigabytes: on a function app's instance the next workers would
fill its disk. Each directory is named after the process that made it
(``deltaextras-<kind>-<pid>-<random>``). The first directory a process makes under a parent removes the
ones there whose process is gone and that have not changed for ``STALE_SECONDS`` (a parent shared with
another machine's processes keeps their young directories). Directories of a live process are never
touched.

Example:
    >>> import os, tempfile
    >>> parent = tempfile.mkdtemp()
    >>> path = scratch_dir("out", parent)
    >>> os.path.basename(path).startswith(f"deltaextras-out-{os.getpid()}-")
    True
    >>> sweep(parent)  # its own process is alive: kept
    []
"""

from __future__ import annotations

import os
import re
import shutil
import tempfile
import threading
import time

STALE_SECONDS = 3600.0
KINDS = ("out", "spill", "delete")  # what a scratch directory holds: outputs, spilled passes, change files
_NAME = re.compile(rf"^deltaextras-(?:{'|'.join(KINDS)})-(\d+)-")
_swept: set[str] = set()
_lock = threading.Lock()


def scratch_dir(kind: str, parent: str | None = None) -> str:
    """A new directory ``deltaextras-<kind>-<pid>-<random>`` under ``parent`` (the system's temporary
    directory by default); the first call per parent in a process first removes the stale directories
    of dead processes there (:func:`sweep`). ``kind`` is one of :data:`KINDS` (the sweep knows those
    names only). The caller removes the directory when done."""
    if kind not in KINDS:
        raise ValueError(f"scratch kind must be one of {KINDS}, not {kind!r}")
    root = os.path.abspath(parent or tempfile.gettempdir())
    with _lock:
        first = root not in _swept
        _swept.add(root)
    if first:
        sweep(root)
    return tempfile.mkdtemp(prefix=f"deltaextras-{kind}-{os.getpid()}-", dir=root)


def sweep(parent: str, stale_seconds: float = STALE_SECONDS) -> list[str]:
    """Remove the scratch directories under ``parent`` whose process is gone and that have not changed
    for ``stale_seconds``; the paths removed. Only on POSIX (where a process can be asked whether it
    lives)."""
    if os.name != "posix":
        return []
    now = time.time()
    removed: list[str] = []
    try:
        entries = list(os.scandir(parent))
    except OSError:
        return removed
    for entry in entries:
        match = _NAME.match(entry.name)
        if match is None:
            continue
        pid = int(match.group(1))
        try:
            if not entry.is_dir(follow_symlinks=False) or pid == os.getpid() or _alive(pid):
                continue
            if now - entry.stat(follow_symlinks=False).st_mtime < stale_seconds:
                continue
        except OSError:
            continue
        shutil.rmtree(entry.path, ignore_errors=True)
        removed.append(entry.path)
    return removed


def _alive(pid: int) -> bool:
    """Whether process ``pid`` exists (signal 0 checks without sending; no permission means it exists)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:
        return True
    return True
