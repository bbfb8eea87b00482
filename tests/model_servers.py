"""Scripted model servers for the real agent CLIs: local HTTP, standard library only.

Each test gives the server a script: what the model answers to each request the agent makes
(call a tool, say something, hang, fail with an HTTP status). The server records every request
body, so a test can check what the agent sent (a resumed conversation carries earlier turns).
"""

from __future__ import annotations

import json
import socket
import threading
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

HANG_LIMIT_S = 120.0
"""A `hang` step holds its request at most this long (the test kills the agent before)."""


@dataclass(frozen=True)
class Step:
    """One scripted answer: a tool call, a text, a hang, or an HTTP error status."""

    kind: str
    """tool | text | hang | drop | status"""
    name: str = ""
    args: dict[str, Any] = field(default_factory=dict)
    text: str = ""
    status: int = 0
    after_s: float = HANG_LIMIT_S
    """A `drop` step closes its stream this long after the hold began, unless told sooner."""


def tool(name: str, **args: Any) -> Step:
    """The model calls tool `name` with `args`."""
    return Step("tool", name=name, args=args)


def text(words: str) -> Step:
    """The model answers with text and ends its turn."""
    return Step("text", text=words)


def hang() -> Step:
    """The model starts answering and then never finishes (until the server closes)."""
    return Step("hang")


def drop(after_s: float = HANG_LIMIT_S) -> Step:
    """The model starts answering, goes silent, then the server closes the stream unfinished.

    What a timed-out API stream looks like to the agent: the answer's first event, then the
    connection closed with no `message_stop`. It closes after `after_s`, or as soon as the test
    calls `drop_held()` (a test that must know the agent was stopped when it closed).
    """
    return Step("drop", after_s=after_s)


def fail(status: int) -> Step:
    """The API answers with this HTTP error status (401, 429, 529...)."""
    return Step("status", status=status)


@dataclass(frozen=True)
class Tokens:
    """The usage the server reports for every answer it completes."""

    input: int = 100
    output: int = 30
    cache_read: int = 20
    cache_write: int = 10


class ScriptedServer:
    """A threaded local HTTP server answering from a script; subclasses speak one API."""

    def __init__(self, steps: list[Step], tokens: Tokens = Tokens()) -> None:
        self.steps = list(steps)
        self.tokens = tokens
        self.log_path: Path | None = None
        """Where a hand-run server appends each scripted request's body."""
        self.requests: list[dict[str, Any]] = []
        """Every scripted request's JSON body, in order."""
        self.paths: list[str] = []
        self.answered = 0
        self.served = 0
        """Every answer completed, side requests too (each carried `tokens`): the bill."""
        """Answers the server completed (each reported `tokens` once)."""
        self.hanging = threading.Event()
        """Set while a `hang` or `drop` step holds a request."""
        self.dropped = threading.Event()
        """Set once a `drop` step has closed its stream unfinished."""
        self.held_flag: Path | None = None
        """A file created when a hold begins: a process the agent left running can wait on it."""
        self._release = threading.Event()
        self._drop_now = threading.Event()
        self._lock = threading.Lock()
        owner = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: Any) -> None:  # noqa: A002
                pass  # quiet: the test output is for the test

            def do_HEAD(self) -> None:  # noqa: N802 (http.server's naming)
                self.send_response(200)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def do_GET(self) -> None:  # noqa: N802
                owner.paths.append(self.path)
                self.send_json(404, {"error": {"message": "not scripted"}})

            def do_POST(self) -> None:  # noqa: N802
                length = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(length) if length else b""
                try:
                    body = json.loads(raw or b"{}")
                except ValueError:
                    body = {}
                owner.paths.append(self.path)
                owner.handle(self, body)

            def send_json(self, status: int, obj: Any) -> None:
                data = json.dumps(obj).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                if status == 429:
                    self.send_header("Retry-After", "3600")
                self.end_headers()
                self.wfile.write(data)

            def start_events(self) -> None:
                self.send_response(200)
                self.send_header("Content-Type", "text/event-stream")
                self.send_header("Cache-Control", "no-cache")
                self.send_header("Connection", "close")
                self.end_headers()
                self.close_connection = True

            def event(self, name: str | None, obj: Any) -> None:
                head = f"event: {name}\n" if name else ""
                self.wfile.write(f"{head}data: {json.dumps(obj)}\n\n".encode())
                self.wfile.flush()

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self._thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        host, port = self.httpd.server_address[:2]
        return f"http://{host}:{port}"

    def __enter__(self) -> ScriptedServer:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._release.set()
        self._drop_now.set()
        self.httpd.shutdown()
        self.httpd.server_close()

    def next_step(self, body: dict[str, Any]) -> Step:
        """The next scripted answer (a plain text once the script is used up)."""
        with self._lock:
            self.requests.append(body)
            if self.log_path is not None:  # the hand-run server: what each request carried
                with self.log_path.open("a") as log:
                    log.write(json.dumps(body) + "\n")
            return self.steps.pop(0) if self.steps else text("Nothing more to do.")

    def hold(self) -> None:
        """Hold a `hang` request until the server closes."""
        self._begin_hold()
        self._release.wait(HANG_LIMIT_S)

    def _begin_hold(self) -> None:
        self.hanging.set()
        if self.held_flag is not None:
            self.held_flag.touch()

    def hold_then_drop(self, handler: Any, step: Step) -> None:
        """Hold a `drop` request for its time (or until `drop_held`), then close it unfinished."""
        self._begin_hold()
        self._drop_now.wait(step.after_s)
        self.hanging.clear()
        try:
            handler.wfile.flush()
            handler.connection.shutdown(socket.SHUT_RDWR)  # FIN now, mid-answer
        except OSError:
            pass  # the agent had gone already
        self.dropped.set()

    def drop_held(self) -> None:
        """Close the stream a `drop` step holds now, instead of after its time."""
        self._drop_now.set()

    def completed(self) -> None:
        with self._lock:
            self.answered += 1

    def served_one(self) -> None:
        with self._lock:
            self.served += 1
            if self.log_path is not None:  # the hand-run server: its bill so far, for a person
                bill = {
                    "answers": self.served,
                    **{k: v * self.served for k, v in vars(self.tokens).items()},
                }
                self.log_path.with_name(
                    self.log_path.name.replace(".requests.jsonl", ".bill.json")
                ).write_text(json.dumps(bill) + "\n")

    def handle(self, handler: Any, body: dict[str, Any]) -> None:
        raise NotImplementedError


def _ids() -> Iterator[str]:
    while True:
        yield uuid.uuid4().hex[:24]


_id = _ids()


class AnthropicServer(ScriptedServer):
    """The Anthropic Messages API (`POST /v1/messages`, streaming or not) for Claude Code."""

    def handle(self, handler: Any, body: dict[str, Any]) -> None:
        if "/v1/messages" not in handler.path or "count_tokens" in handler.path:
            handler.send_json(200, {"input_tokens": self.tokens.input})
            return
        if not body.get("tools"):
            # Side requests (titles, summaries) are not part of the conversation's script.
            self._answer(handler, body, text("ok"), scripted=False)
            return
        self._answer(handler, body, self.next_step(body), scripted=True)

    def _answer(self, handler: Any, body: dict[str, Any], step: Step, scripted: bool) -> None:
        if step.kind == "status":
            error_type = {429: "rate_limit_error", 401: "authentication_error"}.get(
                step.status, "overloaded_error"
            )
            handler.send_json(
                step.status,
                {
                    "type": "error",
                    "error": {"type": error_type, "message": f"scripted {step.status}"},
                },
            )
            return
        tokens = self.tokens
        message_id = f"msg_{next(_id)}"
        model = body.get("model") or "claude-sonnet-4-5"
        start_usage = {
            "input_tokens": tokens.input,
            "output_tokens": 1,
            "cache_read_input_tokens": tokens.cache_read,
            "cache_creation_input_tokens": tokens.cache_write,
        }
        if step.kind == "tool":
            block = {"type": "tool_use", "id": f"toolu_{next(_id)}", "name": step.name, "input": {}}
            delta = {"type": "input_json_delta", "partial_json": json.dumps(step.args)}
            stop_reason = "tool_use"
        else:
            block = {"type": "text", "text": ""}
            delta = {"type": "text_delta", "text": step.text or "..."}
            stop_reason = "end_turn"
        if not body.get("stream"):
            if step.kind == "drop":  # no answer at all: the connection just closes
                self.hold_then_drop(handler, step)
                return
            content = dict(block)
            if step.kind == "tool":
                content["input"] = step.args
            else:
                content["text"] = step.text
            usage = {**start_usage, "output_tokens": tokens.output}
            handler.send_json(
                200,
                {
                    "id": message_id,
                    "type": "message",
                    "role": "assistant",
                    "model": model,
                    "content": [content],
                    "stop_reason": stop_reason,
                    "stop_sequence": None,
                    "usage": usage,
                },
            )
            self.served_one()
            if scripted:
                self.completed()
            return
        handler.start_events()
        handler.event(
            "message_start",
            {
                "type": "message_start",
                "message": {
                    "id": message_id,
                    "type": "message",
                    "role": "assistant",
                    "model": model,
                    "content": [],
                    "stop_reason": None,
                    "stop_sequence": None,
                    "usage": start_usage,
                },
            },
        )
        if step.kind == "hang":
            self.hold()
            return
        if step.kind == "drop":
            self.hold_then_drop(handler, step)
            return
        handler.event(
            "content_block_start",
            {"type": "content_block_start", "index": 0, "content_block": block},
        )
        handler.event(
            "content_block_delta", {"type": "content_block_delta", "index": 0, "delta": delta}
        )
        handler.event("content_block_stop", {"type": "content_block_stop", "index": 0})
        handler.event(
            "message_delta",
            {
                "type": "message_delta",
                "delta": {"stop_reason": stop_reason, "stop_sequence": None},
                "usage": {
                    "input_tokens": tokens.input,
                    "output_tokens": tokens.output,
                    "cache_read_input_tokens": tokens.cache_read,
                    "cache_creation_input_tokens": tokens.cache_write,
                },
            },
        )
        handler.event("message_stop", {"type": "message_stop"})
        self.served_one()
        if scripted:
            self.completed()


class OpenAIResponsesServer(ScriptedServer):
    """The OpenAI Responses API (`POST /v1/responses`, server-sent events) for Codex.

    A `tool` step is a function call to the tool Codex offers for shell commands
    (`exec_command` in codex-cli 0.171.0), its arguments given by the step.
    """

    def handle(self, handler: Any, body: dict[str, Any]) -> None:
        if not handler.path.rstrip("/").endswith("/responses"):
            handler.send_json(404, {"error": {"message": "not scripted"}})
            return
        step = self.next_step(body)
        if step.kind == "status":
            handler.send_json(
                step.status, {"error": {"message": f"scripted {step.status}", "type": "error"}}
            )
            return
        tokens = self.tokens
        response_id = f"resp_{next(_id)}"
        model = body.get("model") or "gpt-5.1-codex"
        shell = {"id": response_id, "object": "response", "model": model, "status": "in_progress"}
        handler.start_events()
        handler.event("response.created", {"type": "response.created", "response": shell})
        if step.kind == "hang":
            self.hold()
            return
        if step.kind == "drop":
            self.hold_then_drop(handler, step)
            return
        if step.kind == "tool":
            item: dict[str, Any] = {
                "type": "function_call",
                "id": f"fc_{next(_id)}",
                "call_id": f"call_{next(_id)}",
                "name": step.name,
                "arguments": json.dumps(step.args),
                "status": "completed",
            }
        else:
            item = {
                "type": "message",
                "id": f"msg_{next(_id)}",
                "role": "assistant",
                "status": "completed",
                "content": [{"type": "output_text", "text": step.text, "annotations": []}],
            }
        handler.event(
            "response.output_item.added",
            {"type": "response.output_item.added", "output_index": 0, "item": item},
        )
        handler.event(
            "response.output_item.done",
            {"type": "response.output_item.done", "output_index": 0, "item": item},
        )
        usage = {
            "input_tokens": tokens.input,
            "input_tokens_details": {"cached_tokens": tokens.cache_read},
            "output_tokens": tokens.output,
            "output_tokens_details": {"reasoning_tokens": 0},
            "total_tokens": tokens.input + tokens.output,
        }
        done = {**shell, "status": "completed", "output": [item], "usage": usage}
        handler.event("response.completed", {"type": "response.completed", "response": done})
        self.served_one()
        self.completed()


class OpenAIChatServer(ScriptedServer):
    """The OpenAI Chat Completions API (`POST /v1/chat/completions`, streamed) for OpenCode.

    A request without `tools` (OpenCode's title request) is not part of the script: it gets a
    short text, billed like any answer.
    """

    def handle(self, handler: Any, body: dict[str, Any]) -> None:
        if not handler.path.rstrip("/").endswith("/chat/completions"):
            handler.send_json(404, {"error": {"message": "not scripted"}})
            return
        scripted = bool(body.get("tools"))
        step = self.next_step(body) if scripted else text("A title")
        if step.kind == "status":
            handler.send_json(
                step.status, {"error": {"message": f"scripted {step.status}", "type": "error"}}
            )
            return
        tokens = self.tokens
        usage = {
            "prompt_tokens": tokens.input,
            "completion_tokens": tokens.output,
            "total_tokens": tokens.input + tokens.output,
            "prompt_tokens_details": {"cached_tokens": tokens.cache_read},
        }
        base = {"id": f"chatcmpl-{next(_id)}", "object": "chat.completion.chunk", "created": 0}
        base["model"] = body.get("model") or "test-model"
        if not body.get("stream") and step.kind == "text":  # Aider's commit-message request
            message = {"role": "assistant", "content": step.text}
            choice = {"index": 0, "message": message, "finish_reason": "stop"}
            answer = {**base, "object": "chat.completion", "choices": [choice], "usage": usage}
            handler.send_json(200, answer)
            self.served_one()
            if scripted:
                self.completed()
            return
        handler.start_events()
        if step.kind in ("hang", "drop"):
            handler.event(None, {**base, "choices": [{"index": 0, "delta": {"role": "assistant"}}]})
            if step.kind == "drop":
                self.hold_then_drop(handler, step)
            else:
                self.hold()
            return
        if step.kind == "tool":
            call = {
                "index": 0,
                "id": f"call_{next(_id)}",
                "type": "function",
                "function": {"name": step.name, "arguments": json.dumps(step.args)},
            }
            delta: dict[str, Any] = {"role": "assistant", "tool_calls": [call]}
            finish = "tool_calls"
        else:
            delta, finish = {"role": "assistant", "content": step.text}, "stop"
        handler.event(None, {**base, "choices": [{"index": 0, "delta": delta}]})
        handler.event(
            None, {**base, "choices": [{"index": 0, "delta": {}, "finish_reason": finish}]}
        )
        handler.event(None, {**base, "choices": [], "usage": usage})
        handler.wfile.write(b"data: [DONE]\n\n")
        handler.wfile.flush()
        self.served_one()
        if scripted:
            self.completed()


def _fill_schema(schema: Any) -> Any:
    """A value that follows a JSON schema: first enum value, "x", the minimum, false, keys."""
    if not isinstance(schema, dict):
        return "x"
    if schema.get("enum"):
        return schema["enum"][0]
    kind = str(schema.get("type", "object")).lower()
    if kind == "object":
        props = schema.get("properties") or {}
        return {key: _fill_schema(props.get(key)) for key in props}
    if kind == "array":
        return []
    if kind in ("number", "integer"):
        return schema.get("minimum", 1)
    if kind == "boolean":
        return False
    return "x"


class GeminiServer(ScriptedServer):
    """The Gemini API for Gemini CLI: a routing `:generateContent`, then streamed answers.

    The routing request (its answer follows the JSON schema in the request) is not part of
    the script; each `:streamGenerateContent?alt=sse` takes the next step.
    """

    def handle(self, handler: Any, body: dict[str, Any]) -> None:
        path = handler.path
        tokens = self.tokens
        usage = {
            "promptTokenCount": tokens.input,
            "candidatesTokenCount": tokens.output,
            "cachedContentTokenCount": tokens.cache_read,
            "totalTokenCount": tokens.input + tokens.output,
        }
        if ":countTokens" in path:
            handler.send_json(200, {"totalTokens": tokens.input})
            return
        if ":generateContent" in path:
            config = body.get("generationConfig") or body.get("generation_config") or {}
            schema = config.get("responseJsonSchema") or config.get("responseSchema")
            answer = json.dumps(_fill_schema(schema)) if schema else "ok"
            handler.send_json(200, self._chunk([{"text": answer}], "STOP", usage))
            self.served_one()
            return
        if ":streamGenerateContent" not in path:
            handler.send_json(404, {"error": {"message": "not scripted"}})
            return
        step = self.next_step(body)
        if step.kind == "status":
            status_name = {429: "RESOURCE_EXHAUSTED", 401: "UNAUTHENTICATED"}.get(
                step.status, "UNAVAILABLE"
            )
            handler.send_json(
                step.status,
                {"error": {"code": step.status, "message": "scripted", "status": status_name}},
            )
            return
        handler.start_events()
        if step.kind in ("hang", "drop"):
            handler.event(None, self._chunk([{"text": ""}], None, None))
            if step.kind == "drop":
                self.hold_then_drop(handler, step)
            else:
                self.hold()
            return
        if step.kind == "tool":
            parts = [{"functionCall": {"name": step.name, "args": step.args}}]
        else:
            parts = [{"text": step.text}]
        handler.event(None, self._chunk(parts, "STOP", usage))
        self.served_one()
        self.completed()

    @staticmethod
    def _chunk(parts: list[Any], finish: str | None, usage: Any) -> dict[str, Any]:
        candidate: dict[str, Any] = {"content": {"role": "model", "parts": parts}, "index": 0}
        if finish:
            candidate["finishReason"] = finish
        chunk: dict[str, Any] = {"candidates": [candidate], "modelVersion": "gemini-test"}
        if usage:
            chunk["usageMetadata"] = usage
        return chunk


SERVERS: dict[str, type[ScriptedServer]] = {
    "anthropic": AnthropicServer,
    "openai": OpenAIResponsesServer,
    "gemini": GeminiServer,
    "chat": OpenAIChatServer,
}


def _step_from_json(obj: dict[str, Any]) -> Step:
    """{"tool": NAME, "args": {...}} | {"text": "..."} | {"hang": true} | {"drop": SECONDS}
    | {"status": 429}."""
    if "tool" in obj:
        return tool(obj["tool"], **obj.get("args", {}))
    if "status" in obj:
        return fail(int(obj["status"]))
    if obj.get("hang"):
        return hang()
    if "drop" in obj:
        return drop(float(obj["drop"]))
    return text(str(obj.get("text", "")))


def main(argv: list[str]) -> int:
    """`python tests/model_servers.py KIND SCRIPT.json`: serve until killed.

    Prints its URL; appends each scripted request's body to SCRIPT.requests.jsonl and keeps its
    bill (answers served, side requests too, and the tokens they reported) in SCRIPT.bill.json.
    """
    import sys
    import time

    if len(argv) != 2 or argv[0] not in SERVERS:
        print(f"usage: model_servers.py {'|'.join(SERVERS)} SCRIPT.json", file=sys.stderr)
        return 2
    steps = [_step_from_json(obj) for obj in json.loads(Path(argv[1]).read_text())]
    with SERVERS[argv[0]](steps) as server:
        server.log_path = Path(argv[1]).with_suffix(".requests.jsonl")
        print(server.url, flush=True)
        while True:
            time.sleep(3600)


if __name__ == "__main__":
    import sys

    raise SystemExit(main(sys.argv[1:]))
