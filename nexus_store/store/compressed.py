"""Large message content kept zstd-compressed in SQLite (schema 0065, issue 17).

SQLite stores text as it is given, and message content is most of a store's bytes.
A message whose content is at least `THRESHOLD` (512) bytes of UTF-8 keeps it in
``messages.content_zstd`` (zstd, level `LEVEL`) instead of in its plain column: the
``text`` column for the kinds ``string``, ``text_block`` and ``bash_output``, and
``content_json`` for the kind ``json``. A ``json`` message's flattened text (what
search indexes) is stored nowhere: `rows.json_content_text` derives it from the
content, as the write path did. Columns people filter on (role, tool_name, model,
tokens, timestamps, ids) stay plain. PostgreSQL keeps every value plain (TOAST
compresses large values there); its ``content_zstd`` stays NULL.

Readers get the plain values back through SQL functions that `register` puts on every
connection the store opens (and the Datasette and sqlite-utils plugins on theirs):

* ``nexus_unzstd(blob)``: the text of a compressed value (``zstandard.decompress(blob)
  .decode()`` in Python); ``nexus_unzstd(blob, key)`` names message ``key`` when the
  blob is damaged;
* ``nexus_message_text(content_kind, content_json, content_zstd, key)``: the text of a
  message whose ``text`` column is NULL (decompressed, or derived from the content).

The view ``messages_text`` (schema 0065) shows ``messages`` with both columns plain;
the message search index reads its text from that view. A blob that cannot be
decompressed is reported as `ContentCorrupt` naming the message, never as a driver
traceback: the function records what failed (`take_failure`) before SQLite turns its
exception into "user-defined function raised exception".
"""

from __future__ import annotations

import functools
import threading
from collections.abc import Iterable
from typing import Any

from nexus_store import jsoncodec
from nexus_store.errors import ContentCorrupt
from nexus_store.rows import json_content_text

__all__ = [
    "LEVEL",
    "TEXT_KINDS",
    "THRESHOLD",
    "compress",
    "decompress",
    "is_large",
    "message_text",
    "pack_row",
    "pack_rows",
    "register",
    "take_failure",
]

THRESHOLD = 512
"""Content of at least this many bytes (UTF-8) is stored compressed.

Measured on the benchmark history (benchmarks/README.md, issue 17): at 1,024 bytes the
store was 1.01x its JSONL, at 512 bytes 0.97x (values of 512-1,023 bytes compress to
about half); below that zstd gains less per call, and every compressed value costs its
reads a function call.
"""
LEVEL = 3
"""zstd's default level: about 0.38x on transcript text at hundreds of MB/s."""
TEXT_KINDS = frozenset({"string", "text_block", "bash_output"})
"""Content kinds whose content is the ``text`` column (``json`` is ``content_json``)."""

_local = threading.local()  # per-thread zstd contexts (not shareable) and the last failure


@functools.cache
def _stdlib_zstd() -> Any:
    # The standard library's binding of the same reference library (Python 3.14+), or
    # None. Imported, like zstandard, by the first value compressed or read: opening a
    # store and `context status` load neither (issue 17: start-up).
    try:
        from compression import zstd  # type: ignore[import-not-found,unused-ignore]  # 3.14+
    except ImportError:
        return None
    return zstd


def _compress_bytes(data: bytes) -> bytes:
    stdlib = _stdlib_zstd()
    if stdlib is not None:
        return bytes(stdlib.compress(data, level=LEVEL))
    import zstandard  # Python < 3.14 (a core dependency there)

    found = getattr(_local, "compressor", None)
    if found is None:
        found = _local.compressor = zstandard.ZstdCompressor(level=LEVEL)
    return bytes(found.compress(data))


def _decompress_bytes(blob: bytes) -> bytes:
    stdlib = _stdlib_zstd()
    if stdlib is not None:
        return bytes(stdlib.decompress(blob))
    import zstandard

    found = getattr(_local, "decompressor", None)
    if found is None:
        found = _local.decompressor = zstandard.ZstdDecompressor()
    return bytes(found.decompress(blob))


def is_large(value: str) -> bool:
    """Whether a stored string is at least `THRESHOLD` bytes of UTF-8 (then it is compressed).

    Args:
        value: A text or content_json value (always UTF-8 encodable: `rows` escapes or
            replaces lone surrogates).

    Returns:
        True when it goes to ``content_zstd``.
    """
    size = len(value)
    if size >= THRESHOLD:  # every character is at least one byte
        return True
    if size * 4 < THRESHOLD:  # and at most four
        return False
    return len(value.encode("utf-8")) >= THRESHOLD


def compress(value: str) -> bytes:
    """A string as one zstd frame (level `LEVEL`, content size recorded)."""
    return _compress_bytes(value.encode("utf-8"))


def decompress(blob: bytes, key: int | None = None) -> str:
    """The string `compress` made of ``blob``.

    Args:
        blob: A ``content_zstd`` value.
        key: The message's row key, named in the error.

    Raises:
        ContentCorrupt: If the blob is not a zstd frame of UTF-8 text.
    """
    try:
        return _decompress_bytes(blob).decode("utf-8")
    except Exception as err:  # zstandard.ZstdError, compression.zstd.ZstdError, not UTF-8
        what = "a message" if key is None else f"message row {key}"
        raise ContentCorrupt(
            f"the compressed content of {what} cannot be read ({err}); the database is "
            "damaged there: restore it from a backup (`nexus-store doctor` lists such rows)"
        ) from None


def message_text(
    content_kind: str | None, content_json: str | None, content_zstd: bytes | None, key: Any
) -> str | None:
    """The text of a message whose ``text`` column is NULL: decompressed or derived.

    Args:
        content_kind: How the content is stored.
        content_json: The plain content JSON (kind ``json``, below the threshold).
        content_zstd: The compressed content, if any.
        key: The message's row key (for errors).

    Returns:
        The text search indexes for the message (None when it has none).

    Raises:
        ContentCorrupt: If the blob cannot be read.
    """
    if content_kind == "json":
        payload = content_json if content_zstd is None else decompress(content_zstd, key)
        return None if payload is None else json_content_text(jsoncodec.loads(payload))
    if content_zstd is None:
        return None
    return decompress(content_zstd, key)


def pack_row(row: dict[str, Any]) -> None:
    """Give a `rows.encode_message` row its SQLite form (in place).

    A ``json`` message loses its ``text`` (derived when needed); content of at least
    `THRESHOLD` bytes moves to ``content_zstd``. Doctor checks stored rows against
    this function.
    """
    kind = row["content_kind"]
    if kind == "json":
        row["text"] = None
        column = "content_json"
    elif kind in TEXT_KINDS:
        column = "text"
    else:
        return
    value = row[column]
    if value is not None and is_large(value):
        row["content_zstd"] = compress(value)
        row[column] = None


def pack_rows(rows: Iterable[dict[str, Any]]) -> None:
    """`pack_row` for each row."""
    for row in rows:
        pack_row(row)


def take_failure() -> ContentCorrupt | None:
    """The error a registered function met in this thread, once (then forgotten)."""
    failure: ContentCorrupt | None = getattr(_local, "failure", None)
    _local.failure = None
    return failure


def _recording(func: Any) -> Any:
    def call(*args: Any) -> Any:
        try:
            return func(*args)
        except ContentCorrupt as err:
            _local.failure = err
            raise

    return call


def _unzstd(blob: bytes | None, key: int | None = None) -> str | None:
    return None if blob is None else decompress(blob, key)


def _zstd(value: str | None) -> bytes | None:
    return None if value is None else compress(value)


def _large(value: str | None) -> int:
    return int(value is not None and is_large(value))


def register(conn: Any) -> None:
    """Put the store's SQL functions on a SQLite connection (see the module docstring).

    ``nexus_zstd(text)`` and ``nexus_is_large(text)`` serve the migration that
    compresses an existing store (schema 0065).
    """
    unzstd = _recording(_unzstd)
    conn.create_function("nexus_unzstd", 1, unzstd, deterministic=True)
    conn.create_function("nexus_unzstd", 2, unzstd, deterministic=True)
    conn.create_function("nexus_message_text", 4, _recording(message_text), deterministic=True)
    conn.create_function("nexus_zstd", 1, _zstd, deterministic=True)
    conn.create_function("nexus_is_large", 1, _large, deterministic=True)
