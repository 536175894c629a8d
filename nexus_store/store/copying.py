"""Copying sessions between stores: SQLite to PostgreSQL and back (issue 8).

A session is copied whole, with the same public ids, tree, append order, active
leaf, title, fork links and source records, through the importer's storing path
(the batched writer of `IngestMixin.ingest`, as `restore_session` uses it), so the path values are
recomputed by the same code. Each session is copied in one transaction of the
destination: an interrupted copy leaves whole sessions, and running it again
copies only what is missing (a session's turns are a prefix of the source's:
the missing tail is appended; a complete session is skipped). Both stores must
count tokens with the same counter, so that stored counts stay comparable.
"""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Callable, Iterator, Sequence
from typing import Any

from pydantic import BaseModel, ConfigDict

from nexus_store.errors import ConflictError, NexusError
from nexus_store.store.ingest import IngestCounts, _prepared_batches, _Run

__all__ = ["CopyMixin", "CopyProgress", "CopyReport"]

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

    model_config = ConfigDict(extra="forbid")

    sessions: int = 0
    copied: int = 0
    skipped: int = 0
    turns: int = 0
    seconds: float = 0.0


class CopyMixin:
    """The copy methods of `Store` (see there)."""

    conn: sqlite3.Connection

    def copy_to(
        self,
        other: Any,
        *,
        session_ids: Sequence[str] | None = None,
        progress: CopyProgress | None = None,
    ) -> CopyReport:
        """Copy every session (or those named) with its whole tree into another store.

        Resumable and idempotent: each session goes in one transaction of ``other``;
        a session already there is completed (its missing turns appended) or skipped,
        so running the copy again copies nothing twice.

        Args:
            other: The destination `Store` (SQLite or PostgreSQL).
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
        mine = self.counter.name
        theirs = other.counter.name
        if mine != theirs and not other._take_counter(self.counter):
            raise NexusError(
                f"the source counts tokens with {mine!r} and the destination with {theirs!r}; "
                f"copy into a new database (it takes the source's counter) or open the "
                f"destination with counter={mine!r}"
            )
        rows = self.conn.execute(_SOURCE_SESSIONS_SQL + " order by s.id").fetchall()
        if session_ids is not None:
            wanted = set(session_ids)
            missing = wanted - {row[0] for row in rows}
            if missing:
                self._session_row(sorted(missing)[0])  # type: ignore[attr-defined]  # raises
            rows = [row for row in rows if row[0] in wanted]
        report = CopyReport(sessions=len(rows))
        for n, row in enumerate(rows, 1):
            written = other._copy_session_from(self, row)
            if written is None:
                report.skipped += 1
            else:
                report.copied += 1
                report.turns += written
            if progress is not None:
                progress(n, len(rows), report.turns)
        if report.turns and hasattr(other, "analyze"):
            other.analyze()  # PostgreSQL: plan the next queries with the new rows' statistics
        report.seconds = round(time.monotonic() - started, 3)
        return report

    def _take_counter(self, counter: Any) -> bool:
        """Count tokens with ``counter`` from now on, if no session (no count) is stored yet.

        A destination that some command opened first recorded the default counter; it
        holds no counts, so a copy may still give it the source's (issue 18).

        Returns:
            Whether the counter was taken.
        """
        with self.atomic():  # type: ignore[attr-defined]
            if self.conn.execute("select 1 from sessions limit 1").fetchone() is not None:
                return False
            self.conn.execute(
                "update settings set value = ? where key = 'token_counter'", [counter.name]
            )
        self.counter = counter
        return True

    def _copy_session_from(self, source: Any, row: Sequence[Any]) -> int | None:
        """Copy one session (a row of _SOURCE_SESSIONS_SQL) from ``source``; turns written."""
        uid, total = row[0], int(row[14])
        with self.atomic():  # type: ignore[attr-defined]
            found = self.conn.execute(
                "select id, last_seq from sessions where uid = ?", [uid]
            ).fetchone()
            created = found is None
            if found is None:
                try:
                    cursor = self.conn.execute(_INSERT_SESSION_SQL, list(row[:11]))
                except sqlite3.IntegrityError:
                    raise ConflictError(
                        f"session {uid!r}: the destination holds another session imported from "
                        f"the same source ({row[5]} {row[7]}); not overwritten"
                    ) from None
                key, last_seq = int(cursor.lastrowid or 0), -1
            else:
                key, last_seq = int(found[0]), int(found[1])
            self._lock_session(uid)  # type: ignore[attr-defined]
            have = int(
                self.conn.execute(
                    "select count(*) from turns where session_id = ?", [key]
                ).fetchone()[0]
            )
            last_uid = self.conn.execute(
                "select uid from turns where session_id = ? order by seq desc limit 1", [key]
            ).fetchone()
            if have > total:
                raise ConflictError(
                    f"session {uid!r} has {have} turns in the destination but {total} in the "
                    "source; not overwritten"
                )
            self.conn.execute(_FORK_SQL, [row[12], row[12], row[13], key])
            written = self._copy_turns(source, uid, key, have, last_uid, last_seq)
            self.conn.execute(
                _UPDATE_SESSION_SQL,
                [
                    row[2],
                    row[4],
                    row[10],
                    self._last_seq,
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
        source: Any,
        uid: str,
        key: int,
        have: int,
        last_uid: Sequence[Any] | None,
        last_seq: int,
    ) -> int:
        counts = IngestCounts()

        def problem(line: int, kind: str, message: str, repaired: bool) -> None:
            raise ConflictError(f"session {uid!r}, turn {line}: {message}; nothing copied")

        patches = source._patches(uid)

        def missing() -> Iterator[tuple[int, dict[str, Any], Any]]:
            for n, turn in enumerate(source.iter_turns(uid)):
                if n < have:
                    if n == have - 1 and (last_uid is None or last_uid[0] != turn.id):
                        raise ConflictError(
                            f"session {uid!r} in the destination is not a copy of the source "
                            f"(turn {n} is {last_uid[0] if last_uid else None!r}, not "
                            f"{turn.id!r}); not overwritten"
                        )
                    continue
                yield n + 1, dict(turn.entry), patches.get(turn.id)

        # The importer's batched writer (see IngestMixin.ingest): same rows, same checks.
        run = _Run(self, key, uid, counts, problem)
        for prepared in _prepared_batches(missing(), self.counter):
            run.process(*prepared)
        run.complete()
        self._last_seq = run.last_seq
        return counts.turns

    _last_seq = -1
