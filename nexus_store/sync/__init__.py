"""Sync: keep the store current with the transcripts agents write, at the cost of what changed.

`sync_paths` reads each source from its checkpoint (``sync_sources`` table): one
``stat`` for an unchanged file, the new bytes of a grown JSONL transcript, the new
rows of an OpenClaw session; rewritten or truncated sources are re-read and
reported, never mixed. `watch` repeats it on every change. See docs/sync.md.

Example::

    from nexus_store import Store
    from nexus_store.sync import sync_paths

    with Store("sessions.db") as store:
        report = sync_paths(store)  # the default locations of the tools on this machine
        print(report.turns, "turns added;", report.unchanged, "sources unchanged")
"""

from __future__ import annotations

from nexus_store.sync.report import SyncReport
from nexus_store.sync.run import SYNC_PATHS_ENV, default_sources, iter_sources, sync_paths
from nexus_store.sync.watch import watch

__all__ = ["SYNC_PATHS_ENV", "SyncReport", "default_sources", "iter_sources", "sync_paths", "watch"]
