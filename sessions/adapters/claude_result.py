"""How a Claude Code ``result`` line says its run ended: error, limit, denials, max turns."""

from __future__ import annotations

from typing import Any

from agentherd.sessions.adapters import outcomes
from agentherd.sessions.adapters.claude_tokens import Tokens, claude_tokens, model_usage_tokens
from agentherd.sessions.adapters.usage import Outcome, as_amount, as_count


def result_cost(obj: dict[str, Any]) -> float | None:
    """The process's cost so far as a result line states it (older versions name it otherwise)."""
    cost = as_amount(obj.get("total_cost_usd"))
    return cost if cost is not None else as_amount(obj.get("total_cost", obj.get("cost_usd")))


def result_totals(obj: dict[str, Any]) -> Tokens | None:
    """The process's token totals as a result line states them: `modelUsage`, else `usage`."""
    totals = model_usage_tokens(obj.get("modelUsage"))
    if totals is None and isinstance(obj.get("usage"), dict):
        totals = claude_tokens(obj["usage"])
    return totals


class ResultTotals:
    """The process's running totals from its result lines: tokens, cost and turns.

    Claude Code 2.1.332 adds ``model_usage_since_last_result``: what the process spent since
    its previous result. Its ``modelUsage`` and ``total_cost_usd`` then cover the whole
    conversation, a resumed one's earlier processes too, and its ``num_turns`` the turns since
    the previous result (a background subagent's report starts another), so where that field is
    present the running totals are the sums, one result line after another; older versions'
    figures cover the process and are taken as they stand.
    """

    def __init__(self) -> None:
        """No result yet."""
        self._tokens: Tokens = (0, 0, 0, 0)
        self._cost_usd: float | None = None
        self._turns = 0

    def take(
        self, obj: dict[str, Any], turns_seen: int
    ) -> tuple[Tokens | None, float | None, int | None]:
        """The process's token totals, cost and turns as of this result line; `turns_seen` is
        how many main-thread answers the stream showed (a result printed after the answers of
        the next one, as 2.1.332 prints a background subagent's, must not take turns back)."""
        since = obj.get("model_usage_since_last_result")
        tokens = model_usage_tokens(since) if isinstance(since, dict) else None
        turns = as_count(obj.get("num_turns"))
        if not isinstance(since, dict) or (since and tokens is None):
            return result_totals(obj), result_cost(obj), turns
        before, tokens = self._tokens, tokens or (0, 0, 0, 0)
        self._tokens = (
            before[0] + tokens[0],
            before[1] + tokens[1],
            before[2] + tokens[2],
            before[3] + tokens[3],
        )
        costs = [as_amount(e.get("costUSD")) for e in since.values() if isinstance(e, dict)]
        if any(cost is not None for cost in costs):
            self._cost_usd = (self._cost_usd or 0.0) + sum(c for c in costs if c is not None)
        self._turns += turns or 0
        return self._tokens, self._cost_usd, max(self._turns, turns_seen)


def limit_retry(obj: dict[str, Any]) -> tuple[float | None, int | None] | None:
    """An `api_retry` line's delay (ms) and attempt when it retries a rate limit, else None."""
    if obj.get("error_status") != 429 and obj.get("error") != "rate_limit":
        return None
    delay_ms = obj.get("retry_delay_ms")
    delay = float(delay_ms) if isinstance(delay_ms, int | float) and delay_ms >= 0 else None
    attempt = obj.get("attempt")
    return delay, attempt if isinstance(attempt, int) else None


def result_outcome(
    obj: dict[str, Any],
    error_texts: list[str],
    result_text: str | None,
    rate_limited: bool,
    resets_at: str | None,
) -> Outcome:
    """The outcome of a result line; `rate_limited` and `resets_at` as the stream said before."""
    is_error = obj.get("is_error") is True
    all_text = " ".join([*error_texts, result_text or ""])
    status = obj.get("api_error_status")
    rate_limited = rate_limited or status == 429
    rate_limited = rate_limited or outcomes.RATE_LIMIT_TEXT.search(all_text) is not None
    subtype = obj.get("subtype")
    reason = obj.get("terminal_reason")
    denials: list[str] = []
    given = obj.get("permission_denials")
    for denial in given if isinstance(given, list) else []:
        name = denial.get("tool_name") if isinstance(denial, dict) else denial
        outcomes.add_denial(denials, outcomes.tool_name(name) or "(unnamed tool)")
    max_turns = subtype == "error_max_turns" or reason == "max_turns"
    message = "; ".join(error_texts) if is_error and error_texts else result_text
    return outcomes.ended(
        is_error=is_error,
        subtype=subtype if isinstance(subtype, str) else None,
        message=message,
        rate_limited=rate_limited,
        max_turns=max_turns,
        denials=denials,
        terminal_reason=reason if isinstance(reason, str) else None,
        resets_at=resets_at or outcomes.reset_time_in_text(all_text),
    )
