"""Keeping a database healthy: `Store.doctor` checks and repairs (part `Doctor`).

``doctor`` reports what is wrong with a database file (SQLite's own integrity and
foreign-key checks, a message search index that disagrees with the messages, stored
path values that disagree with a recomputation from the parent, a persisted active
leaf that is not a turn of its session, a large WAL, files readable by others) and,
when asked, repairs only what is derived or reversible: the search index is rebuilt,
path values are recomputed the way an append computes them, a bad active leaf moves
to the session's latest turn, the WAL is checkpointed, modes go back to 0600. Entries
are never touched.

``gc`` (the only place rows are deleted) lives in `nexus_store.store.gc`.
"""

from __future__ import annotations

import contextlib
import json
import os
import sqlite3
import stat
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict

from nexus_store.errors import ContentCorrupt, NexusError
from nexus_store.store import compressed
from nexus_store.store.connection import DEFAULT_WAL_LIMIT
from nexus_store.store.db import Handle
from nexus_store.store.indexqueue import check_message_index, rebuild_message_index
from nexus_store.store.pathvalues import (
    PARENT_COLUMNS,
    STRUCTURAL,
    PathRow,
    PathValues,
    child_row,
    path_values,
)

__all__ = ["Doctor", "DoctorFinding", "DoctorReport"]

_FROZEN = ConfigDict(frozen=True, extra="forbid", defer_build=True)
# What a damaged database raises while doctor reads or repairs it: the driver's
# errors as Handle.execute translates them, and SQLite's own from pragmas.
_DB_ERRORS = (sqlite3.DatabaseError, NexusError)

# Every turn with what `path_values` needs to recompute its path values: its stored
# row (PathRow columns, from PARENT_COLUMNS), its parent and first kept turn, its
# session's fork turn, gc's note and the tokens of its messages; parents first (seq
# order within a session). The gc note is read in Python, so this runs on PostgreSQL.
DOCTOR_TURNS_SQL = f"""
select s.uid, t.session_id, t.parent_id, t.first_kept_turn_id, s.fork_turn_id,
       t.source_patch_json, (select sum(m.tokens) from messages m where m.turn_id = t.id),
       {PARENT_COLUMNS}
from turns t
join sessions s on s.id = t.session_id
left join turns pc on pc.id = t.compaction_id
where (cast(:session as bigint) is null or t.session_id = :session)
order by t.session_id, t.seq
"""

# A persisted active leaf that is missing or belongs to another session.
BAD_LEAF_SQL = """
select s.id, s.uid, s.active_leaf_id, t.session_id
from sessions s left join turns t on t.id = s.active_leaf_id
where s.active_leaf_id is not null and (t.id is null or t.session_id <> s.id)
"""


# Each message's stored content with its turn and session (content check, schema 0065).
CONTENT_ROWS_SQL = """
select m.id, t.uid, s.uid, m.content_kind, m.content_json, m.text, m.content_zstd
from messages m join turns t on t.id = m.turn_id join sessions s on s.id = t.session_id
where m.content_kind in ('string', 'text_block', 'bash_output', 'json')
"""


class DoctorFinding(BaseModel):
    """One problem found by `Store.doctor`.

    Attributes:
        check: Which check found it: integrity, foreign_key, search_index,
            path_values, tokens, active_leaf, content (compressed message content),
            wal, permissions.
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


class Doctor:
    """``Store.doctor`` (see the module docstring).

    Args:
        db: The database handle.
    """

    def __init__(self, db: Handle) -> None:
        self.db = db

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
            except _DB_ERRORS as err:  # a damaged file can fail mid-repair
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
        if self.db.filename is None:
            return []
        base = str(self.db.filename)
        return [Path(base + suffix) for suffix in ("", "-wal", "-shm")]

    def _wal_bytes(self) -> int | None:
        if self.db.filename is None:
            return None
        wal = Path(str(self.db.filename) + "-wal")
        return wal.stat().st_size if wal.exists() else 0

    def _diagnose(self, wal_limit: int) -> tuple[list[DoctorFinding], int, int | None]:
        found: list[DoctorFinding] = []
        if self.db.dialect.capabilities.file_checks:
            self._check_storage(found)
            self._check_search_index(found)
        checked = 0
        try:
            checked = self._check_path_values(found)
            self._check_active_leaves(found)
            if self.db.dialect.capabilities.compressed_content:
                self._check_content(found)
        except _DB_ERRORS as err:
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
                    message=f"the WAL {self.db.filename}-wal holds {wal_bytes:,} bytes (limit "
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

        (Only where ``capabilities.file_checks``: PostgreSQL enforces foreign keys on
        every write and checks its files itself; amcheck and pg_checksums are the
        tools for them.)
        """
        try:
            rows = [r[0] for r in self.db.execute("pragma integrity_check").fetchall()]
        except _DB_ERRORS as err:
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
            fk_rows = self.db.execute("pragma foreign_key_check").fetchall()
        except _DB_ERRORS as err:
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

    def _check_search_index(self, found: list[DoctorFinding]) -> None:
        """The message index holds exactly the messages up to its watermark (indexqueue)."""
        try:
            problem = check_message_index(self.db)
        except _DB_ERRORS as err:
            problem = str(err)
        if problem is not None:
            found.append(
                DoctorFinding(
                    check="search_index",
                    severity="error",
                    message=f"the message search index disagrees with messages ({problem}); "
                    "doctor --fix rebuilds it from the messages",
                    fixable=True,
                )
            )

    def _path_walk(
        self, session_key: int | None, *, repair: bool
    ) -> Iterator[tuple[tuple[Any, ...], PathRow, PathValues | None]]:
        """Each turn (parents first) with its stored row and the values `path_values` gives.

        The values are computed from the parent's stored row (checking: a finding
        names the turn that is wrong, not its descendants) or, when ``repair``, from
        the parent's recomputed row, so that one pass repairs a whole session. A
        root of a forked session continues from its fork turn, as an append does
        (issue 14: doctor called such a root corrupt). Turns changed by gc (its note
        in source_patch_json) are baselines: yielded with None and kept as stored.
        """
        rows: dict[int, PathRow] = {}
        current = None
        for record in self.db.execute(DOCTOR_TURNS_SQL, {"session": session_key}):
            _uid, session, parent_key, kept_key, fork_key, patch, _sum = record[:7]
            stored = PathRow._make(record[7:])
            if session != current:
                rows, current = {}, session
            if _gc_baseline(patch):
                rows[stored.id] = stored
                yield record, stored, None
                continue
            parent = None if parent_key is None else self._row(rows, parent_key)
            fork = None
            if parent_key is None and fork_key is not None:
                fork = self._row(rows, fork_key)
            kept = None if kept_key is None else self._row(rows, kept_key)
            if repair and parent_key is not None and parent is None:
                # a missing parent leaves nothing to compute from: left for the report
                rows[stored.id] = stored
                yield record, stored, None
                continue
            expected = path_values(
                parent,
                key=stored.id,
                seq=stored.seq,
                kind=stored.kind,
                tokens=stored.tokens,
                fork=fork,
                kept=kept,
            )
            if repair:
                rows[stored.id] = child_row(
                    expected._replace(
                        active_model_json=stored.active_model_json,
                        active_thinking_level=stored.active_thinking_level,
                    ),
                    key=stored.id,
                    seq=stored.seq,
                    kind=stored.kind,
                    tokens=stored.tokens,
                    uid=stored.uid,
                    parent=parent,
                    fork=fork,
                )._replace(compaction_uid=stored.compaction_uid)
            else:
                rows[stored.id] = stored
            yield record, stored, expected

    def _row(self, rows: dict[int, PathRow], key: int) -> PathRow | None:
        found = rows.get(key)
        return found if found is not None else self.db.parent_row(key)

    def _check_path_values(self, found: list[DoctorFinding]) -> int:
        checked = 0
        for record, stored, expected in self._path_walk(None, repair=False):
            if expected is None:
                continue
            checked += 1
            session_uid, message_tokens = record[0], record[6]
            wrong = [
                f"{name} {getattr(stored, name)!r} (expected {getattr(expected, name)!r})"
                for name in STRUCTURAL
                if getattr(stored, name) != getattr(expected, name)
            ]
            if wrong:
                found.append(
                    DoctorFinding(
                        check="path_values",
                        severity="error",
                        message=f"turn {stored.uid!r} of session {session_uid!r} stores "
                        + ", ".join(wrong),
                        session=session_uid,
                        turn=stored.uid,
                        fixable=True,
                    )
                )
            if stored.kind in ("message", "custom_message") and message_tokens is not None:
                if stored.tokens != message_tokens:
                    found.append(
                        DoctorFinding(
                            check="tokens",
                            severity="error",
                            message=f"turn {stored.uid!r} of session {session_uid!r} stores "
                            f"tokens {stored.tokens} but its messages count {message_tokens}; not "
                            "repaired (the path values above it depend on it): re-import the "
                            "session",
                            session=session_uid,
                            turn=stored.uid,
                        )
                    )
        return checked

    def _check_content(self, found: list[DoctorFinding]) -> None:
        """Every compressed content reads back, and each row has the form the write gives it.

        The form is recomputed with the write path's own function (`compressed.pack_row`)
        from the content read back: compressed at or above the threshold, plain below.
        """
        for key, turn, session, kind, content_json, text, blob in self.db.execute(CONTENT_ROWS_SQL):
            where = f"message row {key} (turn {turn} of session {session})"
            try:
                payload = None if blob is None else compressed.decompress(blob, key)
            except ContentCorrupt as err:
                found.append(
                    DoctorFinding(
                        check="content",
                        severity="error",
                        message=f"{err} [{where}]",
                        session=session,
                        turn=turn,
                    )
                )
                continue
            column = "content_json" if kind == "json" else "text"
            plain = {"content_json": content_json, "text": text}
            row = {"content_kind": kind, **plain, "content_zstd": None}
            if payload is not None:
                row[column] = payload
            stored_form = (plain[column] is None, blob is None)
            compressed.pack_row(row)
            if (row[column] is None, row["content_zstd"] is None) != stored_form:
                found.append(
                    DoctorFinding(
                        check="content",
                        severity="warning",
                        message=f"{where} is stored {'plain' if blob is None else 'compressed'}"
                        f", not as written today ({compressed.THRESHOLD} bytes is the "
                        "threshold); its content reads back intact",
                        session=session,
                        turn=turn,
                    )
                )

    def _check_active_leaves(self, found: list[DoctorFinding]) -> None:
        for _session_key, uid, leaf, owner in self.db.execute(BAD_LEAF_SQL).fetchall():
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
        with self.db.atomic():
            if "search_index" in checks:
                rebuild_message_index(self.db)
                actions.append("rebuilt the message search index")
            if "active_leaf" in checks:
                for key, uid, _leaf, _owner in self.db.execute(BAD_LEAF_SQL).fetchall():
                    self.db.execute(
                        "update sessions set active_leaf_id = (select id from turns "
                        "where session_id = ? order by seq desc limit 1) where id = ?",
                        [key, key],
                    )
                    new = self.db.execute(
                        "select t.uid from sessions s left join turns t on t.id = s.active_leaf_id"
                        " where s.id = ?",
                        [key],
                    ).fetchone()[0]
                    actions.append(f"session {uid!r}: moved the active leaf to {new!r}")
            if "path_values" in checks:
                # parent sessions first: a fork's root continues from its fork turn
                sessions = sorted(
                    (self.db.session_row(uid)[0], uid)
                    for uid in {f.session for f in findings if f.check == "path_values"}
                    if uid
                )
                for key, uid in sessions:
                    changed = self._recompute_path_values(key)
                    actions.append(f"session {uid!r}: recomputed path values of {changed} turns")
        if "wal" in checks:
            busy, log, done = self.db.execute("pragma wal_checkpoint(truncate)").fetchone()
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
        """Store the recomputed path values of a session's turns (in a transaction)."""
        changed = 0
        for _record, stored, expected in list(self._path_walk(session_key, repair=True)):
            if expected is None:
                continue
            new = [getattr(expected, name) for name in STRUCTURAL]
            if new != [getattr(stored, name) for name in STRUCTURAL]:
                changed += 1
                self.db.execute(
                    "update turns set depth = ?, path_tokens = ?, context_tokens = ?, "
                    "compaction_id = ?, compaction_count = ?, run_start_seq = ?, "
                    "run_parent_id = ? where id = ?",
                    [*new, stored.id],
                )
        return changed


def _gc_baseline(patch: str | None) -> bool:
    """Whether a turn's source_patch_json carries gc's note (its values are a baseline)."""
    return patch is not None and '"gc"' in patch and "gc" in json.loads(patch)


def _key(finding: DoctorFinding) -> tuple[str, str | None, str | None]:
    return finding.check, finding.session, finding.turn
