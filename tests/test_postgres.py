"""What is particular to PostgreSQL: concurrent writer processes, migrations, copy, CLI, dialect."""

from __future__ import annotations

import io
import json
import multiprocessing as mp
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
from click.testing import CliRunner

from nexus_store import ConflictError, NexusError, SchemaOutOfDate, Store, StoreOpenError
from nexus_store.cli import cli
from nexus_store.store import pg
from nexus_store.store.copy import Copy
from nexus_store.store.dialect import PostgresDialect, SqliteDialect
from nexus_store.store.pgstore import PostgresStore, pg_schema_files

if TYPE_CHECKING:
    from tests.pg_server import PgServer

pytest_plugins = ["tests.pg_server"]

FIXTURES = Path(__file__).parent / "fixtures" / "jsonl"


def user(text: str, ts: int = 0) -> dict[str, Any]:
    return {"role": "user", "content": text, "timestamp": ts}


# -- concurrency: real processes, one connection each ----------------------------------


def _writer(url: str, session_id: str, parent: str | None, name: str, count: int) -> list[str]:
    ids = []
    with Store(url) as store:
        for i in range(count):
            if parent is None:
                turn = store.append_message(session_id, user(f"{name}-{i}", i))
            else:
                turn = store.append_message(session_id, user(f"{name}-{i}", i), parent_id=parent)
            ids.append(turn.id)
    return ids


def _run(jobs: list[tuple[str, str, str | None, str, int]]) -> list[list[str]]:
    ctx = mp.get_context("spawn")
    with ctx.Pool(len(jobs)) as pool:
        results = [pool.apply_async(_writer, job) for job in jobs]
        return [r.get(timeout=300) for r in results]


class TestConcurrency:
    @pytest.mark.slow
    def test_writer_processes_on_one_session_lose_nothing(self, pg_url: str) -> None:
        with Store(pg_url, counter="chars4") as store:
            sid = store.create_session().id
        written = _run([(pg_url, sid, None, f"w{n}", 100) for n in range(4)])
        with Store(pg_url) as store:
            turns = list(store.iter_turns(sid))
            assert len(turns) == 400
            assert {t.id for t in turns} == {i for ids in written for i in ids}
            # appends to the active leaf serialize on the session row: one chain
            assert len(store.leaves(sid)) == 1
            assert [t.id for t in store.path(sid)] == [t.id for t in turns]
            assert [t.seq for t in turns] == list(range(400))

    @pytest.mark.slow
    def test_writer_processes_on_one_parent_make_siblings(self, pg_url: str) -> None:
        with Store(pg_url, counter="chars4") as store:
            sid = store.create_session().id
            root = store.append_message(sid, user("root")).id
        written = _run([(pg_url, sid, root, f"w{n}", 60) for n in range(4)])
        with Store(pg_url) as store:
            children = store.children(sid, root)
            assert len(children) == 240
            assert {c.id for c in children} == {i for ids in written for i in ids}
            for child in children[:20]:
                assert [t.id for t in store.path(sid, child.id)] == [root, child.id]

    @pytest.mark.slow
    def test_writer_processes_on_many_sessions(self, pg_url: str) -> None:
        with Store(pg_url, counter="chars4") as store:
            sids = [store.create_session().id for _ in range(4)]
        _run([(pg_url, sid, None, "w", 100) for sid in sids])
        with Store(pg_url) as store:
            for sid in sids:
                assert len(store.path(sid)) == 100 and len(store.leaves(sid)) == 1

    def test_no_global_lock_only_the_session_waits(self, pg_url: str) -> None:
        with Store(pg_url, counter="chars4") as a, Store(pg_url) as b:
            s1, s2 = a.create_session().id, a.create_session().id
            done = threading.Event()

            def append_to_s1() -> None:
                b2 = Store(pg_url)
                try:
                    b2.append_message(s1, user("waited"))
                finally:
                    b2.close()
                done.set()

            with a.atomic():
                a.append_message(s1, user("holding s1"))
                # another session of the same database is not blocked ...
                started = time.monotonic()
                b.append_message(s2, user("free"))
                # nor is a fork of the locked session (its foreign key check passes)
                b.create_session(parent_session=s1)
                assert time.monotonic() - started < 2
                # ... the same session waits for the holder's commit
                thread = threading.Thread(target=append_to_s1)
                thread.start()
                assert not done.wait(0.5)
            thread.join(30)
            assert done.is_set()
            assert [m["content"] for m in b.context(s1).messages] == ["holding s1", "waited"]

    @pytest.mark.slow
    def test_processes_opening_a_new_database_migrate_it_once(self, pg_server: PgServer) -> None:
        url = pg_server.create_schema()
        ctx = mp.get_context("spawn")
        with ctx.Pool(4) as pool:
            results = [pool.apply_async(_open_and_count, (url,)) for _ in range(4)]
            assert [r.get(timeout=120) for r in results] == [0, 0, 0, 0]
        with Store(url) as store:
            assert isinstance(store, PostgresStore)
            assert store.applied_migrations() == [p.stem for p in pg_schema_files()]


def _open_and_count(url: str) -> int:
    with Store(url, counter="chars4") as store:
        return len(store.list_sessions())


# -- opening and migrations ------------------------------------------------------------


class TestOpening:
    def test_reopening_is_a_no_op_and_keeps_the_counter(self, pg_url: str) -> None:
        with Store(pg_url, counter="chars4") as store:
            sid = store.create_session().id
        with Store(pg_url) as store:
            assert store.counter.name == "chars4"
            assert store.get_session(sid).id == sid
            assert store.applied_migrations() == [p.stem for p in pg_schema_files()]
        with pytest.raises(NexusError, match="chars4"):
            Store(pg_url, counter="cl100k_base")

    def test_a_newer_database_is_refused(self, pg_url: str) -> None:
        with Store(pg_url, counter="chars4") as store:
            store.conn.execute(
                "insert into nexus_migrations values ('nexus_store', '9999_future', 'x')"
            )
        with pytest.raises(SchemaOutOfDate, match="9999_future"):
            Store(pg_url)

    def test_another_programs_sessions_table_is_refused(self, pg_server: PgServer) -> None:
        import psycopg

        url = pg_server.create_schema()
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute("create table sessions (x int)")
        with pytest.raises(StoreOpenError, match="another program"):
            Store(url)

    def test_unreachable_server_is_one_clear_error(self, tmp_path: Path) -> None:
        url = f"postgresql://nobody:secret@/db?host={tmp_path}"
        with pytest.raises(StoreOpenError, match="cannot connect") as err:
            Store(url)
        assert "secret" not in str(err.value)
        result = CliRunner().invoke(cli, ["--db", url, "sessions"])
        assert result.exit_code == 1 and "cannot connect" in result.output

    def test_memory_is_refused_with_a_url(self, pg_url: str) -> None:
        with pytest.raises(ValueError, match="memory"):
            Store(pg_url, memory=True)


# -- copy ----------------------------------------------------------------------------


def _fill(store: Store) -> list[str]:
    ids = list(store.import_paths([FIXTURES]).sessions)
    s = store.create_session(cwd="/native", title="native")
    a = store.append_message(s.id, user("q", 1))
    store.append_message(
        s.id, {"role": "assistant", "content": [{"type": "text", "text": "x"}], "timestamp": 2}
    )
    store.append_compaction(s.id, "summary", a.id, 10)
    store.append_message(s.id, user("after", 3), parent_id=a.id)
    store.set_label(s.id, a.id, "start")
    store.navigate(s.id, a.id)
    store.record_flush(s.id)
    fork = store.create_session(parent_session=s.id, fork_turn=a.id)
    store.append_message(fork.id, user("in the fork"))
    store.create_session(id="empty")
    return [*ids, s.id, fork.id, "empty"]


def _snapshot(store: Store) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for session in store.list_sessions():
        sid = session.id
        text = io.StringIO()
        store.export_jsonl(sid, text)
        out[sid] = {
            "session": session.model_dump(),
            "backup": store.backup_session(sid),
            "export": text.getvalue(),
            "contexts": {
                t.id: store.context(sid, t.id).to_json_dict() for t in store.iter_turns(sid)
            },
            "status": {t.id: store.status(sid, t.id).model_dump() for t in store.iter_turns(sid)},
            "labels": store.labels(sid),
        }
    return out


class TestCopy:
    def test_sqlite_to_postgres_and_back_is_exact(self, tmp_path: Path, pg_url: str) -> None:
        with Store(tmp_path / "a.db", counter="chars4") as src:
            ids = _fill(src)
            want = _snapshot(src)
            with Store(pg_url, counter="chars4") as dst:
                seen: list[tuple[int, int, int]] = []
                report = src.copy_to(dst, progress=lambda *a: seen.append(a))
                assert report.sessions == len(ids) and report.copied == len(ids)
                assert seen[-1][:2] == (len(ids), len(ids))
                assert _snapshot(dst) == want
                with Store(tmp_path / "back.db", counter="chars4") as back:
                    dst.copy_to(back)
                    assert _snapshot(back) == want

    def test_copy_again_copies_nothing_and_grown_sessions_get_their_tail(
        self, tmp_path: Path, pg_url: str
    ) -> None:
        with (
            Store(tmp_path / "a.db", counter="chars4") as src,
            Store(pg_url, counter="chars4") as dst,
        ):
            ids = _fill(src)
            src.copy_to(dst)
            before = _snapshot(dst)
            again = src.copy_to(dst)
            assert again.turns == 0 and again.skipped == len(ids) and again.copied == 0
            assert _snapshot(dst) == before
            sid = ids[-3]
            src.append_message(sid, user("later"))
            grown = src.copy_to(dst)
            assert grown.turns == 1 and grown.copied == 1
            assert _snapshot(dst) == _snapshot(src)

    def test_an_interrupted_copy_resumes(
        self, tmp_path: Path, pg_url: str, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        with (
            Store(tmp_path / "a.db", counter="chars4") as src,
            Store(pg_url, counter="chars4") as dst,
        ):
            ids = _fill(src)
            original = Copy.copy_session_from
            calls = {"n": 0}

            def failing(self: Copy, source: Copy, row: Any) -> Any:
                calls["n"] += 1
                if calls["n"] == 3:
                    raise KeyboardInterrupt
                return original(self, source, row)

            monkeypatch.setattr(Copy, "copy_session_from", failing)
            with pytest.raises(KeyboardInterrupt):
                src.copy_to(dst)
            assert len(dst.list_sessions()) == 2  # whole sessions only
            monkeypatch.setattr(Copy, "copy_session_from", original)
            report = src.copy_to(dst)
            assert report.skipped == 2 and report.copied == len(ids) - 2
            assert _snapshot(dst) == _snapshot(src)

    def test_a_different_session_with_the_same_id_is_not_overwritten(
        self, tmp_path: Path, pg_url: str
    ) -> None:
        with (
            Store(tmp_path / "a.db", counter="chars4") as src,
            Store(pg_url, counter="chars4") as dst,
        ):
            s = src.create_session(id="same")
            src.append_message(s.id, user("source"))
            dst.create_session(id="same")
            dst.append_message("same", user("other"))
            with pytest.raises(ConflictError, match="not a copy"):
                src.copy_to(dst)
            assert [m["content"] for m in dst.context("same").messages] == ["other"]

    def test_counters_must_match(self, tmp_path: Path, pg_url: str) -> None:
        with (
            Store(tmp_path / "a.db", counter="chars4") as src,
            Store(pg_url, counter="cl100k_base") as dst,
        ):
            src.create_session(id="s")
            dst.create_session(id="holds-counts")  # not empty: its counter stays
            with pytest.raises(NexusError, match="counter"):
                src.copy_to(dst)

    def test_cli_copy_both_ways(self, tmp_path: Path, pg_url: str) -> None:
        db = tmp_path / "a.db"
        with Store(db, counter="chars4") as src:
            _fill(src)
            want = _snapshot(src)
        runner = CliRunner()
        result = runner.invoke(
            cli, ["copy", "--from", str(db), "--to", pg_url, "--json"], catch_exceptions=False
        )
        assert result.exit_code == 0, result.output
        first = json.loads(result.output)
        assert first["copied"] == first["sessions"] > 0
        result = runner.invoke(
            cli, ["copy", "--from", str(db), "--to", pg_url], catch_exceptions=False
        )
        assert result.exit_code == 0 and "0 copied" in result.output
        back = tmp_path / "back.db"
        result = runner.invoke(
            cli, ["copy", "--from", pg_url, "--to", str(back), "-q"], catch_exceptions=False
        )
        assert result.exit_code == 0, result.output
        with Store(back) as store:
            assert store.counter.name == "chars4"
            assert _snapshot(store) == want
        result = runner.invoke(
            cli, ["copy", "--from", str(tmp_path / "missing.db"), "--to", pg_url]
        )
        assert result.exit_code == 1 and "no database" in result.output


# -- the CLI on a URL ------------------------------------------------------------------


class TestCli:
    def test_commands_work_on_a_url(self, pg_url: str) -> None:
        runner = CliRunner()
        assert runner.invoke(cli, ["--db", pg_url, "import", "--example", "-q"]).exit_code == 0
        listed = json.loads(runner.invoke(cli, ["--db", pg_url, "sessions", "--json"]).output)
        sid = listed[0]["id"]
        shown = runner.invoke(
            cli, ["--db", pg_url, "context", "show", sid, "--json"], catch_exceptions=False
        )
        assert shown.exit_code == 0
        with Store(pg_url) as store:
            ctx = store.context(sid)
            assert json.loads(shown.output)["messages"] == ctx.messages
        tree = runner.invoke(cli, ["--db", pg_url, "tree", "latest"], catch_exceptions=False)
        assert tree.exit_code == 0 and sid in tree.output
        status = runner.invoke(cli, ["context", "status", "latest"], env={"NEXUS_STORE_DB": pg_url})
        assert status.exit_code == 0, status.output

    def test_sql_reads_and_refuses_writes(self, pg_url: str) -> None:
        runner = CliRunner()
        runner.invoke(cli, ["--db", pg_url, "import", "--example", "-q"])
        result = runner.invoke(
            cli,
            [
                "--db",
                pg_url,
                "sql",
                "select count(*) as n from turns where kind = ?",
                "-p",
                "message",
                "--json",
            ],
            catch_exceptions=False,
        )
        assert result.exit_code == 0 and json.loads(result.output)[0]["n"] > 0
        for statement in [
            "delete from turns",
            "with x as (delete from turns returning 1) select * from x",
            "select nextval(pg_get_serial_sequence('turns', 'id'))",
        ]:
            refused = runner.invoke(cli, ["--db", pg_url, "sql", statement])
            assert refused.exit_code == 1 and "read-only" in refused.output, statement
        with Store(pg_url) as store:
            assert store.conn.execute("select count(*) from turns").fetchone()[0] > 0


# -- the dialect -----------------------------------------------------------------------


def test_every_named_statement_of_the_dialect_runs(pg_url: str) -> None:
    """Each statement PostgreSQL has its own text for is the one the store runs there.

    (It replaced the regex rewrites of SQLite statements; issue 14.)
    """
    pg._CACHE.clear()
    with Store(pg_url, counter="chars4") as store:
        s = store.create_session()
        a = store.append_message(s.id, user("a"))
        store.append_compaction(s.id, "sum", a.id, 1)
        store.context(s.id)
        store.path(s.id)
        store.import_paths([FIXTURES / "pi-v3-quirks.jsonl"])
    statements = set(pg._CACHE)
    named = PostgresDialect.statements
    for field in named._fields:
        text = getattr(named, field)
        assert text in statements, field
        assert text != getattr(SqliteDialect.statements, field) or field == "insert_turns"


def test_placeholders_leave_literals_and_casts_alone() -> None:
    text = pg.translate("select ':x', '?%' || ? from t where a = :a and b::text like '%'")
    assert text == "select ':x', '?%%' || %s from t where a = %(a)s and b::text like '%%'"


def test_async_facade_and_protocol_on_a_url(pg_url: str) -> None:
    import asyncio

    from nexus_store.aio import AsyncStore
    from nexus_store.protocol import SessionStore

    async def main() -> list[Any]:
        async with AsyncStore(pg_url, counter="chars4") as store:
            assert isinstance(store.store, SessionStore)
            s = await store.create_session()
            await store.append_message(s.id, user("hi"))
            return (await store.context(s.id)).messages

    assert asyncio.run(main()) == [user("hi")]


def test_sqlite_only_features_refuse_clearly(pg_url: str) -> None:
    from nexus_store import NexusError

    with Store(pg_url, counter="chars4") as store:
        sid = store.create_session().id
        with pytest.raises(NexusError, match="not available on PostgreSQL yet"):
            store.gc(sid)


class TestSearch:
    """Search on PostgreSQL: GIN indexes on tsvector, web-search query syntax."""

    @pytest.fixture
    def filled(self, pg_url: str) -> Iterator[tuple[Store, str, str]]:
        with Store(pg_url, counter="chars4") as store:
            a = store.create_session().id
            b = store.create_session().id
            first = store.append_message(a, user("please deploy the walrus service"))
            store.append_message(
                a,
                {
                    "role": "assistant",
                    "content": [{"type": "text", "text": "walrus walrus walrus: deployed"}],
                    "timestamp": 0,
                },
            )
            store.append_message(
                a,
                {
                    "role": "toolResult",
                    "toolCallId": "c1",
                    "toolName": "bash",
                    "content": [{"type": "text", "text": "walrus: permission denied"}],
                    "isError": True,
                    "timestamp": 0,
                },
            )
            store.append_compaction(a, "Goal: deploy the walrus. Done: build.", first.id, 100)
            store.append_message(b, user("one walrus among many other words in session b"))
            yield store, a, b

    def test_messages_and_summaries_best_first(self, filled: tuple[Store, str, str]) -> None:
        store, a, b = filled
        hits = store.search("walrus")
        assert len(hits) == 5
        assert hits[0].snippet.count("[walrus]") == 3  # the densest match ranks first
        assert [h.rank for h in hits] == sorted(h.rank for h in hits)
        assert {h.session_id for h in hits} == {a, b}
        (summary,) = [h for h in hits if h.kind == "compaction"]
        assert summary.role == "compactionSummary" and summary.message_index is None

    def test_filters(self, filled: tuple[Store, str, str]) -> None:
        store, _, b = filled
        assert {h.session_id for h in store.search("walrus", session=b)} == {b}
        (hit,) = store.search("walrus", tool="bash")
        assert hit.role == "toolResult" and hit.tool_name == "bash"
        assert hit.snippet == "[walrus]: permission denied"
        assert [h.kind for h in store.search("walrus", role="compactionSummary")] == ["compaction"]
        assert len(store.search("walrus", role="user")) == 2
        assert len(store.search("walrus", limit=2)) == 2

    def test_web_search_syntax_and_literal(self, filled: tuple[Store, str, str]) -> None:
        store, _, _ = filled
        assert len(store.search('"permission denied"')) == 1
        # -word excludes: only the assistant's message says "deployed" (no stemming:
        # "deploy" in the first message and the summary is another word)
        assert len(store.search("walrus -deployed")) == 4
        assert len(store.search("permission or service")) == 2
        assert len(store.search("permission denied", literal=True)) == 1
        (hit,) = store.search("permission", markers=("<b>", "</b>"), snippet_tokens=3)
        assert "<b>permission</b>" in hit.snippet
        assert store.search("narwhal") == []

    def test_errors_are_clear(self, filled: tuple[Store, str, str]) -> None:
        from nexus_store import InvalidQuery, SessionNotFound

        store, _, _ = filled
        with pytest.raises(InvalidQuery, match="empty"):
            store.search("   ")
        with pytest.raises(SessionNotFound):
            store.search("walrus", session="no-such-session")
        with pytest.raises(InvalidQuery, match="marker"):
            store.search("walrus", markers=('"', '"'))

    def test_cli_search_on_a_url(self, filled: tuple[Store, str, str], pg_url: str) -> None:
        result = CliRunner().invoke(cli, ["--db", pg_url, "search", "permission", "--json"])
        assert result.exit_code == 0, result.output
        (hit,) = json.loads(result.output)
        assert hit["tool_name"] == "bash"


@pytest.mark.parametrize("query", ["a\x00b", "lone \ud800 surrogate"])
def test_a_query_no_index_can_hold_is_one_clear_error_on_both_backends(
    pg_url: str, tmp_path: Path, query: str
) -> None:
    from nexus_store import InvalidQuery

    for target in (pg_url, str(tmp_path / "s.db")):
        with Store(target, counter="chars4") as store:
            s = store.create_session().id
            store.append_message(s, user("some text"))
            with pytest.raises(InvalidQuery, match="NUL or a lone surrogate"):
                store.search(query)
            assert len(store.search("text")) == 1  # the store is still usable


class TestDoctor:
    """doctor on PostgreSQL: the store's own checks (the server checks its files)."""

    def test_finds_and_repairs_path_values(self, pg_url: str) -> None:
        with Store(pg_url, counter="chars4") as store:
            s = store.create_session().id
            store.append_message(s, user("hello world"))
            second = store.append_message(s, user("more words here"))
            store.append_message(s, user("and a third"))
            before = store.context(s)
            clean = store.doctor()
            assert clean.ok and clean.turns_checked == 3 and clean.wal_bytes is None
            store.conn.execute(
                "update turns set path_tokens = path_tokens + 7 where uid = ?", [second.id]
            )
            found = store.doctor()
            assert not found.ok
            # the damaged turn, and its child (whose values follow from the parent's)
            assert second.id in {f.turn for f in found.findings if f.check == "path_values"}
            fixed = store.doctor(fix=True)
            assert fixed.ok and fixed.actions
            assert store.doctor().ok
            assert store.context(s) == before

    def test_cli_doctor_on_a_url(self, pg_url: str) -> None:
        with Store(pg_url, counter="chars4") as store:
            store.append_message(store.create_session().id, user("hi"))
        result = CliRunner().invoke(cli, ["--db", pg_url, "doctor", "--json"])
        assert result.exit_code == 0, result.output
        assert json.loads(result.output)["ok"] is True
