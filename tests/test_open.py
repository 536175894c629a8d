"""Opening files: creation with private permissions, refusals that change nothing, migrations."""

from __future__ import annotations

import hashlib
import os
import shutil
import stat
from pathlib import Path

import pytest

from nexus_store import SchemaOutOfDate, Store, StoreOpenError
from nexus_store import migrate as migrate_mod


def digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


class TestCreate:
    def test_new_database_is_private_and_in_wal_mode(self, store_path: Path) -> None:
        with Store(store_path) as store:
            s = store.create_session()
            store.append_message(s.id, {"role": "user", "content": "secret"})
            for suffix in ("", "-wal", "-shm"):
                f = Path(str(store_path) + suffix)
                if f.exists():
                    assert stat.S_IMODE(f.stat().st_mode) & 0o077 == 0, f
            assert store.conn.execute("pragma journal_mode").fetchone()[0] == "wal"
            assert store.conn.execute("pragma foreign_keys").fetchone()[0] == 1

    def test_reopen_keeps_data_and_counter(self, store_path: Path) -> None:
        with Store(store_path, counter="chars4") as store:
            sid = store.create_session().id
            store.append_message(sid, {"role": "user", "content": "x" * 8})
        with Store(store_path) as store:
            assert store.counter.name == "chars4"
            assert store.context(sid).tokens == 2

    def test_other_counter_on_existing_database_is_refused(self, store_path: Path) -> None:
        Store(store_path, counter="chars4").close()
        with pytest.raises(Exception, match="chars4"):
            Store(store_path, counter="cl100k_base")

    def test_world_readable_file_warns(self, store_path: Path) -> None:
        Store(store_path).close()
        store_path.chmod(0o644)
        with pytest.warns(UserWarning, match="readable by other users"):
            Store(store_path).close()


class TestRefusals:
    def test_empty_file(self, tmp_path: Path) -> None:
        f = tmp_path / "empty.db"
        f.write_bytes(b"")
        with pytest.raises(StoreOpenError, match="empty file"):
            Store(f)
        assert f.read_bytes() == b""

    def test_not_sqlite(self, tmp_path: Path) -> None:
        f = tmp_path / "notes.txt"
        f.write_text("hello, these are my notes\n")
        before = digest(f)
        with pytest.raises(StoreOpenError, match="not a SQLite database"):
            Store(f)
        assert digest(f) == before

    def test_another_programs_database(self, tmp_path: Path) -> None:
        import sqlite3

        f = tmp_path / "other.db"
        conn = sqlite3.connect(f)
        conn.execute("create table invoices (id integer)")
        conn.commit()
        conn.close()
        before = digest(f)
        with pytest.raises(StoreOpenError, match="another program"):
            Store(f)
        assert digest(f) == before

    def test_directory(self, tmp_path: Path) -> None:
        with pytest.raises(StoreOpenError, match="directory"):
            Store(tmp_path)

    def test_missing_directory(self, tmp_path: Path) -> None:
        with pytest.raises(StoreOpenError, match="does not exist"):
            Store(tmp_path / "no" / "such.db")

    def test_read_only_directory(self, tmp_path: Path) -> None:
        if os.geteuid() == 0:
            # root writes through any mode bits; /sys refuses new files even to root
            folder = Path("/sys")
        else:
            folder = tmp_path / "ro"
            folder.mkdir()
            folder.chmod(0o555)
        before = sorted(p.name for p in folder.iterdir())
        with pytest.raises(StoreOpenError, match="not writable"):
            Store(folder / "sessions.db")
        assert sorted(p.name for p in folder.iterdir()) == before

    def test_database_from_a_newer_version(self, store_path: Path) -> None:
        Store(store_path).close()
        import sqlite3

        conn = sqlite3.connect(store_path)
        conn.execute(
            "insert into _sqlite_migrations (migration_set, name, applied_at) "
            "values ('nexus_store', '9999_from_the_future', 'x')"
        )
        conn.commit()
        conn.close()
        before = digest(store_path)
        with pytest.raises(SchemaOutOfDate, match="newer nexus_store"):
            Store(store_path)
        assert digest(store_path) == before


class TestMigrations:
    def test_older_database_is_upgraded(
        self, store_path: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        real = migrate_mod.schema_files()
        with Store(store_path) as store:
            sid = store.create_session().id
            store.append_message(sid, {"role": "user", "content": "kept"})
        extra = tmp_path / "schema"
        extra.mkdir()
        for f in real:
            shutil.copy(f, extra / f.name)
        (extra / "9000_test_change.sql").write_text(
            "-- a later change: a column for a test\nalter table sessions add column test_note text;\n"
        )
        monkeypatch.setattr(migrate_mod, "schema_files", lambda: sorted(extra.glob("*.sql")))
        with Store(store_path) as store:
            assert "9000_test_change" in migrate_mod.applied(store.db)
            assert store.context(sid).messages[0]["content"] == "kept"
            cols = [r[1] for r in store.conn.execute("pragma table_info(sessions)")]
            assert "test_note" in cols

    def test_migrating_twice_is_a_no_op(self, store_path: Path) -> None:
        Store(store_path).close()
        before = digest(store_path)
        with Store(store_path) as store:
            names = migrate_mod.applied(store.db)
        assert names == [f.stem for f in migrate_mod.schema_files()]
        assert digest(store_path) == before

    def test_schema_files_are_numbered_and_commented(self) -> None:
        for f in migrate_mod.schema_files():
            assert f.name[:4].isdigit() and f.name[4] == "_"
            assert f.read_text().startswith("--"), f"{f.name} must open with a comment saying why"
