"""Keeping a database healthy: `Store.doctor` checks and repairs, `Store.gc` removes.

``doctor`` reports what is wrong with a database file (SQLite's own integrity and
foreign-key checks, stored path values that disagree with a recomputation from the
parent, a persisted active leaf that is not a turn of its session, a large WAL,
files readable by others) and, when asked, repairs only what is derived or
reversible: path values are recomputed the way an append computes them, a bad
active leaf moves to the session's latest turn, the WAL is checkpointed, modes go
back to 0600. Entries are never touched.

``gc`` (the only place rows are deleted) lives in `nexus_store.store.retention`.
"""

from __future__ import annotations

import contextlib
import json
import os
import sqlite3
import stat
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ConfigDict

from nexus_store.errors import StorageError
from nexus_store.store.retention import GcReport, RetentionMixin

__all__ = ["DoctorFinding", "DoctorReport", "GcReport", "MaintenanceMixin"]

_FROZEN = ConfigDict(frozen=True, extra="forbid")
DEFAULT_WAL_LIMIT = 64 * 1024 * 1024

# Each turn's stored path values beside the values an append would compute from its
# parent's stored values (see Store._insert_turn). Turns changed by gc (a "gc" note in
# source_patch_json, the last column) are baselines: their own values are not checked
# (the note is read in Python, so the query runs unchanged on PostgreSQL).
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
       (select sum(m.tokens) from messages m where m.turn_id = t.id),
       t.source_patch_json
from turns t
join sessions s on s.id = t.session_id
left join turns p on p.id = t.parent_id
left join turns k on k.id = t.first_kept_turn_id
where (cast(:session as bigint) is null or t.session_id = :session)
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


class MaintenanceMixin(RetentionMixin):
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
            try:
                actions = self._repair(findings)
            except (
                sqlite3.DatabaseError,
                StorageError,
            ) as err:  # a damaged file can fail mid-repair
                actions = [f"repair stopped and rolled back: {err}; restore a backup"]
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
        self._check_storage(found)
        checked = 0
        try:
            checked = self._check_path_values(found)
            self._check_active_leaves(found)
        except (sqlite3.DatabaseError, StorageError) as err:
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

    def _check_storage(self, found: list[DoctorFinding]) -> None:
        """SQLite's own checks: the file's integrity and its foreign keys.

        (PostgreSQL enforces foreign keys on every write and checks its files itself;
        its store has nothing to add here.)
        """
        try:
            rows = [r[0] for r in self.conn.execute("pragma integrity_check").fetchall()]
        except (sqlite3.DatabaseError, StorageError) as err:
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
        except (sqlite3.DatabaseError, StorageError) as err:
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

    def _check_path_values(self, found: list[DoctorFinding]) -> int:
        checked = 0
        for row in self.conn.execute(PATH_CHECK_SQL, {"session": None}):
            if _gc_baseline(row[22]):
                continue
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
            if _gc_baseline(patch):
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


def _gc_baseline(patch: str | None) -> bool:
    """Whether a turn's source_patch_json carries gc's note (its values are a baseline)."""
    return patch is not None and '"gc"' in patch and "gc" in json.loads(patch)


def _key(finding: DoctorFinding) -> tuple[str, str | None, str | None]:
    return finding.check, finding.session, finding.turn
