"""Full-text search: ranking, filters, the indexes kept in sync, errors, migration, CLI."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any, ClassVar

import pytest
from click.testing import CliRunner
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from nexus_store import InvalidQuery, SessionNotFound, Store, migrate
from nexus_store.cli import cli
from nexus_store.errors import TranscriptError
from nexus_store.store.indexqueue import check_message_index
from nexus_store.store.search import literal_query

try:
    from tests.old_schema import copy_to_old_schema
except ImportError:  # tests/ itself on sys.path
    from old_schema import copy_to_old_schema  # type: ignore[no-redef]


def user(text: str) -> dict[str, Any]:
    return {"role": "user", "content": text, "timestamp": 0}


def assistant(text: str) -> dict[str, Any]:
    return {"role": "assistant", "content": [{"type": "text", "text": text}], "timestamp": 0}


def tool_result(tool: str, text: str, *, error: bool = False) -> dict[str, Any]:
    return {
        "role": "toolResult",
        "toolCallId": f"call-{tool}",
        "toolName": tool,
        "content": [{"type": "text", "text": text}],
        "isError": error,
        "timestamp": 0,
    }


def fts_ok(store: Store) -> None:
    """FTS5's own check that each index matches its content exactly (messages: up to the
    watermark, the rest indexed first inside a rolled-back transaction)."""
    assert check_message_index(store.handle) is None
    store.conn.execute(
        "insert into summaries_fts (summaries_fts, rank) values ('integrity-check', 1)"
    )


def _trigger_sql(store: Store) -> str | None:
    row = store.conn.execute(
        "select sql from sqlite_master where name = 'messages_fts_after_insert'"
    ).fetchone()
    return None if row is None else str(row[0])


@pytest.fixture
def filled(store: Store) -> tuple[Store, str, str]:
    a = store.create_session(id="sess-a")
    b = store.create_session(id="sess-b")
    first = store.append_message(a.id, user("please deploy the walrus service"))
    store.append_message(a.id, assistant("walrus walrus walrus: the walrus is deployed"))
    store.append_message(a.id, tool_result("bash", "walrus: permission denied", error=True))
    store.append_message(a.id, tool_result("read", "config of the walrus"))
    store.append_compaction(a.id, "Goal: deploy the walrus. Done: build.", first.id, 100)
    store.append_message(
        b.id, user("a long message that mentions walrus once among many other words")
    )
    return store, a.id, b.id


class TestRanking:
    def test_best_match_first(self, filled: tuple[Store, str, str]) -> None:
        store, _, _ = filled
        hits = store.search("walrus")
        assert hits[0].snippet.count("[walrus]") == 4
        ranks = [hit.rank for hit in hits]
        assert ranks == sorted(ranks)
        # the long message mentioning it once is the weakest message match
        assert hits[-1].session_id == "sess-b" or hits[-1].kind == "compaction"

    def test_hits_carry_their_place(self, filled: tuple[Store, str, str]) -> None:
        store, a, _ = filled
        hit = store.search("permission")[0]
        assert hit.session_id == a
        assert hit.kind == "message"
        assert hit.role == "toolResult"
        assert hit.tool_name == "bash"
        assert hit.message_index == 0
        assert hit.snippet == "walrus: [permission] denied"
        assert store.get_turn(a, hit.turn_id).entry["message"]["toolName"] == "bash"

    def test_summaries_are_searched(self, filled: tuple[Store, str, str]) -> None:
        store, a, _ = filled
        (hit,) = store.search("build")
        assert (hit.kind, hit.role, hit.tool_name, hit.message_index) == (
            "compaction",
            "compactionSummary",
            None,
            None,
        )
        assert hit.turn_id == store.get_session(a).active_leaf

    def test_limit(self, filled: tuple[Store, str, str]) -> None:
        store, _, _ = filled
        assert len(store.search("walrus", limit=2)) == 2
        assert len(store.search("walrus")) == 6

    def test_fts_operators(self, filled: tuple[Store, str, str]) -> None:
        store, _, _ = filled
        assert {h.tool_name for h in store.search("walrus NOT deployed NOT deploy")} >= {"bash"}
        assert len(store.search('"permission denied"')) == 1
        assert len(store.search("perm*")) == 1
        assert len(store.search("permission OR config")) == 2

    def test_snippet_markers(self, filled: tuple[Store, str, str]) -> None:
        store, _, _ = filled
        (hit,) = store.search("permission", markers=("<b>", "</b>"))
        assert hit.snippet == "walrus: <b>permission</b> denied"


class TestFilters:
    def test_session(self, filled: tuple[Store, str, str]) -> None:
        store, _, b = filled
        hits = store.search("walrus", session=b)
        assert [h.session_id for h in hits] == [b]

    def test_session_with_interleaved_writes(self, store: Store) -> None:
        # Session filters bound the FTS rowid range; rows of sessions written in turns
        # interleave inside that range and must still be told apart.
        a, b, empty = (store.create_session(id=x).id for x in ("ia", "ib", "ie"))
        for i in range(5):
            store.append_message(a, user(f"kiwi from a {i}"))
            store.append_message(b, user(f"kiwi from b {i}"))
        store.append_compaction(a, "kiwi summary a", store.path(a)[0].id, 5)
        hits = store.search("kiwi", session=a, limit=100)
        assert {h.session_id for h in hits} == {a} and len(hits) == 6
        assert len(store.search("kiwi", session=b, limit=100)) == 5
        assert store.search("kiwi", session=empty) == []

    def test_unknown_session(self, store: Store) -> None:
        with pytest.raises(SessionNotFound):
            store.search("x", session="nope")

    def test_role(self, filled: tuple[Store, str, str]) -> None:
        store, _, _ = filled
        assert {h.role for h in store.search("walrus", role="toolResult")} == {"toolResult"}
        assert len(store.search("walrus", role="toolResult")) == 2
        (summary,) = store.search("walrus", role="compactionSummary")
        assert summary.kind == "compaction"
        assert store.search("walrus", role="branchSummary") == []

    def test_tool(self, filled: tuple[Store, str, str]) -> None:
        store, _, _ = filled
        hits = store.search("walrus", tool="read")
        assert [(h.tool_name, h.snippet) for h in hits] == [("read", "config of the [walrus]")]

    def test_tool_excludes_summaries(self, filled: tuple[Store, str, str]) -> None:
        store, _, _ = filled
        assert store.search("build", tool="bash") == []


class TestSync:
    def test_every_append_is_searchable(self, store: Store) -> None:
        s = store.create_session().id
        root = store.append_message(s, user("alpha"))
        store.append_entry(s, {"type": "message", "message": assistant("bravo")})
        store.append_messages(s, [user("charlie"), assistant("delta")])
        store.append_entry(
            s, {"type": "custom_message", "customType": "note", "content": "echo", "display": True}
        )
        store.append_compaction(s, "foxtrot summary", root.id, 10)
        store.append_branch_summary(s, root.id, "golf branch summary")
        for word, role in [
            ("alpha", "user"),
            ("bravo", "assistant"),
            ("charlie", "user"),
            ("delta", "assistant"),
            ("echo", "custom"),
            ("foxtrot", "compactionSummary"),
            ("golf", "branchSummary"),
        ]:
            hits = store.search(word)
            assert [h.role for h in hits] == [role], word
        delta = store.search("delta")[0]
        assert delta.message_index == 1
        fts_ok(store)

    def test_imported_entries_are_searchable(self, store: Store) -> None:
        header = {
            "type": "session",
            "version": 3,
            "id": "src-1",
            "timestamp": "2026-01-01T00:00:00Z",
        }
        entries = [
            (
                2,
                {
                    "type": "message",
                    "id": "e1",
                    "parentId": None,
                    "message": user("imported hotel"),
                },
                None,
            ),
            (
                3,
                {
                    "type": "compaction",
                    "id": "e2",
                    "parentId": "e1",
                    "summary": "india summary",
                    "firstKeptEntryId": "e1",
                    "tokensBefore": 5,
                },
                None,
            ),
        ]
        sid, _ = store.ingest(header, entries, source_format="pi", source_id="src-1")
        assert [h.turn_id for h in store.search("hotel")] == ["e1"]
        assert [h.turn_id for h in store.search("india", session=sid)] == ["e2"]
        fts_ok(store)

    def test_store_compaction_and_branch_summary_are_searchable(self, store: Store) -> None:
        s = store.create_session().id
        for i in range(6):
            store.append_message(s, user(f"question {i} about the narwhal migration " * 5))
            store.append_message(s, assistant(f"answer {i} on the narwhal " * 5))
        result = store.compact(s, summarizer="extractive", keep_recent_tokens=30)
        (hit,) = store.search("narwhal", role="compactionSummary")
        assert hit.turn_id == result.turn.id
        first = store.path(s)[0].id
        summary = store.navigate_with_summary(s, first, summarizer="extractive")
        assert summary is not None
        branch_hits = store.search("narwhal", role="branchSummary")
        assert [h.turn_id for h in branch_hits] == [summary.id]
        fts_ok(store)

    def test_imported_files_are_searchable(self, store: Store) -> None:
        fixture = Path(__file__).parent / "fixtures" / "jsonl" / "pi-v3-quirks.jsonl"
        (sid,) = store.import_jsonl(fixture)
        assert store.search("parentId", session=sid)[0].turn_id == "q1"
        assert store.search('"read a.txt"', role="compactionSummary")[0].turn_id == "q4"
        fts_ok(store)

    def test_bulk_import_indexes_once_and_restores_the_trigger(
        self, filled: tuple[Store, str, str], tmp_path: Path
    ) -> None:
        # An import pauses the per-row trigger and indexes its messages in one
        # statement; the trigger is back afterwards, so later appends are indexed.
        store, a, _ = filled
        trigger = _trigger_sql(store)
        lines = [{"type": "session", "version": 3, "id": "bulk", "timestamp": "t"}]
        parent = None
        for i in range(1_200):  # more than two import batches
            lines.append(
                {
                    "type": "message",
                    "id": f"m{i}",
                    "parentId": parent,
                    "timestamp": "t",
                    "message": user(f"bulk kraken number{i}"),
                }
            )
            parent = f"m{i}"
        src = tmp_path / "bulk.jsonl"
        src.write_text("".join(json.dumps(line) + "\n" for line in lines))
        (sid,) = store.import_jsonl(src)
        assert _trigger_sql(store) == trigger
        assert len(store.search("kraken", session=sid, limit=5_000)) == 1_200
        assert [h.turn_id for h in store.search("number777")] == ["m777"]
        assert store.search("walrus", session=a)  # rows indexed before are still there
        store.append_message(a, user("appended after the import: okapi"))
        assert len(store.search("okapi")) == 1
        fts_ok(store)

    def test_failed_import_keeps_the_trigger_and_indexes_nothing(
        self, store: Store, tmp_path: Path
    ) -> None:
        trigger = _trigger_sql(store)
        lines = [{"type": "session", "version": 3, "id": "half", "timestamp": "t"}]
        lines += [
            {
                "type": "message",
                "id": f"m{i}",
                "parentId": f"m{i - 1}" if i else None,
                "message": user(f"lost zebra {i}"),
            }
            for i in range(700)
        ]
        src = tmp_path / "half.jsonl"
        body = "".join(json.dumps(line) + "\n" for line in lines)
        src.write_text(body + "{not json\n")  # a bad last line: strict mode refuses the file
        with pytest.raises(TranscriptError, match=r"half\.jsonl:702"):
            store.import_jsonl(src, strict=True)
        assert _trigger_sql(store) == trigger
        assert store.search("zebra") == []
        assert store.conn.execute("select count(*) from messages").fetchone()[0] == 0
        fts_ok(store)
        s = store.create_session().id
        store.append_message(s, user("a zebra after the failure"))
        assert len(store.search("zebra")) == 1

    def test_deleted_rows_leave_the_index(self, filled: tuple[Store, str, str]) -> None:
        # gc deletes rows; the triggers must forget them exactly (or the index corrupts).
        store, _, b = filled
        with store.atomic():
            store.conn.execute(
                "delete from messages where turn_id in (select t.id from turns t "
                "join sessions s on s.id = t.session_id where s.uid = ?)",
                [b],
            )
        assert {h.session_id for h in store.search("walrus")} == {"sess-a"}
        with store.atomic():
            store.conn.execute("update sessions set active_leaf_id = null")
            store.conn.execute("delete from messages")
            store.conn.execute("delete from turns")
        assert store.search("walrus") == []
        assert store.search("build") == []
        fts_ok(store)

    def test_updated_text_is_reindexed(self, filled: tuple[Store, str, str]) -> None:
        # Turns are immutable, but a repair tool may rewrite a row: stay correct.
        store, _, _ = filled
        with store.atomic():
            store.conn.execute("update messages set text = 'kiwi' where text like '%permission%'")
            store.conn.execute("update turns set summary = 'lima' where kind = 'compaction'")
        assert store.search("permission") == []
        assert len(store.search("kiwi")) == 1
        assert store.search("lima")[0].kind == "compaction"
        fts_ok(store)

    def test_messages_without_text_match_nothing(self, store: Store) -> None:
        s = store.create_session().id
        store.append_message(
            s, {"role": "user", "content": [{"type": "image", "data": "aGk=", "mimeType": "png"}]}
        )
        store.append_message(
            s,
            {
                "role": "assistant",
                "content": [
                    {"type": "toolCall", "id": "c1", "name": "read", "arguments": {"path": "zulu"}}
                ],
            },
        )
        assert store.search("aGk OR png OR zulu OR read") == []
        fts_ok(store)


class TestQueryErrors:
    @pytest.mark.parametrize("query", ["AND", '"unterminated', "foo-bar", "c++", "a.b", "*", "x:y"])
    def test_bad_syntax_is_one_clear_error(
        self, filled: tuple[Store, str, str], query: str
    ) -> None:
        store, _, _ = filled
        with pytest.raises(InvalidQuery, match="invalid search query") as info:
            store.search(query)
        assert "literal" in str(info.value)

    @pytest.mark.parametrize("query", ["", "   "])
    def test_empty_query(self, store: Store, query: str) -> None:
        with pytest.raises(InvalidQuery, match="empty"):
            store.search(query)
        with pytest.raises(InvalidQuery, match="empty"):
            store.search(query, literal=True)

    def test_literal_matches_words_as_typed(self, store: Store) -> None:
        s = store.create_session().id
        store.append_message(s, user("run foo-bar with c++ flags"))
        assert len(store.search("foo-bar c++", literal=True)) == 1
        assert literal_query('say "hi"') == '"say" """hi"""'

    def test_bad_limit(self, store: Store) -> None:
        with pytest.raises(InvalidQuery, match="limit"):
            store.search("x", limit=0)
        with pytest.raises(InvalidQuery, match="snippet_tokens"):
            store.search("x", snippet_tokens=65)


class TestMigration:
    def test_existing_rows_are_indexed_when_0002_applies(
        self, store_path: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        today = store_path.with_name("today.db")
        with Store(today, counter="chars4") as old:
            s = old.create_session(id="old").id
            first = old.append_message(s, user("a note about the yak"))
            old.append_message(s, tool_result("bash", "yak shaved"))
            old.append_compaction(s, "summary: shaving the yak", first.id, 10)
        # the rows as a store of schema 0001 holds them (written before search existed)
        copy_to_old_schema(today, store_path, "0001_initial", monkeypatch)
        conn = sqlite3.connect(store_path)
        tables = {r[0] for r in conn.execute("select name from sqlite_master")}
        conn.close()
        assert "messages_fts" not in tables and "turns" in tables
        with Store(store_path) as new:
            assert "0002_search" in migrate.applied(new.db)
            hits = new.search("yak")
            assert sorted(h.kind for h in hits) == ["compaction", "message", "message"]
            assert new.search("yak", tool="bash")[0].snippet == "[yak] shaved"
            new.append_message("old", user("and a new yak"))
            assert len(new.search("yak")) == 4
            fts_ok(new)

    def test_migrating_twice_is_a_no_op(self, store_path: Path) -> None:
        with Store(store_path, counter="chars4") as first:
            s = first.create_session().id
            first.append_message(s, user("zebra"))
        with Store(store_path) as again:
            assert len(again.search("zebra")) == 1
            assert migrate.applied(again.db).count("0002_search") == 1


class TestCli:
    @pytest.fixture
    def db(self, store_path: Path) -> Path:
        with Store(store_path, counter="chars4") as store:
            s = store.create_session(id="cli-session").id
            store.append_message(s, user("the quick brown fox"))
            store.append_message(s, tool_result("bash", "fox: command not found", error=True))
        return store_path

    def test_json(self, runner: CliRunner, db: Path) -> None:
        result = runner.invoke(
            cli, ["--db", str(db), "search", "fox", "--json"], catch_exceptions=False
        )
        assert result.exit_code == 0, result.output
        hits = json.loads(result.output)
        assert len(hits) == 2
        assert set(hits[0]) == {
            "session_id",
            "turn_id",
            "kind",
            "role",
            "tool_name",
            "message_index",
            "snippet",
            "rank",
        }

    def test_filters(self, runner: CliRunner, db: Path) -> None:
        result = runner.invoke(
            cli,
            [
                "--db",
                str(db),
                "search",
                "fox",
                "--tool",
                "bash",
                "--session",
                "cli-",
                "--role",
                "toolResult",
                "--limit",
                "5",
                "--json",
            ],
            catch_exceptions=False,
        )
        assert result.exit_code == 0, result.output
        assert [h["tool_name"] for h in json.loads(result.output)] == ["bash"]

    def test_table(self, runner: CliRunner, db: Path) -> None:
        result = runner.invoke(cli, ["--db", str(db), "search", "quick"], catch_exceptions=False)
        assert result.exit_code == 0
        assert "the [quick] brown fox" in result.output
        result = runner.invoke(cli, ["--db", str(db), "search", "nothing"], catch_exceptions=False)
        assert result.output.strip() == "no matches"

    def test_bad_query_is_one_line_exit_1(self, runner: CliRunner, db: Path) -> None:
        result = runner.invoke(cli, ["--db", str(db), "search", "fox AND"])
        assert result.exit_code == 1
        assert result.output.startswith("Error: invalid search query")
        assert len(result.output.strip().splitlines()) == 1

    def test_literal(self, runner: CliRunner, db: Path) -> None:
        result = runner.invoke(
            cli,
            ["--db", str(db), "search", "fox: command", "--literal", "--json"],
            catch_exceptions=False,
        )
        assert result.exit_code == 0, result.output
        assert len(json.loads(result.output)) == 1

    def test_help_has_example(self, runner: CliRunner) -> None:
        result = runner.invoke(cli, ["search", "--help"])
        assert result.exit_code == 0
        assert "Example:" in result.output

    def test_read_only_sql_can_query_the_index(self, runner: CliRunner, db: Path) -> None:
        query = "select rowid from messages_fts where messages_fts match 'brown'"
        result = runner.invoke(
            cli, ["--db", str(db), "sql", query, "--json"], catch_exceptions=False
        )
        assert result.exit_code == 0, result.output
        assert len(json.loads(result.output)) == 1


def test_index_does_not_copy_text(store: Store) -> None:
    """External-content indexes: the text lives once, in messages.text."""
    s = store.create_session().id
    store.append_message(s, user("x" * 1000))
    tables = {r[0] for r in store.conn.execute("select name from sqlite_master where type='table'")}
    assert "messages_fts_content" not in tables
    assert isinstance(store.conn, sqlite3.Connection)


class TestSyncProperty:
    """Random appends, branches, compactions and deletes: the index always equals the rows."""

    WORDS: ClassVar[list[str]] = ["alpha", "bravo", "charlie", "delta", "echo"]

    @settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
    @given(
        st.lists(
            st.tuples(
                st.sampled_from(["user", "assistant", "toolResult", "compaction", "delete"]),
                st.lists(st.sampled_from(WORDS), min_size=0, max_size=4),
                st.integers(min_value=0, max_value=50),
            ),
            min_size=1,
            max_size=25,
        )
    )
    def test_search_matches_a_naive_scan(self, ops: list[tuple[str, list[str], int]]) -> None:
        with Store(memory=True, counter="chars4") as store:
            s = store.create_session().id
            for kind, words, pick in ops:
                text = " ".join(words)
                turns = store.path(s)
                if kind == "delete":
                    # what gc does: remove a leaf (nothing refers to a leaf but the session)
                    leaves = store.leaves(s)
                    if leaves:
                        leaf = leaves[pick % len(leaves)]
                        with store.atomic():
                            key = store.conn.execute(
                                "select t.id from turns t join sessions x on x.id = t.session_id "
                                "where x.uid = ? and t.uid = ?",
                                [s, leaf.id],
                            ).fetchone()[0]
                            store.conn.execute(
                                "update sessions set active_leaf_id = "
                                "(select parent_id from turns where id = ?) "
                                "where active_leaf_id = ?",
                                [key, key],
                            )
                            store.conn.execute("delete from messages where turn_id = ?", [key])
                            store.conn.execute("delete from turns where id = ?", [key])
                    continue
                if kind == "compaction":
                    if turns:
                        kept = turns[pick % len(turns)].id
                        store.append_compaction(s, text, kept, 10)
                    continue
                if turns and pick % 3 == 0:
                    store.navigate(s, turns[pick % len(turns)].id)  # branch
                message = (
                    tool_result("bash", text)
                    if kind == "toolResult"
                    else {"role": kind, "content": text}
                )
                store.append_message(s, message)
            fts_ok(store)
            rows = store.conn.execute(
                "select t.uid, coalesce(m.text, t.summary) from turns t "
                "left join messages m on m.turn_id = t.id"
            ).fetchall()
            for word in self.WORDS:
                expected = sorted(uid for uid, text in rows if text and word in text.split())
                found = sorted(h.turn_id for h in store.search(word, limit=1000))
                assert found == expected, word
