"""Codex CLI ``codex exec --json`` (JSONL events).

Tokens: ``turn.completed.usage`` is the thread's running total, not the turn's. Within one
process the last figure wins; across ``codex exec resume`` it includes every earlier run of the
thread. The parser is therefore given the thread's totals before this run (``thread_usage``:
the sum of the per-run usage herd recorded for earlier runs of the same thread) and reports
the difference, so per-run figures add up to the thread's total. A run killed mid-turn printed
no ``turn.completed``: ``recover_from_rollout`` takes the thread's running total from the
rollout file Codex keeps (see ``codex_rollout``), so the killed run counts its own spend.
A figure below the previous total means the counter was not cumulative: it is taken as this
run's own, with a warning.

Refused commands: stdout's ``command_execution`` items are read as they come (a ``declined``
status, or a failed command whose output says the file system is read-only), but Codex
often prints no item for a command its sandbox refused. When the run has ended, the supervisor
reads the thread's rollout and ``take_rollout_refusals`` replaces that guess with what the
rollout shows (``codex_refusals``: the sandbox's own profile decides, so a failing test is
never a refusal).

``cached_input_tokens`` (and ``cache_write_input_tokens`` where present) are parts of
``input_tokens``: they become cache read (write) and only the rest is input.
``reasoning_output_tokens`` is part of ``output_tokens`` and is not added. No cost is printed.
"""

from __future__ import annotations

import re
from typing import Any, ClassVar, Self

from agentherd.sessions.adapters import outcomes
from agentherd.sessions.adapters.agent import MESSAGE, Agent, Preset, work_prompt
from agentherd.sessions.adapters.base import OutputParser, display_text
from agentherd.sessions.adapters.codex_refusals import command_name
from agentherd.sessions.adapters.usage import Usage, as_count

_Tokens = tuple[int, int, int, int]
"""input (without cache), output, cache read, cache write."""

_READ_ONLY = re.compile(r"Read-only file system|Operation not permitted", re.IGNORECASE)
"""Command output that says the sandbox refused a write (e.g. .git under workspace-write)."""


class CodexParser(OutputParser):
    """Codex CLI ``exec --json``: thread id, per-run tokens, outcome from turn events."""

    agent: ClassVar[str] = "codex"

    def __init__(self, session_id: str | None = None, thread_usage: Usage | None = None) -> None:
        """Start empty; thread_usage is what earlier runs of the resumed thread used."""
        super().__init__(session_id)
        before = thread_usage or Usage()
        self._before: _Tokens = (
            before.input_tokens,
            before.output_tokens,
            before.cache_read_tokens,
            before.cache_write_tokens,
        )
        self._cumulative: _Tokens | None = None
        self._turns = 0
        self._denials: list[str] = []
        self._declined: list[str] = []
        self._ended_as: dict[str, Any] | None = None
        """How the turn ended (all but the denials), to decide the outcome again from them."""
        self._error: str | None = None

    @classmethod
    def for_run(cls, session_id: str | None, thread_usage: Usage | None) -> Self:
        """A fresh adapter for one run, counting from the thread's earlier totals."""
        return cls(session_id, thread_usage=thread_usage)

    @property
    def cumulative(self) -> Usage:
        """The thread's running total as Codex last printed it (all runs of the thread)."""
        tokens = self._cumulative or (0, 0, 0, 0)
        return Usage(tokens[0], tokens[1], tokens[2], tokens[3])

    @property
    def usage(self) -> Usage:
        """This run's own tokens (cumulative minus the thread's earlier runs); no cost."""
        if self._cumulative is None:
            return Usage(turns=self._turns)
        now = self._cumulative
        if any(value < earlier for value, earlier in zip(now, self._before, strict=True)):
            own = now  # not cumulative after all: warned when read
        else:
            own = (
                now[0] - self._before[0],
                now[1] - self._before[1],
                now[2] - self._before[2],
                now[3] - self._before[3],
            )
        return Usage(own[0], own[1], own[2], own[3], turns=self._turns)

    def recover_from_rollout(self, total: dict[str, Any]) -> bool:
        """Take a killed run's thread total from its rollout (``total_token_usage``).

        Taken only when no turn ended well or badly since and it is not below what stdout
        showed. Returns whether anything changed.
        """
        tokens = _codex_tokens(total) if self.outcome is None else None
        now = self._cumulative
        if tokens is None or tokens == now:
            return False
        if now is not None and any(
            value < earlier for value, earlier in zip(tokens, now, strict=True)
        ):
            return False
        self._take_cumulative(tokens)
        return True

    def take_rollout_refusals(self, refused: list[str] | None) -> bool:
        """Decide a finished run's denials from its rollout (None: unknown, stdout's stand).

        Commands Codex declined on stdout are kept; the rest is what the rollout shows.
        Returns whether the outcome changed.
        """
        if refused is None or self.outcome is None or self._ended_as is None:
            return False
        denials: list[str] = []
        for name in (*self._declined, *refused):
            outcomes.add_denial(denials, name)
        if denials == self._denials:
            return False
        self._denials = denials
        self.outcome = outcomes.ended(**self._ended_as, denials=denials)
        return True

    def take_rollout_reset(self, resets_at: str | None) -> bool:
        """A rate limit whose stdout gave no reset time: the one its rollout holds (the used-up
        window's `resets_at`). Returns whether the outcome changed."""
        outcome, ended_as = self.outcome, self._ended_as
        if resets_at is None or outcome is None or ended_as is None:
            return False
        if outcome.kind != "rate-limit" or outcome.resets_at is not None:
            return False
        self._ended_as = {**ended_as, "resets_at": resets_at}
        self.outcome = outcomes.ended(**self._ended_as, denials=self._denials)
        return True

    def _on_object(self, obj: dict[str, Any]) -> None:
        """Dispatch one event on its ``type``."""
        kind = obj.get("type")
        if kind == "thread.started":
            self._set_session_id(obj.get("thread_id"))
        elif kind == "turn.completed":
            self._on_turn_completed(obj)
        elif kind == "turn.failed":
            self._on_turn_failed(obj)
        elif kind == "error":
            text = display_text(obj.get("message"))
            if text is not None:
                self._error = text
        elif kind in ("item.completed", "item.updated"):
            self._on_item(obj.get("item"))

    def _on_item(self, item: object) -> None:
        """Keep the agent's message text and note commands the sandbox refused."""
        if not isinstance(item, dict):
            return
        kind = item.get("type")
        if kind == "agent_message":
            text = display_text(item.get("text"))
            if text is not None:
                self.last_text = self.result_text = text
        elif kind == "command_execution":
            command = item.get("command")
            output = item.get("aggregated_output")
            refused = item.get("status") == "declined" or (
                item.get("exit_code") not in (0, None)
                and isinstance(output, str)
                and _READ_ONLY.search(output[-8192:]) is not None
            )
            if refused:
                outcomes.add_denial(self._denials, command_name(command))
            if item.get("status") == "declined":
                outcomes.add_denial(self._declined, command_name(command))

    def _on_turn_completed(self, obj: dict[str, Any]) -> None:
        """Take the thread's running token total; the turn ended well."""
        self._turns += 1
        usage = obj.get("usage")
        if isinstance(usage, dict):
            tokens = _codex_tokens(usage)
            if tokens is not None:
                self._take_cumulative(tokens)
        self._ended_as = {
            "is_error": False,
            "subtype": "turn.completed",
            "message": self.result_text,
        }
        self.outcome = outcomes.ended(**self._ended_as, denials=self._denials)

    def _take_cumulative(self, tokens: _Tokens) -> None:
        """Keep the latest running total; one that shrinks is warned about and not taken."""
        if self._cumulative is not None and any(
            value < earlier for value, earlier in zip(tokens, self._cumulative, strict=True)
        ):
            self.warn(f"codex token total went backwards ({self._cumulative} -> {tokens}): kept")
            kept = self._cumulative
            tokens = (
                max(tokens[0], kept[0]),
                max(tokens[1], kept[1]),
                max(tokens[2], kept[2]),
                max(tokens[3], kept[3]),
            )
        elif any(value < earlier for value, earlier in zip(tokens, self._before, strict=True)):
            self.warn("codex usage is below the thread's earlier total: taken as this run's own")
        self._cumulative = tokens

    def _on_turn_failed(self, obj: dict[str, Any]) -> None:
        """The turn failed: an error, a rate or usage limit when its message says so."""
        error = obj.get("error")
        message = error.get("message") if isinstance(error, dict) else error
        text = display_text(message) or self._error or "turn failed"
        self._ended_as = {
            "is_error": True,
            "subtype": "turn.failed",
            "message": text,
            "rate_limited": outcomes.RATE_LIMIT_TEXT.search(text) is not None,
            "resets_at": _reset_in_text(text),
        }
        self.outcome = outcomes.ended(**self._ended_as, denials=self._denials)


def _codex_tokens(usage: dict[str, Any]) -> _Tokens | None:
    """Split a Codex usage object into input without cache, output, cache read, cache write."""
    given = as_count(usage.get("input_tokens"))
    output = as_count(usage.get("output_tokens"))
    cached = as_count(usage.get("cached_input_tokens")) or 0
    written = as_count(usage.get("cache_write_input_tokens")) or 0
    if given is None and output is None:
        return None
    given = given or 0
    cached = min(cached, given)
    written = min(written, given - cached)
    return (given - cached - written, output or 0, cached, written)


_ISO_IN_TEXT = re.compile(r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}(:\d{2})?(\.\d+)?(Z|[+-]\d{2}:?\d{2})?")


def _reset_in_text(text: str) -> str | None:
    """The reset time a limit message gives: an ISO time, "try again in 120s" or Codex's own
    "try again at 9:53 PM" (this machine's local time, which the agent inherits); else None."""
    found = _ISO_IN_TEXT.search(text)
    if found is not None:
        return outcomes.reset_time_iso(found.group(0))
    return outcomes.reset_time_in_text(text)


_SANDBOX = ("--sandbox", "danger-full-access")
"""workspace-write leaves .git read-only (no commit): the session's worktree is the sandbox."""

AGENT = Agent(
    name="codex",
    key_env=("CODEX_API_KEY", "OPENAI_API_KEY"),
    parser=CodexParser,
    order=2,
    interactive_resume=("resume", "{session_id}"),
    preset=Preset(
        prompt_at=-1,
        command=("codex", "exec", "--json", *_SANDBOX, work_prompt()),
        resume=("codex", "exec", "--json", *_SANDBOX, "resume", "{session_id}", MESSAGE),
    ),
    price="gpt-5-codex",
    # `turn.completed` comes once a run, whatever the model answered: no turn to count.
    counts_turns=False,
)
