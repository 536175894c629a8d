"""Search snippets in bounded time, whatever the size of the matching text.

FTS5's ``snippet()`` scores every window of the document against every hit in it,
so its cost grows with the square of the hits in one document: a 1 MB tool output
repeating a word took over 300 s (issue 15, item 1). The search query ranks with
FTS5 and asks ``snippet()`` only for texts of at most `WINDOW_CHARS` characters;
for a longer text this module finds the first hit of the query's words with one
regular-expression scan (linear), cuts a window of `WINDOW_CHARS` characters around
it, and runs ``snippet()`` on that window alone, in a private in-memory FTS5 table
with the same tokenizer. The snippet is therefore FTS5's own (same markers, same
ellipsis, same tokenizer), computed over a bounded text.
"""

from __future__ import annotations

import re
import sqlite3
import unicodedata

__all__ = ["WINDOW_CHARS", "WindowSnippets", "first_hit", "query_terms"]

WINDOW_CHARS = 2048
"""Texts up to this many characters get FTS5's snippet directly; longer ones a window of it.

FTS5's snippet over 2,000 characters that repeat the matched word costs about 30 ms
(measured: 4,000 characters 130 ms, 16,000 characters 2.2 s).
"""

_TOKENIZE = "unicode61 remove_diacritics 2"  # as schema/0002_search.sql declares
_OPERATORS = {"AND", "OR", "NOT", "NEAR"}
# A word of the query: a quoted phrase, or a bare word with an optional prefix star.
_QUERY_PART = re.compile(r'"((?:[^"]|"")*)"(\*?)|([^\W_]+)(\*?)')
_WORD = re.compile(r"[^\W_]+")
_NON_ASCII_WORD = re.compile(r"[^\W_]*[^\x00-\x7f][^\W_]*")


def _fold(text: str) -> str:
    """Case- and diacritic-fold as unicode61 with remove_diacritics does."""
    decomposed = unicodedata.normalize("NFKD", text.casefold())
    return "".join(ch for ch in decomposed if not unicodedata.combining(ch))


def query_terms(query: str) -> list[tuple[str, bool]]:
    """The words an FTS5 query looks for, each with whether it is a prefix.

    Operators (AND, OR, NOT, NEAR) are left out, and so are the words right after
    NOT; a phrase gives each of its words (its last one a prefix when starred).

    Args:
        query: An FTS5 query.

    Returns:
        ``(folded word, is_prefix)`` pairs, in query order, without repeats.

    Example:
        >>> query_terms('"Permission denied" OR migrat* NOT sqlite')
        [('permission', False), ('denied', False), ('migrat', True)]
    """
    terms: list[tuple[str, bool]] = []
    negate = False
    for match in _QUERY_PART.finditer(query):
        phrase, phrase_star, word, word_star = match.groups()
        if word is not None and word in _OPERATORS:
            negate = word == "NOT"
            continue
        if negate:
            negate = False
            continue
        if phrase is not None:
            words = _WORD.findall(phrase.replace('""', '"'))
            found = [(_fold(w), False) for w in words]
            if found and phrase_star:
                found[-1] = (found[-1][0], True)
        else:
            found = [(_fold(word), bool(word_star))]
        terms.extend(term for term in found if term not in terms)
    return terms


def first_hit(text: str, terms: list[tuple[str, bool]]) -> int | None:
    """The character offset of the first word of ``text`` matching a term, or None.

    A linear scan of a case-insensitive regular expression, then (for a word whose
    diacritics differ from the term's, as ``Café`` for ``cafe``) a scan of the words
    holding a non-ASCII character, folded as the tokenizer folds them.
    """
    if not terms:
        return None
    parts = [re.escape(word) + ("" if prefix else r"(?![^\W_])") for word, prefix in terms]
    pattern = re.compile(r"(?<![^\W_])(?:" + "|".join(parts) + ")", re.IGNORECASE)
    match = pattern.search(text)
    first = None if match is None else match.start()
    for word in _NON_ASCII_WORD.finditer(text, 0, len(text) if first is None else first):
        folded = _fold(word.group())
        if any(folded.startswith(t) if prefix else folded == t for t, prefix in terms):
            return word.start()
    return first


def _window(text: str, hit: int | None) -> tuple[int, int]:
    """A window of at most WINDOW_CHARS around ``hit``, cut at whitespace where possible."""
    if hit is None:
        hit = 0
    start = max(0, hit - WINDOW_CHARS // 4)
    end = min(len(text), start + WINDOW_CHARS)
    if start > 0:  # do not start inside a word
        space = text.find(" ", start, hit)
        start = space + 1 if space != -1 else start
    if end < len(text):
        space = text.rfind(" ", hit, end)
        end = space if space > hit else end
    return start, end


class WindowSnippets:
    """FTS5 snippets of long texts, made from a bounded window around the first hit.

    Holds a private in-memory database with one FTS5 table; each call indexes one
    window under a new rowid and asks ``snippet()`` for that row with the caller's
    query. One instance serves one search (at most ``limit`` windows).
    """

    def __init__(self) -> None:
        self._rowid = 0
        self._conn = sqlite3.connect(":memory:", isolation_level=None)
        self._conn.execute(
            f"create virtual table window_fts using fts5(text, tokenize = '{_TOKENIZE}')"
        )

    def close(self) -> None:
        """Close the private database."""
        self._conn.close()

    def snippet(
        self, text: str, query: str, markers: tuple[str, str], tokens: int, ellipsis: str = "…"
    ) -> str:
        """FTS5's snippet of ``query`` over the window of ``text`` around its first hit.

        Args:
            text: The whole matching text (any length).
            query: The FTS5 query that matched it.
            markers: Text put before and after each match.
            tokens: Words in the snippet (1 to 64).
            ellipsis: Put where the snippet cuts the text.

        Returns:
            The snippet; the start of the window (cut to ``tokens`` words) when the
            window holds no match FTS5 recognises.
        """
        start, end = _window(text, first_hit(text, query_terms(query)))
        piece = text[start:end]
        self._rowid += 1
        self._conn.execute(
            "insert into window_fts (rowid, text) values (?, ?)", [self._rowid, piece]
        )
        row = self._conn.execute(
            "select snippet(window_fts, 0, ?, ?, ?, ?) from window_fts "
            "where window_fts match ? and rowid = ?",
            [markers[0], markers[1], ellipsis, tokens, query, self._rowid],
        ).fetchone()
        if row is None:
            snippet = " ".join(piece.split()[:tokens])
            if end < len(text) or len(snippet) < len(piece.strip()):
                snippet += ellipsis
        else:
            snippet = str(row[0])
            if end < len(text) and not snippet.endswith(ellipsis):
                snippet += ellipsis
        if start > 0 and not snippet.startswith(ellipsis):
            snippet = ellipsis + snippet
        return snippet
