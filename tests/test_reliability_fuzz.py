"""Bad input everywhere: random entries, ids, session arguments and command lines.

Only documented errors come out (NexusError subclasses from the library; exit 1
with one "Error:" line or a click usage error, exit 2, from the CLI), each message
names what was wrong, and a refused write leaves the database exactly as it was."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from nexus_store import NexusError, SessionNotFound, Store, TurnNotFound
from nexus_store.cli import cli
from tests.reliability_helpers import msg

FUZZ = settings(max_examples=40, deadline=None, suppress_health_check=list(HealthCheck))

TEXT = st.text(max_size=12)
ODD_TEXT = st.one_of(
    TEXT,
    st.sampled_from(
        ["", " ", "\x00", "'; drop table turns; --", "%", "_", "\\", "\ud800", "é" * 3]
    ),
)
SCALARS = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=True, allow_infinity=True),
    ODD_TEXT,
    st.binary(max_size=4),
)
VALUES = st.recursive(
    SCALARS,
    lambda inner: st.one_of(
        st.lists(inner, max_size=3),
        st.dictionaries(ODD_TEXT, inner, max_size=3),
        st.tuples(inner),
        st.sets(st.integers(0, 3), max_size=2),
    ),
    max_leaves=8,
)
KEYS = st.sampled_from(
    [
        "type",
        "id",
        "parentId",
        "message",
        "messages",
        "summary",
        "firstKeptEntryId",
        "tokensBefore",
        "targetId",
        "label",
        "content",
        "customType",
        "data",
        "details",
        "timestamp",
        "fromId",
        "provider",
        "modelId",
        "thinkingLevel",
        "display",
        "name",
    ]
)
KINDS = st.sampled_from(
    [
        "message",
        "custom_message",
        "custom",
        "compaction",
        "branch_summary",
        "model_change",
        "thinking_level_change",
        "label",
        "session_info",
        "session",
        "mystery",
        "",
    ]
)
MESSAGES = st.fixed_dictionaries(
    {"role": st.one_of(st.sampled_from(["user", "assistant", "toolResult"]), VALUES)},
    optional={"content": VALUES, "timestamp": VALUES, "usage": VALUES, "model": VALUES},
)
ENTRIES = st.one_of(
    st.dictionaries(KEYS, VALUES, max_size=6),
    st.builds(
        lambda kind, fields, message: {"type": kind, **fields, "message": message},
        KINDS,
        st.dictionaries(KEYS, VALUES, max_size=4),
        MESSAGES,
    ),
    VALUES,
)


def _snapshot(store: Store) -> list[str]:
    return list(store.conn.iterdump())


def _seeded() -> tuple[Store, str, list[str]]:
    store = Store(memory=True, counter="chars4")
    s = store.create_session(id="s1")
    ids = [store.append_entry(s.id, msg(f"m{i}")).id for i in range(3)]
    return store, s.id, ids


def _named(err: Exception) -> None:
    text = str(err)
    assert len(text) > 12, f"vague error: {text!r}"


@FUZZ
@given(entry=ENTRIES, parent=st.one_of(st.none(), st.integers(0, 3)))
def test_append_entry_with_random_dicts(entry: Any, parent: int | None) -> None:
    store, sid, ids = _seeded()
    with store:
        if isinstance(entry, dict) and parent is not None and "parentId" not in entry:
            entry["parentId"] = ids[parent] if parent < 3 else "nope"
        before = _snapshot(store)
        try:
            turn = store.append_entry(sid, entry)
        except NexusError as err:
            _named(err)
            assert _snapshot(store) == before  # a refused write changes nothing
            return
        # accepted: it is stored and reads back
        assert store.get_turn(sid, turn.id).kind == turn.kind
        store.context(sid)
        assert store.doctor().ok


@FUZZ
@given(session=ODD_TEXT, turn=ODD_TEXT)
def test_reads_and_navigate_with_random_ids(session: str, turn: str) -> None:
    store, sid, ids = _seeded()
    with store:
        before = _snapshot(store)
        for call in (
            lambda: store.get_turn(session, turn),
            lambda: store.get_turn(sid, turn),
            lambda: store.context(session),
            lambda: store.context(sid, turn),
            lambda: store.children(sid, turn),
            lambda: store.path(sid, turn),
            lambda: store.navigate(sid, turn),
            lambda: store.navigate(session, ids[0]),
            lambda: store.get_session(session),
            lambda: store.resolve_session(session),
        ):
            try:
                call()
            except (SessionNotFound, TurnNotFound) as err:
                _named(err)
            except NexusError as err:
                _named(err)
        if turn not in ids:
            assert _snapshot(store) == before


@FUZZ
@given(
    id=st.one_of(st.none(), ODD_TEXT),
    cwd=st.one_of(st.none(), ODD_TEXT),
    title=st.one_of(st.none(), ODD_TEXT),
    parent=st.one_of(st.none(), ODD_TEXT, st.just("s1")),
    fork=st.one_of(st.none(), ODD_TEXT),
    created=st.one_of(st.none(), ODD_TEXT),
)
def test_create_session_with_random_arguments(
    id: str | None,
    cwd: str | None,
    title: str | None,
    parent: str | None,
    fork: str | None,
    created: str | None,
) -> None:
    store, _sid, _ids = _seeded()
    with store:
        before = _snapshot(store)
        try:
            session = store.create_session(
                id=id,
                cwd=cwd,
                title=title,
                parent_session=parent,
                fork_turn=fork,
                created_utc=created,
            )
        except NexusError as err:
            _named(err)
            assert _snapshot(store) == before
            return
        assert store.get_session(session.id).cwd == cwd


# -- the command line ----------------------------------------------------------------

COMMANDS = [
    ["sessions"],
    ["tree"],
    ["context", "show"],
    ["context", "status"],
    ["sql"],
    ["doctor"],
    ["gc"],
    ["nope"],
    [],
]
OPTIONS = st.sampled_from(
    [
        "--json",
        "--limit",
        "--leaf",
        "--window",
        "--render",
        "--thinking",
        "--width",
        "-p",
        "--fix",
        "--wal-limit",
        "--all",
        "--dry-run",
        "--dead-branches-older-than",
        "--compacted-older-than",
        "--sessions-older-than",
        "--keep",
        "--no-vacuum",
        "--csv",
        "--nl",
        "-h",
        "--bogus",
    ]
)
VALUES_ARGV = st.one_of(
    st.sampled_from(
        [
            "s1",
            "latest",
            "0",
            "-1",
            "1e9",
            "nan",
            "inf",
            "openai",
            "x" * 50,
            "select 1",
            "delete from turns",
            "",
            "--",
            "%",
        ]
    ),
    st.text(max_size=6).filter(lambda t: "\x00" not in t),
)


@FUZZ
@given(
    command=st.sampled_from(COMMANDS), rest=st.lists(st.one_of(OPTIONS, VALUES_ARGV), max_size=5)
)
def test_cli_random_argv(
    tmp_path_factory: pytest.TempPathFactory, command: list[str], rest: list[str]
) -> None:
    db = tmp_path_factory.mktemp("cli") / "f.db"
    with Store(db, counter="chars4") as store:
        s = store.create_session(id="s1")
        for i in range(3):
            store.append_entry(s.id, msg(f"m{i}"))
    result = CliRunner().invoke(cli, ["--db", str(db), *command, *rest])
    assert result.exit_code in (0, 1, 2), (result.exit_code, result.output)
    if result.exception is not None:
        assert isinstance(result.exception, SystemExit), repr(result.exception)
    if result.exit_code == 1 and command not in (["doctor"],):
        assert "Error:" in result.output, result.output
    if result.exit_code == 2:
        assert "Usage:" in result.output or "Error:" in result.output


def test_nan_and_huge_numbers_round_trip_or_refuse(store: Store) -> None:
    s = store.create_session()
    for value in (math.nan, math.inf, 2**80, -(2**70)):
        try:
            turn = store.append_entry(s.id, {"type": "custom", "customType": "x", "data": value})
        except NexusError as err:
            _named(err)
            continue
        back = store.get_turn(s.id, turn.id).entry["data"]
        assert back == value or (
            isinstance(value, float) and math.isnan(value) and math.isnan(back)
        )


def test_refused_writes_on_a_file_leave_it_unchanged(store_path: Path) -> None:
    from tests.reliability_helpers import dump

    with Store(store_path, counter="chars4") as store:
        s = store.create_session(id="s1")
        a = store.append_entry(s.id, msg("a")).id
        store.conn.execute("pragma wal_checkpoint(truncate)")
        before = dump(store_path)
        bad = [
            {"type": "compaction", "summary": "s", "firstKeptEntryId": "nope"},
            {"type": "message"},
            {"type": "message", "message": {"role": "user"}, "id": a},
            {"type": "message", "message": {"role": "user"}, "parentId": "nope"},
            {"type": "label"},
            {"type": "session"},
            {},
        ]
        for entry in bad:
            with pytest.raises(NexusError):
                store.append_entry(s.id, entry)
        with pytest.raises(SessionNotFound):
            store.append_entry("nope", msg("x"))
        with pytest.raises(NexusError):
            store.create_session(id="s1")
        assert dump(store_path) == before


# -- the import path: Store.ingest with what a JSON transcript can hold --------------

JSON_TEXT = st.one_of(st.text(max_size=8), st.sampled_from(["\ud800", "a\udfffb", "", "x"]))
JSON_VALUES = st.recursive(
    st.one_of(st.none(), st.booleans(), st.integers(-(2**70), 2**70), st.floats(), JSON_TEXT),
    lambda inner: st.one_of(
        st.lists(inner, max_size=3), st.dictionaries(JSON_TEXT, inner, max_size=3)
    ),
    max_leaves=6,
)
IDS = st.sampled_from(["a", "b", "c", "d", "\ud800"])
JSON_ENTRIES = st.builds(
    lambda kind, uid, parent, fields: {"type": kind, "id": uid, "parentId": parent, **fields},
    st.one_of(KINDS, JSON_VALUES),
    st.one_of(IDS, JSON_VALUES),
    st.one_of(st.none(), IDS, JSON_VALUES),
    st.dictionaries(st.one_of(KEYS, JSON_TEXT), JSON_VALUES, max_size=4),
)


@FUZZ
@given(entries=st.lists(JSON_ENTRIES, max_size=6), source=JSON_TEXT, strict=st.booleans())
def test_ingest_with_random_json_entries(
    entries: list[dict[str, Any]], source: str, strict: bool
) -> None:
    store, _sid, _ids = _seeded()
    with store:
        before = _snapshot(store)
        header = {"type": "session", "id": source, "timestamp": "2024-01-01T00:00:00Z"}
        try:
            sid, counts = store.ingest(
                header,
                ((i + 2, e, None) for i, e in enumerate(entries)),
                source_format="fuzz",
                source_id=source,
                strict=strict,
            )
        except NexusError as err:
            _named(err)
            assert _snapshot(store) == before  # an import is all or nothing
            return
        assert counts.entries == len(entries)
        store.context(sid)
        for turn in store.iter_turns(sid):
            store.context(sid, turn.id)
        assert store.doctor().ok


def test_a_parent_id_that_is_not_utf8_is_a_missing_turn(store: Store) -> None:
    s = store.create_session()
    store.append_message(s.id, {"role": "user", "content": "kept"})
    before = list(store.conn.iterdump())
    for bad in ("\ud800", "x\udfff"):
        with pytest.raises(TurnNotFound, match="parentId"):
            store.append_message(s.id, {"role": "user", "content": "y"}, parent_id=bad)
    assert list(store.conn.iterdump()) == before
