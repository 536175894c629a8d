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
