"""Scripted model servers for the real agent CLIs: local HTTP, standard library only.

Each test gives the server a script: what the model answers to each request the agent makes
(call a tool, say something, hang, fail with an HTTP status). The server records every request
body, so a test can check what the agent sent (a resumed conversation carries earlier turns).
"""

from __future__ import annotations

import bisect
import json
import socket
import threading
import uuid
from dataclasses import asdict, astuple, dataclass, field, replace
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
    retry_s: float | None = None
    """A `status` step's reset time, said the way the real API says it (None: not said)."""
    retry_as: tuple[str, ...] = ("header",)
    """Where the reset time is said: `header` (Retry-After), `text` (the error message, as
    Gemini's API words it: "Please retry in 20s."), `detail` (Gemini's RetryInfo detail),
    `stream` (the Responses API: a 200 stream whose `response.failed` is a
    `rate_limit_exceeded` saying "Please try again in 120s."), `usage` (ChatGPT's Codex backend:
    a `usage_limit_reached` 429 whose reset is only in its `x-codex-primary-*` headers)."""
    namespace: str = ""
    """A `tool` step's tool namespace, where the API has them (the Responses API's `namespace`
    of a function call: Codex offers its subagent tools in `multi_agent_v1`)."""


def tool(name: str, **args: Any) -> Step:
    """The model calls tool `name` with `args`."""
    return Step("tool", name=name, args=args)


def namespaced(namespace: str, name: str, **args: Any) -> Step:
    """The model calls tool `name` of the tool namespace `namespace` with `args`."""
    return Step("tool", name=name, args=args, namespace=namespace)


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


def fail(status: int, retry_s: float | None = None, said: tuple[str, ...] = ("header",)) -> Step:
    """The API answers with this HTTP error status (401, 429, 529...).

    retry_s: the reset time it gives, in the places `said` names (see `Step.retry_as`).
    """
    return Step("status", status=status, retry_s=retry_s, retry_as=said)


def retry_words(step: Step, words: str) -> str:
    """An error message with the step's reset time in words where the step says so."""
    if step.retry_s is not None and "text" in step.retry_as:
        return f"{words} Please retry in {step.retry_s:g}s."
    return words


@dataclass(frozen=True)
class Tokens:
    """Usage figures: a server's base for its answers, one answer's report, or a bill's sum."""

    input: int = 100
    output: int = 30
    cache_read: int = 20
    cache_write: int = 10

    def nth(self, number: int) -> Tokens:
        """What answer `number` (from 0) reports: each non-zero figure `number` above the base.

        No two answers report the same usage, so a count that takes an answer twice or loses
        one disagrees with the server's ledger.
        """
        return Tokens(*(value + number if value else 0 for value in astuple(self)))

    def __add__(self, other: Tokens) -> Tokens:
        return Tokens(*(a + b for a, b in zip(astuple(self), astuple(other), strict=True)))


@dataclass(frozen=True)
class Served:
    """One answer the server completed: what it reported, and whether the script asked for it."""

    tokens: Tokens
    scripted: bool
    kind: str = "main"
    """main | subagent | compaction | side: which of the agent's requests it answered."""
    begun: int = field(default=0, compare=False)
    """Its place among the answers begun: the ledger's order (an answer completes later than
    one that began after it when its thread is descheduled at its end: under load, a
    subagent's whole answer came in between the main thread's last event and its entry)."""


class ScriptedServer:
    """A threaded local HTTP server answering from a script; subclasses speak one API."""

    def __init__(
        self,
        steps: list[Step],
        tokens: Tokens = Tokens(),
        subagent_steps: list[Step] | None = None,
    ) -> None:
        self.steps = list(steps)
        self.tokens = tokens
        self.subagent_steps = subagent_steps
        """A subagent's own script, for a server that tells its requests apart (None: the
        one script answers them too)."""
        self.log_path: Path | None = None
        """Where a hand-run server appends each scripted request's body."""
        self.requests: list[dict[str, Any]] = []
        """Every scripted request's JSON body, in order."""
        self.paths: list[str] = []
        self.ledger: list[Served] = []
        """Every answer completed, side requests too, in the order they began, with the usage
        it reported."""
        self._begun = 0
        self._handler = threading.local()
        """The answer this handler thread began last (`begin`), for its ledger entry (its own
        name: under `_thread`, the serving thread replaced it, and every handler shared one
        number: a ledger out of order, a test waiting 90 s for an answer it had)."""
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

            def send_json(self, status: int, obj: Any, retry_after: str | None = None) -> None:
                data = json.dumps(obj).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                if retry_after is None and status == 429:
                    retry_after = "3600"  # an unscripted limit: far off, as a quota's would be
                if retry_after:
                    self.send_header("Retry-After", retry_after)
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

    def next_subagent_step(self, body: dict[str, Any]) -> Step:
        """A subagent's next answer: from its own script when there is one."""
        if self.subagent_steps is None:
            return self.next_step(body)
        with self._lock:
            self.requests.append(body)
            return self.subagent_steps.pop(0) if self.subagent_steps else text("Subagent done.")

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

    def begin(self) -> Tokens:
        """The usage the answer now beginning reports (its start and its end say the same)."""
        with self._lock:
            self._begun += 1
            self._handler.begun = self._begun
            return self.tokens.nth(self._begun - 1)

    def served_one(self, tokens: Tokens, scripted: bool = True, kind: str = "") -> None:
        """Enter a completed answer in the ledger (kind: see `Served.kind`)."""
        begun = getattr(self._handler, "begun", 0)
        with self._lock:
            entry = Served(tokens, scripted, kind or ("main" if scripted else "side"), begun)
            bisect.insort(self.ledger, entry, key=lambda served: served.begun)
            if self.log_path is not None:  # the hand-run server: its bill so far, for a person
                bill = {"answers": len(self.ledger), **asdict(self.bill())}
                self.log_path.with_name(
                    self.log_path.name.replace(".requests.jsonl", ".bill.json")
                ).write_text(json.dumps(bill) + "\n")

    @property
    def served(self) -> int:
        """Answers completed, side requests too."""
        return len(self.ledger)

    @property
    def answered(self) -> int:
        """Scripted answers completed (the conversation's, not side requests)."""
        return sum(1 for entry in self.ledger if entry.scripted)

    def bill(self, scripted_only: bool = False, first: int = 0, last: int | None = None) -> Tokens:
        """The sum of what answers `first` to `last` (ledger order) reported."""
        entries = self.ledger[first:last]
        total = Tokens(0, 0, 0, 0)
        for entry in entries:
            if entry.scripted or not scripted_only:
                total = total + entry.tokens
        return total

    def handle(self, handler: Any, body: dict[str, Any]) -> None:
        raise NotImplementedError

    @staticmethod
    def retry_header(step: Step) -> str | None:
        """The Retry-After a `status` step sends (whole seconds): None for the default, "" none."""
        if step.retry_s is None:
            return None
        return str(max(1, round(step.retry_s))) if "header" in step.retry_as else ""


def _new_id() -> str:
    """A fresh id for a message, a call or a response (the server answers on many threads: a
    shared generator raised "generator already executing" when two requests came at once)."""
    return uuid.uuid4().hex[:24]


_SUBAGENT_MARK = "cc_is_subagent=true"
"""Claude Code's billing header in a subagent's system prompt (2.1.197 and 2.1.332)."""

_COMPACTION_MARK = "create a detailed summary of the conversation"
"""Claude Code's compaction request asks this in a user message, the last or one before a
system note (the request carries the tools too)."""

COMPACT_SUMMARY = (
    "<analysis>Scripted.</analysis>\n<summary>The work so far: files written.</summary>"
)


class AnthropicServer(ScriptedServer):
    """The Anthropic Messages API (`POST /v1/messages`, streaming or not) for Claude Code.

    A subagent's requests (its system prompt carries `cc_is_subagent=true`) take their answers
    from `subagent_steps` when given (a subagent may run beside the main thread), else from
    the one script. A compaction request is answered with COMPACT_SUMMARY, off the script.
    """

    def handle(self, handler: Any, body: dict[str, Any]) -> None:
        if "/v1/messages" not in handler.path or "count_tokens" in handler.path:
            handler.send_json(200, {"input_tokens": self.tokens.input})
            return
        if not body.get("tools"):
            # Side requests (titles, summaries) are not part of the conversation's script.
            self._answer(handler, body, text("ok"), scripted=False)
            return
        if _COMPACTION_MARK in json.dumps(body.get("messages")):
            self._answer(handler, body, text(COMPACT_SUMMARY), False, "compaction")
            return
        if _SUBAGENT_MARK in json.dumps(body.get("system")):
            step = self.next_subagent_step(body)
            self._answer(handler, body, step, True, "subagent")
            return
        self._answer(handler, body, self.next_step(body), scripted=True)

    def _answer(
        self, handler: Any, body: dict[str, Any], step: Step, scripted: bool, kind: str = ""
    ) -> None:
        if step.kind == "status":
            error_type = {429: "rate_limit_error", 401: "authentication_error"}.get(
                step.status, "overloaded_error"
            )
            handler.send_json(
                step.status,
                {
                    "type": "error",
                    "error": {
                        "type": error_type,
                        "message": retry_words(step, f"scripted {step.status}"),
                    },
                },
                self.retry_header(step),
            )
            return
        tokens = self.begin()
        message_id = f"msg_{_new_id()}"
        model = body.get("model") or "claude-sonnet-4-5"
        start_usage = {
            "input_tokens": tokens.input,
            "output_tokens": 1,
            "cache_read_input_tokens": tokens.cache_read,
            "cache_creation_input_tokens": tokens.cache_write,
        }
        if step.kind == "tool":
            block = {"type": "tool_use", "id": f"toolu_{_new_id()}", "name": step.name, "input": {}}
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
            self.served_one(tokens, scripted, kind)
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
        self.served_one(tokens, scripted, kind)


class OpenAIResponsesServer(ScriptedServer):
    """The OpenAI Responses API (`POST /v1/responses`, server-sent events) for Codex.

    A `tool` step is a function call to the tool Codex offers for shell commands
    (`exec_command` in codex-cli 0.171.0), its arguments given by the step.

    A subagent's requests (Codex sends them with an `x-openai-subagent` header) take their
    answers from `subagent_steps` when given, else from the one script. An argument
    `SPAWNED` in a step stands for the id of the agent last spawned in the conversation (what
    `spawn_agent` returned, for a `wait_agent` that names it).
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.subagent_headers: list[str] = []
        """The `x-openai-subagent` header of each subagent request, in order."""

    def handle(self, handler: Any, body: dict[str, Any]) -> None:
        if not handler.path.rstrip("/").endswith("/responses"):
            handler.send_json(404, {"error": {"message": "not scripted"}})
            return
        schema = _title_schema(body)
        scripted = schema is None
        subagent = handler.headers.get("x-openai-subagent") if scripted else None
        if subagent is not None:
            self.subagent_headers.append(subagent)
            step = _with_spawned(self.next_subagent_step(body), body)
        elif scripted:
            step = _with_spawned(self.next_step(body), body)
        else:
            step = text(json.dumps(_fill_schema(schema)))
        if step.kind == "status" and "stream" in step.retry_as:
            self._failed_stream(handler, body, step)
            return
        if step.kind == "status" and "usage" in step.retry_as:
            self._usage_limit(handler, step)
            return
        if step.kind == "status":
            words = retry_words(step, f"scripted {step.status}")
            handler.send_json(
                step.status, {"error": {"message": words, "type": "error"}}, self.retry_header(step)
            )
            return
        tokens = self.begin()
        response_id = f"resp_{_new_id()}"
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
                "id": f"fc_{_new_id()}",
                "call_id": f"call_{_new_id()}",
                "name": step.name,
                "arguments": json.dumps(step.args),
                "status": "completed",
            }
            if step.namespace:
                item["namespace"] = step.namespace
        else:
            item = {
                "type": "message",
                "id": f"msg_{_new_id()}",
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
        self.served_one(tokens, scripted, "subagent" if subagent is not None else "")

    @staticmethod
    def _usage_limit(handler: Any, step: Step) -> None:
        """A usage limit as ChatGPT's Codex backend says it: the reset in headers only."""
        import time

        error = {"type": "usage_limit_reached", "message": "The usage limit has been reached"}
        data = json.dumps({"error": {**error, "plan_type": "plus"}}).encode()
        handler.send_response(step.status)
        handler.send_header("Content-Type", "application/json")
        handler.send_header("Content-Length", str(len(data)))
        handler.send_header("x-codex-primary-used-percent", "100")
        handler.send_header("x-codex-primary-window-minutes", "300")
        reset_at = int(time.time() + (step.retry_s or 0))
        handler.send_header("x-codex-primary-reset-at", str(reset_at))
        handler.end_headers()
        handler.wfile.write(data)

    def _failed_stream(self, handler: Any, body: dict[str, Any], step: Step) -> None:
        """A stream that fails at once on a rate limit (Codex prints the API's words)."""
        model = body.get("model") or "gpt-5.1-codex"
        shell = {"id": f"resp_{_new_id()}", "object": "response", "model": model}
        handler.start_events()
        handler.event("response.created", {"type": "response.created", "response": shell})
        failed = {**shell, "status": "failed", "error": _stream_failure(step)}
        handler.event("response.failed", {"type": "response.failed", "response": failed})


SPAWNED = "<the agent last spawned>"
"""A step's argument that the Responses server replaces by the id `spawn_agent` returned."""


def _with_spawned(step: Step, body: dict[str, Any]) -> Step:
    """`step` with each SPAWNED in its arguments (or in a list of them) replaced by the
    `agent_id` of the last `spawn_agent` output in the request's input."""
    if step.kind != "tool" or SPAWNED not in json.dumps(step.args):
        return step
    spawned = ""
    for item in body.get("input") or []:
        if isinstance(item, dict) and item.get("type") == "function_call_output":
            try:
                spawned = json.loads(item.get("output") or "{}").get("agent_id") or spawned
            except (ValueError, TypeError, AttributeError):
                continue
    args = json.loads(json.dumps(step.args).replace(json.dumps(SPAWNED), json.dumps(spawned)))
    return replace(step, args=args)


def _title_schema(body: dict[str, Any]) -> dict[str, Any] | None:
    """The JSON schema of a request without tools that asks for one (the interactive Codex's
    thread-title request, a side request off the script); None for the conversation's own."""
    if body.get("tools"):
        return None
    fmt = (body.get("text") or {}).get("format") or {}
    schema = fmt.get("schema") if fmt.get("type") == "json_schema" else None
    return schema if isinstance(schema, dict) else None


def _stream_failure(step: Step) -> dict[str, Any]:
    """A Responses stream's rate-limit failure, worded as the API words it."""
    wait = f" Please try again in {step.retry_s:g}s." if step.retry_s is not None else ""
    message = f"Rate limit reached for requests per min (RPM): Limit 3, Used 3.{wait}"
    return {"code": "rate_limit_exceeded", "message": message}


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
            words = retry_words(step, f"scripted {step.status}")
            handler.send_json(
                step.status, {"error": {"message": words, "type": "error"}}, self.retry_header(step)
            )
            return
        tokens = self.begin()
        usage = {
            "prompt_tokens": tokens.input,
            "completion_tokens": tokens.output,
            "total_tokens": tokens.input + tokens.output,
            "prompt_tokens_details": {"cached_tokens": tokens.cache_read},
        }
        base = {"id": f"chatcmpl-{_new_id()}", "object": "chat.completion.chunk", "created": 0}
        base["model"] = body.get("model") or "test-model"
        if not body.get("stream") and step.kind == "text":  # Aider's commit-message request
            message = {"role": "assistant", "content": step.text}
            choice = {"index": 0, "message": message, "finish_reason": "stop"}
            answer = {**base, "object": "chat.completion", "choices": [choice], "usage": usage}
            handler.send_json(200, answer)
            self.served_one(tokens, scripted)
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
                "id": f"call_{_new_id()}",
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
        self.served_one(tokens, scripted)


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
    the script; each `:streamGenerateContent?alt=sse` takes the next step. A subagent's
    requests (they offer the `complete_task` tool, its way to end) take their answers from
    `subagent_steps` when given, else from the one script.
    """

    def handle(self, handler: Any, body: dict[str, Any]) -> None:
        path = handler.path
        if ":countTokens" in path:
            handler.send_json(200, {"totalTokens": self.tokens.input})
            return
        if ":generateContent" in path:
            config = body.get("generationConfig") or body.get("generation_config") or {}
            schema = config.get("responseJsonSchema") or config.get("responseSchema")
            answer = json.dumps(_fill_schema(schema)) if schema else "ok"
            tokens = self.begin()
            chunk = self._chunk([{"text": answer}], "STOP", self._usage(tokens), _model_of(path))
            handler.send_json(200, chunk)
            self.served_one(tokens, scripted=False)
            return
        if ":streamGenerateContent" not in path:
            handler.send_json(404, {"error": {"message": "not scripted"}})
            return
        subagent = _offers_complete_task(body)
        step = self.next_subagent_step(body) if subagent else self.next_step(body)
        if step.kind == "status":
            status_name = {429: "RESOURCE_EXHAUSTED", 401: "UNAUTHENTICATED"}.get(
                step.status, "UNAVAILABLE"
            )
            error: dict[str, Any] = {
                "code": step.status,
                "message": retry_words(step, "scripted"),
                "status": status_name,
            }
            if step.retry_s is not None and "detail" in step.retry_as:
                retry_info = "type.googleapis.com/google.rpc.RetryInfo"
                error["details"] = [{"@type": retry_info, "retryDelay": f"{step.retry_s:g}s"}]
            handler.send_json(step.status, {"error": error}, self.retry_header(step))
            return
        handler.start_events()
        if step.kind in ("hang", "drop"):
            handler.event(None, self._chunk([{"text": ""}], None, None, _model_of(path)))
            if step.kind == "drop":
                self.hold_then_drop(handler, step)
            else:
                self.hold()
            return
        if step.kind == "tool":
            parts = [{"functionCall": {"name": step.name, "args": step.args}}]
        else:
            parts = [{"text": step.text}]
        tokens = self.begin()
        handler.event(None, self._chunk(parts, "STOP", self._usage(tokens), _model_of(path)))
        self.served_one(tokens, kind="subagent" if subagent else "")

    @staticmethod
    def _usage(tokens: Tokens) -> dict[str, int]:
        return {
            "promptTokenCount": tokens.input,
            "candidatesTokenCount": tokens.output,
            "cachedContentTokenCount": tokens.cache_read,
            "totalTokenCount": tokens.input + tokens.output,
        }

    @staticmethod
    def _chunk(parts: list[Any], finish: str | None, usage: Any, model: str) -> dict[str, Any]:
        candidate: dict[str, Any] = {"content": {"role": "model", "parts": parts}, "index": 0}
        if finish:
            candidate["finishReason"] = finish
        # As the Gemini API does: the answer names the model asked for (Gemini CLI keys its
        # stats by it).
        chunk: dict[str, Any] = {"candidates": [candidate], "modelVersion": model}
        if usage:
            chunk["usageMetadata"] = usage
        return chunk


def _offers_complete_task(body: dict[str, Any]) -> bool:
    """Whether a Gemini request offers `complete_task`: a Gemini CLI subagent's request."""
    return any(
        declaration.get("name") == "complete_task"
        for group in body.get("tools") or []
        for declaration in group.get("functionDeclarations") or []
    )


def _model_of(path: str) -> str:
    """The model a Gemini API path asks for (`/v1beta/models/NAME:streamGenerateContent`)."""
    name = path.split("/models/", 1)[-1].split(":", 1)[0]
    return name or "gemini-test"


SERVERS: dict[str, type[ScriptedServer]] = {
    "anthropic": AnthropicServer,
    "openai": OpenAIResponsesServer,
    "gemini": GeminiServer,
    "chat": OpenAIChatServer,
}


def _step_from_json(obj: dict[str, Any]) -> Step:
    """{"tool": NAME, "args": {...}} | {"text": "..."} | {"hang": true} | {"drop": SECONDS}
    | {"status": 429, "retry_s": 20, "said": ["header", "text", "detail"]}."""
    if "tool" in obj:
        return tool(obj["tool"], **obj.get("args", {}))
    if "status" in obj:
        return fail(int(obj["status"]), obj.get("retry_s"), tuple(obj.get("said", ["header"])))
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
