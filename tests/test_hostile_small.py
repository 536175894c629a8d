"""Issue 18, item 8: the WAL is checkpointed at a sane size, `backup` copies what the
WAL holds, `sql` refuses pointer functions and stops runaway queries (SQLite and
PostgreSQL, where it also refuses pg_read_file), and a compaction cannot keep itself."""

from __future__ import annotations

import os
import shutil
import sqlite3
import stat
from pathlib import Path

import pytest
from click.testing import CliRunner

from nexus_store import Store
from nexus_store.cli import cli
from nexus_store.errors import InvalidEntry, NexusError, QueryTimeout, ReadOnlyError
from nexus_store.store.readonly import run_readonly

pytest_plugins = ["tests.pg_server"]

RUNAWAY = "with recursive r(n) as (select 1 union all select n + 1 from r) select count(*) from r"


def _fill(db: Path, sessions: int = 1, turns: int = 5, size: int = 100) -> None:
    with Store(db, counter="chars4") as store:
        for s in range(sessions):
            sid = store.create_session(id=f"s{s}").id
            for n in range(turns):
                store.append_message(
                    sid, {"role": "user", "content": f"{n} " + "w" * size, "timestamp": n}
                )


class TestWal:
    def test_checkpoint_every_4mb_so_the_db_file_holds_the_data(self, store_path: Path) -> None:
        with Store(store_path, counter="chars4") as store:
            assert store.conn.execute("pragma wal_autocheckpoint").fetchone()[0] == 1000
            assert store.conn.execute("pragma journal_size_limit").fetchone()[0] == 16 * 2**20
            sid = store.create_session().id
            for n in range(300):  # ~12 MB over 300 commits, random so it does not compress
                store.append_message(
                    sid, {"role": "user", "content": os.urandom(20_000).hex(), "timestamp": n}
                )
            assert Path(f"{store_path}-wal").stat().st_size <= 16 * 2**20
            # a copy of the .db alone (the common mistake) misses at most the last ~4 MB
            alone = store_path.with_name("alone.db")
            shutil.copy(store_path, alone)
        conn = sqlite3.connect(alone)
        copied = conn.execute("select count(*) from turns").fetchone()[0]
        conn.close()
        # (every 10,000 pages, as before issue 18, the .db alone held none of the 300)
        assert copied >= 200


class TestBackup:
    def test_backup_holds_what_only_the_wal_holds(
        self, store_path: Path, tmp_path: Path, runner: CliRunner
    ) -> None:
        _fill(store_path)
        with Store(store_path) as store:  # keep it open: the last writes sit in -wal
            store.append_message(
                "s0", {"role": "user", "content": "only in the wal", "timestamp": 9}
            )
            alone = tmp_path / "alone.db"
            shutil.copy(store_path, alone)
            result = runner.invoke(cli, ["--db", str(store_path), "backup", str(tmp_path / "b.db")])
            assert result.exit_code == 0, result.output
        conn = sqlite3.connect(alone)
        assert (
            conn.execute("select count(*) from messages where text = 'only in the wal'").fetchone()[
                0
            ]
            == 0
        )
        conn.close()
        backup = tmp_path / "b.db"
        assert stat.S_IMODE(backup.stat().st_mode) == 0o600
        assert not Path(f"{backup}-wal").exists()
        with Store(backup) as copy:
            assert copy.context("s0").messages[-1]["content"] == "only in the wal"
            assert copy.doctor().ok

    def test_refuses_to_overwrite_unless_forced(
        self, store_path: Path, tmp_path: Path, runner: CliRunner
    ) -> None:
        _fill(store_path)
        dest = tmp_path / "b.db"
        dest.write_text("precious")
        result = runner.invoke(cli, ["--db", str(store_path), "backup", str(dest)])
        assert result.exit_code == 1 and "--force" in result.output
        assert dest.read_text() == "precious"
        forced = runner.invoke(cli, ["--db", str(store_path), "backup", str(dest), "--force"])
        assert forced.exit_code == 0, forced.output
        with Store(dest) as copy:
            assert [s.id for s in copy.list_sessions()] == ["s0"]

    def test_a_planted_link_is_replaced_not_followed(
        self, store_path: Path, tmp_path: Path
    ) -> None:
        _fill(store_path)
        victim = tmp_path / "victim"
        victim.write_text("precious")
        dest = tmp_path / "b.db"
        dest.symlink_to(victim)
        with Store(store_path) as store:
            with pytest.raises(NexusError, match="exists"):
                store.backup(dest)
            store.backup(dest, force=True)
        assert victim.read_text() == "precious" and not dest.is_symlink()


class TestSqlGuards:
    @pytest.mark.parametrize(
        "query",
        [
            "select fts3_tokenizer('simple')",
            "select hex(fts3_tokenizer('porter'))",
            "select FTS3_TOKENIZER('unicode61')",
        ],
    )
    def test_pointer_returning_functions_are_refused(self, store_path: Path, query: str) -> None:
        _fill(store_path)
        with pytest.raises(ReadOnlyError, match="fts3_tokenizer"):
            run_readonly(store_path, query)

    def test_runaway_recursive_cte_stops_at_the_timeout(
        self, store_path: Path, runner: CliRunner
    ) -> None:
        _fill(store_path)
        with pytest.raises(QueryTimeout, match=r"0\.3s"):
            list(run_readonly(store_path, RUNAWAY, timeout=0.3)[1])
        result = runner.invoke(cli, ["--db", str(store_path), "sql", RUNAWAY, "--timeout", "0.3"])
        assert result.exit_code == 1
        assert len(result.output.strip().splitlines()) == 1 and "--timeout" in result.output
        # a query that ends still works
        ok = runner.invoke(
            cli, ["--db", str(store_path), "sql", "select count(*) as n from turns", "--json"]
        )
        assert ok.exit_code == 0 and '"n": 5' in ok.output

    def test_a_bad_timeout_is_a_usage_error(self, store_path: Path, runner: CliRunner) -> None:
        _fill(store_path)
        result = runner.invoke(cli, ["--db", str(store_path), "sql", "select 1", "--timeout", "0"])
        assert result.exit_code == 2


class TestCompactionKeepingItself:
    def test_native_append_naming_itself_as_first_kept_is_refused(self, store: Store) -> None:
        sid = store.create_session().id
        store.append_message(sid, {"role": "user", "content": "a", "timestamp": 0})
        before = store.context(sid).model_dump()
        with pytest.raises(InvalidEntry, match="not an ancestor"):
            store.append_entry(
                sid,
                {
                    "type": "compaction",
                    "id": "c1",
                    "summary": "s",
                    "firstKeptEntryId": "c1",
                    "tokensBefore": 1,
                },
            )
        assert store.find_turn(sid, "c1") is None
        assert store.context(sid).model_dump() == before


class TestPostgresSql:
    @pytest.mark.parametrize(
        "query",
        [
            "select pg_read_file('/etc/hostname')",
            "select \"pg_read_file\"('/etc/hostname')",
            "select pg_catalog.pg_read_file('/etc/hostname')",
            "select * from pg_ls_dir('.')",
            "select x from (select pg_read_binary_file('/etc/hostname') as x) s",
            "select query_to_xml('select pg_read_file(''/etc/hostname'')', true, true, '')",
            "select set_config('statement_timeout', '0', false)",
            "explain analyze select pg_read_file('/etc/hostname')",
        ],
    )
    def test_server_file_functions_are_refused(self, pg_url: str, query: str) -> None:
        Store(pg_url, counter="chars4").close()
        with pytest.raises(ReadOnlyError, match="refuses"):
            run_readonly(pg_url, query)

    def test_ordinary_queries_and_harmless_functions_run(self, pg_url: str) -> None:
        with Store(pg_url, counter="chars4") as store:
            sid = store.create_session(id="s").id
            store.append_message(sid, {"role": "user", "content": "Hello", "timestamp": 0})
        columns, rows = run_readonly(
            pg_url,
            "select lower(m.text) as t, pg_typeof(m.tokens)::text as ty, count(*) over () as n "
            "from messages m",
        )
        assert columns == ["t", "ty", "n"] and list(rows) == [("hello", "integer", 1)]

    def test_runaway_query_stops_at_the_timeout(self, pg_url: str) -> None:
        Store(pg_url, counter="chars4").close()
        with pytest.raises(QueryTimeout):
            list(run_readonly(pg_url, RUNAWAY, timeout=0.5)[1])

    def test_backup_points_to_pg_dump(self, pg_url: str, tmp_path: Path) -> None:
        with Store(pg_url, counter="chars4") as store, pytest.raises(NexusError, match="pg_dump"):
            store.backup(tmp_path / "b.db")
