"""Token counting in a helper process: same counts as in-process, and any failure of it costs nothing."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest

from nexus_store import Store
from nexus_store.countproc import CountingProcess, CountingProcessError
from nexus_store.store import appends
from nexus_store.tokens import Cl100kCounter, count_payloads, message_tokens

HEADER = {"type": "session", "version": 3, "id": "cp", "timestamp": "2026-01-01T00:00:00Z"}


def _ready(helper: CountingProcess) -> None:
    _ready_with(CountingProcess.ready, helper)


def _ready_with(ready: Any, helper: CountingProcess) -> None:
    deadline = time.monotonic() + 60
    while not ready(helper):
        assert not helper.failed, "the helper exited before it was ready"
        assert time.monotonic() < deadline, "the helper never became ready"
        time.sleep(0.01)


def _messages(n: int) -> list[dict[str, Any]]:
    out = []
    for i in range(n):
        if i % 3 == 0:
            out.append(
                {"role": "user", "content": f"question {i}: why is the sky blue? " * (i % 7)}
            )
        elif i % 3 == 1:
            out.append(
                {
                    "role": "assistant",
                    "content": [
                        {"type": "thinking", "thinking": f"think {i} ünïcødé 漢字"},
                        {"type": "toolCall", "id": f"c{i}", "name": "read", "arguments": {"p": i}},
                    ],
                }
            )
        else:
            out.append(
                {
                    "role": "toolResult",
                    "toolCallId": f"c{i}",
                    "toolName": "read",
                    "content": [{"type": "text", "text": "x = 1\n" * (i % 40)}, {"type": "image"}],
                }
            )
    return out


def _write(path: Path, messages: list[dict[str, Any]]) -> None:
    with path.open("w") as f:
        f.write(json.dumps(HEADER) + "\n")
        for i, message in enumerate(messages):
            entry = {
                "type": "message",
                "id": f"m{i}",
                "parentId": f"m{i - 1}" if i else None,
                "message": message,
            }
            f.write(json.dumps(entry) + "\n")


def _stored_tokens(store: Store) -> list[int]:
    rows = store.conn.execute("select tokens from messages order by turn_id, idx").fetchall()
    return [int(r[0]) for r in rows]


def test_the_helper_counts_exactly_as_in_process() -> None:
    payloads = [
        (["plain text", "second"], 0),
        (["lone \ud800 surrogate", "nul \x00 inside"], 2),
        ([], 1),
        ([], 0),
        (["漢字 and emoji 🎉" * 50], 0),
    ]
    helper = CountingProcess("cl100k_base")
    try:
        _ready(helper)
        assert helper.count(payloads) == count_payloads(Cl100kCounter(), payloads)
    finally:
        helper.close()
    assert helper._proc.returncode == 0  # it ended at the end of its input


def test_a_long_import_stores_the_same_counts(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    messages = _messages(3_000)  # six batches: the helper counts from the second on
    path = tmp_path / "long.jsonl"
    _write(path, messages)
    real_ready, real_count = CountingProcess.ready, CountingProcess.count
    through_helper: list[int] = []

    def waited(self: CountingProcess) -> bool:  # the helper is used as soon as it starts
        if not self.failed:
            _ready_with(real_ready, self)
        return real_ready(self)

    def counted(self: CountingProcess, payloads: Any) -> list[int]:
        through_helper.append(len(payloads))
        return real_count(self, payloads)

    monkeypatch.setattr(CountingProcess, "ready", waited)
    monkeypatch.setattr(CountingProcess, "count", counted)
    counter = Cl100kCounter()
    with Store(tmp_path / "a.db") as store:
        store.import_paths([path])
        assert _stored_tokens(store) == [message_tokens(counter, m) for m in messages]
    assert through_helper == [500] * 5  # every batch after the first, by the helper


def test_a_helper_that_dies_mid_import_costs_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    messages = _messages(3_000)
    path = tmp_path / "long.jsonl"
    _write(path, messages)
    real = CountingProcess.count
    calls: list[int] = []

    def dying(self: CountingProcess, payloads: Any) -> list[int]:
        calls.append(len(payloads))
        if len(calls) == 2:
            self._proc.kill()  # as if the OOM killer took it between two batches
            self._proc.wait()
        return real(self, payloads)

    monkeypatch.setattr(CountingProcess, "count", dying)
    real_ready = CountingProcess.ready

    def waited(self: CountingProcess) -> bool:  # the helper is used from its first batch
        if not self.failed:
            _ready_with(real_ready, self)
        return real_ready(self)

    monkeypatch.setattr(CountingProcess, "ready", waited)
    counter = Cl100kCounter()
    with Store(tmp_path / "b.db") as store:
        report = store.import_paths([path])
        assert report.turns == 3_000 and not report.errors
        assert _stored_tokens(store) == [message_tokens(counter, m) for m in messages]
    assert len(calls) == 2  # one batch through the helper, then in-process for the rest


def test_no_interpreter_to_start_counts_in_process(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("sys.executable", str(tmp_path / "no-such-python"))
    messages = _messages(1_200)
    path = tmp_path / "long.jsonl"
    _write(path, messages)
    with Store(tmp_path / "c.db") as store:
        report = store.import_paths([path])
        assert report.turns == 1_200
        assert _stored_tokens(store) == [message_tokens(Cl100kCounter(), m) for m in messages]


def test_a_dead_helper_raises_its_own_error() -> None:
    helper = CountingProcess("cl100k_base")
    _ready(helper)
    helper._proc.kill()
    helper._proc.wait()
    with pytest.raises(CountingProcessError, match="counting process"):
        helper.count([(["text"], 0)])
    assert helper.failed
    helper.close()


def test_a_helper_still_starting_is_not_waited_for() -> None:
    # An import that ends before the helper is ready must not wait for it to load.
    helper = CountingProcess("cl100k_base")
    helper.close()
    assert helper._proc.returncode == -9  # killed, not waited out


def test_ctrl_c_mid_import_stores_nothing_and_ends_the_helper(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    messages = _messages(3_000)
    path = tmp_path / "long.jsonl"
    _write(path, messages)
    helpers: list[CountingProcess] = []
    real_init, real_ready = CountingProcess.__init__, CountingProcess.ready

    def init(self: CountingProcess, name: str) -> None:
        real_init(self, name)
        helpers.append(self)

    def waited(self: CountingProcess) -> bool:
        if not self.failed:
            _ready_with(real_ready, self)
        return real_ready(self)

    original = appends.turn_values
    calls = {"n": 0}

    def interrupted(*args: Any, **kwargs: Any) -> Any:
        calls["n"] += 1
        if calls["n"] == 2_500:
            raise KeyboardInterrupt  # Ctrl-C while the helper is serving
        return original(*args, **kwargs)

    monkeypatch.setattr(CountingProcess, "__init__", init)
    monkeypatch.setattr(CountingProcess, "ready", waited)
    monkeypatch.setattr(appends, "turn_values", interrupted)
    with Store(tmp_path / "d.db") as store:
        with pytest.raises(KeyboardInterrupt):
            store.import_paths([path])
        assert store.conn.execute("select count(*) from turns").fetchone()[0] == 0
        assert store.conn.execute(
            "select count(*) from sqlite_master where name = 'messages_fts_after_insert'"
        ).fetchone() == (1,)
    (helper,) = helpers
    assert helper._proc.poll() == 0  # ended at the end of its input, not left running
