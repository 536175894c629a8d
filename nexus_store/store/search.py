"""Full-text search over message text and summaries (FTS5, BM25-ranked).

Two external-content FTS5 indexes (schema/0002_search.sql) point at the text the
store already keeps: ``messages_fts`` at ``messages_text.text`` (schema 0065: the
flattened text of a message, text blocks joined, tool output, bash output, decompressed
where it is stored compressed) and ``summaries_fts`` at
``turns.summary`` (compaction and branch-summary turns). Triggers keep the summaries
in sync on every write; messages are indexed in bulk up to a watermark, and a search
first indexes the messages above it (store/indexqueue.py), so it sees every committed
write. Each index is queried in rank order with the filters applied inside SQL; the
two ranked lists are merged by their BM25 score (lower is better, as FTS5 ``rank``).
"""

from __future__ import annotations

import sqlite3
from typing import Any

from pydantic import BaseModel, ConfigDict

from nexus_store.errors import InvalidQuery
from nexus_store.rows import is_storable_text
from nexus_store.store.db import Handle
from nexus_store.store.indexqueue import ensure_indexed
from nexus_store.store.snippets import WINDOW_CHARS, WindowSnippets

__all__ = ["SUMMARY_ROLES", "Search", "SearchHit", "literal_query"]

SUMMARY_ROLES = {"compaction": "compactionSummary", "branch_summary": "branchSummary"}
"""The role a summary hit reports: the role of the message pi's assembly makes of it."""

# Matches in message text, best first. The FTS table drives the loop, so SQLite
# takes its rank order (no sort) and computes a snippet only for rows it returns.
# FTS5's snippet costs the square of the hits in one text (issue 15: 300 s for a
# 1 MB tool output repeating the word), so it runs only on texts of at most :window
# characters; a longer text gives NULL here and its key, and gets its snippet from
# a bounded window (nexus_store.store.snippets).
SEARCH_MESSAGES_SQL = """
select s.uid, t.uid, t.kind, m.role, m.tool_name, m.idx,
       case when length(m.text) <= :window
            then snippet(messages_fts, 0, :open, :close, '…', :tokens) end,
       messages_fts.rank, m.id
from messages_fts
join messages_text m on m.id = messages_fts.rowid
join turns t on t.id = m.turn_id
join sessions s on s.id = t.session_id
where messages_fts match :query
  and messages_fts.rowid between :lo and :hi
  and (:session is null or t.session_id = :session)
  and (:role is null or m.role = :role)
  and (:tool is null or m.tool_name = :tool)
order by messages_fts.rank
limit :limit
"""

# Matches in compaction and branch-summary text, best first (same shape).
SEARCH_SUMMARIES_SQL = """
select s.uid, t.uid, t.kind,
       case t.kind when 'compaction' then 'compactionSummary'
                   when 'branch_summary' then 'branchSummary' end,
       case when length(t.summary) <= :window
            then snippet(summaries_fts, 0, :open, :close, '…', :tokens) end,
       summaries_fts.rank, t.id
from summaries_fts
join turns t on t.id = summaries_fts.rowid
join sessions s on s.id = t.session_id
where summaries_fts match :query
  and summaries_fts.rowid between :lo and :hi
  and (:session is null or t.session_id = :session)
  and (:kind is null or t.kind = :kind)
order by summaries_fts.rank
limit :limit
"""

# PostgreSQL (schema/postgres/0002_search.sql): the same two searches over GIN indexes
# on tsvector expressions. The query is web-search syntax (websearch_to_tsquery); the
# rank is ts_rank_cd negated, so that lower is better as with FTS5; ts_headline makes
# the snippet, with the markers and length in :headline.
PG_SEARCH_MESSAGES_SQL = """
select s.uid, t.uid, t.kind, m.role, m.tool_name, m.idx,
       ts_headline('simple', m.text, q.query, :headline),
       -ts_rank_cd(to_tsvector('simple', coalesce(m.text, '')), q.query)
from (select websearch_to_tsquery('simple', :query) as query) q
cross join messages m
join turns t on t.id = m.turn_id
join sessions s on s.id = t.session_id
where to_tsvector('simple', coalesce(m.text, '')) @@ q.query
  and (:session::bigint is null or t.session_id = :session::bigint)
  and (:role::text is null or m.role = :role::text)
  and (:tool::text is null or m.tool_name = :tool::text)
order by 8, m.id
limit :limit
"""

PG_SEARCH_SUMMARIES_SQL = """
select s.uid, t.uid, t.kind,
       case t.kind when 'compaction' then 'compactionSummary'
                   when 'branch_summary' then 'branchSummary' end,
       ts_headline('simple', t.summary, q.query, :headline),
       -ts_rank_cd(to_tsvector('simple', t.summary), q.query)
from (select websearch_to_tsquery('simple', :query) as query) q
cross join turns t
join sessions s on s.id = t.session_id
where t.summary is not null
  and to_tsvector('simple', t.summary) @@ q.query
  and (:session::bigint is null or t.session_id = :session::bigint)
  and (:kind::text is null or t.kind = :kind::text)
order by 6, t.id
limit :limit
"""

# The smallest and largest key of a session's messages, and of its turns. A session's
# rows are mostly one contiguous key range (one writer at a time), so bounding the FTS
# rowid lets FTS5 rank only that range: a search in one session of a large database
# costs what that session holds, not what the database holds.
SESSION_MESSAGE_BOUNDS_SQL = """
select min(m.id), max(m.id)
from turns t join messages m on m.turn_id = t.id
where t.session_id = ?
"""
SESSION_TURN_BOUNDS_SQL = "select min(id), max(id) from turns where session_id = ?"
# The whole text of a long hit, for its bounded snippet.
MESSAGE_TEXT_SQL = "select coalesce(text, '') from messages_text where id = ?"
SUMMARY_TEXT_SQL = "select coalesce(summary, '') from turns where id = ?"
_ALL_ROWIDS = (-(2**63), 2**63 - 1)

_SYNTAX_HINT = (
    'FTS5 syntax: words (all must match), "a phrase", OR, NOT, prefix*, NEAR(a b); '
    "search with literal=True (CLI: --literal) to match the words as typed"
)
_FTS_ERRORS = ("fts5:", "no such column", "unterminated string", "unknown special query")


class SearchHit(BaseModel):
    """One search match: where it is and a snippet of its text.

    Attributes:
        session_id: The session.
        turn_id: The turn whose message or summary matched.
        kind: The turn's kind (message, custom_message, compaction, branch_summary).
        role: The message role (user, assistant, toolResult, ...); for summaries the
            role of the message assembly makes of them (compactionSummary, branchSummary).
        tool_name: The tool of a tool result, else None.
        message_index: Position of the message within its turn; None for a summary.
        snippet: The matching text around the match, matches wrapped in the markers.
        rank: BM25 score as FTS5 gives it: lower (more negative) is a better match.
    """

    model_config = ConfigDict(frozen=True, extra="forbid", defer_build=True)

    session_id: str
    turn_id: str
    kind: str
    role: str | None
    tool_name: str | None
    message_index: int | None
    snippet: str
    rank: float


def literal_query(text: str) -> str:
    """Turn free text into an FTS5 query matching each word as typed (all must match).

    Args:
        text: Words separated by whitespace; quotes and operators lose their meaning.

    Returns:
        An FTS5 query: each word as a quoted string.

    Raises:
        InvalidQuery: If there are no words.

    Example:
        >>> literal_query("foo-bar c++")
        '"foo-bar" "c++"'
    """
    words = text.split()
    if not words:
        raise InvalidQuery("the search query is empty; give at least one word")
    return " ".join('"' + word.replace('"', '""') + '"' for word in words)


class Search:
    """Full-text search (``Store.search``).

    SQLite searches FTS5 (BM25); a backend without ``capabilities.fts_bm25``
    (PostgreSQL) searches its GIN text indexes with the same filters.

    Args:
        db: The database handle.
    """

    def __init__(self, db: Handle) -> None:
        self.db = db

    def search(
        self,
        query: str,
        *,
        session: str | None = None,
        role: str | None = None,
        tool: str | None = None,
        limit: int = 20,
        literal: bool = False,
        markers: tuple[str, str] = ("[", "]"),
        snippet_tokens: int = 16,
    ) -> list[SearchHit]:
        """Search message text and compaction/branch summaries, best match first.

        Args:
            query: An FTS5 query: words (all must match), ``"a phrase"``, ``OR``,
                ``NOT``, ``prefix*``, ``NEAR(a b)``. On PostgreSQL, web-search syntax
                (words, ``"a phrase"``, ``or``, ``-word``), ranked by ``ts_rank_cd``.
            session: Only this session (its id).
            role: Only messages with this role (``user``, ``assistant``,
                ``toolResult``, ...; ``compactionSummary`` or ``branchSummary`` for
                summaries).
            tool: Only results of this tool (summaries never match).
            limit: At most this many hits.
            literal: Match the words of ``query`` as typed instead of parsing FTS5
                syntax (see `literal_query`).
            markers: Text put before and after each match in the snippet.
            snippet_tokens: Words of context in a snippet (1 to 64).

        Returns:
            The hits ordered by BM25 rank (best first).

        Raises:
            InvalidQuery: If the query is not valid FTS5 syntax, is empty, or
                ``limit``/``snippet_tokens`` is out of range.
            SessionNotFound: If ``session`` does not exist.

        Example:
            >>> from nexus_store import Store
            >>> with Store(memory=True, counter="chars4") as store:
            ...     s = store.create_session()
            ...     _ = store.append_message(s.id, {"role": "user", "content": "the fox jumps"})
            ...     [hit.snippet for hit in store.search("fox")]
            ['the [fox] jumps']
        """
        ensure_indexed(self.db)  # the messages not indexed yet are, first: search is exact
        if limit < 1:
            raise InvalidQuery(f"limit must be at least 1, not {limit}")
        if not 1 <= snippet_tokens <= 64:
            raise InvalidQuery(f"snippet_tokens must be between 1 and 64, not {snippet_tokens}")
        if not all(is_storable_text(text) for text in (query, *markers)):
            raise InvalidQuery(
                f"the search query {query!r} or a snippet marker holds a NUL or a lone "
                "surrogate, which no text index holds"
            )
        if literal:
            query = literal_query(query)
        elif not query.strip():
            raise InvalidQuery("the search query is empty; give at least one word")
        session_key = None if session is None else self.db.session_row(session)[0]
        params: dict[str, Any] = {
            "query": query,
            "session": session_key,
            "open": markers[0],
            "close": markers[1],
            "tokens": snippet_tokens,
            "limit": limit,
            "window": WINDOW_CHARS,
        }
        hits: list[SearchHit] = []
        for row in self._message_matches({**params, "role": role, "tool": tool}):
            hits.append(
                SearchHit(
                    session_id=row[0],
                    turn_id=row[1],
                    kind=row[2],
                    role=row[3],
                    tool_name=row[4],
                    message_index=row[5],
                    snippet=row[6],
                    rank=row[7],
                )
            )
        summary_kinds = {v: k for k, v in SUMMARY_ROLES.items()}
        if tool is None and (role is None or role in summary_kinds):
            kind = None if role is None else summary_kinds[role]
            for row in self._summary_matches({**params, "kind": kind}):
                hits.append(
                    SearchHit(
                        session_id=row[0],
                        turn_id=row[1],
                        kind=row[2],
                        role=row[3],
                        tool_name=None,
                        message_index=None,
                        snippet=row[4],
                        rank=row[5],
                    )
                )
        hits.sort(key=lambda hit: hit.rank)  # stable: messages before summaries on ties
        return hits[:limit]

    def _message_matches(self, params: dict[str, Any]) -> list[tuple[Any, ...]]:
        """Rows of SEARCH_MESSAGES_SQL (or of PG_SEARCH_MESSAGES_SQL)."""
        if not self.db.dialect.capabilities.fts_bm25:
            rows = self.db.execute(PG_SEARCH_MESSAGES_SQL, _pg_search_params(params))
            return list(rows.fetchall())
        bounds = _ALL_ROWIDS
        if params["session"] is not None:
            bounds = self.db.execute(SESSION_MESSAGE_BOUNDS_SQL, [params["session"]]).fetchone()
        rows = self._fts_rows(SEARCH_MESSAGES_SQL, {**params, "lo": bounds[0], "hi": bounds[1]})
        return self._bounded_snippets(rows, 6, params)

    def _summary_matches(self, params: dict[str, Any]) -> list[tuple[Any, ...]]:
        """Rows of SEARCH_SUMMARIES_SQL (or of PG_SEARCH_SUMMARIES_SQL)."""
        if not self.db.dialect.capabilities.fts_bm25:
            rows = self.db.execute(PG_SEARCH_SUMMARIES_SQL, _pg_search_params(params))
            return list(rows.fetchall())
        bounds = _ALL_ROWIDS
        if params["session"] is not None:
            bounds = self.db.execute(SESSION_TURN_BOUNDS_SQL, [params["session"]]).fetchone()
        rows = self._fts_rows(SEARCH_SUMMARIES_SQL, {**params, "lo": bounds[0], "hi": bounds[1]})
        return self._bounded_snippets(rows, 4, params)

    def _bounded_snippets(
        self, rows: list[tuple[Any, ...]], column: int, params: dict[str, Any]
    ) -> list[tuple[Any, ...]]:
        """Fill the snippets the query left out (long texts) from a window; drop the key column.

        Column 6 is a message's snippet (the key is a message), column 4 a summary's.
        """
        if all(row[column] is not None for row in rows):
            return [row[:-1] for row in rows]
        windows = WindowSnippets()
        try:
            out = []
            for row in rows:
                if row[column] is None:
                    text = self.db.execute(
                        MESSAGE_TEXT_SQL if column == 6 else SUMMARY_TEXT_SQL, [row[-1]]
                    ).fetchone()[0]
                    snippet = windows.snippet(
                        text, params["query"], (params["open"], params["close"]), params["tokens"]
                    )
                    row = (*row[:column], snippet, *row[column + 1 :])
                out.append(row[:-1])
            return out
        finally:
            windows.close()

    def _fts_rows(self, sql: str, params: dict[str, Any]) -> list[tuple[Any, ...]]:
        try:
            return list(self.db.execute(sql, params).fetchall())
        except sqlite3.OperationalError as err:
            text = str(err)
            if any(marker in text for marker in _FTS_ERRORS):
                raise InvalidQuery(
                    f"invalid search query {params['query']!r} ({text}). {_SYNTAX_HINT}"
                ) from None
            raise


def _pg_search_params(params: dict[str, Any]) -> dict[str, Any]:
    """The search parameters, with the snippet's markers and length for ts_headline."""
    for marker in (params["open"], params["close"]):
        if '"' in marker or "," in marker:
            raise InvalidQuery(
                f"snippet marker {marker!r} holds a double quote or a comma, which "
                "PostgreSQL's ts_headline options cannot carry; choose another marker"
            )
    words = max(2, int(params["tokens"]))
    headline = (
        f'StartSel="{params["open"]}", StopSel="{params["close"]}", '
        f"MaxWords={words}, MinWords={max(1, words // 2)}, ShortWord=0"
    )
    return {**params, "headline": headline}
