"""Recording the workspace bootstrap files a session was given (schema/0003_workspace.sql).

A *load* is the list of files injected into the system prompt at one moment, in
order. Each distinct content is stored once in ``workspace_files`` (keyed by its
SHA-256), and ``session_workspace`` holds one row per file per load. Recording the
same list again is a no-op, so a runtime can record on every run and only changes
add rows.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

from nexus_store.errors import InvalidEntry
from nexus_store.jsoncodec import has_lone_surrogate
from nexus_store.store.db import Handle, utc_now
from nexus_store.workspace import WorkspaceFile, sha256_text

__all__ = ["Workspace"]

# The files of one load of a session, in prompt order.
WORKSPACE_LOAD_SQL = """
select w.path, f.content, w.truncated, w.original_length, w.original_sha256, w.max_chars,
       f.sha256
from session_workspace w
join workspace_files f on f.id = w.file_id
where w.session_id = :session and w.load_seq = :load
order by w.position
"""

INSERT_SESSION_WORKSPACE_SQL = """
insert into session_workspace (
    session_id, load_seq, position, path, file_id, truncated, original_length,
    original_sha256, max_chars, loaded_utc
) values (
    :session, :load, :position, :path, :file_id, :truncated, :original_length,
    :original_sha256, :max_chars, :loaded_utc
)
"""


class Workspace:
    """The workspace bootstrap files of sessions (``Store.record_workspace``, ...).

    Args:
        db: The database handle.
    """

    def __init__(self, db: Handle) -> None:
        self.db = db

    def record_workspace(
        self, session_id: str, files: Sequence[WorkspaceFile], *, loaded_utc: str | None = None
    ) -> int:
        """Record the bootstrap files injected into a session's system prompt.

        Args:
            session_id: The session.
            files: The files as injected (see `nexus_store.workspace.load_workspace`),
                in prompt order.
            loaded_utc: When they were loaded (now when omitted).

        Returns:
            The load number (1 for the first). When ``files`` equal the latest load
            (same paths, contents and truncation, in the same order), nothing is
            written and that load's number is returned. An empty ``files`` records
            nothing and returns 0.

        Raises:
            SessionNotFound: If the session does not exist.
        """
        for file in files:
            self._check_workspace_text(file)
        if not files:
            self.db.session_row(session_id)
            return 0
        with self.db.atomic():
            session_key, _ = self.db.session_row(session_id)
            latest = self._latest_load(session_key)
            if latest and self._load(session_key, latest) == list(files):
                return latest
            load = latest + 1
            now = loaded_utc or utc_now()
            for position, file in enumerate(files):
                digest = sha256_text(file.content)
                self.db.execute(
                    "insert into workspace_files (sha256, content, chars) values (?, ?, ?) "
                    "on conflict (sha256) do nothing",
                    [digest, file.content, len(file.content)],
                )
                file_id = self.db.execute(
                    "select id from workspace_files where sha256 = ?", [digest]
                ).fetchone()[0]
                self.db.execute(
                    INSERT_SESSION_WORKSPACE_SQL,
                    {
                        "session": session_key,
                        "load": load,
                        "position": position,
                        "path": file.path,
                        "file_id": file_id,
                        "truncated": int(file.truncated),
                        "original_length": file.original_length,
                        "original_sha256": file.original_sha256,
                        "max_chars": file.max_chars,
                        "loaded_utc": now,
                    },
                )
            return load

    def _check_workspace_text(self, file: WorkspaceFile) -> None:
        """Refuse text this backend cannot store (a NUL only where text holds none)."""
        for what, text in (("path", file.path), ("content", file.content)):
            if has_lone_surrogate(text):
                raise InvalidEntry(
                    f"workspace file {file.path!r}: its {what} holds a lone surrogate (not "
                    "text); decode the file with errors='replace'; nothing recorded"
                )
            if "\x00" in text and not self.db.dialect.capabilities.nul_in_text:
                raise InvalidEntry(
                    f"workspace file {file.path!r}: its {what} holds a NUL character, which "
                    "PostgreSQL text cannot store (SQLite can); nothing recorded"
                )

    def workspace(self, session_id: str, *, load: int | None = None) -> list[WorkspaceFile]:
        """Return the bootstrap files recorded for a session, in prompt order.

        Args:
            session_id: The session.
            load: Which load (1 = the first); the latest when omitted.

        Returns:
            The files ([] when none were recorded).

        Raises:
            SessionNotFound: If the session does not exist.
        """
        session_key, _ = self.db.session_row(session_id)
        if load is None:
            load = self._latest_load(session_key)
        return self._load(session_key, load)

    def iter_workspace_loads(self, session_id: str) -> Iterator[tuple[int, str]]:
        """Yield ``(load number, loaded_utc)`` for each recorded load, oldest first."""
        session_key, _ = self.db.session_row(session_id)
        rows = self.db.execute(
            "select load_seq, min(loaded_utc) from session_workspace where session_id = ? "
            "group by load_seq order by load_seq",
            [session_key],
        ).fetchall()
        for load, when in rows:
            yield int(load), str(when)

    def _latest_load(self, session_key: int) -> int:
        row = self.db.execute(
            "select max(load_seq) from session_workspace where session_id = ?", [session_key]
        ).fetchone()
        return 0 if row[0] is None else int(row[0])

    def _load(self, session_key: int, load: int) -> list[WorkspaceFile]:
        rows = self.db.execute(WORKSPACE_LOAD_SQL, {"session": session_key, "load": load})
        return [
            WorkspaceFile(
                path=row[0],
                content=row[1],
                truncated=bool(row[2]),
                original_length=row[3],
                original_sha256=row[4],
                max_chars=row[5],
            )
            for row in rows
        ]
