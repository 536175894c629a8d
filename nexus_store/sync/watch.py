"""``sync --watch``: sync again whenever a watched source changes, until stopped.

File events come from ``watchfiles`` (the optional extra ``nexus_store[watch]``: it
uses inotify, FSEvents or ReadDirectoryChangesW through the Rust ``notify`` crate,
so a quiet tree costs nothing, where a polling loop would stat every file each
second). Events are debounced: a burst of appends (an agent streaming a reply)
gives one sync. Each sync costs what changed, as any sync does.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import TYPE_CHECKING

from nexus_store.errors import NexusError
from nexus_store.sync.report import SyncReport
from nexus_store.sync.run import sync_paths

if TYPE_CHECKING:
    from nexus_store.store.facade import Store

__all__ = ["watch"]


def watch(
    store: Store,
    roots: Iterable[Path],
    on_sync: Callable[[SyncReport], None],
    *,
    debounce_ms: int = 500,
    stop: threading.Event | None = None,
) -> None:
    """Sync ``roots`` now and again after each (debounced) change, until stopped.

    Args:
        store: The store.
        roots: Folders and files to watch (the parent folder of a file is watched).
        on_sync: Receives each sync's report.
        debounce_ms: Changes closer together than this are one sync.
        stop: Set it to stop (Ctrl-C stops too: KeyboardInterrupt propagates).

    Raises:
        NexusError: ``watchfiles`` is not installed.
    """
    try:
        import watchfiles
    except ImportError:
        raise NexusError(
            "sync --watch needs the watchfiles package: pip install 'nexus_store[watch]'"
        ) from None
    roots = [Path(r).resolve() for r in roots]
    watched = sorted({str(r if r.is_dir() else r.parent) for r in roots})
    first = True
    # The watcher starts before the first sync (at the first, empty, yield), so a change
    # made while that sync runs is seen and synced next, never missed.
    for changes in watchfiles.watch(
        *watched,
        debounce=debounce_ms,
        stop_event=stop,
        raise_interrupt=True,
        yield_on_timeout=True,
        rust_timeout=200,
    ):
        if first:
            first = False
            on_sync(sync_paths(store, roots))
            continue
        changed = {Path(path) for _, path in changes}
        targets = [r for r in roots if any(_under(c, r) for c in changed)]
        if targets:
            on_sync(sync_paths(store, targets))


def _under(path: Path, root: Path) -> bool:
    if root.is_dir():
        return path == root or root in path.parents
    # A database changes through its -wal and -shm files too.
    return path == root or path.name.startswith(root.name)
