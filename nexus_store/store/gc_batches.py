"""Removing what `Store.gc` planned, in bounded batches (issue 18, item 1).

gc used to delete everything in one transaction: it held SQLite's write lock for the
whole removal (another process's append waited 30 s and failed) and, with no index on
the columns that reference turns, each deleted row scanned the table (quadratic).
Migration 0050 adds those indexes; this part removes the planned turns a batch at a
time, each batch its own short transaction, so writers get the lock between batches.

Every batch leaves a sound tree with every context unchanged, because turns go
**deepest first** (depth descending, then seq): a turn's parent, nearest compaction,
run parent and first kept turn are all its ancestors, so they are never removed
before it. A turn that stays and links into a batch (a turn behind a compaction whose
parent goes) becomes a root with those links cleared and a ``"gc"`` note, as before.
A crash between batches leaves the batches before it done and the rest untouched;
running gc again finishes the work.

Writers are not stopped: the plan was made on a snapshot, so before each batch the
sessions it touches are compared with the snapshot. A session that was written to
meanwhile (a new turn, a moved active leaf, a new fork from one of its turns, a new
session forking from it) keeps the rest of its planned removals: nothing a writer
just did is undone, and the next gc plans again.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from nexus_store.store.db import Handle

__all__ = ["GcBatches", "GcProgress"]

GcProgress = Callable[[int, int], None]
"""Called after each committed batch with (turns removed so far, turns planned)."""

# Remaining turns (not planned for removal) that link into the batch, found through
# the indexes on each referencing column, with which links do. (CROSS JOIN keeps the
# batch as the outer loop: the planner has no statistics for a temp table and would
# otherwise scan a whole index per batch, which made gc quadratic again.)
LINKED_SQL = """
select t.id, t.source_patch_json, p.uid, k.uid,
       t.parent_id in (select id from temp.gc_batch),
       t.first_kept_turn_id in (select id from temp.gc_batch),
       t.compaction_id in (select id from temp.gc_batch),
       t.run_parent_id in (select id from temp.gc_batch)
from turns t
left join turns p on p.id = t.parent_id
left join turns k on k.id = t.first_kept_turn_id
where t.id in (
    select c.id from temp.gc_batch b cross join turns c on c.parent_id = b.id
    union select c.id from temp.gc_batch b cross join turns c on c.run_parent_id = b.id
    union select c.id from temp.gc_batch b cross join turns c on c.compaction_id = b.id
    union select c.id from temp.gc_batch b cross join turns c on c.first_kept_turn_id = b.id
) and t.id not in (select id from temp.gc_doomed)
"""

# Remaining turns whose parent is in the batch: they become roots.
REROOTED_SQL = """
select c.seq, c.session_id, c.run_start_seq
from temp.gc_batch b cross join turns c on c.parent_id = b.id
where c.id not in (select id from temp.gc_batch)
"""

# Clear the links into the batch, then remove it (each through an index).
# (Rows of the batch itself are not updated: they go in the same transaction, and
# foreign keys are checked at its commit.)
UNLINK_SQL = (
    "update turns set parent_id = null where parent_id in (select id from temp.gc_batch) "
    "and id not in (select id from temp.gc_batch)",
    "update turns set run_parent_id = null where run_parent_id in (select id from temp.gc_batch) "
    "and id not in (select id from temp.gc_batch)",
    "update turns set compaction_id = null where compaction_id in (select id from temp.gc_batch) "
    "and id not in (select id from temp.gc_batch)",
    "update turns set first_kept_turn_id = null "
    "where first_kept_turn_id in (select id from temp.gc_batch) "
    "and id not in (select id from temp.gc_batch)",
    "update sessions set active_leaf_id = null "
    "where active_leaf_id in (select id from temp.gc_batch)",
    "update sessions set fork_turn_id = null where fork_turn_id in (select id from temp.gc_batch)",
    "delete from messages where turn_id in (select id from temp.gc_batch)",
    "delete from turns where id in (select id from temp.gc_batch)",
    "delete from temp.gc_doomed where id in (select id from temp.gc_batch)",
)

# The planned turns, deepest first, with their session.
ORDER_SQL = """
select d.id, t.session_id from temp.gc_doomed d join turns t on t.id = d.id
order by t.depth desc, t.seq desc
"""

# What each session looked like when gc planned (compared before every batch).
STATE_SQL = "select id, last_seq, active_leaf_id from sessions"

# Sessions that fork from a turn of the batch, or from a session planned for removal.
FORKS_INTO_SQL = """
select t.session_id from temp.gc_batch b cross join sessions s on s.fork_turn_id = b.id
cross join turns t on t.id = b.id
"""


class GcBatches:
    """Removes a gc plan in batches (a helper of the `Gc` part); takes the handle."""

    def __init__(self, db: Handle) -> None:
        self.db = db

    def snapshot(self) -> dict[int, tuple[Any, ...]]:
        """Each session's state (last seq, active leaf) when gc plans."""
        return {int(r[0]): (r[1], r[2]) for r in self.db.execute(STATE_SQL)}

    def order(self) -> list[tuple[int, int]]:
        """The planned turns as (turn, session), deepest first."""
        return [(int(r[0]), int(r[1])) for r in self.db.execute(ORDER_SQL)]

    def run(
        self,
        order: Sequence[tuple[int, int]],
        whole_sessions: Iterable[int],
        state: dict[int, tuple[Any, ...]],
        moment: datetime,
        *,
        batch_size: int,
        progress: GcProgress | None = None,
    ) -> tuple[int, set[int], set[int]]:
        """Remove the planned turns (``order``) and then whole sessions, batch by batch.

        Returns:
            ``(turns removed, sessions removed, sessions left for a later gc because
            they were written to meanwhile)``.
        """
        left: dict[int, int] = {}
        for _turn, session in order:
            left[session] = left.get(session, 0) + 1
        whole = set(whole_sessions)
        skipped: set[int] = set()
        removed_sessions: set[int] = set()
        done = 0
        position = 0
        total = len(order)
        # sessions with no planned turns are removed in the first batch
        empty = sorted(s for s in whole if left.get(s, 0) == 0)
        while position < total or empty:
            chunk = [t for t in order[position : position + batch_size] if t[1] not in skipped]
            position += batch_size
            with self.db.atomic():
                # relinks come before deletes: foreign keys are checked at commit
                self.db.execute("pragma defer_foreign_keys = on")
                touched = {s for _t, s in chunk} | set(empty)
                changed = self._changed(touched, state, whole)
                if changed:
                    skipped |= changed
                    chunk = [t for t in chunk if t[1] not in skipped]
                self.db.execute("delete from temp.gc_batch")
                self.db.executemany(
                    "insert into temp.gc_batch (id) values (?)", [[t] for t, _s in chunk]
                )
                forked = {int(r[0]) for r in self.db.execute(FORKS_INTO_SQL)}
                if forked:  # a fork made meanwhile from a planned turn: keep that session
                    skipped |= forked
                    chunk = [t for t in chunk if t[1] not in skipped]
                    self.db.execute("delete from temp.gc_batch")
                    self.db.executemany(
                        "insert into temp.gc_batch (id) values (?)", [[t] for t, _s in chunk]
                    )
                self._remove_batch(moment)
                for _turn, session in chunk:
                    left[session] -= 1
                finished = [
                    s
                    for s in sorted(touched)
                    if s in whole and s not in skipped and left.get(s, 0) == 0
                ]
                for session in finished:
                    if self.db.execute(
                        "select 1 from sessions where parent_session_id = ? limit 1", [session]
                    ).fetchone():
                        skipped.add(session)  # a session made meanwhile forks from it
                        continue
                    self.db.execute("delete from sessions where id = ?", [session])
                    removed_sessions.add(session)
            empty = []
            done += len(chunk)
            if progress is not None:
                progress(done, total)
        return done, removed_sessions, skipped

    def _changed(
        self, sessions: set[int], state: dict[int, tuple[Any, ...]], whole: set[int]
    ) -> set[int]:
        """Sessions written to since the plan (inside the batch's transaction)."""
        changed: set[int] = set()
        for session in sessions:
            row = self.db.execute(
                "select last_seq, active_leaf_id from sessions where id = ?", [session]
            ).fetchone()
            before = state.get(session)
            if row is None or before is None:
                changed.add(session)
                continue
            last_seq, active = row
            if last_seq != before[0]:
                changed.add(session)
            elif active != before[1] and not (session in whole and active is None):
                # (removing a whole session clears its active leaf itself)
                changed.add(session)
        return changed

    def _remove_batch(self, moment: datetime) -> None:
        stamp = moment.strftime("%Y-%m-%dT%H:%M:%SZ")
        # Turns that stay but point into the batch: record what changes under "gc" in
        # source_patch_json (doctor then takes their path values as a baseline).
        for key, patch, parent, kept, *links in self.db.execute(LINKED_SQL).fetchall():
            note: dict[str, Any] = {"utc": stamp}
            for name, value, flag in zip(
                ("parentId", "firstKeptTurn", "compaction", "run"),
                (parent, kept, 1, 1),
                links,
                strict=True,
            ):
                if flag:
                    note[name] = value if name in ("parentId", "firstKeptTurn") else True
            merged = json.loads(patch) if patch else {}
            earlier = merged.get("gc")  # a second gc (or batch) keeps the earlier note too
            merged["gc"] = (
                note
                if earlier is None
                else [*(earlier if isinstance(earlier, list) else [earlier]), note]
            )
            self.db.execute(
                "update turns set source_patch_json = ? where id = ?", [json.dumps(merged), key]
            )
        # A turn whose parent goes becomes a root and starts its own run.
        for seq, session_key, run_start in self.db.execute(REROOTED_SQL).fetchall():
            self.db.execute(
                "update turns set run_start_seq = ?, run_parent_id = null where session_id = ? "
                "and run_start_seq = ? and seq >= ?",
                [seq, session_key, run_start, seq],
            )
        for statement in UNLINK_SQL:
            self.db.execute(statement)
