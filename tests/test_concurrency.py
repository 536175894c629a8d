"""Several processes writing one database at once lose nothing."""

from __future__ import annotations

import multiprocessing as mp
from pathlib import Path

import pytest

from nexus_store import Store


def _writer(path: str, session_id: str, parent: str | None, name: str, count: int) -> list[str]:
    ids = []
    with Store(path) as store:
        for i in range(count):
            message = {"role": "user", "content": f"{name}-{i}", "timestamp": i}
            if parent is None:
                turn = store.append_message(session_id, message)
            else:
                turn = store.append_message(session_id, message, parent_id=parent)
            ids.append(turn.id)
    return ids


def _run(
    path: Path, session_id: str, parent: str | None, workers: int, count: int
) -> list[list[str]]:
    ctx = mp.get_context("spawn")
    with ctx.Pool(workers) as pool:
        results = [
            pool.apply_async(_writer, (str(path), session_id, parent, f"w{n}", count))
            for n in range(workers)
        ]
        return [r.get(timeout=120) for r in results]


@pytest.mark.slow
def test_two_processes_appending_to_one_session_lose_nothing(store_path: Path) -> None:
    with Store(store_path) as store:
        sid = store.create_session().id
    written = _run(store_path, sid, None, workers=2, count=150)
    with Store(store_path) as store:
        turns = list(store.iter_turns(sid))
        assert len(turns) == 300
        assert {t.id for t in turns} == {i for ids in written for i in ids}
        # appends to the active leaf serialize: one chain, every turn's parent the previous one
        assert len(store.leaves(sid)) == 1
        assert [t.id for t in store.path(sid)] == [t.id for t in turns]
        assert store.conn.execute("pragma integrity_check").fetchone()[0] == "ok"


@pytest.mark.slow
def test_two_processes_appending_to_one_parent_make_siblings(store_path: Path) -> None:
    with Store(store_path) as store:
        sid = store.create_session().id
        root = store.append_message(sid, {"role": "user", "content": "root"}).id
    written = _run(store_path, sid, root, workers=2, count=100)
    with Store(store_path) as store:
        children = store.children(sid, root)
        assert len(children) == 200
        assert {c.id for c in children} == {i for ids in written for i in ids}
        for child in children:
            assert [t.id for t in store.path(sid, child.id)] == [root, child.id]
