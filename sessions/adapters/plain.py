"""Custom harnesses: plain JSON usage lines and a done line; any other line is shown as text."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, ClassVar

from agentherd.sessions.adapters import outcomes
from agentherd.sessions.adapters.agent import Agent, Preset
from agentherd.sessions.adapters.base import MAX_TEXT_CHARS, OutputParser, display_text
from agentherd.sessions.adapters.usage import Usage, as_amount, as_count

_PASS_STRINGS = frozenset({"done", "success"})
_JSON_OPENERS = (b"{", b"[")


def _all_text(lines: Sequence[bytes]) -> bool:
    """True when no line can be JSON: none starts (after blanks) with `{` or `[`."""
    joined = b"".join(lines)
    if b"{" not in joined and b"[" not in joined:  # one pass in C: most text has neither
        return True
    return not any(line.lstrip()[:1] in _JSON_OPENERS for line in lines)


_FAIL_STRINGS = frozenset({"error", "failed"})


class PlainParser(OutputParser):
    """Custom harnesses: JSON usage lines (running totals) and a done line; other lines ignored.

    Recognised lines: ``{"usage": {...}, "cost_usd": x, "turns": n, "session_id": "..."}`` (each
    value a running total: the last one wins), ``{"herd": "done"}`` / ``{"herd": "error"}`` and
    ``{"result": "success"}`` / ``{"result": "error"}``, each with an optional ``"message"``, and
    on an error an optional ``"kind"`` (``rate-limit``, ``max-turns``, ``permission-denied``)
    with ``"resets_at"`` (ISO). A running total that goes backwards is warned about and the
    larger figure kept.
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

    def decode_lines(self, lines: Sequence[bytes]) -> list[object | None]:
        """`OutputParser.decode_lines`, with text lines passed over in bulk: most of a harness's
        output is text, of which only the last non-blank line is kept (`last_text`)."""
        if len(lines) < 2 or not _all_text(lines):
            return super().decode_lines(lines)
        self.skipped_lines += len(lines)
        for line in reversed(lines):  # what feeding them one by one would have kept
            if line.strip():
                self._on_other_line(line)
                break
        return [None] * len(lines)

    def _on_object(self, obj: dict[str, Any]) -> None:
        """Apply a usage line or a done line."""
        self._set_session_id(obj.get("session_id"))
        usage = obj.get("usage")
        for source in (usage if isinstance(usage, dict) else {}, obj):
            for key, index in self._TOKEN_KEYS.items():
                value = as_count(source.get(key))
                if value is not None and value < self._tokens[index]:
                    self.warn(f"plain: {key} went backwards ({self._tokens[index]} -> {value})")
                elif value is not None:
                    self._tokens[index] = value
            cost = as_amount(source.get("cost_usd"))
            if cost is not None and self._cost_usd is not None and cost < self._cost_usd:
                self.warn(f"plain: cost went backwards ({self._cost_usd} -> {cost} USD): kept")
            elif cost is not None:
                self._cost_usd = cost
                self._cost_estimated = source.get("cost_estimated") is True
            turns = as_count(source.get("turns"))
            if turns is not None:
                self._turns = turns
        verdict = obj.get("herd", obj.get("result"))
        if isinstance(verdict, str):
            word = verdict.strip().lower()
            if word in _PASS_STRINGS or word in _FAIL_STRINGS:
                failed = word in _FAIL_STRINGS
                kind = obj.get("kind")
                self.outcome = outcomes.ended(
                    is_error=failed,
                    subtype="error" if failed else "success",
                    message=obj.get("message"),
                    rate_limited=failed and kind == "rate-limit",
                    max_turns=failed and kind == "max-turns",
                    denials=["(reported)"] if failed and kind == "permission-denied" else [],
                    resets_at=outcomes.reset_time_iso(obj.get("resets_at")),
                )

    def _on_other_line(self, line: bytes) -> None:
        """Keep the last non-blank text line for display."""
        text = line.strip()
        if text:
            self.last_text = display_text(
                text[: MAX_TEXT_CHARS * 4].decode("utf-8", errors="replace")
            )


AGENT = Agent(
    name="plain",
    parser=PlainParser,
    order=99,
    preset=Preset(command=("./run-agent.sh",)),
    reports_cost=True,
)
"""A custom harness: it reports a cost when it prints `cost_usd`."""
