"""A fake OpenAI-compatible model server on 127.0.0.1 that records every request.

OpenClaw's ``openai-completions`` provider posts to ``/v1/chat/completions`` (streaming
or not). The server answers each request with ``reply <n>: <last user text>``, or with
the tool call a test scripted for a trigger word, and keeps every request body so a
test can assert what the model was shown. Run it in-process (`FakeModel`) or as a
script (``python tests/fake_model.py --port-file F --log L``) so that several processes
can read the same log.
"""

from __future__ import annotations

import argparse
import json
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

__all__ = ["FakeModel", "last_user_text", "message_texts", "user_texts"]


def message_texts(body: dict[str, Any]) -> list[str]:
    """Every text the request showed the model (system prompt included), in order."""
    out: list[str] = []
    for message in body.get("messages") or []:
        content = message.get("content")
        if isinstance(content, str):
            out.append(content)
        elif isinstance(content, list):
            out.extend(str(part.get("text", "")) for part in content if isinstance(part, dict))
    return out


def last_user_text(body: dict[str, Any]) -> str:
    """The text of the user messages after the last assistant or tool message.

    OpenClaw sends the prompt and then a user message of internal context, so the
    current turn is every user message since the model last spoke.
    """
    current: list[dict[str, Any]] = []
    for message in reversed(body.get("messages") or []):
        if message.get("role") != "user":
            break
        current.insert(0, message)
    return "\n".join(message_texts({"messages": current}))


def user_texts(body: dict[str, Any]) -> list[str]:
    """The texts of every user message of a request, in order."""
    users = [m for m in body.get("messages") or [] if m.get("role") == "user"]
    return message_texts({"messages": users})


class FakeModel:
    """The server; ``tool_calls`` maps a trigger word in the last user text to a tool call.

    Args:
        log: A JSONL file every request body is appended to (optional).
        tool_calls: ``{trigger: (tool name, arguments)}``: when the last message is
            the user's and holds ``trigger``, the answer is that tool call.
    """

    def __init__(
        self,
        log: Path | None = None,
        tool_calls: dict[str, tuple[str, dict[str, Any]]] | None = None,
    ) -> None:
        self.log = log
        self.tool_calls = dict(tool_calls or {})
        self.requests: list[dict[str, Any]] = []
        self._lock = threading.Lock()
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self._server.daemon_threads = True
        self.port = self._server.server_address[1]
        self.base_url = f"http://127.0.0.1:{self.port}/v1"
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    def __enter__(self) -> FakeModel:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()

    def _record(self, body: dict[str, Any]) -> int:
        with self._lock:
            self.requests.append(body)
            if self.log is not None:
                with self.log.open("a", encoding="utf-8") as f:
                    f.write(json.dumps(body) + "\n")
            return len(self.requests)

    def answer(self, body: dict[str, Any], n: int) -> dict[str, Any]:
        """The assistant message for request number ``n``."""
        messages = body.get("messages") or []
        last = messages[-1] if messages else {}
        text = last_user_text(body)
        # a sub-agent's task ("[Subagent Task]") never triggers: its forked history
        # may hold the parent's trigger word
        if last.get("role") == "user" and "[Subagent Task]" not in text:
            for trigger, (name, arguments) in self.tool_calls.items():
                if trigger in text:
                    return {
                        "role": "assistant",
                        "content": None,
                        "tool_calls": [
                            {
                                "id": f"call_{n}",
                                "type": "function",
                                "function": {"name": name, "arguments": json.dumps(arguments)},
                            }
                        ],
                    }
        return {"role": "assistant", "content": f"reply {n}"}

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        model = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: Any) -> None:
                pass

            def _send_json(self, status: int, value: Any) -> None:
                data = json.dumps(value).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_GET(self) -> None:
                if self.path.rstrip("/").endswith("/models"):
                    self._send_json(200, {"object": "list", "data": [{"id": "fake-model"}]})
                else:
                    self._send_json(404, {"error": {"message": "not found"}})

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                body = json.loads(self.rfile.read(length) or b"{}")
                if not self.path.rstrip("/").endswith("/chat/completions"):
                    self._send_json(404, {"error": {"message": f"no route {self.path}"}})
                    return
                n = model._record(body)
                message = model.answer(body, n)
                finish = "tool_calls" if message.get("tool_calls") else "stop"
                usage = {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15}
                if not body.get("stream"):
                    self._send_json(
                        200,
                        {
                            "id": f"cmpl-{n}",
                            "object": "chat.completion",
                            "created": int(time.time()),
                            "model": body.get("model", "fake-model"),
                            "choices": [{"index": 0, "message": message, "finish_reason": finish}],
                            "usage": usage,
                        },
                    )
                    return
                self.send_response(200)
                self.send_header("Content-Type", "text/event-stream")
                self.send_header("Cache-Control", "no-cache")
                self.send_header("Connection", "close")
                self.end_headers()
                for chunk in _chunks(n, body.get("model", "fake-model"), message, finish, usage):
                    self.wfile.write(b"data: " + json.dumps(chunk).encode() + b"\n\n")
                self.wfile.write(b"data: [DONE]\n\n")
                self.wfile.flush()
                self.close_connection = True

        return Handler


def _chunks(
    n: int, model: str, message: dict[str, Any], finish: str, usage: dict[str, int]
) -> Iterator[dict[str, Any]]:
    base = {"id": f"cmpl-{n}", "object": "chat.completion.chunk", "created": 0, "model": model}
    delta: dict[str, Any] = {"role": "assistant"}
    if message.get("tool_calls"):
        delta["tool_calls"] = [dict(call, index=i) for i, call in enumerate(message["tool_calls"])]
    else:
        delta["content"] = message["content"]
    yield {**base, "choices": [{"index": 0, "delta": delta, "finish_reason": None}]}
    yield {**base, "choices": [{"index": 0, "delta": {}, "finish_reason": finish}]}
    yield {**base, "choices": [], "usage": usage}


def main() -> None:
    """Run the server until killed, writing its port to ``--port-file``."""
    parser = argparse.ArgumentParser()
    parser.add_argument("--port-file", type=Path, required=True)
    parser.add_argument("--log", type=Path, required=True)
    parser.add_argument("--tool", action="append", default=[], help="TRIGGER=NAME=JSON")
    args = parser.parse_args()
    tools = {}
    for spec in args.tool:
        trigger, name, arguments = spec.split("=", 2)
        tools[trigger] = (name, json.loads(arguments))
    with FakeModel(args.log, tools) as model:
        args.port_file.write_text(str(model.port))
        threading.Event().wait()


if __name__ == "__main__":
    main()
