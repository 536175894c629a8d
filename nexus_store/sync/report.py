"""What a sync did, and the one helper that stores a parsed session into a report."""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from nexus_store.formats import ParsedSession, Problem
from nexus_store.store.importing import ImportReport, ingest_parsed
from nexus_store.store.responses import ResponseUsage

if TYPE_CHECKING:
    from nexus_store.store.facade import Store

__all__ = ["SyncReport", "store_parsed"]


class SyncReport(ImportReport):
    """What a sync did: an `ImportReport` plus what the checkpoints saved and saw.

    Attributes:
        sources: Sources looked at (transcript files and OpenClaw databases).
        unchanged: Sources skipped because nothing changed since the last sync
            (one ``stat`` each).
        grown: Sources read from their checkpoint (only the new bytes or rows).
        new: Sources read for the first time.
        reread: Sources read again from the start because they were rewritten,
            truncated or replaced, with what was seen (never appended to).
        missing: Sources synced before that are gone now (their sessions are kept).
        not_transcripts: Paths that are not transcripts, with why (no session made).
    """

    sources: int = 0
    unchanged: int = 0
    grown: int = 0
    new: int = 0
    reread: list[str] = []  # noqa: RUF012 (pydantic copies field defaults)
    missing: list[str] = []  # noqa: RUF012


def store_parsed(
    store: Store,
    parsed: ParsedSession,
    report: ImportReport,
    *,
    strict: bool = False,
    progress: Any = None,
) -> str:
    """Store one parsed session with `Store.ingest` and add what it did to ``report``.

    A Claude Code session's responses that now carry usage are recorded in the same
    transaction (`ResponseUsage`), so another file's copy of them counts none.

    Args:
        store: The store (the caller holds a transaction open around this).
        parsed: The session; its entries are consumed.
        report: Receives counts and problems (file and line).
        strict: Stop at the first problem (`ConflictError`), storing nothing of it.
        progress: Called as progress(entries) every 5,000 entries.

    Returns:
        The session's id.
    """
    seen: list[Problem] = []

    def on_problem(line: int, kind: str, message: str, repaired: bool) -> None:
        seen.append(Problem(parsed.path, line, kind, message, repaired))

    def entries() -> Iterator[tuple[int, dict[str, Any], Any]]:
        for n, item in enumerate(parsed.entries, 1):
            if progress is not None and n % 5000 == 0:
                progress(n)
            yield item.line, item.entry, item.patch

    usage = ResponseUsage(store.handle)
    session_id, counts = ingest_parsed(store.ingest, usage, parsed, entries(), on_problem, strict)
    report.add_session(session_id, counts, parsed.problems, seen)
    return session_id
