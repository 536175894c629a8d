"""Copying sessions between stores: SQLite to PostgreSQL and back (issue 8).

A session is copied whole, with the same public ids, tree, append order, active
leaf, title, fork links and source records, through the importer's storing path
(the batched writer of `Ingest.write_entries`, as `restore_session` uses it), so the path values are
recomputed by the same code. Each session is copied in one transaction of the
destination: an interrupted copy leaves whole sessions, and running it again
copies only what is missing (a session's turns are a prefix of the source's:
the missing tail is appended; a complete session is skipped). Both stores must
count tokens with the same counter, so that stored counts stay comparable.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator, Sequence
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ConfigDict

from nexus_store.errors import ConflictError, ConstraintViolation, NexusError
from nexus_store.store.db import Handle
from nexus_store.store.export import Export
from nexus_store.store.ingest import Ingest
from nexus_store.store.reading import Reading

if TYPE_CHECKING:
    from nexus_store.tokens import TokenCounter

__all__ = ["Copy", "CopyProgress", "CopyReport"]

CopyProgress = Callable[[int, int, int], None]
"""Called as progress(sessions_done, sessions_total, turns_copied) after each session."""

# Every column a copy carries over, with the public ids of the links.
_SOURCE_SESSIONS_SQL = """
select s.uid, s.cwd, s.title, s.created_utc, s.updated_utc, s.source_format, s.source_path,
       s.source_id, s.source_version, s.header_json, s.flush_epoch, leaf.uid, parent.uid,
       fork.uid, (select count(*) from turns c where c.session_id = s.id)
from sessions s
left join turns leaf on leaf.id = s.active_leaf_id
left join sessions parent on parent.id = s.parent_session_id
left join turns fork on fork.id = s.fork_turn_id
"""
_INSERT_SESSION_SQL = """
insert into sessions (uid, cwd, title, created_utc, updated_utc, source_format, source_path,
                      source_id, source_version, header_json, flush_epoch)
values (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
"""
# The fork link first: the roots of a forked session take their path values from it.
_FORK_SQL = """
update sessions set parent_session_id = (select id from sessions where uid = ?),
       fork_turn_id = (select t.id from turns t join sessions p on p.id = t.session_id
                       where p.uid = ? and t.uid = ?)
where id = ?
"""
_UPDATE_SESSION_SQL = """
update sessions set title = ?, updated_utc = ?, flush_epoch = ?, last_seq = ?,
       active_leaf_id = (select id from turns where session_id = ? and uid = ?),
       parent_session_id = (select id from sessions where uid = ?),
       fork_turn_id = (select t.id from turns t join sessions p on p.id = t.session_id
                       where p.uid = ? and t.uid = ?)
where id = ?
"""


class CopyReport(BaseModel):
    """What a copy did.

    Attributes:
        sessions: Sessions in the source (or asked for).
        copied: Sessions that received turns or were created.
        skipped: Sessions already complete in the destination.
        turns: Turns written.
        seconds: Wall time.
    """

    model_config = ConfigDict(extra="forbid", defer_build=True)

    sessions: int = 0
    copied: int = 0
    skipped: int = 0
    turns: int = 0
    seconds: float = 0.0


class Copy:
    """``Store.copy_to``: this store's sessions into another store (part `Copy`).

    Args:
        db: The database handle.
        reading: The reading part (the source's turns).
        export: The export part (the source's patches).
        ingest: The ingest part (the destination's batched writer).
    """

    def __init__(self, db: Handle, reading: Reading, export: Export, ingest: Ingest) -> None:
        self.db = db
        self.reading = reading
        self.export = export
        self.ingest = ingest

    def copy_to(
        self,
        other: Copy,
        *,
        session_ids: Sequence[str] | None = None,
        progress: CopyProgress | None = None,
    ) -> CopyReport:
        """Copy every session (or those named) with its whole tree into another store.

        Resumable and idempotent: each session goes in one transaction of ``other``;
        a session already there is completed (its missing turns appended) or skipped,
        so running the copy again copies nothing twice.

        Args:
            other: The destination store's copy part (SQLite or PostgreSQL).
            session_ids: Only these sessions (default: all, in creation order).
            progress: Receives (sessions done, sessions total, turns copied).

        Returns:
            A CopyReport.

        Raises:
            NexusError: If the stores count tokens with different counters.
            ConflictError: If a destination session with the same id is not a prefix
                of the source session (nothing of it is overwritten).
        """
        started = time.monotonic()
        mine = self.db.counter.name
        theirs = other.db.counter.name
        if mine != theirs and not other.take_counter(self.db.counter):
            raise NexusError(
                f"the source counts tokens with {mine!r} and the destination with {theirs!r}; "
                f"copy into a new database (it takes the source's counter) or open the "
                f"destination with counter={mine!r}"
            )
        rows = self.db.execute(_SOURCE_SESSIONS_SQL + " order by s.id").fetchall()
        if session_ids is not None:
            wanted = set(session_ids)
            missing = wanted - {row[0] for row in rows}
            if missing:
                self.db.session_row(sorted(missing)[0])  # raises
            rows = [row for row in rows if row[0] in wanted]
        report = CopyReport(sessions=len(rows))
        for n, row in enumerate(rows, 1):
            written = other.copy_session_from(self, row)
            if written is None:
                report.skipped += 1
            else:
                report.copied += 1
                report.turns += written
            if progress is not None:
                progress(n, len(rows), report.turns)
        if report.turns:
            # PostgreSQL: plan the next queries with the new rows' statistics
            other.db.dialect.analyze(other.db)
        report.seconds = round(time.monotonic() - started, 3)
        return report

    def take_counter(self, counter: TokenCounter) -> bool:
        """Count tokens with ``counter`` from now on, if no session (no count) is stored yet.

        A destination that some command opened first recorded the default counter; it
        holds no counts, so a copy may still give it the source's (issue 18).

        Returns:
            Whether the counter was taken.
        """
        with self.db.atomic():
            if self.db.execute("select 1 from sessions limit 1").fetchone() is not None:
                return False
            self.db.execute(
                "update settings set value = ? where key = 'token_counter'", [counter.name]
            )
        self.db.counter = counter
        return True

    def copy_session_from(self, source: Copy, row: Sequence[Any]) -> int | None:
        """Copy one session (a row of _SOURCE_SESSIONS_SQL) from ``source``; turns written."""
        uid, total = row[0], int(row[14])
        with self.db.atomic():
            found = self.db.execute(
                "select id, last_seq from sessions where uid = ?", [uid]
            ).fetchone()
            created = found is None
            if found is None:
                try:
                    new_key = self.db.dialect.insert_key(
                        self.db, _INSERT_SESSION_SQL, list(row[:11])
                    )
                except ConstraintViolation:
                    raise ConflictError(
                        f"session {uid!r}: the destination holds another session imported from "
                        f"the same source ({row[5]} {row[7]}); not overwritten"
                    ) from None
                key = new_key
            else:
                key = int(found[0])
            self.db.lock_session(uid)
            have = int(
                self.db.execute(
                    "select count(*) from turns where session_id = ?", [key]
                ).fetchone()[0]
            )
            last_uid = self.db.execute(
                "select uid from turns where session_id = ? order by seq desc limit 1", [key]
            ).fetchone()
            if have > total:
                raise ConflictError(
                    f"session {uid!r} has {have} turns in the destination but {total} in the "
                    "source; not overwritten"
                )
            self.db.execute(_FORK_SQL, [row[12], row[12], row[13], key])
            written, copied_seq = self._copy_turns(source, uid, key, have, last_uid)
            self.db.execute(
                _UPDATE_SESSION_SQL,
                [
                    row[2],
                    row[4],
                    row[10],
                    copied_seq,
                    key,
                    row[11],
                    row[12],
                    row[12],
                    row[13],
                    key,
                ],
            )
        return written if written or created else None

    def _copy_turns(
        self,
        source: Copy,
        uid: str,
        key: int,
        have: int,
        last_uid: Sequence[Any] | None,
    ) -> tuple[int, int]:
        def problem(line: int, kind: str, message: str, repaired: bool) -> None:
            raise ConflictError(f"session {uid!r}, turn {line}: {message}; nothing copied")

        patches = source.export.patches(uid)

        def missing() -> Iterator[tuple[int, dict[str, Any], Any]]:
            for n, turn in enumerate(source.reading.iter_turns(uid)):
                if n < have:
                    if n == have - 1 and (last_uid is None or last_uid[0] != turn.id):
                        raise ConflictError(
                            f"session {uid!r} in the destination is not a copy of the source "
                            f"(turn {n} is {last_uid[0] if last_uid else None!r}, not "
                            f"{turn.id!r}); not overwritten"
                        )
                    continue
                yield n + 1, dict(turn.entry), patches.get(turn.id)

        # The importer's batched writer: same rows, same checks.
        counts, last_seq = self.ingest.write_entries(key, uid, missing(), problem)
        return counts.turns, last_seq
