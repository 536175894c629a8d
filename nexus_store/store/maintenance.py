"""Keeping a database healthy: `Store.doctor` checks and repairs, `Store.gc` removes.

``doctor`` reports what is wrong with a database file (SQLite's own integrity and
foreign-key checks, stored path values that disagree with a recomputation from the
parent, a persisted active leaf that is not a turn of its session, a large WAL,
files readable by others) and, when asked, repairs only what is derived or
reversible: path values are recomputed the way an append computes them, a bad
active leaf moves to the session's latest turn, the WAL is checkpointed, modes go
back to 0600. Entries are never touched.

``gc`` is the only place nexus_store deletes rows. It removes what the caller asks
for and keeps the tree valid:

* **dead branches**: subtrees not on the path of the active leaf, of a leaf the
  caller keeps, of a fork point another session starts from, or of a label turn
  that labels a kept turn, whose every turn is older than the limit. Deleting whole
  subtrees only means no remaining turn points at a deleted one. Branch summaries
  sit on the live path (they are children of the point the user went back to), so
  they stay.
* **raw turns behind a compaction**: turns that no remaining leaf's context uses
  (they lie above the first kept turn of the leaf's latest compaction), older than
  the limit. A remaining turn whose parent goes becomes a root; links into the
  removed turns (run, nearest compaction, first kept) are cleared; each changed
  turn records what changed under ``"gc"`` in ``source_patch_json``. The context of
  every remaining leaf, the active leaf and every kept turn is unchanged.
* **whole sessions** last updated before the limit (not those another session
  forks from).

Then the WAL is checkpointed and the file vacuumed to give the space back.
"""

from __future__ import annotations

import contextlib
import json
import os
import sqlite3
import stat
from collections.abc import Iterable, Iterator, Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ConfigDict

from nexus_store.errors import NexusError

__all__ = ["DoctorFinding", "DoctorReport", "GcReport", "MaintenanceMixin"]

_FROZEN = ConfigDict(frozen=True, extra="forbid")
DEFAULT_WAL_LIMIT = 64 * 1024 * 1024

# Each turn's stored path values beside the values an append would compute from its
# parent's stored values (see Store._insert_turn). Turns changed by gc (a "gc" note in
# source_patch_json) are baselines: their own values are not recomputed.
PATH_CHECK_SQL = """
select s.id, s.uid, t.id, t.uid, t.kind, t.seq, t.tokens,
       t.depth, t.path_tokens, t.context_tokens, t.compaction_id, t.compaction_count,
       t.run_start_seq, t.run_parent_id,
       case when p.id is null then 0 else p.depth + 1 end,
       case when t.kind = 'compaction' then coalesce(p.path_tokens, 0)
            else coalesce(p.path_tokens, 0) + t.tokens end,
       case when t.kind <> 'compaction' then t.tokens + coalesce(p.context_tokens, 0)
            when k.id is null then t.tokens
            else t.tokens + p.path_tokens - k.path_tokens
                 + case when k.kind = 'compaction' then 0 else k.tokens end end,
       case when t.kind = 'compaction' then t.id else p.compaction_id end,
       case when t.kind = 'compaction' then 1 + coalesce(p.compaction_count, 0)
            else coalesce(p.compaction_count, 0) end,
       case when p.seq = t.seq - 1 then p.run_start_seq else t.seq end,
       case when p.seq = t.seq - 1 then p.run_parent_id else p.id end,
       (select sum(m.tokens) from messages m where m.turn_id = t.id)
from turns t
join sessions s on s.id = t.session_id
left join turns p on p.id = t.parent_id
left join turns k on k.id = t.first_kept_turn_id
where json_extract(coalesce(t.source_patch_json, '{}'), '$.gc') is null
  and (:session is null or t.session_id = :session)
order by t.session_id, t.seq
"""

_PATH_FIELDS = (
    "depth",
    "path_tokens",
    "context_tokens",
    "compaction_id",
    "compaction_count",
    "run_start_seq",
    "run_parent_id",
)

# A persisted active leaf that is missing or belongs to another session.
BAD_LEAF_SQL = """
select s.id, s.uid, s.active_leaf_id, t.session_id
from sessions s left join turns t on t.id = s.active_leaf_id
where s.active_leaf_id is not null and (t.id is null or t.session_id <> s.id)
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
       + coalesce(length(extra_json), 0) + coalesce(length(tool_call_id), 0)), 0)
from messages where turn_id in (select id from temp.gc_doomed)
"""

# The turns of a session whose context gc must keep: its active leaf and the turns
# other sessions fork from.
ANCHORS_SQL = """
select active_leaf_id from sessions where id = ? and active_leaf_id is not null
union
select fork_turn_id from sessions where fork_turn_id in (select id from turns where session_id = ?)
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

# Remaining turns that link into the removed set, with which links do.
LINKED_SQL = """
select t.id, t.source_patch_json, p.uid, k.uid,
       t.parent_id in (select id from temp.gc_doomed),
       t.first_kept_turn_id in (select id from temp.gc_doomed),
       t.compaction_id in (select id from temp.gc_doomed),
       t.run_parent_id in (select id from temp.gc_doomed)
from turns t
left join turns p on p.id = t.parent_id
left join turns k on k.id = t.first_kept_turn_id
where t.id not in (select id from temp.gc_doomed)
  and (t.parent_id in (select id from temp.gc_doomed)
       or t.run_parent_id in (select id from temp.gc_doomed)
       or t.compaction_id in (select id from temp.gc_doomed)
       or t.first_kept_turn_id in (select id from temp.gc_doomed))
"""

# Remaining turns whose parent is removed: they become roots.
REROOTED_SQL = """
select seq, session_id, run_start_seq from turns
where parent_id in (select id from temp.gc_doomed) and id not in (select id from temp.gc_doomed)
"""

# Clear the links into the removed set, then remove it.
UNLINK_SQL = (
    "update turns set parent_id = null where parent_id in (select id from temp.gc_doomed)",
    "update turns set run_parent_id = null where run_parent_id in (select id from temp.gc_doomed)",
    "update turns set compaction_id = null where compaction_id in (select id from temp.gc_doomed)",
    "update turns set first_kept_turn_id = null "
    "where first_kept_turn_id in (select id from temp.gc_doomed)",
    "update sessions set active_leaf_id = null "
    "where active_leaf_id in (select id from temp.gc_doomed)",
    "update sessions set fork_turn_id = null where fork_turn_id in (select id from temp.gc_doomed)",
    "delete from messages where turn_id in (select id from temp.gc_doomed)",
    "delete from turns where id in (select id from temp.gc_doomed)",
)


class DoctorFinding(BaseModel):
    """One problem found by `Store.doctor`.

    Attributes:
        check: Which check found it: integrity, foreign_key, path_values, tokens,
            active_leaf, wal, permissions.
        severity: ``error`` (data is wrong) or ``warning`` (worth acting on).
        message: What is wrong, naming the session/turn/file, and what to do.
        session: Public id of the session concerned, if any.
        turn: Public id of the turn concerned, if any.
        fixable: Whether ``doctor --fix`` repairs it.
        fixed: Whether this run repaired it.
    """

    model_config = _FROZEN

    check: str
    severity: str
    message: str
    session: str | None = None
    turn: str | None = None
    fixable: bool = False
    fixed: bool = False


class DoctorReport(BaseModel):
    """What `Store.doctor` found and did.

    Attributes:
        ok: True when no problem is left (everything found was fixed, or nothing was).
        findings: Every problem found, with whether it was fixed.
        actions: What ``fix=True`` did, one sentence each.
        turns_checked: Turns whose path values were recomputed.
        wal_bytes: Size of the -wal file when checked (None for an in-memory store).
    """

    model_config = _FROZEN

    ok: bool
    findings: list[DoctorFinding]
    actions: list[str]
    turns_checked: int
    wal_bytes: int | None


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


def _chunks(items: Sequence[int], size: int = 500) -> Iterator[Sequence[int]]:
    for start in range(0, len(items), size):
        yield items[start : start + size]


class MaintenanceMixin:
    """`Store.doctor` and `Store.gc` (see the module docstring)."""

    conn: sqlite3.Connection
    filename: Path | None

    if TYPE_CHECKING:  # provided by Store

        def atomic(self) -> contextlib.AbstractContextManager[Any]:
            """Run the block in one write transaction."""
            ...

    def _session_row(self, session_id: str) -> tuple[int, int | None]:
        raise NotImplementedError

    def _path_keys(self, session_key: int, leaf_key: int, stop_depth: int = 0) -> list[int]:
        raise NotImplementedError

    # -- doctor ------------------------------------------------------------------

    def doctor(self, *, fix: bool = False, wal_limit: int = DEFAULT_WAL_LIMIT) -> DoctorReport:
        """Check the database and, with ``fix=True``, repair what is safe to repair.

        Args:
            fix: Repair derived values: recompute path values, move a bad active
                leaf to the session's latest turn, checkpoint a WAL over
                ``wal_limit``, chmod 600 the files. Entries are never changed.
            wal_limit: WAL size in bytes above which the WAL is reported.

        Returns:
            The findings (each says whether it was fixed) and the actions taken.
        """
        findings, turns_checked, wal_bytes = self._diagnose(wal_limit)
        actions: list[str] = []
        if fix and any(f.fixable for f in findings):
            actions = self._repair(findings)
            remaining = {_key(f) for f in self._diagnose(wal_limit)[0]}
            findings = [f.model_copy(update={"fixed": _key(f) not in remaining}) for f in findings]
            wal_bytes = self._wal_bytes()
        ok = all(f.fixed for f in findings)
        return DoctorReport(
            ok=ok,
            findings=findings,
            actions=actions,
            turns_checked=turns_checked,
            wal_bytes=wal_bytes,
        )

    def _files(self) -> list[Path]:
        if self.filename is None:
            return []
        base = str(self.filename)
        return [Path(base + suffix) for suffix in ("", "-wal", "-shm")]

    def _wal_bytes(self) -> int | None:
        if self.filename is None:
            return None
        wal = Path(str(self.filename) + "-wal")
        return wal.stat().st_size if wal.exists() else 0

    def _diagnose(self, wal_limit: int) -> tuple[list[DoctorFinding], int, int | None]:
        found: list[DoctorFinding] = []
        try:
            rows = [r[0] for r in self.conn.execute("pragma integrity_check").fetchall()]
        except sqlite3.DatabaseError as err:
            rows = [str(err)]
        if rows != ["ok"]:
            for text in rows[:20]:
                found.append(
                    DoctorFinding(
                        check="integrity",
                        severity="error",
                        message=f"integrity_check: {text}; restore from a backup or run "
                        "sqlite3's .recover into a new file",
                    )
                )
        try:
            fk_rows = self.conn.execute("pragma foreign_key_check").fetchall()
        except sqlite3.DatabaseError as err:
            fk_rows = []
            found.append(DoctorFinding(check="foreign_key", severity="error", message=str(err)))
        for table, rowid, parent, _fkid in fk_rows[:100]:
            found.append(
                DoctorFinding(
                    check="foreign_key",
                    severity="error",
                    message=f"{table} row {rowid} points at a missing {parent} row",
                    turn=f"{table}:{rowid}",
                )
            )
        checked = 0
        try:
            checked = self._check_path_values(found)
            self._check_active_leaves(found)
        except sqlite3.DatabaseError as err:
            found.append(
                DoctorFinding(
                    check="integrity", severity="error", message=f"cannot read turns: {err}"
                )
            )
        wal_bytes = self._wal_bytes()
        if wal_bytes is not None and wal_bytes > wal_limit:
            found.append(
                DoctorFinding(
                    check="wal",
                    severity="warning",
                    message=f"the WAL {self.filename}-wal holds {wal_bytes:,} bytes (limit "
                    f"{wal_limit:,}); a checkpoint (doctor --fix) folds it into the database",
                    fixable=True,
                )
            )
        for path in self._files():
            with contextlib.suppress(FileNotFoundError):
                mode = stat.S_IMODE(path.stat().st_mode)
                if mode & 0o077:
                    found.append(
                        DoctorFinding(
                            check="permissions",
                            severity="warning",
                            message=f"{path} has mode {mode:o}: others can read the transcripts"
                            f"; doctor --fix sets 600",
                            turn=path.name,
                            fixable=True,
                        )
                    )
        return found, checked, wal_bytes

    def _check_path_values(self, found: list[DoctorFinding]) -> int:
        checked = 0
        for row in self.conn.execute(PATH_CHECK_SQL, {"session": None}):
            checked += 1
            stored, expected = row[7:14], row[14:21]
            wrong = [
                f"{name} {have!r} (expected {want!r})"
                for name, have, want in zip(_PATH_FIELDS, stored, expected, strict=True)
                if have != want
            ]
            if wrong:
                found.append(
                    DoctorFinding(
                        check="path_values",
                        severity="error",
                        message=f"turn {row[3]!r} of session {row[1]!r} stores " + ", ".join(wrong),
                        session=row[1],
                        turn=row[3],
                        fixable=True,
                    )
                )
            if row[4] in ("message", "custom_message") and row[21] is not None:
                if row[6] != row[21]:
                    found.append(
                        DoctorFinding(
                            check="tokens",
                            severity="error",
                            message=f"turn {row[3]!r} of session {row[1]!r} stores tokens "
                            f"{row[6]} but its messages count {row[21]}; not repaired (the "
                            "path values above it depend on it): re-import the session",
                            session=row[1],
                            turn=row[3],
                        )
                    )
        return checked

    def _check_active_leaves(self, found: list[DoctorFinding]) -> None:
        for _session_key, uid, leaf, owner in self.conn.execute(BAD_LEAF_SQL).fetchall():
            where = "does not exist" if owner is None else "belongs to another session"
            found.append(
                DoctorFinding(
                    check="active_leaf",
                    severity="error",
                    message=f"session {uid!r}: the active leaf (turn key {leaf}) {where}; "
                    "doctor --fix moves it to the session's latest turn",
                    session=uid,
                    fixable=True,
                )
            )

    def _repair(self, findings: Sequence[DoctorFinding]) -> list[str]:
        actions: list[str] = []
        checks = {f.check for f in findings if f.fixable}
        with self.atomic():
            if "active_leaf" in checks:
                for key, uid, _leaf, _owner in self.conn.execute(BAD_LEAF_SQL).fetchall():
                    self.conn.execute(
                        "update sessions set active_leaf_id = (select id from turns "
                        "where session_id = ? order by seq desc limit 1) where id = ?",
                        [key, key],
                    )
                    new = self.conn.execute(
                        "select t.uid from sessions s left join turns t on t.id = s.active_leaf_id"
                        " where s.id = ?",
                        [key],
                    ).fetchone()[0]
                    actions.append(f"session {uid!r}: moved the active leaf to {new!r}")
            if "path_values" in checks:
                sessions = sorted(
                    {f.session for f in findings if f.check == "path_values" and f.session}
                )
                for uid in sessions:
                    key, _ = self._session_row(uid)
                    changed = self._recompute_path_values(key)
                    actions.append(f"session {uid!r}: recomputed path values of {changed} turns")
        if "wal" in checks:
            busy, log, done = self.conn.execute("pragma wal_checkpoint(truncate)").fetchone()
            actions.append(
                f"checkpointed the WAL ({done} of {log} pages"
                + (", another connection was busy" if busy else "")
                + ")"
            )
        if "permissions" in checks:
            for path in self._files():
                with contextlib.suppress(FileNotFoundError):
                    if stat.S_IMODE(path.stat().st_mode) & 0o077:
                        os.chmod(path, 0o600)
                        actions.append(f"set mode 600 on {path}")
        return actions

    def _recompute_path_values(self, session_key: int) -> int:
        """Recompute a session's path values in seq order (parents first), in a transaction."""
        values: dict[int, list[Any]] = {}
        changed = 0
        rows = self.conn.execute(
            "select t.id, t.parent_id, t.kind, t.seq, t.tokens, t.first_kept_turn_id, "
            "t.source_patch_json, t.depth, t.path_tokens, t.context_tokens, t.compaction_id, "
            "t.compaction_count, t.run_start_seq, t.run_parent_id, k.kind "
            "from turns t left join turns k on k.id = t.first_kept_turn_id "
            "where t.session_id = ? order by t.seq",
            [session_key],
        ).fetchall()
        for key, parent_key, kind, seq, tokens, kept_key, patch, *stored, kept_kind in rows:
            # fields: depth, path_tokens, context_tokens, compaction_id, compaction_count,
            # run_start_seq, run_parent_id, seq
            if patch and "gc" in json.loads(patch):
                values[key] = [*stored, seq]
                continue
            p = values.get(parent_key) if parent_key is not None else None
            if parent_key is not None and p is None:
                values[key] = [*stored, seq]  # parent missing or later: left for the report
                continue
            depth = 0 if p is None else p[0] + 1
            if kind == "compaction":
                path_tokens = 0 if p is None else p[1]
                k = values.get(kept_key) if kept_key is not None else None
                if k is None or p is None:
                    context = tokens
                else:
                    own = 0 if kept_kind == "compaction" else self._tokens_of(kept_key)
                    context = tokens + p[1] - k[1] + own
                compaction, count = key, 1 + (0 if p is None else p[4])
            else:
                path_tokens = (0 if p is None else p[1]) + tokens
                context = tokens + (0 if p is None else p[2])
                compaction, count = (None if p is None else p[3]), (0 if p is None else p[4])
            if p is not None and p[7] == seq - 1:
                run_start, run_parent = p[5], p[6]
            else:
                run_start, run_parent = seq, parent_key
            new = [depth, path_tokens, context, compaction, count, run_start, run_parent]
            values[key] = [*new, seq]
            if new != list(stored):
                changed += 1
                self.conn.execute(
                    "update turns set depth = ?, path_tokens = ?, context_tokens = ?, "
                    "compaction_id = ?, compaction_count = ?, run_start_seq = ?, "
                    "run_parent_id = ? where id = ?",
                    [*new, key],
                )
        return changed

    def _tokens_of(self, key: int) -> int:
        return int(self.conn.execute("select tokens from turns where id = ?", [key]).fetchone()[0])

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

        Returns:
            What was (or would be) removed.

        Raises:
            NexusError: If neither or both of ``session_id`` and ``all_sessions`` are
                given, or an age is not a number of days >= 0.
            SessionNotFound: If the session does not exist.
        """
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
            keys = [self._session_row(session_id)[0]]
        else:
            keys = [r[0] for r in self.conn.execute("select id from sessions order by id")]
        before = self._file_bytes()
        plan = _GcPlan()
        try:
            with self.atomic():
                # gc relinks turns before deleting them: check foreign keys at commit.
                self.conn.execute("pragma defer_foreign_keys = on")
                self.conn.execute(
                    "create temp table if not exists gc_doomed (id integer primary key)"
                )
                self.conn.execute("delete from temp.gc_doomed")
                self._plan(
                    plan,
                    keys,
                    set(keep),
                    moment,
                    dead_branches_older_than,
                    compacted_older_than,
                    sessions_older_than,
                )
                plan.turn_count, turn_bytes = self.conn.execute(TURN_BYTES_SQL).fetchone()
                plan.message_count, message_bytes = self.conn.execute(MESSAGE_BYTES_SQL).fetchone()
                plan.bytes = int(turn_bytes) + int(message_bytes)
                if dry_run:
                    raise _DryRun
                self._delete_marked(plan, moment)
                self.conn.execute("delete from temp.gc_doomed")
        except _DryRun:
            pass
        actions: list[str] = []
        if not dry_run:
            actions.append(
                f"removed {plan.turn_count} turns ({plan.dead} on dead branches, {plan.compacted}"
                f" behind compactions, the rest in {len(plan.session_uids)} whole sessions) and "
                f"{plan.message_count} messages"
            )
        after = before
        if not dry_run and vacuum and self.filename is not None:
            self.conn.execute("pragma wal_checkpoint(truncate)")
            self.conn.execute("vacuum")
            self.conn.execute("pragma wal_checkpoint(truncate)")
            after = self._file_bytes()
            actions.append(f"checkpointed the WAL and vacuumed: {before:,} -> {after:,} bytes")
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
                self.conn.execute(
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
        if self.filename is None:
            return None
        return sum(p.stat().st_size for p in self._files()[:2] if p.exists())

    def _old_sessions(self, plan: _GcPlan, keys: Sequence[int], cutoff: datetime) -> None:
        old: dict[int, str] = {}
        for key in keys:
            uid, updated = self.conn.execute(
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
                forks = self.conn.execute(
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
        anchors = [r[0] for r in self.conn.execute(ANCHORS_SQL, [session_key, session_key])]
        for uid in keep:
            row = self.conn.execute(
                "select id from turns where session_id = ? and uid = ?", [session_key, uid]
            ).fetchone()
            if row is not None:
                anchors.append(row[0])
        return anchors

    def _tree(self, session_key: int) -> list[tuple[int, int | None, str, str | None, str | None]]:
        return [
            (r[0], r[1], r[2], r[3], r[4])
            for r in self.conn.execute(
                "select id, parent_id, kind, created_utc, target_uid from turns where "
                "session_id = ? and id not in (select id from temp.gc_doomed) order by seq",
                [session_key],
            )
        ]

    def _uids(self, session_key: int) -> dict[int, str]:
        rows = self.conn.execute("select id, uid from turns where session_id = ?", [session_key])
        return {int(r[0]): str(r[1]) for r in rows}

    def _doom(self, keys: Iterable[int]) -> None:
        self.conn.executemany("insert into temp.gc_doomed (id) values (?)", [[k] for k in keys])

    def _mark_dead_branches(self, session_key: int, keep: set[str], cutoff: datetime) -> int:
        tree = self._tree(session_key)
        uid_of = self._uids(session_key)
        live: set[int] = set()
        for anchor in self._anchors(session_key, keep):
            live.update(self._path_keys(session_key, anchor))
        while True:
            dead_uids = {uid_of[k] for k, *_ in tree if k not in live}
            # A label turn off the live paths that labels a remaining turn keeps its
            # path, so that labels() stays the same.
            pinned = [
                k
                for k, _p, kind, _c, target in tree
                if k not in live and kind == "label" and target and target not in dead_uids
            ]
            if not pinned:
                break
            for key in pinned:
                live.update(self._path_keys(session_key, key))
        # The newest time in each dead subtree (children come after parents in seq order);
        # a turn without a readable time counts as new.
        newest: dict[int, datetime] = {}
        for key, parent, _kind, created, _target in reversed(tree):
            if key in live:
                continue
            mine = max(_parse_time(created) or _FAR_FUTURE, newest.get(key, _FAR_PAST))
            newest[key] = mine
            if parent is not None and parent not in live:
                newest[parent] = max(newest.get(parent, _FAR_PAST), mine)
        doomed = [k for k, when in newest.items() if when < cutoff]
        self._doom(doomed)
        return len(doomed)

    def _needed(self, session_key: int, keep: set[str]) -> set[int]:
        """Turns that some remaining leaf's (or anchor's) context uses."""
        leaves = [r[0] for r in self.conn.execute(LEAVES_SQL, [session_key])]
        needed: set[int] = set()
        for leaf in {*leaves, *self._anchors(session_key, keep)}:
            row = self.conn.execute(STOP_DEPTH_SQL, [leaf]).fetchone()
            stop = row[1] if row[1] is not None else (row[0] if row[0] is not None else 0)
            needed.update(self._path_keys(session_key, leaf, stop))
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
        session_uid = self.conn.execute(
            "select uid from sessions where id = ?", [session_key]
        ).fetchone()[0]
        plan.reparented.extend(
            {"session": session_uid, "turn": uid_of[k], "old_parent": uid_of[p]}
            for k, p, _kind, _c, _t in tree
            if p is not None and p in old and k not in old
        )
        return len(old)

    def _delete_marked(self, plan: _GcPlan, moment: datetime) -> None:
        stamp = moment.strftime("%Y-%m-%dT%H:%M:%SZ")
        # Turns that stay but point into the removed set: record what changes under "gc"
        # in source_patch_json (doctor then takes their path values as a baseline).
        for key, patch, parent, kept, *links in self.conn.execute(LINKED_SQL).fetchall():
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
            merged["gc"] = note
            self.conn.execute(
                "update turns set source_patch_json = ? where id = ?", [json.dumps(merged), key]
            )
        # A turn whose parent goes becomes a root and starts its own run.
        for seq, session_key, run_start in self.conn.execute(REROOTED_SQL).fetchall():
            self.conn.execute(
                "update turns set run_start_seq = ?, run_parent_id = null where session_id = ? "
                "and run_start_seq = ? and seq >= ?",
                [seq, session_key, run_start, seq],
            )
        for statement in UNLINK_SQL:
            self.conn.execute(statement)
        for key in sorted(plan.sessions):
            self.conn.execute("delete from sessions where id = ?", [key])


class _DryRun(Exception):
    pass


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


def _key(finding: DoctorFinding) -> tuple[str, str | None, str | None]:
    return finding.check, finding.session, finding.turn
