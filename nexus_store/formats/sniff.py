"""Telling a transcript from a file that is not one, before reading it.

`import` and `sync` are pointed at whole folders (``~/.claude/projects``,
``~/.openclaw``), which also hold READMEs, archives, images and other databases.
`check_transcript` looks at the first bytes of a file and says what it is: a JSONL
transcript, an SQLite database (read as an OpenClaw agent database, which tells
another program's database apart), or not a transcript, with why ("not a
transcript: PATH (an archive (gzip))"). It never
rejects a damaged transcript: one readable JSON object line among the first lines
is enough to be read (and its bad lines reported one by one).
"""

from __future__ import annotations

from pathlib import Path

from nexus_store.errors import TranscriptError

__all__ = ["OPENCLAW_STORE", "TRANSCRIPT", "NotATranscript", "check_transcript"]

TRANSCRIPT = "jsonl"
OPENCLAW_STORE = "openclaw_store"

_HEAD = 65536
_ARCHIVES = (
    (b"\x1f\x8b", "gzip"),
    (b"PK\x03\x04", "zip"),
    (b"PK\x05\x06", "zip"),
    (b"7z\xbc\xaf\x27\x1c", "7z"),
    (b"\xfd7zXZ\x00", "xz"),
    (b"BZh", "bzip2"),
    (b"\x28\xb5\x2f\xfd", "zstd"),
    (b"Rar!\x1a\x07", "rar"),
)
_SQLITE = b"SQLite format 3\x00"


class NotATranscript(TranscriptError):
    """A path holds nothing a transcript reader can import (binary, archive, text...)."""

    def __init__(self, path: str | Path, why: str):
        self.why = why
        super().__init__(f"not a transcript: {path} ({why})")
        self.path = str(path)


def check_transcript(path: str | Path) -> str:
    """Say whether a file is a transcript nexus_store can read, from its first bytes.

    Args:
        path: The file.

    Returns:
        `TRANSCRIPT` (JSONL of any supported format) or `OPENCLAW_STORE` (an SQLite
        file: `nexus_store.store.openclaw_source` reads it or says why not).

    Raises:
        NotATranscript: The file is empty, binary, an archive, or text with no JSON
            object line (a README, a log).
        OSError: The file cannot be read.
    """
    with open(path, "rb") as handle:
        head = handle.read(_HEAD)
    if not head:
        return _reject(path, "empty file")
    if head.startswith(_SQLITE):
        # Read as an OpenClaw agent database, which says "not a transcript" itself
        # when it has no transcript_events table (store.openclaw_source).
        return OPENCLAW_STORE
    for magic, name in _ARCHIVES:
        if head.startswith(magic):
            return _reject(path, f"an archive ({name})")
    if len(head) > 262 and head[257:262] == b"ustar":
        return _reject(path, "an archive (tar)")
    if b"\x00" in head:
        return _reject(path, "binary file")
    lines = head.split(b"\n")
    if len(head) == _HEAD and len(lines) > 1:
        lines = lines[:-1]  # the cut-off last line says nothing
    stripped = [line.strip().lstrip(b"\xef\xbb\xbf").strip() for line in lines]
    if any(line.startswith(b"{") for line in stripped):
        return TRANSCRIPT
    if _mostly_undecodable(head):
        return _reject(path, "binary file")
    name = Path(path).name.lower()
    if name.startswith("readme"):
        return _reject(path, "a README")
    return _reject(path, "text with no JSON object line")


def _reject(path: str | Path, why: str) -> str:
    raise NotATranscript(path, why)


def _mostly_undecodable(head: bytes) -> bool:
    text = head.decode("utf-8", "replace")
    bad = text.count("\ufffd")
    return bad > max(8, len(text) // 20)
