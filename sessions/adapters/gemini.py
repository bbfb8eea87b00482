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

A run killed before its ``result`` printed no tokens at all: ``recover_from_chat`` takes them
from the chat file Gemini CLI keeps (see ``gemini_chats``), each answer once by id.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any, ClassVar

from agentherd.sessions.adapters import outcomes
from agentherd.sessions.adapters.agent import CONTINUE_PROMPT, WORK_PROMPT, Agent, Preset
from agentherd.sessions.adapters.base import OutputParser, display_text
from agentherd.sessions.adapters.document import DocumentBuffer, Step
from agentherd.sessions.adapters.usage import Usage, as_count
from agentherd.sessions.prices import estimate_cost_usd
from agentherd.sessions.times import parse_iso

_Tokens = tuple[int, int, int, int]
"""input (without cache), output, cache read, cache write."""

MAX_TRACKED_TOOLS = 1024
"""Tool ids remembered to name a denied tool (results follow their calls closely)."""

_DENIED_TEXT = re.compile(
    r'Tool "[^"]{1,64}" not found|not allowed|permission denied|denied by policy|'
    r"requires (user )?(approval|confirmation)|not registered",
    re.IGNORECASE,
)
_DENIED_TYPES = frozenset({"tool_not_registered", "execution_denied", "policy_violation"})
_MAX_TURNS_TEXT = re.compile(r"MaxSessionTurns|maximum session turns|turn limit", re.IGNORECASE)


class GeminiParser(OutputParser):
    """Gemini CLI headless output, either format, even both in one stream."""

    agent: ClassVar[str] = "gemini"

    def __init__(self, session_id: str | None = None) -> None:
        """Start empty; session_id is the id this process resumes, if any."""
        super().__init__(session_id)
        self._document = DocumentBuffer()
        self._tokens: _Tokens = (0, 0, 0, 0)
        self._cost_usd: float | None = None
        self._tools: dict[str, str] = {}
        self._denials: list[str] = []
        self._answer: list[str] = []
        self._error: str | None = None
        self.tool_calls = 0

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
        )

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
        costs = [estimate_cost_usd(model, *tokens) for model, tokens in models.items()]
        known = better == found and all(cost is not None for cost in costs)
        self._cost_usd = sum(cost or 0.0 for cost in costs) if known else None
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

    def _on_object(self, obj: dict[str, Any]) -> None:
        """Dispatch one stream-json event on its ``type`` (a one-line json document too)."""
        kind = obj.get("type")
        if kind is None and ("stats" in obj or "response" in obj):
            self._on_document(obj)
            return
        self._set_session_id(obj.get("session_id"))
        if kind == "message":
            self._on_message(obj)
        elif kind == "tool_use":
            self.tool_calls += 1
            self._answer = []
            tool_id, name = obj.get("tool_id"), outcomes.tool_name(obj.get("tool_name"))
            if isinstance(tool_id, str) and name is not None:
                self._tools[tool_id] = name
                if len(self._tools) > MAX_TRACKED_TOOLS:
                    del self._tools[next(iter(self._tools))]
        elif kind == "tool_result":
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
            return
        if obj.get("delta") is True:
            self._answer.append(content)
        else:
            self._answer = [content]
        self.last_text = display_text("".join(self._answer[-64:]))

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
                self._cost_usd = _estimate(stats.get("models"), _stream_tokens)
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
            self._cost_usd = _estimate(models, _model_tokens)
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
    """Tokens per model of the chat answers written between since and until (ISO times).

    An answer is written again with its tool calls, and a resume replays earlier answers:
    each id counts once, its last copy winning. Answers are taken one at a time; past
    MAX_CHAT_ANSWERS ids, only those already taken are updated.
    """
    start = parse_iso(since)
    end = parse_iso(until) if until else None
    if start is None:
        return {}
    by_id: dict[str, tuple[str, _Tokens]] = {}
    for answer in answers:
        stamp, answer_id = answer.get("timestamp"), answer.get("id")
        moment = parse_iso(stamp) if isinstance(stamp, str) else None
        if moment is None or not isinstance(answer_id, str) or moment < start:
            continue
        if end is not None and moment > end:
            continue
        tokens = answer.get("tokens")
        if not isinstance(tokens, dict):
            continue
        with_cache = (as_count(tokens.get("input")) or 0) + (as_count(tokens.get("tool")) or 0)
        output = (as_count(tokens.get("output")) or 0) + (as_count(tokens.get("thoughts")) or 0)
        split = _split(
            with_cache, as_count(tokens.get("cached")), output, as_count(tokens.get("total"))
        )
        model = answer.get("model")
        if answer_id in by_id or len(by_id) < MAX_CHAT_ANSWERS:
            by_id[answer_id] = (str(model)[:80] if isinstance(model, str) else "gemini", split)
    models: dict[str, _Tokens] = {}
    for model, split in by_id.values():
        now = models.get(model, (0, 0, 0, 0))
        models[model] = (now[0] + split[0], now[1] + split[1], now[2] + split[2], now[3] + split[3])
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


def _estimate(models: object, read: Any) -> float | None:
    """List-price cost of a ``models`` map, or None unless every model's price is known."""
    if not isinstance(models, dict) or not models:
        return None
    cost_usd = 0.0
    for name, entry in models.items():
        tokens = read(entry) if isinstance(entry, dict) else None
        if tokens is None:
            continue
        cost = estimate_cost_usd(str(name)[:80], *tokens)
        if cost is None:
            return None
        cost_usd += cost
    return cost_usd


_STREAM = ("--output-format", "stream-json", "--yolo")

AGENT = Agent(
    name="gemini",
    parser=GeminiParser,
    order=3,
    preset=Preset(
        command=("gemini", "-p", WORK_PROMPT, *_STREAM),
        resume=("gemini", "--resume", "{session_id}", "-p", CONTINUE_PROMPT, *_STREAM),
        # Without it Gemini CLI exits 55 in a folder it was never told to trust.
        env={"GEMINI_CLI_TRUST_WORKSPACE": "true"},
    ),
    price="gemini-2.5-pro",
    reports_cost=True,
)
