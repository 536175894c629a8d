"""Running the service: its files beside the database, one process per database.

Beside ``sessions.db`` (for a PostgreSQL URL: in ``$XDG_STATE_HOME/nexus_store/services/
<key>/``, ``~/.local/state`` by default, the key a hash of the URL without its password,
with the files named ``db.token``, ``db.service.lock`` and so on) the service keeps:

- ``sessions.db.token``: the bearer token (created once, mode 0600; clients read it);
- ``sessions.db.service.lock``: held (``flock``) while a service runs, so a second
  ``nexus-store serve`` on the same database sees it and leaves the first one alone;
- ``sessions.db.service.json``: where it listens (``url``, ``socket``) and its ``pid``,
  written once the sockets are bound and removed when it stops;
- ``sessions.db.sock``: the Unix socket (when the platform and the path length allow).

`serve` runs uvicorn on already-bound sockets (127.0.0.1 TCP and the Unix socket) and
stops cleanly on SIGTERM or SIGINT. `ensure_running` starts one in the background when
none answers (what the OpenClaw plugin does in JavaScript).
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import logging
import os
import secrets
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from nexus_store.errors import NexusError
from nexus_store.store.pg import is_postgres_url, redact

__all__ = [
    "ServiceFiles",
    "ServiceInfo",
    "ServiceUnavailable",
    "ensure_running",
    "read_token",
    "running",
    "serve",
    "state_dir",
    "stop_service",
]

log = logging.getLogger("nexus_store.service")

_SOCKET_PATH_MAX = 100  # sun_path is 108 bytes on Linux, 104 on macOS


class ServiceUnavailable(NexusError):
    """The service could not be started or did not answer."""


def state_dir(url: str) -> Path:
    """Where the service files of a PostgreSQL URL live (the plugin computes the same).

    ``$XDG_STATE_HOME`` (else ``~/.local/state``) ``/nexus_store/services/`` and the
    first 16 hex digits of the SHA-256 of the URL without its password: one folder per
    server, database and user, whatever password is given.
    """
    base = Path(os.environ.get("XDG_STATE_HOME") or Path.home() / ".local" / "state")
    key = hashlib.sha256(redact(url).encode()).hexdigest()[:16]
    return base / "nexus_store" / "services" / key


@dataclass(frozen=True)
class ServiceFiles:
    """The files of the service of one database (a file, or a PostgreSQL URL)."""

    database: Path | str

    @classmethod
    def of(cls, database: str | Path) -> ServiceFiles:
        """The files of a database file (resolved) or a ``postgresql://`` URL."""
        if is_postgres_url(database):
            return cls(str(database))
        return cls(Path(database).resolve())

    @property
    def label(self) -> str:
        """The database as the service names it: the file, or the URL without password."""
        return str(self.database) if isinstance(self.database, Path) else redact(self.database)

    @property
    def base(self) -> Path:
        """What every file's name extends: the database file, or ``<state_dir>/db``."""
        if isinstance(self.database, Path):
            return self.database
        return state_dir(self.database) / "db"

    def _beside(self, suffix: str) -> Path:
        return self.base.with_name(self.base.name + suffix)

    @property
    def token(self) -> Path:
        """The bearer token file (0600)."""
        return self._beside(".token")

    @property
    def lock(self) -> Path:
        """The lock file held while a service runs."""
        return self._beside(".service.lock")

    @property
    def state(self) -> Path:
        """Where a running service writes its address."""
        return self._beside(".service.json")

    @property
    def socket(self) -> Path:
        """The Unix socket."""
        return self._beside(".sock")

    @property
    def log(self) -> Path:
        """The log of a service started in the background."""
        return self._beside(".service.log")

    def make_folder(self) -> None:
        """Create the folder of the files (owner only when it is the state folder)."""
        if isinstance(self.database, Path):
            self.base.parent.mkdir(parents=True, exist_ok=True)
        else:
            self.base.parent.mkdir(parents=True, exist_ok=True, mode=0o700)


@dataclass(frozen=True)
class ServiceInfo:
    """Where a running service listens."""

    url: str
    pid: int
    socket: str | None
    database: str


def read_token(files: ServiceFiles, *, create: bool = False) -> str:
    """The bearer token of a database's service (created 0600 when ``create``).

    Raises:
        ServiceUnavailable: If there is no token file and ``create`` is false.
        NexusError: If the token file is readable by others (then it is not used).
    """
    path = files.token
    if create and not path.exists():
        fd = None
        with contextlib.suppress(FileExistsError):
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        if fd is not None:
            with os.fdopen(fd, "w") as f:
                f.write(secrets.token_urlsafe(32) + "\n")
    try:
        mode = path.stat().st_mode & 0o777
        text = path.read_text(encoding="utf-8").strip()
    except FileNotFoundError:
        raise ServiceUnavailable(
            f"no token file {path}: start the service with `nexus-store --db {files.label} serve`"
        ) from None
    if mode & 0o077:
        raise NexusError(
            f"the token file {path} is readable by others (mode {mode:o}); run `chmod 600 {path}`"
        )
    if not text:
        raise NexusError(f"the token file {path} is empty; delete it and start the service again")
    return text


def running(files: ServiceFiles) -> ServiceInfo | None:
    """The service running on this database, if its lock is held and its state file says where."""
    if not files.lock.exists():
        return None
    with open(files.lock, "a+") as f:
        try:
            fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            pass  # held: a service runs
        else:
            fcntl.flock(f, fcntl.LOCK_UN)
            return None
    try:
        state = json.loads(files.state.read_text(encoding="utf-8"))
    except (FileNotFoundError, ValueError):
        return None  # starting: not bound yet
    try:
        os.kill(int(state["pid"]), 0)
    except ProcessLookupError:
        return None  # left by a killed service; the one holding the lock is starting
    except PermissionError:
        pass  # alive, another user's (cannot happen with 0600 files, but not ours to judge)
    return ServiceInfo(
        url=state["url"], pid=state["pid"], socket=state.get("socket"), database=state["database"]
    )


def _bind(host: str, port: int, files: ServiceFiles) -> list[socket.socket]:
    tcp = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET, socket.SOCK_STREAM)
    tcp.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        tcp.bind((host, port))
    except OSError as err:
        tcp.close()
        raise ServiceUnavailable(f"cannot listen on {host}:{port}: {err.strerror}") from None
    # no Nagle delay on the answers (accepted sockets inherit it on Linux)
    tcp.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    tcp.listen(128)
    tcp.set_inheritable(True)
    sockets = [tcp]
    path = str(files.socket)
    if hasattr(socket, "AF_UNIX") and len(path.encode()) <= _SOCKET_PATH_MAX:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(path)
        unix = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        old = os.umask(0o177)  # the socket file: owner only
        try:
            unix.bind(path)
        finally:
            os.umask(old)
        unix.listen(128)
        sockets.append(unix)
    return sockets


def serve(
    database: str | Path,
    *,
    host: str = "127.0.0.1",
    port: int = 0,
    summarizer: str = "extractive",
    ready: Any = None,
) -> ServiceInfo | None:
    """Serve a database until SIGTERM/SIGINT; return None if one already serves it.

    Args:
        database: The SQLite database file (created if missing).
        host: A loopback address to listen on.
        port: TCP port (0: any free port, written to the state file).
        summarizer: Compaction summarizer (``extractive`` by default, offline).
        ready: Called with the `ServiceInfo` once the sockets are bound.

    Returns:
        None when it served and stopped; the running service's info when another
        process already serves this database (nothing is started then).

    Raises:
        ServiceUnavailable: If the address is not loopback or cannot be bound.
    """
    import uvicorn

    from nexus_store.service.app import LOOPBACK, create_app
    from nexus_store.service.lifecycle import EngineCalls
    from nexus_store.store import Store

    if host not in LOOPBACK:
        raise ServiceUnavailable(
            f"the service listens on loopback only (127.0.0.1 or ::1), not {host}"
        )
    files = ServiceFiles.of(database)
    files.make_folder()
    lock = open(files.lock, "a+")
    try:
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            for _ in range(100):  # the other one may still be binding
                info = running(files)
                if info is not None:
                    return info
                time.sleep(0.05)
            raise ServiceUnavailable(
                f"another process holds {files.lock} but does not answer; if no "
                "`nexus-store serve` runs, delete that file"
            ) from None
        # a state file left by a killed service is stale from here on: clients must not
        # take its address (or pid) for ours while we start
        with contextlib.suppress(FileNotFoundError):
            files.state.unlink()
        token = read_token(files, create=True)
        store = Store(files.database)
        try:
            sockets = _bind(host, port, files)
            bound_port = sockets[0].getsockname()[1]
            url_host = f"[{host}]" if ":" in host else host
            info = ServiceInfo(
                url=f"http://{url_host}:{bound_port}",
                pid=os.getpid(),
                socket=str(files.socket) if len(sockets) > 1 else None,
                database=files.label,
            )
            app = create_app(EngineCalls(store, summarizer=summarizer), token, database=files.label)
            config = uvicorn.Config(
                app,
                log_level="warning",
                access_log=False,
                lifespan="off",
                # the plugin's client keeps its connection for 20 s: it closes first
                timeout_keep_alive=30,
                timeout_graceful_shutdown=5,
            )
            server = uvicorn.Server(config)
            # uvicorn re-raises SIGTERM after its graceful shutdown (exit status -15); a
            # service stopped on purpose should exit 0, so it gets handlers of our own
            server.capture_signals = contextlib.nullcontext  # type: ignore[method-assign,assignment]

            def stop(signum: int, frame: object) -> None:
                server.should_exit = True

            previous = {sig: signal.signal(sig, stop) for sig in (signal.SIGTERM, signal.SIGINT)}
            tmp = files.state.with_name(files.state.name + f".{os.getpid()}")
            tmp.write_text(json.dumps(info.__dict__) + "\n", encoding="utf-8")
            os.replace(tmp, files.state)
            if ready is not None:
                ready(info)
            try:
                server.run(sockets=sockets)
            finally:
                for sig, handler in previous.items():
                    signal.signal(sig, handler)
                for sock in sockets:
                    sock.close()
                with contextlib.suppress(FileNotFoundError):
                    files.state.unlink()
                if info.socket:
                    with contextlib.suppress(FileNotFoundError):
                        os.unlink(info.socket)
        finally:
            store.close()
    finally:
        lock.close()
    return None


def ensure_running(
    database: str | Path, *, command: list[str] | None = None, timeout: float = 30.0
) -> ServiceInfo:
    """The service of a database, started in the background when none runs.

    Args:
        database: The database file.
        command: How to start it (default: this Python, ``-m nexus_store serve``).
        timeout: Seconds to wait for it to answer.

    Raises:
        ServiceUnavailable: If it did not come up in time (its log is named).
    """
    files = ServiceFiles.of(database)
    info = running(files)
    if info is not None:
        return info
    argv = [
        *(command or [sys.executable, "-m", "nexus_store"]),
        "--db",
        str(files.database),
        "serve",
    ]
    files.make_folder()
    with open(files.log, "ab") as out:
        proc = subprocess.Popen(
            argv, stdin=subprocess.DEVNULL, stdout=out, stderr=out, start_new_session=True
        )
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        info = running(files)
        if info is not None:
            return info
        if proc.poll() not in (None, 0):
            break  # it failed; 0 means another one won the lock and is still binding
        time.sleep(0.05)
    raise ServiceUnavailable(
        f"the service for {files.label} did not start in {timeout:.0f}s; see {files.log}"
    )


def stop_service(files: ServiceFiles, *, timeout: float = 30.0) -> ServiceInfo | None:
    """Stop the service of a database (SIGTERM) and wait until it has let go of its lock.

    Returns:
        The stopped service's info, or None when none was running.

    Raises:
        ServiceUnavailable: If it is still running after ``timeout`` seconds.
    """
    info = running(files)
    if info is None:
        return None
    with contextlib.suppress(ProcessLookupError):
        os.kill(info.pid, signal.SIGTERM)
    deadline = time.monotonic() + timeout
    while running(files) is not None:
        if time.monotonic() > deadline:
            raise ServiceUnavailable(f"the service (pid {info.pid}) did not stop in {timeout:.0f}s")
        time.sleep(0.05)
    return info
