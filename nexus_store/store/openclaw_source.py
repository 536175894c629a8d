"""OpenClaw's own SQLite store (``agents/<agent>/agent/openclaw-agent.sqlite``), read only.

(It lives in the store package because it talks SQL, to OpenClaw's database; what it
produces are the same `ParsedSession` values as the transcript readers of
`nexus_store.formats`.)

Since 2026.8 OpenClaw keeps transcripts in a per-agent SQLite database instead of
JSONL files. The tables nexus_store reads (``PRAGMA user_version`` 19, 21 and 23:
OpenClaw 2026.8.1 to 2026.9.6; 2026.7 had no transcript store):

* ``transcript_events(session_id, seq, event_json, ...)``: one row per pi entry of
  a session, in ``seq`` order, the session header (``{"type": "session", ...}``)
  included. From version 23 a large row may instead hold the entry zstd-compressed in
  ``event_zstd`` with its UTF-8 length in ``event_utf8_bytes``.
* ``transcript_event_identities(session_id, event_id, seq, parent_id, ...)``: the id
  and parent of each entry (used where an entry has no ``id`` of its own).
* ``session_windows(session_id, session_key, previous_session_id, reason, ...)``: the
  windows of one conversation, each a session id; ``reason`` says why a window
  followed the previous one (reset, rollover, fork, rewind, compaction, ...).
* ``transcript_rewrite_watermarks(session_id, generation)``: a new generation means
  the session's rows were rewritten (then they are re-read, never mixed).

The database is opened with ``mode=ro`` and read inside one read transaction: on
OpenClaw's WAL this sees one consistent snapshot and never takes a write lock, so
OpenClaw is never blocked. Entries are read as pi v3 entries (`pi.read_tree_entries`),
so a session OpenClaw migrated from JSONL is the same session as its JSONL file.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson

from nexus_store.errors import TranscriptError
from nexus_store.formats.base import LineReader, ParsedSession, Problem
from nexus_store.formats.pi import read_tree_entries
from nexus_store.formats.sniff import NotATranscript

__all__ = [
    "SUPPORTED_VERSIONS",
    "OpenClawStore",
    "UnknownSchemaVersion",
    "Window",
    "decompress_zstd",
]

# user_version -> the OpenClaw releases that write it (the tests build stores from the
# CREATE statements of 19 and 23, tests/fixtures/openclaw/).
# (20 and 22 were never released). 21 has the tables of 19.
SUPPORTED_VERSIONS = {
    19: "2026.8.1 to 2026.9.4",
    21: "2026.9.5",
    23: "2026.9.6",
}

# A session's rows after a seq, with their identity rows; schema 23 adds the zstd columns.
_EVENTS_SQL = (
    "select e.seq, e.event_json, i.event_id, i.parent_id from transcript_events e "
    "left join transcript_event_identities i on i.session_id = e.session_id and i.seq = e.seq "
    "where e.session_id = ? and e.seq > ? order by e.seq"
)
_EVENTS_ZSTD_SQL = (
    "select e.seq, e.event_json, e.event_zstd, e.event_utf8_bytes, i.event_id, i.parent_id "
    "from transcript_events e left join transcript_event_identities i "
    "on i.session_id = e.session_id and i.seq = e.seq "
    "where e.session_id = ? and e.seq > ? order by e.seq"
)
_WINDOWS_SQL = (
    "select session_id, session_key, previous_session_id, reason, created_at "
    "from session_windows order by created_at, session_id"
)


class UnknownSchemaVersion(TranscriptError):
    """An OpenClaw database of a schema version this nexus_store does not know."""


@dataclass(frozen=True)
class Window:
    """One ``session_windows`` row: a session id and where it comes from.

    Attributes:
        session_id: OpenClaw's session id (the transcript header's id).
        session_key: OpenClaw's logical session key (``agent:main:main``).
        previous_session_id: The window this one follows, or None.
        reason: Why it started (initial, reset, rollover, fork, rewind, switch,
            recovery, compaction) or None.
        created_at: Epoch milliseconds.
    """

    session_id: str
    session_key: str | None
    previous_session_id: str | None
    reason: str | None
    created_at: int | None


def decompress_zstd(blob: bytes, size: int) -> bytes:
    """Decompress one zstd frame of a known decompressed size.

    Uses the standard library's ``compression.zstd`` (Python 3.14+) or the
    ``zstandard`` package.

    Args:
        blob: The compressed frame.
        size: The decompressed size recorded beside it (at most this much is produced).

    Returns:
        The decompressed bytes.

    Raises:
        ValueError: Not a zstd frame, or not of the recorded size.
    """
    try:
        from compression import zstd  # type: ignore[import-not-found,unused-ignore]  # Python 3.14+

        data: bytes = zstd.decompress(blob)
    except ImportError:
        import zstandard

        try:
            data = zstandard.ZstdDecompressor().decompress(blob, max_output_size=size)
        except zstandard.ZstdError as err:
            raise ValueError(f"not a zstd frame ({err})") from None
    except Exception as err:  # compression.zstd.ZstdError
        raise ValueError(f"not a zstd frame ({err})") from None
    if len(data) != size:
        raise ValueError(f"decompressed to {len(data)} bytes, not the recorded {size}")
    return data


class _RowReader(LineReader):
    """A `LineReader` over decoded rows: ``(seq, entry)`` pairs, bad rows reported."""

    def __init__(self, rows: Iterator[tuple[int, Any]], path: str, problems: list[Problem]):
        super().__init__((), path, problems)
        self._rows = rows

    def __next__(self) -> tuple[int, dict[str, Any]]:
        seq, obj = next(self._rows)
        self.count += 1
        return seq, obj


class OpenClawStore:
    """An OpenClaw agent database opened read-only, inside one read transaction.

    Use as a context manager; everything read between enter and exit comes from one
    snapshot of the database, and OpenClaw keeps writing meanwhile.

    Example::

        with OpenClawStore("openclaw-agent.sqlite") as source:
            for window in source.windows():
                session = source.read_session(window.session_id)
    """

    def __init__(self, path: str | Path, *, timeout: float = 30.0):
        self.path = str(path)
        self.timeout = timeout
        self.version = 0
        self._conn: sqlite3.Connection | None = None
        self._columns: set[str] = set()
        self._tables: set[str] = set()

    def __enter__(self) -> OpenClawStore:
        uri = Path(self.path).resolve().as_uri() + "?mode=ro"
        try:
            conn = sqlite3.connect(uri, uri=True, timeout=self.timeout, isolation_level=None)
        except sqlite3.Error as err:
            raise TranscriptError(f"cannot open OpenClaw database {self.path}: {err}") from None
        try:
            conn.execute("pragma query_only = 1")
            # A deferred transaction takes its snapshot at the first read and never
            # a write lock (WAL readers do not block OpenClaw's writer, nor it them).
            conn.execute("begin")
            self.version = int(conn.execute("pragma user_version").fetchone()[0])
            self._tables = {
                str(r[0]) for r in conn.execute("select name from sqlite_master where type='table'")
            }
            if "transcript_events" in self._tables:
                self._columns = {
                    str(r[1]) for r in conn.execute("pragma table_info(transcript_events)")
                }
        except sqlite3.Error as err:
            conn.close()
            raise TranscriptError(f"cannot read OpenClaw database {self.path}: {err}") from None
        self._conn = conn
        try:
            if "transcript_events" not in self._tables:
                raise NotATranscript(
                    self.path, "an SQLite database that is not an OpenClaw agent database"
                )
            self._check_version()
        except TranscriptError:
            self.close()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """End the read transaction and close the connection."""
        if self._conn is not None:
            try:
                self._conn.execute("rollback")
            except sqlite3.Error:
                pass
            self._conn.close()
            self._conn = None

    @property
    def conn(self) -> sqlite3.Connection:
        """The read-only connection (only while open)."""
        if self._conn is None:
            raise TranscriptError(f"OpenClaw database {self.path} is not open")
        return self._conn

    def _check_version(self) -> None:
        if self.version not in SUPPORTED_VERSIONS:
            known = ", ".join(f"{v} ({r})" for v, r in SUPPORTED_VERSIONS.items())
            raise UnknownSchemaVersion(
                f"OpenClaw database {self.path} has schema version {self.version}, which this "
                f"nexus_store does not know how to read (it reads {known}); upgrade nexus_store, "
                "or export the sessions from OpenClaw as JSONL"
            )
        missing = {"transcript_events", "session_windows"} - self._tables
        if missing or "event_json" not in self._columns:
            raise UnknownSchemaVersion(
                f"OpenClaw database {self.path} (schema version {self.version}) lacks "
                f"{', '.join(sorted(missing)) or 'transcript_events.event_json'}; it is not an "
                "OpenClaw agent database nexus_store can read"
            )

    # -- what is there ---------------------------------------------------------------

    def windows(self) -> list[Window]:
        """Every session window, earlier windows before the ones that follow them."""
        rows = [Window(str(r[0]), r[1], r[2], r[3], r[4]) for r in self.conn.execute(_WINDOWS_SQL)]
        known = {w.session_id for w in rows}
        # Sessions with events but no window row (not written by OpenClaw, but possible
        # in a damaged file) are read too: nothing is left behind.
        for (session_id,) in self.conn.execute(
            "select distinct session_id from transcript_events"
        ).fetchall():
            if session_id not in known:
                rows.append(Window(str(session_id), None, None, None, None))
        return _previous_first(rows)

    def last_seqs(self) -> dict[str, int]:
        """The highest ``seq`` of each session's events."""
        return {
            str(r[0]): int(r[1])
            for r in self.conn.execute(
                "select session_id, max(seq) from transcript_events group by session_id"
            )
        }

    def generations(self) -> dict[str, str]:
        """The rewrite generation of each rewritten session (none: never rewritten)."""
        if "transcript_rewrite_watermarks" not in self._tables:
            return {}
        return {
            str(r[0]): str(r[1])
            for r in self.conn.execute(
                "select session_id, generation from transcript_rewrite_watermarks"
            )
        }

    # -- reading -----------------------------------------------------------------------

    def sessions(self) -> Iterator[tuple[Window, ParsedSession]]:
        """Every session, whole, earlier windows first (for `import`).

        Each session's ``parent_source_id`` is the window it follows, so the store
        links it to that session when it is stored.

        Yields:
            ``(window, session)``; consume the session's entries before the next.
        """
        for window in self.windows():
            parsed = self.read_session(window.session_id)
            parsed.parent_source_id = window.previous_session_id
            yield window, parsed

    def read_session(
        self, session_id: str, *, after_seq: int = -1, header: dict[str, Any] | None = None
    ) -> ParsedSession:
        """Read one session's entries (those after ``after_seq``) as pi v3 entries.

        Args:
            session_id: The OpenClaw session id.
            after_seq: Read only rows with a greater ``seq`` (a sync's checkpoint).
            header: The header read before, for a read from a checkpoint.

        Returns:
            A `ParsedSession` (format ``pi``, source id = the session id, path = the
            database); the header row is not an entry; each entry's ``line`` is its
            ``seq``. Entries are lazy: consume them before leaving the context.
        """
        name = f"{self.path}#{session_id}"
        problems: list[Problem] = []
        rows = self._rows(session_id, after_seq, name, problems)
        first = next(rows, None)
        found: dict[str, Any] | None = None
        if first is not None and first[1].get("type") == "session":
            found = first[1]
            first = None
        head = found or header or {"type": "session", "version": 3, "id": session_id}
        pending = iter([first] if first is not None else [])
        reader = _RowReader(_chain(pending, rows), name, problems)
        reader.count = 1  # the header is object 0, as in a JSONL file
        version = head.get("version", 3)
        version = version if isinstance(version, int) and 2 <= version <= 3 else 3
        return ParsedSession(
            path=name,
            source_format="pi",
            source_version=version,
            source_id=session_id,
            header=head,
            parent_source_id=None,
            entries=read_tree_entries(reader, session_id, version),
            problems=problems,
            resume={"header": head},
        )

    def _rows(
        self, session_id: str, after_seq: int, name: str, problems: list[Problem]
    ) -> Iterator[tuple[int, dict[str, Any]]]:
        compressed = "event_zstd" in self._columns and "event_utf8_bytes" in self._columns
        if compressed:
            cursor = self.conn.execute(_EVENTS_ZSTD_SQL, [session_id, after_seq])
        else:
            cursor = self.conn.execute(_EVENTS_SQL, [session_id, after_seq])
        for row in cursor:
            seq = int(row[0])
            text: str | bytes | None = row[1]
            if text is None and compressed:
                try:
                    text = decompress_zstd(row[2], int(row[3]))
                except (ValueError, TypeError) as err:
                    why = f"event {seq}: event_zstd {err}; skipped"
                    problems.append(Problem(name, seq, "bad_zstd", why, False))
                    continue
            try:
                obj = orjson.loads(text) if text is not None else None
            except orjson.JSONDecodeError as err:
                why = f"event {seq} is not valid JSON ({err}); skipped"
                problems.append(Problem(name, seq, "bad_json", why, False))
                continue
            if not isinstance(obj, dict):
                why = f"event {seq} is not a JSON object; skipped"
                problems.append(Problem(name, seq, "not_object", why, False))
                continue
            event_id, parent_id = row[-2], row[-1]
            if "id" not in obj and isinstance(event_id, str):
                obj["id"] = event_id  # the identity row names it
                if "parentId" not in obj and obj.get("type") != "session":
                    obj["parentId"] = parent_id
            yield seq, obj


def _chain(
    first: Iterator[tuple[int, dict[str, Any]] | None], rest: Iterator[tuple[int, dict[str, Any]]]
) -> Iterator[tuple[int, dict[str, Any]]]:
    for item in first:
        if item is not None:
            yield item
    yield from rest


def _previous_first(windows: list[Window]) -> list[Window]:
    """Order windows so that each comes after the one it follows (cycles broken)."""
    by_id = {w.session_id: w for w in windows}
    done: set[str] = set()
    ordered: list[Window] = []
    for window in windows:
        chain: list[Window] = []
        current: Window | None = window
        while current is not None and current.session_id not in done:
            done.add(current.session_id)
            chain.append(current)
            previous = current.previous_session_id
            current = by_id.get(previous) if previous is not None else None
        ordered.extend(reversed(chain))
    return ordered
