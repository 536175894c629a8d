"""Telling a PostgreSQL URL from a SQLite path, and naming one without its password.

Every command and every `Store()` asks whether its target is a ``postgresql://`` URL
before it knows which backend it opens. These two functions live apart from
`nexus_store.store.pg` (the psycopg adapter, which re-exports them) so that opening
a SQLite file does not import the PostgreSQL module (issue 17: start-up).
"""

from __future__ import annotations

import re

__all__ = ["is_postgres_url", "redact"]

_URL = re.compile(r"^postgres(?:ql)?://", re.IGNORECASE)


def is_postgres_url(target: object) -> bool:
    """Whether ``target`` is a ``postgresql://`` (or ``postgres://``) URL."""
    return isinstance(target, str) and bool(_URL.match(target))


def redact(url: str) -> str:
    """The URL without its password, for messages."""
    return re.sub(r"(://[^:/@]*):[^@/]*@", r"\1:***@", url)
