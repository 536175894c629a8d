"""A real HTTP server on 127.0.0.1 whose answers each test scripts.

`ScriptedServer` runs a `ThreadingHTTPServer` on an ephemeral port in a daemon
thread. A test queues `Reply` objects; each request consumes the next one (the
last one repeats), and every request is recorded (method, path, headers, JSON
body) so tests can assert what the client sent and how many attempts it made. A
reply can stall (sleep before answering), send a body that is not JSON, or close
the connection without answering. The server never listens on anything but
127.0.0.1.

Use it through the `scripted_server` fixture (import it into a test module or a
conftest) or as a context manager.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

__all__ = ["RecordedRequest", "Reply", "ScriptedServer", "chat_reply", "scripted_server"]


@dataclass(frozen=True)
class Reply:
    """One scripted answer.

    Attributes:
        status: HTTP status code.
        body: Bytes, str, or a JSON-serializable value (sent as JSON).
        headers: Extra response headers.
        delay: Seconds to sleep before answering (a stall).
        drop: Close the connection without any response.
    """

    status: int = 200
    body: Any = None
    headers: dict[str, str] = field(default_factory=dict)
    delay: float = 0.0
    drop: bool = False


@dataclass(frozen=True)
class RecordedRequest:
    """A request the server received."""

    method: str
    path: str
    headers: dict[str, str]
    body: bytes

    def json(self) -> Any:
        """The request body parsed as JSON."""
        return json.loads(self.body)


def chat_reply(content: str, *, status: int = 200) -> Reply:
    """A well-formed chat-completions answer whose message content is ``content``."""
    return Reply(
        status=status,
        body={
            "id": "cmpl-test",
            "object": "chat.completion",
            "choices": [
                {
                    "index": 0,
                    "message": {"role": "assistant", "content": content},
                    "finish_reason": "stop",
                }
            ],
        },
    )


class ScriptedServer:
    """An HTTP server on 127.0.0.1 answering from a script."""

    def __init__(self) -> None:
        self.requests: list[RecordedRequest] = []
        self._script: list[Reply] = []
        self._lock = threading.Lock()
        self._release = threading.Event()  # wakes stalled handlers at shutdown
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: Any) -> None:  # quiet
                return

            def _handle(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length) if length else b""
                reply = server._record(self.command, self.path, dict(self.headers.items()), body)
                if reply.delay:
                    server._release.wait(reply.delay)
                if reply.drop:
                    self.close_connection = True
                    return
                payload = reply.body
                if isinstance(payload, bytes):
                    data = payload
                elif isinstance(payload, str):
                    data = payload.encode()
                else:
                    data = json.dumps(payload).encode()
                try:
                    self.send_response(reply.status)
                    content_type = "application/json"
                    self.send_header("Content-Type", content_type)
                    for key, value in reply.headers.items():
                        self.send_header(key, value)
                    self.send_header("Content-Length", str(len(data)))
                    self.end_headers()
                    self.wfile.write(data)
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the client gave up (timeout): nothing to answer

            do_POST = _handle
            do_GET = _handle

        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._httpd.daemon_threads = True
        self._thread = threading.Thread(
            target=self._httpd.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True
        )

    def _record(self, method: str, path: str, headers: dict[str, str], body: bytes) -> Reply:
        with self._lock:
            self.requests.append(RecordedRequest(method, path, headers, body))
            if not self._script:
                return Reply(status=500, body={"error": {"message": "no scripted reply"}})
            if len(self._script) > 1:
                return self._script.pop(0)
            return self._script[0]

    @property
    def url(self) -> str:
        """Base URL, e.g. ``http://127.0.0.1:54321/v1``."""
        host, port = self._httpd.server_address[:2]
        return f"http://{host!s}:{port}/v1"

    def script(self, *replies: Reply) -> ScriptedServer:
        """Replace the script; the last reply answers every further request."""
        with self._lock:
            self._script = list(replies)
        return self

    def start(self) -> ScriptedServer:
        """Start serving in a background thread."""
        self._thread.start()
        return self

    def stop(self) -> None:
        """Wake stalled handlers, stop serving and close the socket."""
        self._release.set()
        self._httpd.shutdown()
        self._httpd.server_close()
        self._thread.join(timeout=5)

    def __enter__(self) -> ScriptedServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


@pytest.fixture
def scripted_server() -> Iterator[ScriptedServer]:
    """A started `ScriptedServer`, stopped after the test."""
    with ScriptedServer() as server:
        yield server
