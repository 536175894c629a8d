"""A small client of the service (what the OpenClaw plugin does, in Python).

`ServiceClient` posts JSON to ``/v1/<method>`` with the bearer token, over the Unix
socket when the service has one (no TCP handshake) and TCP otherwise. Errors from the
service become `ServiceError` with its one-line message; an unreachable service is
`ServiceUnavailable`.
"""

from __future__ import annotations

import socket
from pathlib import Path
from typing import Any

import httpx
import orjson

from nexus_store.errors import NexusError
from nexus_store.service.runner import ServiceFiles, ServiceUnavailable, read_token, running

__all__ = ["ServiceClient", "ServiceError"]


class ServiceError(NexusError):
    """The service answered a call with an error (its message is kept)."""

    def __init__(self, message: str, status: int) -> None:
        super().__init__(message)
        self.status = status


class ServiceClient:
    """Calls to the running service of one database.

    Args:
        database: The database file the service serves.
        timeout: Seconds per call.
        unix_socket: Use the Unix socket when the service has one.

    Raises:
        ServiceUnavailable: If no service runs on the database.
    """

    def __init__(
        self, database: str | Path, *, timeout: float = 30.0, unix_socket: bool = True
    ) -> None:
        files = ServiceFiles.of(database)
        info = running(files)
        if info is None:
            raise ServiceUnavailable(f"no service runs on {files.label}; start `nexus-store serve`")
        self.info = info
        token = read_token(files)
        transport = (
            httpx.HTTPTransport(uds=info.socket)
            if unix_socket and info.socket
            # headers and body go out as two writes: without TCP_NODELAY the second waits
            # for the server's delayed ACK (40 ms a call)
            else httpx.HTTPTransport(socket_options=[(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)])
        )
        self.http = httpx.Client(
            base_url=info.url,
            transport=transport,
            timeout=timeout,
            headers={"Authorization": f"Bearer {token}", "Content-Type": "application/json"},
        )

    def call(self, method: str, params: dict[str, Any] | None = None) -> Any:
        """POST ``params`` to ``/v1/<method>`` and return the decoded answer."""
        try:
            response = self.http.post(f"/v1/{method}", content=orjson.dumps(params or {}))
        except httpx.TransportError as err:
            raise ServiceUnavailable(
                f"the service at {self.info.url} did not answer: {err}"
            ) from None
        if response.status_code != 200:
            try:
                message = response.json()["error"]
            except (ValueError, KeyError, TypeError):
                message = response.text[:200]
            raise ServiceError(f"{message} (HTTP {response.status_code})", response.status_code)
        return orjson.loads(response.content)

    def close(self) -> None:
        """Close the connection."""
        self.http.close()

    def __enter__(self) -> ServiceClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
