"""Gemini CLI ``--output-format stream-json`` (JSONL) and ``--output-format json`` (one document).

stream-json: ``init`` (session id), ``message``, ``tool_use``, ``tool_result``, ``error``
(non-fatal), ``result`` (``status``, ``error``, ``stats``). json: one pretty-printed object
``{session_id, response, stats{models{<model>{tokens}}}, error}`` over many lines, gathered
with a DocumentBuffer (noise lines between its lines are skipped).

Tokens are per process (a resumed run's stats do not include earlier runs). ``input_tokens``
(``prompt``) includes ``cached``: cache read is ``cached``, input is the rest. Thinking tokens
are billed as output: output is whatever of ``total_tokens`` is not input, so the total is the
agent's own. Each result or document replaces the figures before it (both are process totals).
No cost is printed: it is estimated from herd's price table when every model is in it.

Before its ``result`` a run prints no tokens at all: while it lives, and when it was killed,
``take_chat_tokens`` takes them from the chat file Gemini CLI keeps (see ``gemini_chats``),
each answer once by id; the result's stats replace them. Turns are counted from the stream:
each answer prints its text and all its tool calls before any tool result, so a turn is the
model speaking (text or a tool call) after the prompt or the tools' results.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any, ClassVar

from agentherd.sessions.adapters import outcomes
from agentherd.sessions.adapters.agent import MESSAGE, Agent, Preset, work_prompt
from agentherd.sessions.adapters.base import OutputParser, display_text
from agentherd.sessions.adapters.document import DocumentBuffer, Step
from agentherd.sessions.adapters.limitwait import RetryLines
from agentherd.sessions.adapters.usage import Usage, as_count
from agentherd.sessions.prices import estimate_cost_usd
from agentherd.sessions.times import parse_iso

_Tokens = tuple[int, int, int, int]
"""input (without cache), output, cache read, cache write."""

MAX_MODELS = 16
"""Models of one result kept by name (Gemini CLI routes between two or three)."""

MAX_TRACKED_TOOLS = 1024
"""Tool ids remembered to name a denied tool (results follow their calls closely)."""

_DENIED_TEXT = re.compile(
    r'Tool "[^"]{1,64}" not found|not allowed|permission denied|denied by policy|'
    r"requires (user )?(approval|confirmation)|not registered",
    re.IGNORECASE,
)
_DENIED_TYPES = frozenset({"tool_not_registered", "execution_denied", "policy_violation"})
_RESUME_REFUSED = "Error resuming session:"
"""Gemini CLI's stderr line (exit 42, no JSON) for a session id it cannot resume."""
_MAX_TURNS_TEXT = re.compile(r"MaxSessionTurns|maximum session turns|turn limit", re.IGNORECASE)


class GeminiParser(OutputParser):
    """Gemini CLI headless output, either format, even both in one stream."""

    agent: ClassVar[str] = "gemini"

    def __init__(self, session_id: str | None = None) -> None:
        """Start empty; session_id is the id this process resumes, if any."""
        super().__init__(session_id)
        self._document = DocumentBuffer()
        self._retries = RetryLines()
        self._tokens: _Tokens = (0, 0, 0, 0)
        self._cost_usd: float | None = None
        self._models: dict[str, _Tokens] = {}
        """The last result's tokens per model, by the model's name."""
        self._tools: dict[str, str] = {}
        self._denials: list[str] = []
        self._answer: list[str] = []
        self._error: str | None = None
        self.tool_calls = 0
        self._turns = 0
        self._speaking = False
        """The model's answer is being printed: its next tool call or text is the same turn."""

    @property
    def usage(self) -> Usage:
        """The last result's tokens; an estimated cost when every model's price is known."""
        return Usage(
            input_tokens=self._tokens[0],
            output_tokens=self._tokens[1],
            cache_read_tokens=self._tokens[2],
            cache_write_tokens=self._tokens[3],
            cost_usd=self._cost_usd,
            cost_estimated=self._cost_usd is not None,
            turns=self._turns,
        )

    @property
    def models(self) -> dict[str, tuple[int, int, int, int]]:
        """The tokens per model the last result (or the chat file) named."""
        return dict(self._models)

    def recover_from_chat(
        self, answers: Iterable[dict[str, Any]], since: str | None, until: str | None = None
    ) -> bool:
        """Take a killed run's tokens from its chat's answers written between since and until.

        Each answer counts once (its last copy); each count becomes the larger of stdout's and
        the chat's. A run that printed its result needs none of this and is left as it is.
        Returns whether anything changed.
        """
        if self.outcome is not None or since is None:
            return False
        return self.take_chat_tokens(gemini_chat_tokens(answers, since, until))

    def take_chat_tokens(self, models: dict[str, _Tokens]) -> bool:
        """Take a killed run's tokens per model as `gemini_chat_tokens` found them (read apart
        from the parser, in a worker thread); True if anything changed."""
        if self.outcome is not None or not models:
            return False
        found = (
            sum(tokens[0] for tokens in models.values()),
            sum(tokens[1] for tokens in models.values()),
            sum(tokens[2] for tokens in models.values()),
            sum(tokens[3] for tokens in models.values()),
        )
        better = (
            max(found[0], self._tokens[0]),
            max(found[1], self._tokens[1]),
            max(found[2], self._tokens[2]),
            max(found[3], self._tokens[3]),
        )
        if better == self._tokens:
            return False
        self._tokens = better
        self._models = dict(models)
        self._cost_usd = _estimate(self._models) if better == found else None
        return True

    def _feed(self, line: bytes) -> object | None:
        """Gather pretty-printed document lines; hand any other line to the JSONL reader."""
        step = self._document.feed(line)
        if step is Step.NOT_MINE:
            return super()._feed(line)
        if step is Step.DONE:
            value = self._document.value
            if isinstance(value, dict):
                self._on_document(value)
                self.parsed_lines += 1
            else:
                self.skipped_lines += 1
        elif step is Step.DROPPED:
            self.skipped_lines += 1
            self.warn("gemini: a multi-line JSON document did not parse or was too large")
        return None

    def _on_other_line(self, line: bytes) -> None:
        """Its stderr lines: retries (waiting on a rate limit while it retries by itself), and
        a resume it refuses (a conversation with no answer yet, as after a first 429)."""
        text = line.decode(errors="replace")
        self.limit_wait = self._retries.feed(text, self.limit_wait)
        if self.outcome is None and text.startswith(_RESUME_REFUSED):
            self.outcome = outcomes.ended(
                is_error=True, subtype="resume", message=text.strip(), denials=()
            )

    def _on_object(self, obj: dict[str, Any]) -> None:
        """Dispatch one stream-json event on its ``type`` (a one-line json document too)."""
        kind = obj.get("type")
        if kind is None and ("stats" in obj or "response" in obj):
            self._on_document(obj)
            return
        self._set_session_id(obj.get("session_id"))
        if kind in ("init", "tool_result") or (kind == "message" and obj.get("role") == "user"):
            self.awaiting_answer = True  # the prompt or a tool's result goes to the model
        elif kind == "tool_use":  # an answer ends in its calls (a text one ends the run)
            self.awaiting_answer = False
        if kind == "message":
            self._on_message(obj)
        elif kind == "tool_use":
            self._spoke()
            self.tool_calls += 1
            self._answer = []
            tool_id, name = obj.get("tool_id"), outcomes.tool_name(obj.get("tool_name"))
            if isinstance(tool_id, str) and name is not None:
                self._tools[tool_id] = name
                if len(self._tools) > MAX_TRACKED_TOOLS:
                    del self._tools[next(iter(self._tools))]
        elif kind == "tool_result":
            self._speaking = False  # the answer's calls were all printed before their results
            self._on_tool_result(obj)
        elif kind == "error":
            self._error = display_text(obj.get("message")) or self._error
        elif kind == "result":
            self._on_result(obj)

    def _on_message(self, obj: dict[str, Any]) -> None:
        """Gather the assistant's answer (delta chunks are joined)."""
        content = obj.get("content")
        if obj.get("role") != "assistant" or not isinstance(content, str):
            if obj.get("role") == "user":
                self._answer = []
                self._speaking = False
            return
        self._spoke()
        if obj.get("delta") is True:
            self._answer.append(content)
        else:
            self._answer = [content]
        self.last_text = display_text("".join(self._answer[-64:]))

    def _spoke(self) -> None:
        """The model printed text or a tool call: a new turn unless its answer goes on."""
        if not self._speaking:
            self._speaking = True
            self._turns += 1

    def _on_tool_result(self, obj: dict[str, Any]) -> None:
        """Note a tool the CLI refused to run (no --yolo: the tool is not even registered)."""
        if obj.get("status") != "error":
            return
        error = obj.get("error")
        kind = error.get("type") if isinstance(error, dict) else None
        text = error.get("message") if isinstance(error, dict) else error
        denied = kind in _DENIED_TYPES or (
            isinstance(text, str) and _DENIED_TEXT.search(text[:2000]) is not None
        )
        if denied:
            tool_id = obj.get("tool_id")
            name = self._tools.get(tool_id) if isinstance(tool_id, str) else None
            outcomes.add_denial(self._denials, name or "(unnamed tool)")

    def _on_result(self, obj: dict[str, Any]) -> None:
        """Take a stream-json result: tokens from ``stats``, the outcome from ``status``."""
        stats = obj.get("stats")
        if isinstance(stats, dict):
            tokens = _stream_tokens(stats)
            if tokens is not None:
                self._tokens = tokens
                self._models = _per_model(stats.get("models"), _stream_tokens)
                self._cost_usd = _estimate(self._models)
        self.result_text = display_text("".join(self._answer)) if self._answer else None
        self._end(obj.get("status") != "success", obj.get("error"), obj.get("status"))

    def _on_document(self, obj: dict[str, Any]) -> None:
        """Take a ``--output-format json`` document."""
        self._set_session_id(obj.get("session_id"))
        stats = obj.get("stats")
        models = stats.get("models") if isinstance(stats, dict) else None
        tokens = _sum_models(models, _model_tokens)
        if tokens is not None:
            self._tokens = tokens
            self._models = _per_model(models, _model_tokens)
            self._cost_usd = _estimate(self._models)
        response = display_text(obj.get("response"))
        if response is not None:
            self.last_text = self.result_text = response
        error = obj.get("error")
        self._end(error is not None, error, "error" if error is not None else "success")

    def _end(self, is_error: bool, error: object, status: object) -> None:
        """Set the outcome from a result's status and error."""
        kind = error.get("type") if isinstance(error, dict) else None
        text = error.get("message") if isinstance(error, dict) else error
        message = display_text(text) or (self._error if is_error else self.result_text)
        code = error.get("code") if isinstance(error, dict) else None
        all_text = f"{kind or ''} {message or ''}"
        self.outcome = outcomes.ended(
            is_error=is_error,
            subtype=status if isinstance(status, str) else None,
            message=message,
            rate_limited=code == 429 or outcomes.RATE_LIMIT_TEXT.search(all_text) is not None,
            resets_at=outcomes.reset_time_in_text(all_text),
            max_turns=is_error and _MAX_TURNS_TEXT.search(all_text) is not None,
            denials=self._denials,
            terminal_reason=kind if isinstance(kind, str) else None,
        )


MAX_CHAT_ANSWERS = 50_000
"""A run's answers taken from its chat files at most: millions of short lines cost a bounded
table, not one entry per line."""


def gemini_chat_tokens(
    answers: Iterable[dict[str, Any]], since: str, until: str | None = None
) -> dict[str, _Tokens]:
    """Tokens per model of the chat answers written between since and until (ISO times)."""
    tally = ChatTally(since, until)
    for answer in answers:
        tally.add(answer)
    return tally.models()


class ChatTally:
    """Chat answers written between two times, each counted once: tokens per model.

    An answer is written again with its tool calls, and a resume replays earlier answers:
    each id counts once, its last copy winning. Answers are taken one at a time (a live read
    adds those a look found); past MAX_CHAT_ANSWERS ids, only those already taken are updated.
    """

    def __init__(self, since: str, until: str | None = None) -> None:
        self.start = parse_iso(since)
        self.end = parse_iso(until) if until else None
        self.by_id: dict[str, tuple[str, _Tokens]] = {}

    def add(self, answer: dict[str, Any]) -> None:
        """Take one answer (a chat line of type ``gemini``) if it was written in the window."""
        stamp, answer_id = answer.get("timestamp"), answer.get("id")
        moment = parse_iso(stamp) if isinstance(stamp, str) else None
        if self.start is None or moment is None or not isinstance(answer_id, str):
            return
        if moment < self.start or (self.end is not None and moment > self.end):
            return
        tokens = answer.get("tokens")
        if not isinstance(tokens, dict):
            return
        with_cache = (as_count(tokens.get("input")) or 0) + (as_count(tokens.get("tool")) or 0)
        output = (as_count(tokens.get("output")) or 0) + (as_count(tokens.get("thoughts")) or 0)
        split = _split(
            with_cache, as_count(tokens.get("cached")), output, as_count(tokens.get("total"))
        )
        model = answer.get("model")
        if answer_id in self.by_id or len(self.by_id) < MAX_CHAT_ANSWERS:
            self.by_id[answer_id] = (str(model)[:80] if isinstance(model, str) else "gemini", split)

    def models(self) -> dict[str, _Tokens]:
        """The answers' tokens summed per model."""
        models: dict[str, _Tokens] = {}
        for model, split in self.by_id.values():
            now = models.get(model, (0, 0, 0, 0))
            models[model] = (
                now[0] + split[0],
                now[1] + split[1],
                now[2] + split[2],
                now[3] + split[3],
            )
        return models


def _stream_tokens(stats: dict[str, Any]) -> _Tokens | None:
    """A stream-json ``stats`` (or one model's entry in it) as our four counts."""
    with_cache = as_count(stats.get("input_tokens"))
    output = as_count(stats.get("output_tokens"))
    total = as_count(stats.get("total_tokens"))
    if with_cache is None and output is None and total is None:
        return None
    return _split(with_cache or 0, as_count(stats.get("cached")), output or 0, total)


def _model_tokens(entry: dict[str, Any]) -> _Tokens | None:
    """One model of a json document's ``stats.models`` as our four counts."""
    tokens = entry.get("tokens")
    if not isinstance(tokens, dict):
        return None
    prompt = as_count(tokens.get("prompt"))
    if prompt is None:
        prompt = (as_count(tokens.get("input")) or 0) + (as_count(tokens.get("cached")) or 0)
    output = (as_count(tokens.get("candidates")) or 0) + (as_count(tokens.get("thoughts")) or 0)
    return _split(prompt, as_count(tokens.get("cached")), output, as_count(tokens.get("total")))


def _split(with_cache: int, cached: int | None, output: int, total: int | None) -> _Tokens:
    """Input without cache, output (with whatever of the total is not input), cache read."""
    cache_read = min(cached or 0, with_cache)
    if total is not None and total > with_cache + output:
        output = total - with_cache  # thinking (and other) tokens the total counts as output
    return (with_cache - cache_read, output, cache_read, 0)


def _sum_models(models: object, read: Any) -> _Tokens | None:
    """Sum a ``models`` map's entries with read(); None when there is none."""
    if not isinstance(models, dict):
        return None
    sums = [0, 0, 0, 0]
    seen = False
    for entry in models.values():
        tokens = read(entry) if isinstance(entry, dict) else None
        if tokens is not None:
            seen = True
            for index in range(4):
                sums[index] += tokens[index]
    return (sums[0], sums[1], sums[2], sums[3]) if seen else None


def _per_model(models: object, read: Any) -> dict[str, _Tokens]:
    """A ``models`` map's entries read with read(), by model name (the first MAX_MODELS)."""
    if not isinstance(models, dict):
        return {}
    found: dict[str, _Tokens] = {}
    for name, entry in list(models.items())[:MAX_MODELS]:
        tokens = read(entry) if isinstance(entry, dict) else None
        if tokens is not None:
            found[str(name)[:80]] = tokens
    return found


def _estimate(models: dict[str, _Tokens]) -> float | None:
    """List-price cost of the tokens per model, or None unless every model's price is known."""
    costs = [estimate_cost_usd(name, *tokens) for name, tokens in models.items()]
    if not costs or any(cost is None for cost in costs):
        return None
    return sum(cost or 0.0 for cost in costs)


_STREAM = ("--output-format", "stream-json", "--yolo")

AGENT = Agent(
    name="gemini",
    key_env=("GEMINI_API_KEY", "GOOGLE_API_KEY"),
    parser=GeminiParser,
    order=3,
    interactive_resume=("--resume", "{session_id}"),
    preset=Preset(
        prompt_at=2,
        command=("gemini", "-p", work_prompt(), *_STREAM),
        resume=("gemini", "--resume", "{session_id}", "-p", MESSAGE, *_STREAM),
        # Without it Gemini CLI exits 55 in a folder it was never told to trust.
        env={"GEMINI_CLI_TRUST_WORKSPACE": "true"},
    ),
    price="gemini-2.5-pro",
    reports_cost=True,
)
