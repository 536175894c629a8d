"""The local service: OpenClaw's context-engine lifecycle over HTTP/JSON (``nexus-store serve``).

`lifecycle` answers the calls from a `Store` (no HTTP), `app` is the Starlette app
(token, loopback only, OpenAPI), `runner` binds and runs it (one per database, files
beside the database), and `client` is a small Python client. Starlette and uvicorn are
the optional ``serve`` extra; importing this package needs neither.
"""

from __future__ import annotations

__all__: list[str] = []
