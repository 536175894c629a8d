"""Syncing one transcript file (JSONL of any format) from its checkpoint.

A checkpoint holds the file's identity (device, inode), its size and mtime when last
read, the offset up to which its complete lines were stored, the SHA-256 of the
(up to 4,096) bytes before that offset, and what a read of the following lines
needs (the header and the parser's state). Then:

* same identity, size and mtime: unchanged, nothing is read (one ``stat``);
* same identity, not smaller, and the bytes before the offset still hash the same:
  grown; the file is read from the offset (only the new bytes), the reader resuming
  from the state it left in the checkpoint (`nexus_store.formats.parse_tail`); a
  checkpoint without state (a Codex rollout whose header is not settled yet, or one
  written by an older version) re-reads the file whole (the store keeps what it
  has and adds the rest);
* another file at the path (replaced), smaller than the offset (truncated), or other
  bytes before the offset (rewritten): re-read from the start and reported; entries
  already stored are kept, entries with other content are conflicts, never
  overwritten.

Only complete lines are read: a line a writer is still writing is left for the next
sync, so nothing is stored half and nothing is read twice.
"""

from __future__ import annotations

import hashlib
import io
import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, BinaryIO

from nexus_store.formats import NotATranscript, parse_stream, parse_tail
from nexus_store.store.checkpoints import Checkpoint, Checkpoints
from nexus_store.store.responses import ResponseUsage
from nexus_store.sync.report import SyncReport, store_parsed

if TYPE_CHECKING:
    from nexus_store.store.facade import Store

__all__ = ["sync_file"]

_TAIL = 4096
_BACK = 65536


class _Window(io.RawIOBase):
    """Bytes ``start``..``end`` of an open file, seekable, counting what it reads."""

    def __init__(self, fd: int, start: int, end: int):
        self.fd = fd
        self.start = start
        self.end = end
        self.pos = 0
        self.read_bytes = 0

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def tell(self) -> int:
        return self.pos

    def seek(self, offset: int, whence: int = 0) -> int:
        base = {0: 0, 1: self.pos, 2: self.end - self.start}[whence]
        self.pos = max(0, base + offset)
        return self.pos

    def readinto(self, buffer: Any) -> int:
        view = memoryview(buffer).cast("B")
        left = self.end - self.start - self.pos
        if left <= 0:
            return 0
        data = os.pread(self.fd, min(len(view), left), self.start + self.pos)
        view[: len(data)] = data
        self.pos += len(data)
        self.read_bytes += len(data)
        return len(data)


def _complete_end(fd: int, start: int, size: int) -> int:
    """Offset just past the last newline in ``start..size`` (``start`` if none)."""
    pos = size
    while pos > start:
        begin = max(start, pos - _BACK)
        chunk = os.pread(fd, pos - begin, begin)
        cut = chunk.rfind(b"\n")
        if cut >= 0:
            return begin + cut + 1
        pos = begin
    return start


def _tail_hash(fd: int, end: int) -> str:
    begin = max(0, end - _TAIL)
    return hashlib.sha256(os.pread(fd, end - begin, begin)).hexdigest()


@dataclass
class _Plan:
    mode: str  # new | grown | reread
    start: int
    why: str = ""


def _plan(cp: Checkpoint | None, st: os.stat_result, fd: int) -> _Plan:
    if cp is None or cp.status != "ok" or cp.format is None:
        return _Plan("new", 0)
    if (cp.device, cp.inode) != (st.st_dev, st.st_ino):
        return _Plan("reread", 0, "replaced by another file")
    if st.st_size < cp.byte_offset:
        return _Plan("reread", 0, f"truncated from {cp.byte_offset:,} to {st.st_size:,} bytes")
    if cp.byte_offset and _tail_hash(fd, cp.byte_offset) != cp.tail_sha256:
        return _Plan("reread", 0, f"rewritten (the bytes before offset {cp.byte_offset:,} changed)")
    if cp.state is None:  # cannot be continued: read whole, the store keeps what it has
        return _Plan("grown", 0)
    return _Plan("grown", cp.byte_offset)


def unchanged(cp: Checkpoint | None, st: os.stat_result) -> bool:
    """Whether a file is as the checkpoint saw it (identity, size and mtime)."""
    return cp is not None and (cp.device, cp.inode, cp.size, cp.mtime_ns) == (
        st.st_dev,
        st.st_ino,
        st.st_size,
        st.st_mtime_ns,
    )


def sync_file(
    store: Store,
    path: Path,
    st: os.stat_result,
    cp: Checkpoint | None,
    report: SyncReport,
    *,
    strict: bool = False,
) -> None:
    """Read what is new in one transcript file and store it with its checkpoint.

    The entries and the new checkpoint commit together: a crash leaves the old
    checkpoint and none of the new entries.

    Args:
        store: The store.
        path: The file (absolute).
        st: Its ``stat`` taken before reading (what the checkpoint records).
        cp: Its checkpoint, or None.
        report: Receives what was read.
        strict: Stop at the first problem, storing nothing of the file.

    Raises:
        NotATranscript: The new file is not a transcript (the caller records it).
    """
    checkpoints = Checkpoints(store.conn)
    fd = os.open(path, os.O_RDONLY)
    try:
        plan = _plan(cp, st, fd)
        end = _complete_end(fd, plan.start, st.st_size)
        if plan.mode == "reread":
            report.reread.append(f"{path}: {plan.why}; re-read from the start")
        if end <= plan.start:
            if plan.mode == "new" and plan.start == 0:
                # Nothing complete yet (a file being created): look again next time.
                raise NotATranscript(path, "no complete line yet")
            _record(checkpoints, cp, path, st, fd, plan, end, None, None)
            return
        usage = ResponseUsage(store.handle)

        def usage_check(source_id: str, key: str) -> bool:
            return usage.counted_elsewhere("claude_code", source_id, key)

        window = _Window(fd, plan.start, end)
        stream: BinaryIO = io.BufferedReader(window, buffer_size=1 << 20)
        if plan.start > 0 and cp is not None and cp.format is not None and cp.state is not None:
            parsed = parse_tail(
                stream,
                str(path),
                cp.format,
                cp.state,
                first_line=int(cp.state.get("lines", cp.lines)) + 1,
                strict=strict,
                boundary_after=_boundary_lookup(checkpoints, cp.session_id),
                usage_check=usage_check,
            )
        else:
            parsed = next(parse_stream(stream, str(path), strict=strict, usage_check=usage_check))
            if parsed.format_guessed:
                # Stored under a guessed format, the file would become a second session
                # once its format shows: store nothing yet, look again when it grows.
                raise NotATranscript(path, "no line recognized yet; looked at again as it grows")
        with store.atomic():
            session_id = store_parsed(store, parsed, report, strict=strict)
            _record(checkpoints, cp, path, st, fd, plan, end, parsed, session_id)
        report.bytes += window.read_bytes
        if plan.mode == "new":
            report.new += 1
        elif plan.mode == "grown":
            report.grown += 1
    finally:
        os.close(fd)


def _boundary_lookup(
    checkpoints: Checkpoints, session_key: int | None
) -> Callable[[str], tuple[bool, str | None]] | None:
    if session_key is None:
        return None
    return lambda uid: checkpoints.message_after(session_key, uid)


def _record(
    checkpoints: Checkpoints,
    cp: Checkpoint | None,
    path: Path,
    st: os.stat_result,
    fd: int,
    plan: _Plan,
    end: int,
    parsed: Any,
    session_id: str | None,
) -> None:
    state = None if parsed is None else parsed.resume
    if state is not None and "objects" not in state:
        state = None  # entries not read to the end: cannot resume from here
    fmt = parsed.source_format if parsed is not None else (cp.format if cp else None)
    if parsed is None and cp is not None:
        state = cp.state
    lines = int(state.get("lines", 0)) if state else 0
    checkpoints.put(
        Checkpoint(
            path=str(path),
            kind="jsonl",
            format=fmt,
            device=st.st_dev,
            inode=st.st_ino,
            size=st.st_size,
            mtime_ns=st.st_mtime_ns,
            byte_offset=end,
            lines=lines,
            tail_sha256=_tail_hash(fd, end) if end else None,
            state=state,
            session_id=(
                checkpoints.session_key(session_id)
                if session_id is not None
                else (cp.session_id if cp else None)
            ),
            status="ok",
        )
    )
