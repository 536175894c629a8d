"""The HTTP face of the service: a Starlette app over `EngineCalls`.

Every route is ``POST /v1/<method>`` with a JSON object in and out (the shapes of
OpenClaw's context-engine methods), plus ``GET /v1/health`` and the OpenAPI
description at ``GET /openapi.json``. Every request must come from the loopback
interface or the Unix socket (403 otherwise) and carry ``Authorization: Bearer
<token>`` (401 otherwise). Errors answer ``{"error": message}`` with a status that
says whose fault it was, and each is logged as one line.
"""

from __future__ import annotations

import hmac
import logging
from collections.abc import Awaitable, Callable
from typing import Any

import orjson
from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from nexus_store import __version__
from nexus_store.errors import InvalidEntry, NexusError, SessionNotFound, TurnNotFound
from nexus_store.service.lifecycle import EngineCalls, RequestError

__all__ = ["LOOPBACK", "METHODS", "SLOW", "create_app", "openapi"]

log = logging.getLogger("nexus_store.service")

LOOPBACK = frozenset({"127.0.0.1", "::1", "localhost"})

Handler = Callable[[EngineCalls, dict[str, Any]], dict[str, Any]]

# route name -> (the EngineCalls method, one-line description for OpenAPI)
METHODS: dict[str, tuple[Handler, str]] = {
    "bootstrap": (EngineCalls.bootstrap, "Map a session key to a session (created once)."),
    "ingest": (EngineCalls.ingest, "Acknowledge one message (turns arrive by commitTurn)."),
    "ingestBatch": (EngineCalls.ingest_batch, "Acknowledge a batch (turns arrive by commitTurn)."),
    "commitTurn": (EngineCalls.commit_turn, "Store an accepted turn once per advancementKey."),
    "assemble": (EngineCalls.assemble, "The model context within tokenBudget."),
    "afterTurn": (EngineCalls.after_turn, "Proactive compaction when the trigger fires."),
    "compact": (EngineCalls.compact, "Compact: a summary turn; nothing is deleted."),
    "prepareSubagentSpawn": (
        EngineCalls.prepare_subagent_spawn,
        "Create a sub-agent session (fork or isolated).",
    ),
    "rollbackSubagentSpawn": (
        EngineCalls.rollback_subagent_spawn,
        "Remove a prepared sub-agent session that never ran.",
    ),
    "onSubagentEnded": (EngineCalls.on_subagent_ended, "Record that a sub-agent ended."),
    "session": (EngineCalls.session_of, "The session a session key maps to."),
}


# Calls that may wait on a summarizer model run in a worker thread. The others take a
# millisecond or two and run on the event loop: a worker-thread hop costs two wake-ups,
# which on a busy machine doubled their latency, and every call takes the one store
# lock anyway, so a thread would not let them run side by side.
SLOW = frozenset({"compact", "afterTurn"})


def _json(value: Any, status: int = 200) -> Response:
    return Response(orjson.dumps(value), status_code=status, media_type="application/json")


def _status(err: Exception) -> int:
    if isinstance(err, SessionNotFound | TurnNotFound):
        return 404
    if isinstance(err, RequestError | InvalidEntry):
        return 400
    if isinstance(err, NexusError):
        return 409
    return 500


def openapi() -> dict[str, Any]:
    """The OpenAPI 3.1 description of the service."""
    any_object = {"type": "object", "additionalProperties": True}
    error = {
        "description": "An error",
        "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Error"}}},
    }
    paths: dict[str, Any] = {
        "/v1/health": {
            "get": {
                "summary": "Who is serving which database.",
                "responses": {"200": {"description": "The service's identity"}, "401": error},
            }
        },
        "/v1/info": {
            "get": {
                "summary": "The engine's info (OpenClaw ContextEngineInfo).",
                "responses": {"200": {"description": "ContextEngineInfo"}, "401": error},
            }
        },
    }
    for name, (_, summary) in METHODS.items():
        paths[f"/v1/{name}"] = {
            "post": {
                "summary": summary,
                "requestBody": {
                    "required": True,
                    "content": {"application/json": {"schema": any_object}},
                },
                "responses": {
                    "200": {
                        "description": "The method's result",
                        "content": {"application/json": {"schema": any_object}},
                    },
                    "400": error,
                    "401": error,
                    "403": error,
                    "404": error,
                    "409": error,
                    "500": error,
                },
            }
        }
    return {
        "openapi": "3.1.0",
        "info": {
            "title": "nexus_store context-engine service",
            "version": __version__,
            "description": "OpenClaw's context-engine lifecycle over a nexus_store database. "
            "Loopback or Unix socket only; every request needs the bearer token from the "
            "file beside the database.",
        },
        "components": {
            "securitySchemes": {"bearer": {"type": "http", "scheme": "bearer"}},
            "schemas": {
                "Error": {
                    "type": "object",
                    "properties": {"error": {"type": "string"}},
                    "required": ["error"],
                }
            },
        },
        "security": [{"bearer": []}],
        "paths": paths,
    }


def create_app(calls: EngineCalls, token: str, *, database: str = "") -> Starlette:
    """The ASGI app.

    Args:
        calls: The lifecycle over the open store.
        token: The bearer token every request must carry.
        database: What to report as the database in ``/v1/health``.

    Returns:
        A Starlette application.
    """
    expected = f"Bearer {token}".encode()

    def refuse(request: Request) -> Response | None:
        client = request.client
        # no client address: the Unix socket, which only the owner can open
        if client is not None and client.host and client.host not in LOOPBACK:
            log.warning(
                "refused %s %s from %s: not loopback", request.method, request.url.path, client.host
            )
            return _json({"error": "this service answers only on the loopback interface"}, 403)
        given = request.headers.get("authorization", "").encode()
        if not hmac.compare_digest(given, expected):
            log.warning(
                "refused %s %s: missing or wrong bearer token", request.method, request.url.path
            )
            return _json(
                {"error": "missing or wrong bearer token (it is in the .token file beside the db)"},
                401,
            )
        return None

    def guarded(
        func: Callable[[Request], Awaitable[Response]],
    ) -> Callable[[Request], Awaitable[Response]]:
        async def endpoint(request: Request) -> Response:
            refused = refuse(request)
            if refused is not None:
                return refused
            return await func(request)

        return endpoint

    async def health(request: Request) -> Response:
        return _json({"service": "nexus_store", "version": __version__, "database": database})

    async def info(request: Request) -> Response:
        return _json(calls.info())

    async def spec(request: Request) -> Response:
        return _json(openapi())

    def method_endpoint(name: str, handler: Handler) -> Callable[[Request], Awaitable[Response]]:
        async def endpoint(request: Request) -> Response:
            try:
                body = orjson.loads(await request.body() or b"{}")
            except orjson.JSONDecodeError as err:
                log.warning("%s: request body is not JSON: %s", name, err)
                return _json({"error": f"{name}: the request body is not JSON ({err})"}, 400)
            if not isinstance(body, dict):
                return _json({"error": f"{name}: the request body must be a JSON object"}, 400)
            try:
                if name in SLOW:
                    result = await run_in_threadpool(handler, calls, body)
                else:
                    result = handler(calls, body)
            except Exception as err:
                status = _status(err)
                log.error("%s failed (%d): %s: %s", name, status, type(err).__name__, err)
                message = (
                    str(err) if status < 500 else f"internal error: {type(err).__name__}: {err}"
                )
                return _json({"error": f"{name}: {message}"}, status)
            return _json(result)

        return endpoint

    routes = [
        Route("/openapi.json", guarded(spec), methods=["GET"]),
        Route("/v1/health", guarded(health), methods=["GET"]),
        Route("/v1/info", guarded(info), methods=["GET"]),
    ]
    routes += [
        Route(f"/v1/{name}", guarded(method_endpoint(name, handler)), methods=["POST"])
        for name, (handler, _) in METHODS.items()
    ]
    return Starlette(routes=routes)
