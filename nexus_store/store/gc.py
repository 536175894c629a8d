"""Retention: `Store.gc` (part `Gc`), the only place nexus_store deletes rows.

``gc`` removes what the caller asks for and keeps the tree valid:

* **dead branches**: subtrees off the path of the active leaf, of a turn the caller
  keeps, of a fork point another session starts from, and of a label turn that
  labels a remaining turn, whose every turn is older than the limit. Removing whole
  subtrees means no remaining turn points at a removed one. Branch summaries sit on
  the live path (they are children of the point the user went back to), so they stay.
* **raw turns behind a compaction**: turns older than the limit that no remaining
  leaf's context uses (they lie above the first kept turn of the leaf's latest
  compaction). A remaining turn whose parent goes becomes a root and starts its own
  run; its links into the removed turns (run parent, nearest compaction, first kept)
  are cleared, and each changed turn records what changed under ``"gc"`` in
  ``source_patch_json`` (`Store.doctor` takes such turns as baselines). The context
  of every remaining leaf, of the active leaf and of every kept turn is unchanged.
* **whole sessions** last updated before the limit, except those another remaining
  session forks from.

gc plans on a snapshot (a read transaction, which never blocks writers), then removes
the plan in bounded batches, each its own transaction, deepest turns first, so that
after every batch each context is unchanged and other writers get the lock between
batches (`nexus_store.store.gc_batches`, issue 18). Then the WAL is checkpointed and
the file vacuumed to give the space back. A dry run reports the same figures and
changes nothing.
"""

from __future__ import annotations

import contextlib
import sqlite3
from collections.abc import Iterable, Iterator, Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict

from nexus_store.errors import DatabaseBusy, NexusError
from nexus_store.store.db import Handle
from nexus_store.store.dialect import not_available
from nexus_store.store.gc_batches import GcBatches, GcProgress
from nexus_store.store.reading import Reading

__all__ = ["Gc", "GcReport"]

_FROZEN = ConfigDict(frozen=True, extra="forbid", defer_build=True)

# The turns of a session whose context gc must keep: its active leaf, the turns other
# sessions fork from, and the tips of its live named branches (NexusAdvancedSession).
ANCHORS_SQL = """
select active_leaf_id from sessions where id = ? and active_leaf_id is not null
union
select fork_turn_id from sessions where fork_turn_id in (select id from turns where session_id = ?)
union
select leaf_turn_id from agent_branches
where session_id = ? and leaf_turn_id is not null and deleted_utc is null
"""

# Remaining turns of a session with no remaining child.
LEAVES_SQL = """
select t.id from turns t
where t.session_id = ? and t.id not in (select id from temp.gc_doomed)
  and not exists (select 1 from turns c
                  where c.parent_id = t.id and c.id not in (select id from temp.gc_doomed))
"""

# The depths of a leaf's latest compaction and of that compaction's first kept turn:
# where its context starts (as in Store.context).
STOP_DEPTH_SQL = """
select c.depth, k.depth from turns t
left join turns c on c.id = t.compaction_id
left join turns k on k.id = c.first_kept_turn_id
where t.id = ?
"""

# Rough size of what gc removes: text columns plus a fixed cost per row.
TURN_BYTES_SQL = """
select count(*), coalesce(sum(100 + length(uid) + coalesce(length(extra_json), 0)
       + coalesce(length(summary), 0) + coalesce(length(details_json), 0)
       + coalesce(length(data_json), 0) + coalesce(length(source_patch_json), 0)
       + coalesce(length(label), 0) + coalesce(length(name), 0)), 0)
from turns where id in (select id from temp.gc_doomed)
"""
MESSAGE_BYTES_SQL = """
select count(*), coalesce(sum(60 + coalesce(length(content_json), 0) + coalesce(length(text), 0)
       + coalesce(length(content_zstd), 0)
       + coalesce(length(extra_json), 0) + coalesce(length(tool_call_id), 0)), 0)
from messages where turn_id in (select id from temp.gc_doomed)
"""


class GcReport(BaseModel):
    """What `Store.gc` removed (or, in a dry run, would remove).

    Attributes:
        dry_run: Nothing was changed.
        sessions_removed: Public ids of whole sessions removed.
        sessions_kept: Sessions old enough but kept, with the reason.
        dead_branch_turns: Turns removed as parts of dead branches.
        compacted_turns: Turns removed from behind compactions.
        messages: Message rows removed with those turns.
        reparented: ``{"session", "turn", "old_parent"}`` for each turn that became a root.
        estimated_bytes: Estimated bytes of row data removed.
        file_bytes_before: Database + WAL size before (None in memory).
        file_bytes_after: Database + WAL size after the checkpoint and vacuum.
        actions: What was done, one sentence each.
    """

    model_config = _FROZEN

    dry_run: bool
    sessions_removed: list[str]
    sessions_kept: list[dict[str, str]]
    dead_branch_turns: int
    compacted_turns: int
    messages: int
    reparented: list[dict[str, Any]]
    estimated_bytes: int
    file_bytes_before: int | None
    file_bytes_after: int | None
    actions: list[str]


def _parse_time(value: str | None) -> datetime | None:
    if not value:
        return None
    try:
        parsed = datetime.fromisoformat(value)
    except ValueError:
        return None
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)


class Gc:
    """``Store.gc`` (see the module docstring); only where ``capabilities.gc``.

    Args:
        db: The database handle.
        reading: The reading part (the paths a kept leaf needs).
    """

    def __init__(self, db: Handle, reading: Reading) -> None:
        self.db = db
        self.reading = reading

    # -- gc ----------------------------------------------------------------------

    def gc(
        self,
        session_id: str | None = None,
        *,
        all_sessions: bool = False,
        dead_branches_older_than: float | None = None,
        compacted_older_than: float | None = None,
        sessions_older_than: float | None = None,
        keep: Iterable[str] = (),
        dry_run: bool = False,
        vacuum: bool = True,
        now: datetime | None = None,
        batch_size: int = 1000,
        progress: GcProgress | None = None,
    ) -> GcReport:
        """Remove old dead branches, turns behind compactions and sessions, then reclaim space.

        Ages are in days and compare each turn's timestamp (a session's last update
        for whole sessions); turns without a readable timestamp are never old.

        Args:
            session_id: The session to clean; or None with ``all_sessions=True``.
            all_sessions: Clean every session.
            dead_branches_older_than: Remove branches off every kept path whose turns
                are all older than this many days.
            compacted_older_than: Remove turns older than this that no remaining
                leaf's context uses (behind the first kept turn of a compaction).
            sessions_older_than: Remove whole sessions last updated before this.
            keep: Turn ids whose path and context must stay, besides every session's
                active leaf and the fork points other sessions start from.
            dry_run: Report what would go and change nothing.
            vacuum: After removing, checkpoint the WAL and VACUUM the file.
            now: The time ages are measured from (default: now).
            batch_size: Turns removed per transaction; between batches other writers
                take the lock (issue 18), and after each one every context is unchanged.
            progress: Called after each batch with (turns removed, turns planned).

        Returns:
            What was (or would be) removed.

        Raises:
            NexusError: If neither or both of ``session_id`` and ``all_sessions`` are
                given, or an age is not a number of days >= 0.
            SessionNotFound: If the session does not exist.
        """
        if not self.db.dialect.capabilities.gc:
            # (SQLite's deferred foreign keys and VACUUM have no PostgreSQL port yet)
            raise not_available("gc", self.db.dialect)
        if (session_id is None) != all_sessions:
            raise NexusError("gc needs one session id, or all_sessions=True (not both)")
        for name, days in (
            ("dead_branches_older_than", dead_branches_older_than),
            ("compacted_older_than", compacted_older_than),
            ("sessions_older_than", sessions_older_than),
        ):
            if days is not None and not (isinstance(days, int | float) and 0 <= days < 1e6):
                raise NexusError(f"gc {name} must be a number of days >= 0, not {days!r}")
        moment = now or datetime.now(UTC)
        if session_id is not None:
            keys = [self.db.session_row(session_id)[0]]
        else:
            keys = [r[0] for r in self.db.execute("select id from sessions order by id")]
        if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
            raise NexusError(f"gc batch_size must be a whole number >= 1, not {batch_size!r}")
        before = self._file_bytes()
        plan = _GcPlan()
        batches = GcBatches(self.db)
        # Plan on a snapshot (a read transaction: writers go on meanwhile), then remove
        # in batches, each its own short write transaction (issue 18).
        self.db.execute("create temp table if not exists gc_doomed (id integer primary key)")
        self.db.execute("create temp table if not exists gc_batch (id integer primary key)")
        with self._snapshot():
            self.db.execute("delete from temp.gc_doomed")
            self._plan(
                plan,
                keys,
                set(keep),
                moment,
                dead_branches_older_than,
                compacted_older_than,
                sessions_older_than,
            )
            plan.turn_count, turn_bytes = self.db.execute(TURN_BYTES_SQL).fetchone()
            plan.message_count, message_bytes = self.db.execute(MESSAGE_BYTES_SQL).fetchone()
            plan.bytes = int(turn_bytes) + int(message_bytes)
            order = batches.order()
            state = batches.snapshot()
        skipped: set[int] = set()
        if not dry_run:
            try:
                _done, _removed, skipped = batches.run(
                    order,
                    plan.sessions,
                    state,
                    moment,
                    batch_size=batch_size,
                    progress=progress,
                )
            finally:
                self.db.execute("delete from temp.gc_doomed")
                self.db.execute("delete from temp.gc_batch")
        else:
            self.db.execute("delete from temp.gc_doomed")
        actions: list[str] = []
        if skipped:
            names = ", ".join(
                repr(r[0])
                for key in sorted(skipped)
                for r in self.db.execute("select uid from sessions where id = ?", [key])
            )
            actions.append(
                f"left the rest of the planned removals in {len(skipped)} session(s) written "
                f"to during gc ({names}); run gc again to finish them"
            )
        if not dry_run:
            actions.append(
                f"removed {plan.turn_count} turns ({plan.dead} on dead branches, {plan.compacted}"
                f" behind compactions, the rest in {len(plan.session_uids)} whole sessions) and "
                f"{plan.message_count} messages"
            )
        after = before
        if not dry_run and vacuum and self.db.filename is not None:
            self.db.execute("pragma wal_checkpoint(truncate)")
            done = "checkpointed the WAL and vacuumed"
            try:
                self.db.execute("vacuum")
            except (sqlite3.OperationalError, DatabaseBusy) as err:
                # Another process holds the write lock: the removal is committed; only
                # the space waits for a later gc (never "database is locked" to the caller).
                done = f"checkpointed the WAL; vacuum skipped ({err}): run gc again later"
            busy = self.db.execute("pragma wal_checkpoint(truncate)").fetchone()[0]
            after = self._file_bytes()
            if busy:
                done += " (a reader kept the WAL open; it shrinks at the next checkpoint)"
            actions.append(f"{done}: {before:,} -> {after:,} bytes")
        return GcReport(
            dry_run=dry_run,
            sessions_removed=plan.session_uids,
            sessions_kept=plan.sessions_kept,
            dead_branch_turns=plan.dead,
            compacted_turns=plan.compacted,
            messages=int(plan.message_count),
            reparented=plan.reparented,
            estimated_bytes=plan.bytes,
            file_bytes_before=before,
            file_bytes_after=after,
            actions=actions,
        )

    def _plan(
        self,
        plan: _GcPlan,
        keys: Sequence[int],
        keep: set[str],
        moment: datetime,
        dead_days: float | None,
        compacted_days: float | None,
        session_days: float | None,
    ) -> None:
        if session_days is not None:
            self._old_sessions(plan, keys, moment - timedelta(days=session_days))
        for key in keys:
            if key in plan.sessions:
                self.db.execute(
                    "insert into temp.gc_doomed select id from turns where session_id = ?", [key]
                )
                continue
            if dead_days is not None:
                plan.dead += self._mark_dead_branches(key, keep, moment - timedelta(days=dead_days))
            if compacted_days is not None:
                plan.compacted += self._mark_compacted(
                    plan, key, keep, moment - timedelta(days=compacted_days)
                )

    def _file_bytes(self) -> int | None:
        if self.db.filename is None:
            return None
        files = (Path(str(self.db.filename) + suffix) for suffix in ("", "-wal"))
        return sum(p.stat().st_size for p in files if p.exists())

    def _old_sessions(self, plan: _GcPlan, keys: Sequence[int], cutoff: datetime) -> None:
        old: dict[int, str] = {}
        for key in keys:
            uid, updated = self.db.execute(
                "select uid, updated_utc from sessions where id = ?", [key]
            ).fetchone()
            when = _parse_time(updated)
            if when is not None and when < cutoff:
                old[key] = uid
        # A session another remaining session forks from stays; repeat until stable.
        changed = True
        while changed:
            changed = False
            for key in list(old):
                forks = self.db.execute(
                    "select uid, id from sessions where parent_session_id = ?", [key]
                ).fetchall()
                alive = [uid for uid, child in forks if child not in old]
                if alive:
                    plan.sessions_kept.append(
                        {"session": old.pop(key), "reason": f"session {alive[0]!r} forks from it"}
                    )
                    changed = True
        plan.sessions = set(old)
        plan.session_uids = [old[k] for k in sorted(old)]

    def _anchors(self, session_key: int, keep: set[str]) -> list[int]:
        """Turns whose context must not change: the active leaf, kept turns, fork points."""
        anchors = [r[0] for r in self.db.execute(ANCHORS_SQL, [session_key] * 3)]
        for uid in keep:
            row = self.db.execute(
                "select id from turns where session_id = ? and uid = ?", [session_key, uid]
            ).fetchone()
            if row is not None:
                anchors.append(row[0])
        return anchors

    def _tree(self, session_key: int) -> list[tuple[int, int | None, str, str | None, str | None]]:
        return [
            (r[0], r[1], r[2], r[3], r[4])
            for r in self.db.execute(
                "select id, parent_id, kind, created_utc, target_uid from turns where "
                "session_id = ? and id not in (select id from temp.gc_doomed) order by seq",
                [session_key],
            )
        ]

    def _uids(self, session_key: int) -> dict[int, str]:
        rows = self.db.execute("select id, uid from turns where session_id = ?", [session_key])
        return {int(r[0]): str(r[1]) for r in rows}

    def _doom(self, keys: Iterable[int]) -> None:
        self.db.executemany("insert into temp.gc_doomed (id) values (?)", [[k] for k in keys])

    def _mark_dead_branches(self, session_key: int, keep: set[str], cutoff: datetime) -> int:
        tree = self._tree(session_key)
        uid_of = self._uids(session_key)
        live: set[int] = set()
        for anchor in self._anchors(session_key, keep):
            live.update(self.reading.path_keys(session_key, anchor))
        labels = {k: target for k, _p, kind, _c, target in tree if kind == "label" and target}
        while True:
            doomed = self._old_subtrees(tree, live, cutoff)
            # A label turn that labels a remaining turn stays, with its path, so that
            # labels() stays the same.
            gone = {uid_of[k] for k in doomed}
            pinned = [k for k in doomed if k in labels and labels[k] not in gone]
            if not pinned:
                break
            for key in pinned:
                live.update(self.reading.path_keys(session_key, key))
        self._doom(doomed)
        return len(doomed)

    @staticmethod
    def _old_subtrees(
        tree: Sequence[tuple[int, int | None, str, str | None, str | None]],
        live: set[int],
        cutoff: datetime,
    ) -> list[int]:
        """Turns off the live paths whose whole subtree is older than ``cutoff``."""
        # The newest time in each dead subtree (children come after parents in seq
        # order); a turn without a readable time counts as new.
        newest: dict[int, datetime] = {}
        for key, parent, _kind, created, _target in reversed(tree):
            if key in live:
                continue
            mine = max(_parse_time(created) or _FAR_FUTURE, newest.get(key, _FAR_PAST))
            newest[key] = mine
            if parent is not None and parent not in live:
                newest[parent] = max(newest.get(parent, _FAR_PAST), mine)
        return [k for k, when in newest.items() if when < cutoff]

    def _needed(self, session_key: int, keep: set[str]) -> set[int]:
        """Turns that some remaining leaf's (or anchor's) context uses."""
        leaves = [r[0] for r in self.db.execute(LEAVES_SQL, [session_key])]
        needed: set[int] = set()
        for leaf in {*leaves, *self._anchors(session_key, keep)}:
            row = self.db.execute(STOP_DEPTH_SQL, [leaf]).fetchone()
            stop = row[1] if row[1] is not None else (row[0] if row[0] is not None else 0)
            needed.update(self.reading.path_keys(session_key, leaf, stop))
        return needed

    def _mark_compacted(
        self, plan: _GcPlan, session_key: int, keep: set[str], cutoff: datetime
    ) -> int:
        tree = self._tree(session_key)
        needed = self._needed(session_key, keep)
        uid_of = self._uids(session_key)
        old = {
            k
            for k, _p, _kind, created, _t in tree
            if k not in needed and (when := _parse_time(created)) is not None and when < cutoff
        }
        while True:  # keep label turns whose target stays (labels() must not change)
            gone = {uid_of[k] for k in old}
            pinned = {
                k
                for k, _p, kind, _c, target in tree
                if k in old and kind == "label" and target and target not in gone
            }
            if not pinned:
                break
            old -= pinned
        self._doom(sorted(old))
        session_uid = self.db.execute(
            "select uid from sessions where id = ?", [session_key]
        ).fetchone()[0]
        plan.reparented.extend(
            {"session": session_uid, "turn": uid_of[k], "old_parent": uid_of[p]}
            for k, p, _kind, _c, _t in tree
            if p is not None and p in old and k not in old
        )
        return len(old)

    @contextlib.contextmanager
    def _snapshot(self) -> Iterator[None]:
        """A read transaction: one consistent view, no write lock (WAL readers never block)."""
        if self.db.conn.in_transaction:  # inside a caller's atomic(): its view already
            yield
            return
        self.db.execute("begin")
        try:
            yield
        finally:
            if self.db.conn.in_transaction:
                self.db.execute("commit")


class _GcPlan:
    def __init__(self) -> None:
        self.sessions: set[int] = set()
        self.session_uids: list[str] = []
        self.sessions_kept: list[dict[str, str]] = []
        self.dead = 0
        self.compacted = 0
        self.reparented: list[dict[str, Any]] = []
        self.turn_count = 0
        self.message_count = 0
        self.bytes = 0


_FAR_FUTURE = datetime.max.replace(tzinfo=UTC)
_FAR_PAST = datetime.min.replace(tzinfo=UTC)
