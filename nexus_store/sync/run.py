"""One sync over many sources, where sources are by default, and ``--watch``.

`sync_paths` walks the given files and folders (or `default_sources`), stats every
transcript file and OpenClaw database, and reads only what changed since its
checkpoint (`nexus_store.sync.files`, `nexus_store.sync.openclaw`). A source that
is not a transcript is reported and remembered (read again only when it changes);
a source synced before and gone now is reported and its sessions are kept.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from pathlib import Path
from typing import TYPE_CHECKING

from nexus_store.errors import ConflictError, NexusError, TranscriptError
from nexus_store.formats import NotATranscript, check_transcript
from nexus_store.formats.sniff import OPENCLAW_STORE
from nexus_store.store.checkpoints import Checkpoint, Checkpoints
from nexus_store.sync.files import sync_file, unchanged
from nexus_store.sync.openclaw import database_stat, database_unchanged, sync_openclaw_database
from nexus_store.sync.report import SyncReport

if TYPE_CHECKING:
    from nexus_store.store.facade import Store

__all__ = ["SYNC_PATHS_ENV", "default_sources", "iter_sources", "sync_paths"]

SYNC_PATHS_ENV = "NEXUS_STORE_SYNC_PATHS"
_SUFFIXES = (".jsonl", ".ndjson")
_DATABASE = "openclaw-agent.sqlite"

SyncProgress = Callable[[int, int, int], None]
"""Called as progress(sources_done, sources_total, entries_done) during a sync."""


def default_sources(env: Mapping[str, str] | None = None, home: Path | None = None) -> list[Path]:
    """Where the agent tools on this machine keep their sessions (those that exist).

    Each tool's own setting moves its folder: ``CLAUDE_CONFIG_DIR`` (Claude Code,
    default ``~/.claude``) + ``projects``, ``CODEX_HOME`` (default ``~/.codex``) +
    ``sessions``, ``PI_CODING_AGENT_DIR`` (default ``~/.pi/agent``) + ``sessions``,
    ``OPENCLAW_STATE_DIR`` (default ``~/.openclaw``) + ``agents/*/sessions`` and
    ``agents/*/agent/openclaw-agent.sqlite``. ``NEXUS_STORE_SYNC_PATHS`` (paths
    separated by ``os.pathsep``) replaces the whole list.

    Args:
        env: The environment (default ``os.environ``).
        home: The home folder (default ``Path.home()``).

    Returns:
        The existing folders and databases, in that order.
    """
    env = os.environ if env is None else env
    home = Path.home() if home is None else home
    override = env.get(SYNC_PATHS_ENV)
    if override:
        return [Path(p).expanduser() for p in override.split(os.pathsep) if p]

    def base(var: str, default: Path) -> Path:
        value = env.get(var)
        return Path(value).expanduser() if value else default

    found = [
        base("CLAUDE_CONFIG_DIR", home / ".claude") / "projects",
        base("CODEX_HOME", home / ".codex") / "sessions",
        base("PI_CODING_AGENT_DIR", home / ".pi" / "agent") / "sessions",
    ]
    agents = base("OPENCLAW_STATE_DIR", home / ".openclaw") / "agents"
    if agents.is_dir():
        for agent in sorted(agents.iterdir()):
            found.append(agent / "sessions")
            found.append(agent / "agent" / _DATABASE)
    return [p for p in found if p.exists()]


def _is_candidate(name: str) -> bool:
    return name.endswith(_SUFFIXES) or ".jsonl.reset." in name or name == _DATABASE


def iter_sources(root: Path) -> Iterator[Path]:
    """Transcript files and OpenClaw databases under a folder (or the file itself).

    Sub-agent files (Claude Code ``agent-*.jsonl``) come after the sessions they
    belong to, so they link to their parent.

    Args:
        root: A file or a folder (searched recursively).

    Yields:
        Absolute paths.
    """
    if not root.is_dir():
        yield root.resolve()
        return
    found: list[Path] = []
    stack = [root.resolve()]
    while stack:
        folder = stack.pop()
        try:
            entries = list(os.scandir(folder))
        except OSError:
            continue
        for entry in entries:
            if entry.is_dir(follow_symlinks=False):
                stack.append(Path(entry.path))
            elif _is_candidate(entry.name) and entry.is_file():
                found.append(Path(entry.path))
    yield from sorted(found, key=lambda p: (p.name.startswith("agent-"), str(p)))


def sync_paths(
    store: Store,
    paths: Iterable[str | Path] | None = None,
    *,
    strict: bool = False,
    progress: SyncProgress | None = None,
) -> SyncReport:
    """Import what is new in transcript files, folders and OpenClaw databases.

    Args:
        store: The store (SQLite); checkpoints live in its ``sync_sources`` table.
        paths: Files and folders; None: `default_sources`.
        strict: Stop at a source's first problem, storing nothing of that source.
        progress: Receives (sources done, sources total, entries done).

    Returns:
        A SyncReport.

    Raises:
        NexusError: A given path does not exist.
    """
    started = time.monotonic()
    report = SyncReport()
    roots = default_sources() if paths is None else [Path(p).expanduser() for p in paths]
    for root in roots:
        if not root.exists():
            raise NexusError(f"no such file or directory: {root}")
    checkpoints = Checkpoints(store.conn)
    sources: list[Path] = []
    for root in roots:
        listed = list(iter_sources(root))
        if root.is_dir() and not listed:
            report.not_transcripts.append(f"not a transcript: {root} (no transcript files in it)")
        sources.extend(listed)
    seen = set()
    for done, path in enumerate(sources, 1):
        if path in seen:
            continue
        seen.add(path)
        report.sources += 1
        _sync_one(store, checkpoints, path, report, strict)
        if progress is not None:
            progress(done, len(sources), report.entries)
    for root in roots:
        _missing(checkpoints, root, seen, report)
    report.files = report.sources
    report.seconds = round(time.monotonic() - started, 3)
    return report


def _sync_one(
    store: Store, checkpoints: Checkpoints, path: Path, report: SyncReport, strict: bool
) -> None:
    cp = checkpoints.get(str(path))
    try:
        if path.name == _DATABASE or (cp is not None and cp.kind == "openclaw_store"):
            st, wal = database_stat(path)
            if database_unchanged(cp, st, wal):
                report.unchanged += 1
                return
        else:
            st = os.stat(path)
            wal = None
            if unchanged(cp, st):
                report.unchanged += 1
                if cp is not None and cp.status == "not_transcript" and cp.message:
                    report.not_transcripts.append(cp.message)
                return
        if cp is None or cp.status != "ok":
            kind = check_transcript(path)
        else:
            kind = OPENCLAW_STORE if cp.kind == "openclaw_store" else "jsonl"
        if kind == OPENCLAW_STORE:
            st, wal = database_stat(path)
            sync_openclaw_database(store, path, st, wal, cp, report, strict=strict)
        else:
            sync_file(store, path, st, cp, report, strict=strict)
    except NotATranscript as err:
        report.not_transcripts.append(str(err))
        if err.why != "no complete line yet":
            _remember(checkpoints, store, path, "not_transcript", str(err))
    except (TranscriptError, ConflictError) as err:
        report.errors.append(str(err))
    except OSError as err:
        report.errors.append(f"{path}: {err.strerror or err}")


def _remember(
    checkpoints: Checkpoints, store: Store, path: Path, status: str, message: str
) -> None:
    try:
        st = os.stat(path)
    except OSError:
        return
    with store.atomic():
        checkpoints.put(
            Checkpoint(
                path=str(path),
                kind="jsonl",
                device=st.st_dev,
                inode=st.st_ino,
                size=st.st_size,
                mtime_ns=st.st_mtime_ns,
                status=status,
                message=message,
            )
        )


def _missing(checkpoints: Checkpoints, root: Path, seen: set[Path], report: SyncReport) -> None:
    for path in checkpoints.paths_under(str(root.resolve())):
        if Path(path) not in seen and not os.path.exists(path):
            report.missing.append(f"{path}: gone since the last sync; its sessions are kept")
