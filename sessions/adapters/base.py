"""Adapters that read an agent's stdout lines: session id, usage, cost, turns and outcome.

Agent output is untrusted: a line that does not parse, or a field of the wrong type, is
skipped (and counted), never raised. See reference/agent-formats.md sections 1, 8 and 9.

Claude token accounting (traps 10-12): until a ``result`` line arrives, tokens are the sum of
``assistant`` usages, one per ``message.id`` (the last copy wins; Amp lines without an id are
each added). At a ``result`` line every token count becomes the larger of that per-message sum
and the result's ``modelUsage`` sum (``usage`` when there is no ``modelUsage``): both are
running totals for the process, and ``modelUsage`` also counts background models. Messages
after the last result are added on top of it. Result usage is never added to the message sum.
Subagent ``subagent_token_usage`` lines are not counted (their messages may already appear).
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, ClassVar

SESSION_ID_PATTERN = re.compile(r"[A-Za-z0-9_.:][A-Za-z0-9_.:-]{0,127}")
"""A session id that is safe as one argv element: 1-128 chars, no leading "-"."""

MAX_TEXT_CHARS = 4000
"""Texts kept for display (last assistant text, outcome message) are cut to this length."""

MAX_TRACKED_MESSAGE_IDS = 4096
"""Repeated copies of one message are adjacent; older ids can be forgotten to bound memory."""

_EPOCH_MS_THRESHOLD = 100_000_000_000
"""An epoch value above this is in milliseconds (seconds would be the year 5138)."""

_NO_CONVERSATION = "No conversation found"
_LIMIT_TEXT = re.compile(r"hit your .{0,40}limit", re.IGNORECASE)
_PASS_STRINGS = frozenset({"done", "success"})
_FAIL_STRINGS = frozenset({"error", "failed"})

_Tokens = tuple[int, int, int, int]
"""input, output, cache read, cache write."""

_ZERO: _Tokens = (0, 0, 0, 0)


def valid_session_id(value: str) -> bool:
    """Return True when value may be put into argv as a session id."""
    return isinstance(value, str) and SESSION_ID_PATTERN.fullmatch(value) is not None


@dataclass(frozen=True, slots=True)
class Usage:
    """Tokens, cost and turns reported by one agent process."""

    input_tokens: int = 0
    output_tokens: int = 0
    cache_read_tokens: int = 0
    cache_write_tokens: int = 0
    cost_usd: float | None = None
    cost_estimated: bool = False
    turns: int = 0

    @property
    def total_tokens(self) -> int:
        """All tokens: input, output, cache read and cache write."""
        return (
            self.input_tokens
            + self.output_tokens
            + self.cache_read_tokens
            + self.cache_write_tokens
        )

    def __add__(self, other: Usage) -> Usage:
        """Add the usage of separate processes; a cost is None only when neither reported one."""
        if self.cost_usd is None and other.cost_usd is None:
            cost_usd: float | None = None
        else:
            cost_usd = (self.cost_usd or 0.0) + (other.cost_usd or 0.0)
        return Usage(
            input_tokens=self.input_tokens + other.input_tokens,
            output_tokens=self.output_tokens + other.output_tokens,
            cache_read_tokens=self.cache_read_tokens + other.cache_read_tokens,
            cache_write_tokens=self.cache_write_tokens + other.cache_write_tokens,
            cost_usd=cost_usd,
            cost_estimated=self.cost_estimated or other.cost_estimated,
            turns=self.turns + other.turns,
        )

    def to_json(self) -> dict[str, Any]:
        """Return the CONTRACT.md ``usage`` object."""
        return {
            "input_tokens": self.input_tokens,
            "output_tokens": self.output_tokens,
            "cache_read_tokens": self.cache_read_tokens,
            "cache_write_tokens": self.cache_write_tokens,
            "total_tokens": self.total_tokens,
            "cost_usd": self.cost_usd,
            "cost_estimated": self.cost_estimated,
            "turns": self.turns,
        }

    @classmethod
    def from_json(cls, data: Any) -> Usage:
        """Read a ``usage`` object written by to_json; bad or missing fields become defaults."""
        if not isinstance(data, dict):
            return cls()
        return cls(
            input_tokens=_count(data.get("input_tokens")) or 0,
            output_tokens=_count(data.get("output_tokens")) or 0,
            cache_read_tokens=_count(data.get("cache_read_tokens")) or 0,
            cache_write_tokens=_count(data.get("cache_write_tokens")) or 0,
            cost_usd=_amount(data.get("cost_usd")),
            cost_estimated=data.get("cost_estimated") is True,
            turns=_count(data.get("turns")) or 0,
        )


@dataclass(frozen=True, slots=True)
class Outcome:
    """How an agent process said its run ended (from its terminal event)."""

    finished: bool
    is_error: bool
    subtype: str | None
    message: str | None
    rate_limited: bool = False
    terminal_reason: str | None = None


def _count(value: object) -> int | None:
    """Return value as a non-negative token/turn count, or None when it is not one."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value if value >= 0 else None
    if isinstance(value, float) and math.isfinite(value) and value >= 0 and value.is_integer():
        return int(value)
    return None


def _amount(value: object) -> float | None:
    """Return value as a non-negative finite amount of money, or None."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    amount = float(value)
    return amount if math.isfinite(amount) and amount >= 0 else None


def _text(value: object) -> str | None:
    """Return value cut to MAX_TEXT_CHARS when it is a string, else None."""
    if not isinstance(value, str):
        return None
    return value if len(value) <= MAX_TEXT_CHARS else value[: MAX_TEXT_CHARS - 1] + "…"


def _reject_constant(name: str) -> float:
    """Refuse NaN and Infinity, which are not JSON."""
    raise ValueError(f"not JSON: {name}")


def _load_json(line: bytes) -> object | None:
    """Parse one line as a JSON object or array; None when it is anything else."""
    stripped = line.strip()
    if not stripped or stripped[:1] not in (b"{", b"["):
        return None
    try:
        return json.loads(
            stripped.decode("utf-8", errors="replace"), parse_constant=_reject_constant
        )
    except (ValueError, RecursionError):
        return None


def _iso_time(value: object) -> str | None:
    """Return a reset time as ISO-8601 UTC text (epoch seconds or ms accepted), or None."""
    if isinstance(value, str):
        return value[:64] if value.strip() else None
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    seconds = float(value)
    if seconds > _EPOCH_MS_THRESHOLD:
        seconds /= 1000
    try:
        return datetime.fromtimestamp(seconds, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    except (OverflowError, OSError, ValueError):
        return None


class OutputParser:
    """Base adapter: feed it stdout lines, read what the agent reported so far."""

    agent: ClassVar[str] = "plain"

    def __init__(self, session_id: str | None = None) -> None:
        """Start empty; session_id is the id this process resumes, if any."""
        self._initial_session_id = (
            session_id if session_id and valid_session_id(session_id) else None
        )
        self.session_id: str | None = self._initial_session_id
        self.outcome: Outcome | None = None
        self.skipped_lines = 0
        self.parsed_lines = 0
        self.rate_limit_resets_at: str | None = None
        self.last_text: str | None = None
        self._rate_limited = False

    @property
    def usage(self) -> Usage:
        """Tokens, cost and turns reported so far by this process."""
        return Usage()

    @property
    def rate_limited(self) -> bool:
        """True while the agent reports that a usage limit rejected it."""
        return self._rate_limited

    def feed_line(self, line: bytes) -> None:
        """Read one stdout line (without its newline); never raises."""
        value = _load_json(line)
        if value is None:
            self.skipped_lines += 1
            self._on_other_line(line)
            return
        objects = value if isinstance(value, list) else [value]
        handled = False
        for obj in objects:
            if not isinstance(obj, dict):
                continue
            try:
                self._on_object(obj)
            except Exception:  # untrusted input must never raise; count it as skipped
                continue
            handled = True
        if handled:
            self.parsed_lines += 1
        else:
            self.skipped_lines += 1

    def _set_session_id(self, value: object) -> None:
        """Record a reported session id when it is safe to use."""
        if isinstance(value, str) and valid_session_id(value):
            self.session_id = value

    def _on_object(self, obj: dict[str, Any]) -> None:
        """Handle one JSON object from the stream."""

    def _on_other_line(self, line: bytes) -> None:
        """Handle a line that is not JSON (by default: nothing)."""


class ClaudeParser(OutputParser):
    """Claude Code ``stream-json`` (also Amp's Claude-compatible stream)."""

    agent: ClassVar[str] = "claude"

    def __init__(self, session_id: str | None = None) -> None:
        """Start empty; session_id is the id this process resumes, if any."""
        super().__init__(session_id)
        self.api_retries = 0
        self._by_message_id: dict[str, _Tokens] = {}
        self._message_sum: list[int] = [0, 0, 0, 0]
        self._result_base: _Tokens | None = None
        self._message_sum_at_result: _Tokens = _ZERO
        self._messages = 0
        self._messages_at_result = 0
        self._result_turns: int | None = None
        self._cost_usd: float | None = None

    @property
    def usage(self) -> Usage:
        """Tokens (see the module docstring), last result's cost and turns."""
        if self._result_base is None:
            tokens = tuple(self._message_sum)
        else:
            tokens = tuple(
                max(0, base + now - then)
                for base, now, then in zip(
                    self._result_base, self._message_sum, self._message_sum_at_result, strict=True
                )
            )
        if self._result_turns is None:
            turns = self._messages
        else:
            turns = self._result_turns + self._messages - self._messages_at_result
        return Usage(
            input_tokens=tokens[0],
            output_tokens=tokens[1],
            cache_read_tokens=tokens[2],
            cache_write_tokens=tokens[3],
            cost_usd=self._cost_usd,
            turns=turns,
        )

    def _on_object(self, obj: dict[str, Any]) -> None:
        """Dispatch one stream-json line on its ``type``."""
        kind = obj.get("type")
        if kind == "result":
            self._on_result(obj)
            return
        self._set_session_id(obj.get("session_id"))
        if kind == "assistant":
            self._on_assistant(obj)
        elif kind == "system":
            if obj.get("subtype") == "api_retry":
                self.api_retries += 1
        elif kind == "rate_limit_event":
            self._on_rate_limit(obj)
        elif kind == "conversation_reset":
            self._set_session_id(obj.get("new_conversation_id"))

    def _on_assistant(self, obj: dict[str, Any]) -> None:
        """Count one assistant message's usage (deduplicated by id) and keep its text."""
        message = obj.get("message")
        if not isinstance(message, dict):
            return
        content = message.get("content")
        if isinstance(content, list):
            for block in content:
                if isinstance(block, dict) and block.get("type") == "text":
                    text = _text(block.get("text"))
                    if text is not None:
                        self.last_text = text
        usage = message.get("usage")
        tokens = _claude_tokens(usage) if isinstance(usage, dict) else None
        message_id = message.get("id")
        if isinstance(message_id, str) and message_id:
            previous = self._by_message_id.pop(message_id, None)
            if previous is None:
                self._messages += 1
                previous = _ZERO
            if tokens is None:
                tokens = previous
            self._by_message_id[message_id] = tokens
            if len(self._by_message_id) > MAX_TRACKED_MESSAGE_IDS:
                del self._by_message_id[next(iter(self._by_message_id))]
            self._add_tokens(tokens, previous)
        else:
            self._messages += 1
            if tokens is not None:
                self._add_tokens(tokens, _ZERO)

    def _add_tokens(self, tokens: _Tokens, replaced: _Tokens) -> None:
        """Add tokens to the message sum in place of an earlier copy."""
        for index in range(4):
            self._message_sum[index] += tokens[index] - replaced[index]

    def _on_rate_limit(self, obj: dict[str, Any]) -> None:
        """Track a usage-limit rejection and its reset time."""
        info = obj.get("rate_limit_info")
        if not isinstance(info, dict):
            info = obj
        status = info.get("status")
        if status == "rejected":
            self._rate_limited = True
            resets_at = _iso_time(info.get("resetsAt"))
            if resets_at is not None:
                self.rate_limit_resets_at = resets_at
        elif status in ("allowed", "allowed_warning"):
            self._rate_limited = False

    def _on_result(self, obj: dict[str, Any]) -> None:
        """Take cost, turns, token totals and the outcome from a result line."""
        is_error = obj.get("is_error") is True
        errors = obj.get("errors")
        error_texts = [e for e in errors if isinstance(e, str)] if isinstance(errors, list) else []
        result_text = obj.get("result") if isinstance(obj.get("result"), str) else None
        all_text = " ".join([*error_texts, result_text or ""])
        lost_conversation = is_error and _NO_CONVERSATION in all_text
        if lost_conversation:
            # Trap 15: the error result carries a new, empty session; keep the one we resumed.
            if self._initial_session_id is not None:
                self.session_id = self._initial_session_id
        else:
            self._set_session_id(obj.get("session_id"))

        cost = _amount(obj.get("total_cost_usd"))
        if cost is None:
            cost = _amount(obj.get("total_cost", obj.get("cost_usd")))
        if cost is not None:
            self._cost_usd = cost
        turns = _count(obj.get("num_turns"))
        if turns is not None:
            self._result_turns = turns
            self._messages_at_result = self._messages

        totals = _model_usage_tokens(obj.get("modelUsage"))
        if totals is None and isinstance(obj.get("usage"), dict):
            totals = _claude_tokens(obj["usage"])
        if totals is not None:
            message_sum = tuple(self._message_sum)
            self._result_base = (
                max(totals[0], message_sum[0]),
                max(totals[1], message_sum[1]),
                max(totals[2], message_sum[2]),
                max(totals[3], message_sum[3]),
            )
            self._message_sum_at_result = (
                message_sum[0],
                message_sum[1],
                message_sum[2],
                message_sum[3],
            )

        status = obj.get("api_error_status")
        rate_limited = self._rate_limited or (
            is_error and (_LIMIT_TEXT.search(all_text) is not None or status == 429)
        )
        subtype = obj.get("subtype")
        reason = obj.get("terminal_reason")
        message = "; ".join(error_texts) if is_error and error_texts else result_text
        self.outcome = Outcome(
            finished=True,
            is_error=is_error,
            subtype=subtype[:64] if isinstance(subtype, str) else None,
            message=_text(message),
            rate_limited=rate_limited,
            terminal_reason=reason[:64] if isinstance(reason, str) else None,
        )


def _claude_tokens(usage: dict[str, Any]) -> _Tokens | None:
    """Read an Anthropic API usage object; None when it has no token field."""
    values = (
        _count(usage.get("input_tokens")),
        _count(usage.get("output_tokens")),
        _count(usage.get("cache_read_input_tokens")),
        _count(usage.get("cache_creation_input_tokens")),
    )
    if all(value is None for value in values):
        return None
    return (values[0] or 0, values[1] or 0, values[2] or 0, values[3] or 0)


def _model_usage_tokens(model_usage: object) -> _Tokens | None:
    """Sum a result's ``modelUsage`` (camelCase, keyed by model); None when absent or empty."""
    if not isinstance(model_usage, dict):
        return None
    sums = [0, 0, 0, 0]
    seen = False
    for entry in model_usage.values():
        if not isinstance(entry, dict):
            continue
        keys = ("inputTokens", "outputTokens", "cacheReadInputTokens", "cacheCreationInputTokens")
        for index, key in enumerate(keys):
            value = _count(entry.get(key))
            if value is not None:
                sums[index] += value
                seen = True
    return (sums[0], sums[1], sums[2], sums[3]) if seen else None


class PlainParser(OutputParser):
    """Custom harnesses: JSON usage lines (running totals) and a done line; other lines ignored.

    Recognised lines: ``{"usage": {...}, "cost_usd": x, "turns": n, "session_id": "..."}`` (each
    value a running total: the last one wins), ``{"herd": "done"}`` / ``{"herd": "error"}`` and
    ``{"result": "success"}`` / ``{"result": "error"}``, each with an optional ``"message"``.
    """

    agent: ClassVar[str] = "plain"

    _TOKEN_KEYS: ClassVar[dict[str, int]] = {
        "input_tokens": 0,
        "output_tokens": 1,
        "cache_read_tokens": 2,
        "cache_read_input_tokens": 2,
        "cache_write_tokens": 3,
        "cache_creation_input_tokens": 3,
    }

    def __init__(self, session_id: str | None = None) -> None:
        """Start empty; session_id is the id this process resumes, if any."""
        super().__init__(session_id)
        self._tokens = [0, 0, 0, 0]
        self._cost_usd: float | None = None
        self._cost_estimated = False
        self._turns = 0

    @property
    def usage(self) -> Usage:
        """The last reported totals."""
        return Usage(
            input_tokens=self._tokens[0],
            output_tokens=self._tokens[1],
            cache_read_tokens=self._tokens[2],
            cache_write_tokens=self._tokens[3],
            cost_usd=self._cost_usd,
            cost_estimated=self._cost_estimated,
            turns=self._turns,
        )

    def _on_object(self, obj: dict[str, Any]) -> None:
        """Apply a usage line or a done line."""
        self._set_session_id(obj.get("session_id"))
        usage = obj.get("usage")
        for source in (usage if isinstance(usage, dict) else {}, obj):
            for key, index in self._TOKEN_KEYS.items():
                value = _count(source.get(key))
                if value is not None:
                    self._tokens[index] = value
            cost = _amount(source.get("cost_usd"))
            if cost is not None:
                self._cost_usd = cost
                self._cost_estimated = source.get("cost_estimated") is True
            turns = _count(source.get("turns"))
            if turns is not None:
                self._turns = turns
        verdict = obj.get("herd", obj.get("result"))
        if isinstance(verdict, str):
            word = verdict.strip().lower()
            if word in _PASS_STRINGS or word in _FAIL_STRINGS:
                self.outcome = Outcome(
                    finished=True,
                    is_error=word in _FAIL_STRINGS,
                    subtype="error" if word in _FAIL_STRINGS else "success",
                    message=_text(obj.get("message")),
                )

    def _on_other_line(self, line: bytes) -> None:
        """Keep the last non-blank text line for display."""
        text = line.strip()
        if text:
            self.last_text = _text(text[: MAX_TEXT_CHARS * 4].decode("utf-8", errors="replace"))


PARSERS: dict[str, type[OutputParser]] = {
    "claude": ClaudeParser,
    "amp": ClaudeParser,
    "plain": PlainParser,
    # Until their own adapters land, these read plain JSON usage lines only.
    "codex": PlainParser,
    "gemini": PlainParser,
    "opencode": PlainParser,
    "aider": PlainParser,
}
"""Adapter per ``agent`` name in herd.toml."""


def make_parser(agent: str, session_id: str | None = None) -> OutputParser:
    """Return a fresh adapter for the agent named in herd.toml (ValueError if unknown)."""
    try:
        parser_class = PARSERS[agent]
    except KeyError:
        known = ", ".join(sorted(PARSERS))
        raise ValueError(f"unknown agent {agent!r}; expected one of: {known}") from None
    return parser_class(session_id)
