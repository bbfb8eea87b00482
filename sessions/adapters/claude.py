"""Claude Code ``stream-json`` (also Amp's Claude-compatible stream).

Claude token accounting (traps 10-12): until a ``result`` line arrives, tokens are the sum of
``assistant`` usages, one per ``message.id`` (the last copy wins; Amp lines without an id are
each added). At a ``result`` line every token count becomes the larger of that per-message sum
and the result's ``modelUsage`` sum (``usage`` when there is no ``modelUsage``): both are
running totals for the process, and ``modelUsage`` also counts background models. Messages
after the last result are added on top of it. Result usage is never added to the message sum.
Subagent ``subagent_token_usage`` lines are not counted (their messages may already appear).
"""

from __future__ import annotations

import re
from typing import Any, ClassVar

from agentherd.sessions.adapters.base import OutputParser, display_text
from agentherd.sessions.adapters.usage import Outcome, Usage, as_amount, as_count
from agentherd.sessions.times import iso_from_epoch

MAX_TRACKED_MESSAGE_IDS = 4096
"""Repeated copies of one message are adjacent; older ids can be forgotten to bound memory."""

_NO_CONVERSATION = "No conversation found"
_LIMIT_TEXT = re.compile(r"hit your .{0,40}limit", re.IGNORECASE)

_Tokens = tuple[int, int, int, int]
"""input, output, cache read, cache write."""

_ZERO: _Tokens = (0, 0, 0, 0)


def _reset_time(value: object) -> str | None:
    """A rate limit's reset time: text as given (cut), or an epoch in seconds or ms as ISO."""
    if isinstance(value, str):
        return value[:64] if value.strip() else None
    return iso_from_epoch(value)


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
                    text = display_text(block.get("text"))
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
            resets_at = _reset_time(info.get("resetsAt"))
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

        cost = as_amount(obj.get("total_cost_usd"))
        if cost is None:
            cost = as_amount(obj.get("total_cost", obj.get("cost_usd")))
        if cost is not None:
            self._cost_usd = cost
        turns = as_count(obj.get("num_turns"))
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
        denials = _denied_tools(obj.get("permission_denials"))
        self.outcome = Outcome(
            finished=True,
            is_error=is_error,
            subtype=subtype[:64] if isinstance(subtype, str) else None,
            message=display_text(message),
            rate_limited=rate_limited,
            terminal_reason=reason[:64] if isinstance(reason, str) else None,
            kind=_outcome_kind(is_error, rate_limited, subtype, denials),
            resets_at=self.rate_limit_resets_at if rate_limited else None,
            permission_denials=denials,
        )


def _denied_tools(denials: object) -> tuple[str, ...]:
    """The tool names of a result's ``permission_denials``, each once, in order."""
    if not isinstance(denials, list):
        return ()
    names = (d.get("tool_name") for d in denials if isinstance(d, dict))
    return tuple(dict.fromkeys(n[:64] for n in names if isinstance(n, str) and n))


def _outcome_kind(
    is_error: bool, rate_limited: bool, subtype: object, denials: tuple[str, ...]
) -> str:
    """How the run ended; a 429 says ``success`` with is_error, denials say ``success`` too."""
    if rate_limited:
        return "rate-limit"
    if subtype == "error_max_turns":
        return "max-turns"
    if is_error:
        return "error"
    return "permission-denied" if denials else "success"


def _claude_tokens(usage: dict[str, Any]) -> _Tokens | None:
    """Read an Anthropic API usage object; None when it has no token field."""
    values = (
        as_count(usage.get("input_tokens")),
        as_count(usage.get("output_tokens")),
        as_count(usage.get("cache_read_input_tokens")),
        as_count(usage.get("cache_creation_input_tokens")),
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
            value = as_count(entry.get(key))
            if value is not None:
                sums[index] += value
                seen = True
    return (sums[0], sums[1], sums[2], sums[3]) if seen else None
