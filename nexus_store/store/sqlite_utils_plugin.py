"""The sqlite-utils plugin: nexus_store's SQL functions on sqlite-utils' connections.

``sqlite-utils query sessions.db "select text from messages_text ..."`` reads
compressed message content (schema 0065, issue 17) through ``nexus_unzstd`` and
``nexus_message_text`` (`nexus_store.store.compressed`). sqlite-utils finds this
module through the ``sqlite_utils`` entry point in pyproject.toml.
"""

from __future__ import annotations

from typing import Any

from sqlite_utils import hookimpl

from nexus_store.store import compressed

__all__ = ["prepare_connection"]


@hookimpl
def prepare_connection(conn: Any) -> None:
    """Register the functions on a connection sqlite-utils opened (its plugin hook)."""
    compressed.register(conn)
