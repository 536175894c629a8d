"""Syncing an OpenClaw agent database (``openclaw-agent.sqlite``) from its checkpoints.

The database file has a checkpoint (the identity, size and mtime of the file and of
its ``-wal``): when neither changed, nothing is opened. Otherwise it is opened
read-only, in one read transaction (`OpenClawStore`), and each session has its own
checkpoint: the last ``seq`` stored and its rewrite generation. A session whose
highest ``seq`` is the checkpoint's costs nothing more; a grown one is read from the
row after it; one whose rows went back (fewer rows) or whose rewrite generation
changed is re-read from its first row and reported. Lineage (``session_windows``)
becomes parent sessions and ``session_lineage`` rows.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING

from nexus_store.store.checkpoints import Checkpoint, Checkpoints
from nexus_store.store.openclaw_source import OpenClawStore, Window
from nexus_store.sync.report import SyncReport, store_parsed

if TYPE_CHECKING:
    from nexus_store.store.facade import Store

__all__ = ["database_stat", "sync_openclaw_database"]


def database_stat(path: Path) -> tuple[os.stat_result, list[int] | None]:
    """The database file's stat and its WAL's ``[size, mtime_ns]`` (None: no or empty WAL).

    An empty WAL holds nothing a reader would see (opening the database may create
    one), so it counts as none.
    """
    st = os.stat(path)
    try:
        wal = os.stat(f"{path}-wal")
    except FileNotFoundError:
        return st, None
    if wal.st_size == 0:
        return st, None
    return st, [wal.st_size, wal.st_mtime_ns]


def database_unchanged(cp: Checkpoint | None, st: os.stat_result, wal: list[int] | None) -> bool:
    """Whether the database and its WAL are as the checkpoint saw them."""
    if cp is None or cp.status != "ok":
        return False
    same = (cp.device, cp.inode, cp.size, cp.mtime_ns) == (
        st.st_dev,
        st.st_ino,
        st.st_size,
        st.st_mtime_ns,
    )
    return same and (cp.state or {}).get("wal") == wal


def sync_openclaw_database(
    store: Store,
    path: Path,
    st: os.stat_result,
    wal: list[int] | None,
    cp: Checkpoint | None,
    report: SyncReport,
    *,
    strict: bool = False,
) -> None:
    """Read what is new in an OpenClaw database and store it with its checkpoints.

    Each session's entries and its checkpoint commit together.

    Args:
        store: The store.
        path: The database (absolute).
        st: Its stat taken before reading.
        wal: Its WAL's ``[size, mtime_ns]`` taken before reading (None: no WAL).
        cp: The database's checkpoint, or None.
        report: Receives what was read.
        strict: Stop at the first problem of a session, storing nothing of it.

    Raises:
        TranscriptError: The database cannot be opened or has an unknown schema
            version (the message names it).
    """
    checkpoints = Checkpoints(store.conn)
    members = checkpoints.members(str(path))
    read_any = False
    with OpenClawStore(path) as source:
        seqs = source.last_seqs()
        generations = source.generations()
        for window in source.windows():
            last = seqs.get(window.session_id)
            if last is None:
                continue  # a window with no rows yet
            member = members.get(window.session_id)
            generation = generations.get(window.session_id)
            after = -1
            if member is not None and member.last_seq is not None:
                seen_generation = (member.state or {}).get("generation")
                if last == member.last_seq and generation == seen_generation:
                    continue
                if last < member.last_seq or generation != seen_generation:
                    why = (
                        f"rewritten (generation {generation})"
                        if generation != seen_generation
                        else f"rows went back from seq {member.last_seq} to {last}"
                    )
                    report.reread.append(
                        f"{path}#{window.session_id}: {why}; re-read from the start"
                    )
                else:
                    after = member.last_seq
            header = (member.state or {}).get("header") if member is not None else None
            parsed = source.read_session(window.session_id, after_seq=after, header=header)
            parsed.parent_source_id = window.previous_session_id
            with store.atomic():
                session_id = store_parsed(store, parsed, report, strict=strict)
                key = checkpoints.session_key(session_id)
                if key is not None:
                    _lineage(checkpoints, key, window, path)
                checkpoints.put(
                    Checkpoint(
                        path=str(path),
                        member=window.session_id,
                        kind="openclaw_session",
                        format="pi",
                        last_seq=last,
                        state={"header": parsed.header, "generation": generation},
                        session_id=key,
                        status="ok",
                    )
                )
            read_any = True
    with store.atomic():
        checkpoints.link_parents()
        checkpoints.put(
            Checkpoint(
                path=str(path),
                kind="openclaw_store",
                device=st.st_dev,
                inode=st.st_ino,
                size=st.st_size,
                mtime_ns=st.st_mtime_ns,
                state={"wal": wal, "schema_version": source.version},
                status="ok",
            )
        )
    if cp is None or cp.status != "ok":
        report.new += 1
    elif read_any:
        report.grown += 1


def _lineage(checkpoints: Checkpoints, key: int, window: Window, path: Path) -> None:
    checkpoints.record_lineage(
        key,
        previous_source_id=window.previous_session_id,
        reason=window.reason,
        openclaw_key=window.session_key,
        source_path=str(path),
    )
