"""The dialects: declared capabilities and driver errors as nexus_store's (issue 14).

Each backend's errors leave `Handle.execute` as nexus_store's: a lock held too long
is `DatabaseBusy` (retryable, naming the file or server), a broken uniqueness rule
a `ConstraintViolation`, and a store opened with another token counter than its
own a `CounterMismatch`; each is a `NexusError`, as the errors they replace were.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from pathlib import Path

import pytest

from nexus_store import (
    ConstraintViolation,
    CounterMismatch,
    DatabaseBusy,
    NexusError,
    Store,
)
from nexus_store.store import db as db_module
from nexus_store.store import pg
from tests.test_conformance import BACKENDS, open_backend

pytest_plugins = ["tests.pg_server"]


@pytest.fixture(params=BACKENDS)
def backend(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Store]:
    store = open_backend(request.param, request, tmp_path)
    try:
        yield store
    finally:
        store.close()


def user(text: str) -> dict[str, object]:
    return {"role": "user", "content": text, "timestamp": 0}


class TestCapabilities:
    def test_declared_per_backend(self, backend: Store) -> None:
        caps = backend.capabilities
        sqlite = backend.dialect.name == "sqlite"
        assert (caps.gc, caps.fts_bm25, caps.file_checks, caps.nul_in_text) == (sqlite,) * 4

    def test_a_missing_capability_refuses_in_one_line(self, backend: Store) -> None:
        s = backend.create_session()
        backend.append_message(s.id, user("hi"))
        if backend.capabilities.gc:
            assert backend.gc(s.id).dead_branch_turns == 0
        else:
            with pytest.raises(NexusError, match="not available on PostgreSQL yet"):
                backend.gc(s.id)


class TestDriverErrors:
    def test_integrity_error_is_a_constraint_violation(self, backend: Store) -> None:
        with pytest.raises(ConstraintViolation) as caught:
            backend.handle.execute(
                "insert into settings (key, value) values ('token_counter', 'x')"
            )
        assert isinstance(caught.value, NexusError)
        assert not isinstance(caught.value, sqlite3.Error)
        assert backend.handle.where in str(caught.value)

    def test_the_store_is_usable_after_a_translated_error(self, backend: Store) -> None:
        s = backend.create_session(id="same")
        with pytest.raises(NexusError, match="already exists"):
            backend.create_session(id="same")
        assert backend.append_message(s.id, user("still writes")).seq == 0

    def test_a_counter_mismatch_names_both_counters(self, backend: Store) -> None:
        if backend.dialect.name == "sqlite":
            assert backend.filename is not None
            target = str(backend.filename)
        else:
            target = backend.url  # type: ignore[attr-defined]  # a PostgresStore
        with pytest.raises(CounterMismatch) as caught:
            Store(target, counter="cl100k_base")
        err = caught.value
        assert isinstance(err, NexusError)
        assert (err.recorded, err.requested) == ("chars4", "cl100k_base")
        assert err.where == backend.handle.where


class TestBusy:
    def test_sqlite_lock_held_too_long_is_database_busy(
        self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        path = tmp_path / "busy.db"
        monkeypatch.setattr(db_module, "BUSY_RETRY_SECONDS", 0.3)
        with Store(path, counter="chars4", busy_timeout=0.05) as store:
            s = store.create_session()
            holder = sqlite3.connect(path, isolation_level=None)
            holder.execute("begin immediate")
            try:
                with pytest.raises(DatabaseBusy) as caught:
                    store.append_message(s.id, user("waits"))
            finally:
                holder.execute("rollback")
                holder.close()
            err = caught.value
            assert isinstance(err, NexusError) and err.retryable
            assert err.where == str(path) and str(path) in str(err)
            assert store.append_message(s.id, user("after")).seq == 0  # retry works

    def test_postgres_row_lock_timeout_is_database_busy(
        self, request: pytest.FixtureRequest
    ) -> None:
        url = request.getfixturevalue("pg_server").create_schema()
        with Store(url, counter="chars4") as first, Store(url, counter="chars4") as second:
            s = first.create_session()
            second.conn.raw.execute("set lock_timeout = '200ms'")
            with first.atomic():
                first.conn.execute("select id from sessions where uid = ? for update", [s.id])
                with pytest.raises(DatabaseBusy) as caught:
                    second.append_message(s.id, user("waits"))
            assert caught.value.retryable and caught.value.where == second.handle.where
            assert second.handle.where == pg.redact(url)  # never the password
            assert second.append_message(s.id, user("after")).seq == 0


class TestNarrowInserts:
    """Appends name only the columns that hold a value (sql.insert_rows_sql, issue 17)."""

    def test_no_turn_or_message_column_has_a_default(self, backend: Store) -> None:
        # A column left out of an insert must read NULL, exactly as an explicit NULL: a
        # default added by a later migration would silently change what appends store.
        if backend.handle.dialect.name == "sqlite":
            defaults = [
                (table, r[1], r[4])
                for table in ("turns", "messages")
                for r in backend.conn.execute(f"pragma table_info({table})").fetchall()
                if r[4] is not None
            ]
        else:
            defaults = backend.handle.execute(
                "select table_name, column_name, column_default from information_schema.columns "
                "where table_schema = current_schema() and table_name in ('turns', 'messages') "
                "and column_default is not null and is_identity = 'NO' "
                "and column_name <> 'id'"
            ).fetchall()
        assert defaults == []

    def test_turns_of_every_shape_read_back_whole(self, backend: Store) -> None:
        s = backend.create_session()
        plain = backend.append_message(s.id, user("plain"))
        rich = backend.append_messages(
            s.id,
            [
                {"role": "user", "content": "with a tool", "timestamp": 1},
                {
                    "role": "assistant",
                    "content": [{"type": "toolCall", "id": "c1", "name": "ls", "arguments": {}}],
                    "model": "m",
                    "provider": "p",
                    "api": "a",
                    "stopReason": "toolUse",
                    "usage": {"input": 3, "output": 4, "cost": {"total": 0.5}},
                    "timestamp": 2,
                },
                {
                    "role": "toolResult",
                    "toolCallId": "c1",
                    "toolName": "ls",
                    "content": [{"type": "text", "text": "x" * 2000}],
                    "isError": True,
                    "timestamp": 3,
                },
            ],
        )
        backend.append_entry(s.id, {"type": "model_change", "provider": "p", "modelId": "m2"})
        backend.append_message(s.id, user("again"))  # the first shape, prepared before
        got = backend.get_turn(s.id, rich.id)
        assert got.entry["messages"][1]["usage"]["cost"] == {"total": 0.5}
        assert got.entry["messages"][2]["isError"] is True
        assert got.entry["messages"][2]["content"][0]["text"] == "x" * 2000
        assert backend.get_turn(s.id, plain.id).entry["message"]["content"] == "plain"
        ctx = backend.context(s.id)
        assert [m["role"] for m in ctx.messages] == [
            "user",
            "user",
            "assistant",
            "toolResult",
            "user",
        ]
        assert ctx.model == {"provider": "p", "modelId": "m2"}
