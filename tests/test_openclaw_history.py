"""A session's history from OpenClaw's own store: imported once, reconciled after a fallback.

The OpenClaw stores here are built from the CREATE statements of real releases
(`tests/openclaw_db.py`, schema 19 and 23) and written as OpenClaw writes them: the
header, bookkeeping entries, then each turn's entries, the user's message before the
engine is asked for context. The service's calls run in-process (`EngineCalls`); the
real OpenClaw runs in tests/test_openclaw_e2e.py.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

import pytest

from nexus_store import Store
from nexus_store.service.lifecycle import EngineCalls
from tests import openclaw_db
from tests.reference import reference_context

KEY = "agent:main:main"


class Host:
    """An OpenClaw session as its store holds it, one entry per seq."""

    def __init__(self, tmp_path: Path, sid: str = "sess-1", version: int = 23) -> None:
        self.path = tmp_path / "agents" / "main" / "agent" / "openclaw-agent.sqlite"
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.sid = sid
        conn = openclaw_db.create(self.path, version)
        openclaw_db.add_window(conn, sid, created_at=1)
        conn.close()
        self.entries: list[dict[str, Any]] = []
        self.seq = 0
        self.parent: str | None = None
        self.write([openclaw_db.header(sid)])
        self.bookkeeping("model-snapshot")

    def write(self, events: list[dict[str, Any]]) -> list[int]:
        conn = openclaw_db.connect(self.path)
        openclaw_db.add_events(conn, self.sid, events, start_seq=self.seq, compress=True)
        conn.close()
        seqs = list(range(self.seq, self.seq + len(events)))
        self.seq += len(events)
        return seqs

    def entry(self, entry: dict[str, Any]) -> tuple[dict[str, Any], int]:
        entry = {**entry, "id": f"e{self.seq}", "parentId": self.parent}
        (seq,) = self.write([entry])
        self.parent = entry["id"]
        self.entries.append(entry)
        return entry, seq

    def bookkeeping(self, kind: str) -> None:
        self.entry({"type": "custom", "customType": kind, "data": {"n": self.seq}})

    def message(self, role: str, text: str) -> tuple[dict[str, Any], int]:
        content: Any = text if role == "user" else [{"type": "text", "text": text}]
        return self.entry(
            {"type": "message", "message": {"role": role, "content": content, "timestamp": 1}}
        )

    def turn(self, text: str) -> tuple[dict[str, Any], int, dict[str, Any], int]:
        """One whole turn as OpenClaw writes it (bootstrap context, user, assistant)."""
        self.bookkeeping("openclaw:bootstrap-context:full")
        user, useq = self.message("user", text)
        answer, aseq = self.message("assistant", f"reply to {text}")
        return user, useq, answer, aseq

    def request(self, **extra: Any) -> dict[str, Any]:
        return {"sessionId": self.sid, "sessionKey": KEY, "openclawStore": str(self.path), **extra}

    def commit(
        self, calls: EngineCalls, turn: tuple[dict[str, Any], int, dict[str, Any], int], key: str
    ) -> dict[str, Any]:
        user, useq, answer, aseq = turn
        return calls.commit_turn(
            self.request(
                advancementKey=key,
                admission={"entryId": user["id"], "sessionId": self.sid, "rawSeq": useq},
                terminal={"entryId": answer["id"], "sessionId": self.sid, "rawSeq": aseq},
                messages=[user["message"], answer["message"]],
            )
        )


def user_texts(store: Store, session_id: str) -> list[str]:
    return [
        m["content"]
        for m in store.context(session_id).messages
        if isinstance(m, dict) and m.get("role") == "user"
    ]


@pytest.fixture
def calls(tmp_path: Path) -> Any:
    with Store(tmp_path / "s.db", counter="chars4") as store:
        yield EngineCalls(store)


class TestImport:
    @pytest.mark.parametrize("version", openclaw_db.VERSIONS)
    def test_earlier_history_is_imported_whole_with_openclaws_ids(
        self, tmp_path: Path, version: int
    ) -> None:
        path = tmp_path / "agents" / "main" / "agent" / "openclaw-agent.sqlite"
        path.parent.mkdir(parents=True)
        conn = openclaw_db.create(path, version)
        entries = openclaw_db.conversation("s1-", 6, compact_at=3)
        openclaw_db.add_window(conn, "s1", created_at=1)
        openclaw_db.add_events(conn, "s1", [openclaw_db.header("s1"), *entries])
        conn.close()
        with Store(tmp_path / "s.db", counter="chars4") as store:
            calls = EngineCalls(store)
            result = calls.bootstrap(
                {"sessionId": "s1", "sessionKey": KEY, "openclawStore": str(path)}
            )
            assert result["importedMessages"] == len(entries)
            session = calls.session_of({"sessionKey": KEY})["sessionId"]
            # every entry by OpenClaw's id and parent, the compaction included
            for entry in entries:
                turn = store.get_turn(session, entry["id"])
                assert turn.parent_id == entry["parentId"]
                want = reference_context(entries, entry["id"])["messages"]
                assert store.context(session, entry["id"]).messages == want
            assert [t.kind for t in store.path(session)].count("compaction") == 1
            # assemble serves it at once; a second bootstrap imports nothing more
            assembled = calls.assemble({"sessionKey": KEY, "sessionId": "s1"})
            assert "needsHistory" not in assembled
            assert (
                assembled["messages"] == reference_context(entries, entries[-1]["id"])["messages"]
            )
            again = calls.bootstrap(
                {"sessionId": "s1", "sessionKey": KEY, "openclawStore": str(path)}
            )
            assert "reconciledEntries" not in again
            assert len(list(store.iter_turns(session))) == len(entries)

    def test_the_current_turn_is_left_to_its_commit(
        self, tmp_path: Path, calls: EngineCalls
    ) -> None:
        host = Host(tmp_path)
        host.turn("before nexus_store")
        host.bookkeeping("openclaw:bootstrap-context:full")
        user, useq = host.message("user", "the current turn")  # written before assemble
        assembled = calls.assemble(host.request(tokenBudget=10_000))
        assert [m["content"] for m in assembled["messages"] if m["role"] == "user"] == [
            "before nexus_store"
        ]
        answer, aseq = host.message("assistant", "answered")
        result = host.commit(calls, (user, useq, answer, aseq), "k-current")
        assert result["status"] == "committed"
        session = result["sessionId"]
        assert user_texts(calls.store, session) == ["before nexus_store", "the current turn"]

    def test_without_openclaws_store_history_comes_from_assemble(
        self, tmp_path: Path, calls: EngineCalls
    ) -> None:
        request = {
            "sessionId": "s9",
            "sessionKey": KEY,
            "openclawStore": str(tmp_path / "none.sqlite"),
        }
        assert calls.bootstrap(request)["importedMessages"] == 0
        assert calls.assemble(request) == {"needsHistory": True}
        old = [{"role": "user", "content": "from assemble", "timestamp": 1}]
        assembled = calls.assemble({**request, "messages": old})
        assert assembled["importedMessages"] == 1

    def test_an_unreadable_store_leaves_the_session_as_it_was(
        self, tmp_path: Path, calls: EngineCalls, caplog: pytest.LogCaptureFixture
    ) -> None:
        bad = tmp_path / "openclaw-agent.sqlite"
        sqlite3.connect(bad).execute("create table t (x)").connection.close()
        request = {"sessionId": "s9", "sessionKey": KEY, "openclawStore": str(bad)}
        assert calls.bootstrap(request)["importedMessages"] == 0
        assert "was not read" in caplog.text and str(bad) in caplog.text
        assert calls.assemble(request) == {"needsHistory": True}


class TestReconcile:
    def test_a_turn_run_on_legacy_is_reconciled_at_the_next_bootstrap(
        self, tmp_path: Path, calls: EngineCalls
    ) -> None:
        host = Host(tmp_path)
        assert calls.bootstrap(host.request())["importedMessages"] == 0
        session = host.commit(calls, host.turn("turn A"), "kA")["sessionId"]
        host.turn("turn B on legacy")  # the engine failed: OpenClaw ran it alone
        assert calls.bootstrap(host.request())["reconciledEntries"] == 2
        # the next model call sees it
        texts = [m["content"] for m in calls.assemble(host.request())["messages"]]
        assert "turn B on legacy" in texts
        assert host.commit(calls, host.turn("turn C"), "kC")["status"] == "committed"
        assert user_texts(calls.store, session) == ["turn A", "turn B on legacy", "turn C"]
        # nothing twice, however often it is asked
        assert "reconciledEntries" not in calls.bootstrap(host.request())
        assert user_texts(calls.store, session) == ["turn A", "turn B on legacy", "turn C"]

    def test_a_commit_reconciles_what_came_before_it(
        self, tmp_path: Path, calls: EngineCalls
    ) -> None:
        host = Host(tmp_path)
        session = host.commit(calls, host.turn("turn A"), "kA")["sessionId"]
        host.turn("turn B on legacy")
        host.message("user", "turn B2: the model failed, no answer")
        assert host.commit(calls, host.turn("turn C"), "kC")["status"] == "committed"
        assert user_texts(calls.store, session) == [
            "turn A",
            "turn B on legacy",
            "turn B2: the model failed, no answer",
            "turn C",
        ]

    def test_an_outbox_retry_of_a_reconciled_turn_is_a_duplicate(
        self, tmp_path: Path, calls: EngineCalls
    ) -> None:
        host = Host(tmp_path)
        session = host.commit(calls, host.turn("turn A"), "kA")["sessionId"]
        failed = host.turn("turn B: its commit failed")  # stays in OpenClaw's outbox
        assert calls.bootstrap(host.request())["reconciledEntries"] == 2
        turns = len(list(calls.store.iter_turns(session)))
        retried = host.commit(calls, failed, "kB")
        assert retried["status"] == "duplicate" and retried["turnId"] == failed[2]["id"]
        assert host.commit(calls, failed, "kB")["status"] == "duplicate"
        assert len(list(calls.store.iter_turns(session))) == turns
        assert host.commit(calls, host.turn("turn C"), "kC")["status"] == "committed"
        assert user_texts(calls.store, session) == [
            "turn A",
            "turn B: its commit failed",
            "turn C",
        ]

    def test_a_legacy_compaction_is_kept_but_not_followed(
        self, tmp_path: Path, calls: EngineCalls
    ) -> None:
        host = Host(tmp_path)
        user, _, _, _ = turn_a = host.turn("turn A")
        session = host.commit(calls, turn_a, "kA")["sessionId"]
        host.turn("turn B on legacy")
        host.entry(
            {
                "type": "compaction",
                "summary": "OpenClaw's own summary",
                "firstKeptEntryId": user["id"],  # inside a committed range: not a turn here
                "tokensBefore": 100,
            }
        )
        assert calls.bootstrap(host.request())["reconciledEntries"] == 3
        kept = [t for t in calls.store.path(session) if t.kind == "custom"]
        assert [t.entry["data"]["summary"] for t in kept] == ["OpenClaw's own summary"]
        assert user_texts(calls.store, session) == ["turn A", "turn B on legacy"]

    def test_a_new_openclaw_session_for_the_key_starts_from_its_own_start(
        self, tmp_path: Path, calls: EngineCalls
    ) -> None:
        host = Host(tmp_path)
        first = host.commit(calls, host.turn("turn A"), "kA")["sessionId"]
        other = Host(tmp_path / "other", sid="sess-2")
        other.turn("after /new, on legacy")
        result = calls.bootstrap(other.request())
        assert result["importedMessages"] == 4  # bookkeeping + that turn
        second = calls.session_of({"sessionKey": KEY})["sessionId"]
        assert second != first
        assert user_texts(calls.store, second) == ["after /new, on legacy"]
        assert user_texts(calls.store, first) == ["turn A"]
