"""A throwaway PostgreSQL server for the tests (issue 8), started by a session fixture.

The server runs from the PostgreSQL binaries of this machine (``pg_ctl`` on PATH or
under /usr/lib/postgresql/*/bin), in a temporary folder, listening on a Unix socket
there only (no TCP). ``initdb`` refuses to run as root, so under root the cluster
belongs to the ``postgres`` OS user. ``NEXUS_TEST_PG_URL`` points the tests at an
existing server instead. Tests skip, saying why, only where no server binary exists.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import tempfile
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

__all__ = ["PgServer", "find_bin_dir", "pg_server", "pg_url", "start_server"]


def find_bin_dir() -> Path | None:
    """The folder holding initdb and pg_ctl, or None."""
    found = shutil.which("pg_ctl")
    if found and shutil.which("initdb"):
        return Path(found).parent
    candidates = sorted(Path("/usr/lib/postgresql").glob("*/bin"), reverse=True)
    for folder in candidates:
        if (folder / "initdb").exists() and (folder / "pg_ctl").exists():
            return folder
    return None


class PgServer:
    """A running server: ``url(dbname)`` gives a libpq URL over its socket."""

    def __init__(self, base_url: str, stop: list[str] | None, root: Path | None) -> None:
        self.base_url = base_url
        self._stop = stop
        self._root = root

    def url(self, dbname: str = "postgres") -> str:
        """A URL for one database of the server."""
        return self.base_url.replace("/postgres?", f"/{dbname}?", 1)

    def create_database(self, prefix: str = "nexus") -> str:
        """A new empty database; returns its URL."""
        import psycopg

        name = f"{prefix}_{uuid.uuid4().hex[:12]}"
        with psycopg.connect(self.url(), autocommit=True) as conn:
            conn.execute(f'create database "{name}"')
        return self.url(name)

    def create_schema(self, prefix: str = "t") -> str:
        """A new empty schema of the ``postgres`` database; returns a URL that uses it."""
        import psycopg

        name = f"{prefix}_{uuid.uuid4().hex[:12]}"
        with psycopg.connect(self.url(), autocommit=True) as conn:
            conn.execute(f'create schema "{name}"')
        sep = "&" if "?" in self.url() else "?"
        return f"{self.url()}{sep}options=-csearch_path%3D{name}"

    def stop(self) -> None:
        """Stop the server and remove its folder."""
        if self._stop is not None:
            subprocess.run(self._stop, capture_output=True, check=False, timeout=60)
        if self._root is not None:
            shutil.rmtree(self._root, ignore_errors=True)


def start_server() -> PgServer:
    """Start a server in a temporary folder (or use NEXUS_TEST_PG_URL).

    Raises:
        RuntimeError: If the binaries are missing or the server does not start.
    """
    given = os.environ.get("NEXUS_TEST_PG_URL")
    if given:
        return PgServer(given, None, None)
    bin_dir = find_bin_dir()
    if bin_dir is None:
        raise RuntimeError("no PostgreSQL server binaries (initdb, pg_ctl) on this machine")
    root = Path(tempfile.mkdtemp(prefix="nexus-pg-"))
    data, sock = root / "data", root / "sock"
    sock.mkdir()
    as_user: list[str] = []
    user = os.environ.get("USER") or "postgres"
    if os.geteuid() == 0:  # initdb refuses root: the cluster belongs to `postgres`
        import pwd

        try:
            pw = pwd.getpwnam("postgres")
        except KeyError:
            shutil.rmtree(root, ignore_errors=True)
            raise RuntimeError(
                "running as root and there is no `postgres` OS user for initdb"
            ) from None
        for folder in (root, sock):
            os.chown(folder, pw.pw_uid, pw.pw_gid)
        as_user = ["runuser", "-u", "postgres", "--"]
        user = "postgres"
    else:
        import getpass

        user = getpass.getuser()
    os.chmod(root, 0o700)
    subprocess.run(
        [
            *as_user,
            str(bin_dir / "initdb"),
            "-D",
            str(data),
            "-U",
            user,
            "--auth=trust",
            "--encoding=UTF8",
            "--locale=C.UTF-8",
            "--no-sync",
        ],
        check=True,
        capture_output=True,
        timeout=120,
    )
    options = (
        f"-c listen_addresses='' -c unix_socket_directories='{sock}' -c fsync=on "
        "-c max_connections=100 -c shared_buffers=128MB"
    )
    subprocess.run(
        [
            *as_user,
            str(bin_dir / "pg_ctl"),
            "-D",
            str(data),
            "-o",
            options,
            "-l",
            str(root / "server.log"),
            "-w",
            "-t",
            "60",
            "start",
        ],
        check=True,
        capture_output=True,
        timeout=120,
    )
    stop = [*as_user, str(bin_dir / "pg_ctl"), "-D", str(data), "-m", "fast", "-w", "stop"]
    return PgServer(f"postgresql://{user}@/postgres?host={sock}", stop, root)


_SHARED: list[PgServer] = []


@pytest.fixture(scope="session")
def pg_server() -> Iterator[PgServer]:
    """A PostgreSQL server for the whole test session (skips where no binary exists)."""
    if not os.environ.get("NEXUS_TEST_PG_URL") and find_bin_dir() is None:
        pytest.skip("PostgreSQL server binaries (initdb, pg_ctl) not found; install postgresql")
    if _SHARED:  # one server even when two modules register the fixture
        yield _SHARED[0]
        return
    server = start_server()
    _SHARED.append(server)
    try:
        yield server
    finally:
        _SHARED.clear()
        with contextlib.suppress(Exception):
            server.stop()


@pytest.fixture
def pg_url(pg_server: PgServer) -> str:
    """The URL of a new, empty schema on the test server (its own tables)."""
    return pg_server.create_schema()
