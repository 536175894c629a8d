"""The docs run: cookbook queries, Datasette canned queries, Python examples, cog, schema.

Every ``sql`` block of docs/cookbook.md runs against a fixture database built here
(branches, a compaction, a branch summary, tool failures, usage and cost, forks),
and its result is checked; every canned query shipped for Datasette runs with plain
sqlite3; every ``python`` block of the docs runs; ``cog --check`` passes on docs/*.md;
and docs/schema.md names every column of every table.
"""

from __future__ import annotations

import asyncio
import os
import re
import sqlite3
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from nexus_store import Store
from nexus_store.datasette import canned_queries, metadata
from nexus_store.store import compressed
from nexus_store.store.readonly import run_readonly

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
SQL_BLOCK = re.compile(r"```sql (\w+)\n(.*?)```", re.DOTALL)
PY_BLOCK = re.compile(r"```python\n(.*?)```", re.DOTALL)


def user(text: str, ts: int) -> dict[str, Any]:
    return {"role": "user", "content": text, "timestamp": ts}


def assistant(
    blocks: list[dict[str, Any]], ts: int, tokens: tuple[int, int] = (0, 0), cost: float = 0.0
) -> dict[str, Any]:
    return {
        "role": "assistant",
        "content": blocks,
        "provider": "anthropic",
        "model": "claude-sonnet",
        "usage": {
            "input": tokens[0],
            "output": tokens[1],
            "cacheRead": 0,
            "cacheWrite": 0,
            "totalTokens": sum(tokens),
            "cost": {"total": cost},
        },
        "stopReason": "toolUse" if blocks and blocks[-1]["type"] == "toolCall" else "stop",
        "timestamp": ts,
    }


def call(call_id: str, tool: str, **arguments: Any) -> dict[str, Any]:
    return {"type": "toolCall", "id": call_id, "name": tool, "arguments": arguments}


def result(call_id: str, tool: str, text: str, ts: int, *, error: bool = False) -> dict[str, Any]:
    return {
        "role": "toolResult",
        "toolCallId": call_id,
        "toolName": tool,
        "content": [{"type": "text", "text": text}],
        "isError": error,
        "timestamp": ts,
    }


def text(t: str) -> dict[str, Any]:
    return {"type": "text", "text": t}


def build_fixture(path: Path) -> None:
    """The cookbook's database: one session with two branches and a compaction, forks."""
    with Store(path, counter="chars4") as store:
        s = store.create_session(id="s-main", cwd="/srv/walrus", title="Deploy the walrus").id

        def add(turn_id: str, message: dict[str, Any]) -> None:
            store.append_entry(s, {"type": "message", "id": turn_id, "message": message})

        add("u1", user("Deploy the walrus service", 1))
        add("a1", assistant([call("c1", "bash", cmd="deploy")], 2, (100, 20), 0.001))
        add("r1", result("c1", "bash", "permission denied", 3, error=True))
        add("a2", assistant([call("c2", "bash", cmd="sudo deploy")], 4, (150, 30), 0.0015))
        add("r2", result("c2", "bash", "walrus deployed", 5))
        add("a3", assistant([text("Deployed the walrus.")], 6, (200, 10), 0.002))
        store.append_compaction(
            s, "Goal: deploy the walrus. Done: deployed with sudo.", "a2", 500,
            id="k1", trigger="auto", layer="summarize", tokensAfter=120,
        )  # fmt: skip
        add("u2", user("Now check the logs", 7))
        add("a4", assistant([call("c3", "read", path="/var/log/walrus")], 8, (300, 15), 0.003))
        add("r3", result("c3", "read", "no errors in the walrus log", 9))
        add("a5", assistant([text("The logs are clean.")], 10, (320, 8), 0.0032))
        # Back to the first user message: try another way (a branch with a summary).
        store.append_branch_summary(s, "u1", "Tried bash deploy; permission denied.")
        add("u3", user("Use the deploy tool instead", 11))
        add("a6", assistant([call("c4", "deploy", target="walrus")], 12, (90, 12), 0.0009))
        add("r4", result("c4", "deploy", "deploy tool: not installed", 13, error=True))
        fork = store.create_session(
            id="s-fork", title="Try staging", parent_session="s-main", fork_turn="a3"
        ).id
        store.append_message(fork, user("Deploy to staging too", 14))
        sub = store.create_session(id="s-sub", title="Sub-agent: check DNS", parent_session=fork)
        store.append_message(sub.id, user("Check DNS for walrus.example", 15))
        other = store.create_session(id="s-other", title="Unrelated").id
        store.append_message(other, user("Read the config", 16))
        store.append_message(
            other, assistant([call("c9", "read", path="/etc/walrus.conf")], 17, (50, 5), 0.0005)
        )
        store.append_message(other, result("c9", "read", "no such file", 18, error=True))


PARAMS = {"session": "s-main", "leaf": "a5", "compaction": "k1", "query": "walrus"}


@pytest.fixture(scope="module")
def fixture_db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("cookbook") / "sessions.db"
    build_fixture(path)
    return path


def run_query(db: Path, sql: str) -> list[dict[str, Any]]:
    names = set(re.findall(r":(\w+)", sql))
    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    compressed.register(conn)  # the view messages_text decompresses (schema 0065)
    conn.row_factory = sqlite3.Row
    try:
        rows = conn.execute(sql, {k: v for k, v in PARAMS.items() if k in names}).fetchall()
    finally:
        conn.close()
    return [dict(row) for row in rows]


def cookbook_blocks() -> dict[str, str]:
    blocks = dict(SQL_BLOCK.findall((DOCS / "cookbook.md").read_text(encoding="utf-8")))
    assert blocks, "docs/cookbook.md has no ```sql NAME blocks"
    return blocks


# What each cookbook query must return on the fixture.
def check_all_leaves(rows: list[dict[str, Any]]) -> None:
    assert [(r["leaf"], r["is_active"]) for r in rows] == [("a5", 0), ("r4", 1)]


def check_leaf_path(rows: list[dict[str, Any]]) -> None:
    assert [r["turn"] for r in rows] == [
        "u1", "a1", "r1", "a2", "r2", "a3", "k1", "u2", "a4", "r3", "a5",
    ]  # fmt: skip
    assert rows[6]["kind"] == "compaction" and rows[6]["preview"].startswith("Goal:")


def check_compactions(rows: list[dict[str, Any]]) -> None:
    (row,) = rows
    assert (row["compaction"], row["tokens_before"], row["tokens_after"]) == ("k1", 500, 120)
    assert (row["trigger"], row["layer"], row["first_kept_uid"]) == ("auto", "summarize", "a2")


def check_compaction_summarized(rows: list[dict[str, Any]]) -> None:
    assert [r["turn"] for r in rows] == ["u1", "a1", "r1"]
    assert rows[2]["tool_name"] == "bash"


def check_branch_costs(rows: list[dict[str, Any]]) -> None:
    by_leaf = {r["leaf"]: r for r in rows}
    assert set(by_leaf) == {"a5", "r4"}
    assert by_leaf["a5"]["messages"] == 10  # u1..a3, u2..a5 (the compaction has no message)
    assert by_leaf["a5"]["input_tokens"] == 100 + 150 + 200 + 300 + 320
    assert by_leaf["a5"]["cost"] == pytest.approx(0.001 + 0.0015 + 0.002 + 0.003 + 0.0032)
    assert by_leaf["r4"]["messages"] == 4  # u1, u3, a6, r4 (the branch summary has none)
    assert by_leaf["r4"]["output_tokens"] == 12


def check_tool_failures(rows: list[dict[str, Any]]) -> None:
    assert [(r["tool_name"], r["results"], r["failures"]) for r in rows] == [
        ("bash", 2, 1),
        ("deploy", 1, 1),
        ("read", 2, 1),
    ]
    assert rows[1]["failure_pct"] == 100.0


def check_forks_of_session(rows: list[dict[str, Any]]) -> None:
    assert [(r["session"], r["level"], r["parent_session"], r["fork_turn"]) for r in rows] == [
        ("s-fork", 1, "s-main", "a3"),
        ("s-sub", 2, "s-fork", None),
    ]


def check_sessions_overview(rows: list[dict[str, Any]]) -> None:
    by_id = {r["session"]: r for r in rows}
    assert set(by_id) == {"s-main", "s-fork", "s-sub", "s-other"}
    assert by_id["s-main"]["turns"] == 15 and by_id["s-main"]["messages"] == 13
    assert by_id["s-other"]["cost"] == 0.0005


def check_search_messages(rows: list[dict[str, Any]]) -> None:
    assert {r["session"] for r in rows} == {"s-main", "s-sub"}
    assert all("[walrus]" in r["snippet"] for r in rows)


CHECKS = {name[len("check_") :]: f for name, f in globals().items() if name.startswith("check_")}


class TestCookbook:
    def test_every_query_is_checked(self) -> None:
        assert set(cookbook_blocks()) <= set(CHECKS)

    @pytest.mark.parametrize("name", sorted(CHECKS))
    def test_query(self, fixture_db: Path, name: str) -> None:
        blocks = cookbook_blocks()
        if name not in blocks:
            pytest.skip(f"{name} is a canned query only")
        CHECKS[name](run_query(fixture_db, blocks[name]))

    def test_queries_run_through_the_read_only_door(self, fixture_db: Path) -> None:
        """`nexus-store sql` refuses writes; every cookbook query must still run there."""
        for name, sql in cookbook_blocks().items():
            names = set(re.findall(r":(\w+)", sql))
            columns, rows = run_readonly(
                fixture_db, sql, {k: v for k, v in PARAMS.items() if k in names}
            )
            assert columns and list(rows), name


class TestDatasette:
    def test_canned_queries_run_with_sqlite3(self, fixture_db: Path) -> None:
        queries = canned_queries()
        assert {"all_leaves", "leaf_path", "compaction_summarized", "branch_costs",
                "tool_failures", "forks_of_session"} <= set(queries)  # fmt: skip
        for name, query in queries.items():
            assert query["title"] and query["description"], name
            rows = run_query(fixture_db, query["sql"])
            assert rows, name
            CHECKS[name](rows)

    def test_cookbook_shows_the_canned_sql(self) -> None:
        queries = canned_queries()
        for name, sql in cookbook_blocks().items():
            assert sql.strip() == queries[name]["sql"].strip(), name

    def test_metadata_for_another_database_name(self) -> None:
        data = metadata("mydb")
        assert list(data["databases"]) == ["mydb"]
        assert data["databases"]["mydb"]["queries"] == canned_queries()
        tables = data["databases"]["mydb"]["tables"]
        assert tables["messages"]["fts_table"] == "messages_fts"

    def test_module_prints_metadata(self) -> None:
        out = subprocess.run(
            [sys.executable, "-m", "nexus_store.datasette", "--database", "x"],
            capture_output=True,
            text=True,
            check=True,
            cwd=ROOT,
            env={**os.environ, "PYTHONPATH": str(ROOT)},
        ).stdout
        assert '"x": {' in out


class TestRealDatasette:
    def test_canned_queries_through_datasette(self, fixture_db: Path) -> None:
        datasette_app = pytest.importorskip("datasette.app", reason="datasette is not installed")
        ds = datasette_app.Datasette([str(fixture_db)], metadata=metadata(fixture_db.stem))

        async def fetch(url: str) -> Any:
            response = await ds.client.get(url)
            assert response.status_code == 200, (url, response.text)
            return response.json()

        for name in canned_queries():
            params = "&".join(f"{k}={v}" for k, v in PARAMS.items())
            rows = asyncio.run(fetch(f"/{fixture_db.stem}/{name}.json?{params}&_shape=array"))
            CHECKS[name](rows)
        hits = asyncio.run(fetch(f"/{fixture_db.stem}/messages.json?_search=walrus&_shape=array"))
        assert len(hits) == 5


class TestDocs:
    @pytest.mark.parametrize("page", ["getting-started.md", "python-api.md", "datasette.md"])
    def test_python_examples_run(
        self, page: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """The python blocks of a page run in order, in one namespace, in an empty directory."""
        monkeypatch.chdir(tmp_path)
        build_fixture(tmp_path / "cookbook.db")
        namespace: dict[str, Any] = {"__name__": "__docs__"}
        blocks = PY_BLOCK.findall((DOCS / page).read_text(encoding="utf-8"))
        assert blocks, page
        for block in blocks:
            exec(compile(block, f"{page}", "exec"), namespace)

    def test_every_public_store_method_is_documented(self) -> None:
        page = (DOCS / "python-api.md").read_text(encoding="utf-8")
        public = [name for name in dir(Store) if not name.startswith("_")]
        missing = [name for name in public if f"{name}(" not in page and f"`{name}`" not in page]
        assert not missing, f"docs/python-api.md does not show: {missing}"

    def test_cog_is_current(self) -> None:
        pages = sorted(str(p) for p in DOCS.glob("*.md"))
        done = subprocess.run(
            [sys.executable, "-m", "cogapp", "--check", *pages],
            capture_output=True,
            text=True,
            cwd=ROOT,
            env={**os.environ, "PYTHONPATH": str(ROOT)},
        )
        assert done.returncode == 0, done.stdout + done.stderr

    def test_schema_page_names_every_column(self) -> None:
        page = (DOCS / "schema.md").read_text(encoding="utf-8")
        with Store(memory=True, counter="chars4") as store:
            tables = [
                r[0]
                for r in store.conn.execute(
                    "select name from sqlite_master where type = 'table' "
                    "and name not like '%fts\\_%' escape '\\' and name not like 'sqlite_%'"
                )
            ]
            missing = []
            for table in tables:
                if f"### `{table}`" not in page:
                    missing.append(table)
                for (column,) in store.conn.execute(
                    "select name from pragma_table_info(?)", [table]
                ):
                    if f"`{column}`" not in page:
                        missing.append(f"{table}.{column}")
        assert not missing, f"docs/schema.md does not explain: {missing}"
