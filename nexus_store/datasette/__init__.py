"""Datasette metadata for a nexus_store database: table descriptions and canned queries.

``metadata.json`` (shipped in this package) is written for a database file named
``sessions.db`` (Datasette names a database after its file stem). Its canned
queries are the ones docs/cookbook.md explains: all leaves of a session, the path of
a leaf, what a compaction summarized, tokens and cost per branch, tool failures per
tool, sessions forked from a session, and full-text search. For a file with another
name, print metadata keyed by that name::

    python -m nexus_store.datasette --database mydb > metadata.json
    datasette mydb.db -m metadata.json
"""

from __future__ import annotations

import copy
import json
from importlib import resources
from typing import Any

__all__ = ["DEFAULT_DATABASE", "canned_queries", "metadata"]

DEFAULT_DATABASE = "sessions"
"""The database name metadata.json is keyed by (the stem of ``sessions.db``)."""


def _load() -> dict[str, Any]:
    text = resources.files(__package__).joinpath("metadata.json").read_text(encoding="utf-8")
    data: dict[str, Any] = json.loads(text)
    return data


def metadata(database: str = DEFAULT_DATABASE) -> dict[str, Any]:
    """Return the Datasette metadata, keyed by the given database name.

    Args:
        database: The Datasette database name (the database file's stem).

    Returns:
        A dict for ``datasette -m`` (or the ``databases`` part of ``datasette.yaml``).
    """
    data = _load()
    data["databases"] = {database: data["databases"][DEFAULT_DATABASE]}
    return data


def canned_queries() -> dict[str, dict[str, Any]]:
    """Return the canned queries by name: each has ``sql``, ``title`` and ``description``.

    Example:
        >>> sorted(canned_queries())[:3]
        ['all_leaves', 'branch_costs', 'compaction_summarized']
    """
    queries: dict[str, dict[str, Any]] = _load()["databases"][DEFAULT_DATABASE]["queries"]
    return copy.deepcopy(queries)
