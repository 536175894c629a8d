"""The Datasette plugin: nexus_store's SQL functions on every connection Datasette opens.

SQLite stores large message content zstd-compressed (schema 0065, issue 17); the view
``messages_text``, the message search index's snippets and the canned queries read the
plain text through ``nexus_unzstd`` and ``nexus_message_text``
(`nexus_store.store.compressed`). Installed with nexus_store, Datasette finds this
module through the ``datasette`` entry point in pyproject.toml.
"""

from __future__ import annotations

from typing import Any

from datasette import hookimpl  # type: ignore[import-untyped]

from nexus_store.store import compressed

__all__ = ["prepare_connection"]


@hookimpl  # type: ignore[untyped-decorator]
def prepare_connection(conn: Any) -> None:
    """Register the functions on a connection Datasette opened (its plugin hook)."""
    compressed.register(conn)
