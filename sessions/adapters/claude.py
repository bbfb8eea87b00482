"""Claude Code ``stream-json`` (also Amp's Claude-compatible stream).

Claude token accounting (traps 10-12): until a ``result`` line arrives, tokens are the sum of
``assistant`` usages, one per ``message.id`` (the last copy wins; Amp lines without an id are
each added). At a ``result`` line every token count becomes the larger of that per-message sum
and the result's ``modelUsage`` sum (``usage`` when there is no ``modelUsage``): both are
running totals for the process, and ``modelUsage`` also counts background models. Messages
after the last result are added on top of it. Result usage is never added to the message sum.
From 2.1.332 the result's totals are the sums of its ``model_usage_since_last_result`` (see
``claude_result.ResultTotals``): its ``modelUsage`` covers the whole conversation.
Subagent ``subagent_token_usage`` lines are not counted (their messages may already appear).
A subagent's messages (``parent_tool_use_id`` set, or ``isSidechain`` in a transcript) count
their tokens but no turn: ``num_turns`` counts the main thread's. A compaction request prints
no usage (2.1.197): its ``compact_boundary`` line's ``pre_tokens`` is taken as its input, an
estimate (the cost is then estimated too) that a result line replaces; it counts a turn, as
``num_turns`` does.

Each ``assistant`` line is printed when its message starts, with ``output_tokens: 1``; the true
figure reaches stdout only in the ``result`` line. A run killed before it keeps that undercount
on stdout; ``recover_from_transcript`` then reads the final figures from the transcript Claude
Code keeps under its config folder (see ``claude_transcript``). Without a result line the cost
is estimated from herd's price table (``cost_estimated``), or None for an unknown model.

While a message shows only its start figure, its output tokens are estimated from the content
its lines carry (text, thinking, tool name and input: CHARS_PER_OUTPUT_TOKEN characters a
token), so a budget sees a running session's spend as it grows; ``Usage.output_estimate_tokens``
says how much is estimate, and the cost is marked estimated. The estimate is replaced, never
added to, when the true figure arrives: a later copy of the message with a larger output count,
a ``result`` line (it covers every message before it), or the transcript after a kill.
"""

from __future__ import annotations

import math
import re
from collections import OrderedDict
from collections.abc import Iterable
from typing import Any, ClassVar

from agentherd.sessions.adapters import limitwait, outcomes
from agentherd.sessions.adapters.agent import MESSAGE, Agent, Preset, work_prompt
from agentherd.sessions.adapters.base import MAX_TEXT_CHARS, OutputParser, display_text
from agentherd.sessions.adapters.claude_result import ResultTotals, limit_retry, result_outcome
from agentherd.sessions.adapters.claude_tokens import (
    COMPACTION,
    COMPACTION_KEY,
    SUBAGENT,
    ZERO,
    Estimate,
    Tokens,
    TranscriptMessage,
    as_tokens,
    claude_tokens,
    compaction_tokens,
    content_chars,
    larger,
    transcript_messages,
    unpriced_tokens,
)
from agentherd.sessions.adapters.usage import Usage
from agentherd.sessions.prices import estimate_cost_usd

MAX_TRACKED_MESSAGE_IDS = 4096
"""Repeated copies of one message are adjacent; older ids can be forgotten to bound memory."""

CHARS_PER_OUTPUT_TOKEN = 4.0
"""About how many characters of English text or code one output token carries (Claude's
tokenizer gives 3.5 to 4.5); used only until the message's true output count arrives."""

_NO_CONVERSATION = "No conversation found"
_MODEL_NAME = re.compile(r"[A-Za-z0-9._:\[\]-]{1,80}")


class ClaudeParser(OutputParser):
    """Claude Code ``stream-json`` (also Amp's Claude-compatible stream)."""

    agent: ClassVar[str] = "claude"
    estimates_cost: ClassVar[bool] = True
    """Estimate the cost from the price table when no result line gave one (Claude's models)."""

    def __init__(self, session_id: str | None = None) -> None:
        """Start empty; session_id is the id this process resumes, if any."""
        super().__init__(session_id)
        self.api_retries = 0
        self._by_message_id: dict[str, Tokens] = {}
        """Per message id, oldest first; an OrderedDict once full (see `_forget_oldest`)."""
        self._estimates: dict[str, Estimate] = {}
        """Per message id (same keys as _by_message_id): its output estimate."""
        self._estimate_extra = 0
        """The sum of the unsettled estimates' extra output tokens."""
        self._message_sum: list[int] = [0, 0, 0, 0]
        self._compactions: dict[str, Tokens] = {}
        """Compactions seen (stdout or transcript), by key: their estimated tokens."""
        self._compaction_sum: list[int] = [0, 0, 0, 0]
        self._compaction_sum_at_result: Tokens = ZERO
        self._result_base: Tokens | None = None
        self._message_sum_at_result: Tokens = ZERO
        self._messages = 0
        self._messages_at_result = 0
        self._result_turns: int | None = None
        self._cost_usd: float | None = None
        self._results = ResultTotals()
        self._unpriced_at_result: Tokens = ZERO
        """Tokens the last result's cost does not cover (a 0 cost for a served message)."""
        self.model: str | None = None
        """The main model's id, from ``system/init`` or an assistant message (for estimates)."""
        self._changes = 0
        """Counts the changes to the figures `usage` is made of (each line, the transcript)."""
        self._usage: tuple[int, Usage] | None = None
        """`usage` as last made, with `_changes` when it was made."""

    @property
    def usage(self) -> Usage:
        """Tokens (see the module docstring), last result's cost and turns."""
        # The budgets ask after every read of the log; made again only when a line came since.
        # A version, not a reset: a transcript read in a thread must not leave a half-made one.
        changes, made = self._changes, self._usage
        if made is None or made[0] != changes:
            made = self._usage = (changes, self._make_usage())
        return made[1]

    def _make_usage(self) -> Usage:
        """`usage` from the counts."""
        if self._result_base is None:
            tokens = tuple(self._message_sum)
        else:
            tokens = tuple(
                max(0, base + now - then)
                for base, now, then in zip(
                    self._result_base, self._message_sum, self._message_sum_at_result, strict=True
                )
            )
        extra = self._estimate_extra
        compacted = self._compaction_after_result()
        tokens = tuple(a + b for a, b in zip(tokens, compacted, strict=True))
        tokens = (tokens[0], tokens[1] + extra, tokens[2], tokens[3])
        if self._result_turns is None:
            turns = self._messages
        else:
            turns = self._result_turns + self._messages - self._messages_at_result
        cost_usd, estimated = self._cost_usd, False
        if cost_usd is None and self.estimates_cost and self._result_base is None:
            cost_usd = estimate_cost_usd(self.model, *tokens)
            estimated = cost_usd is not None
        elif cost_usd is not None and self._result_base is not None:
            cost_usd, estimated = self._with_unpriced(cost_usd)
        return Usage(
            input_tokens=tokens[0],
            output_tokens=tokens[1],
            cache_read_tokens=tokens[2],
            cache_write_tokens=tokens[3],
            cost_usd=cost_usd,
            cost_estimated=estimated,
            turns=turns,
            output_estimate_tokens=extra,
        )

    @property
    def models(self) -> dict[str, tuple[int, int, int, int]]:
        """The main model with the run's tokens (Claude prices a run by its main model)."""
        usage = self.usage
        if self.model is None or not self.estimates_cost:
            return {}
        return {
            self.model: (
                usage.input_tokens,
                usage.output_tokens,
                usage.cache_read_tokens,
                usage.cache_write_tokens,
            )
        }

    def _with_unpriced(self, cost_usd: float) -> tuple[float | None, bool]:
        """The result's cost plus an estimate of what it missed; never a 0 for known spend.

        What it missed: tokens its own totals lacked (or all of them when it said 0 USD for
        tokens it counted) and messages after it. Unpriceable (unknown model, Amp): a 0 becomes
        None (unknown); a positive cost is kept as the known part.
        """
        after = (
            max(0, now - then)
            for now, then in zip(self._message_sum, self._message_sum_at_result, strict=True)
        )
        unpriced = tuple(
            a + b + c
            for a, b, c in zip(
                self._unpriced_at_result, after, self._compaction_after_result(), strict=True
            )
        )
        unpriced = (unpriced[0], unpriced[1] + self._estimate_extra, unpriced[2], unpriced[3])
        if not any(unpriced):
            return cost_usd, False
        extra = estimate_cost_usd(self.model, *unpriced) if self.estimates_cost else None
        if extra is not None:
            return cost_usd + extra, True
        return (None if cost_usd == 0 else cost_usd), False

    def _compaction_after_result(self) -> Tokens:
        """The estimated tokens of compactions since the last result (all of them without one)."""
        now, then = self._compaction_sum, self._compaction_sum_at_result
        return (now[0] - then[0], now[1] - then[1], now[2] - then[2], now[3] - then[3])

    def _add_compaction(self, key: str, tokens: Tokens) -> bool:
        """Count a compaction once (stdout and transcript name it alike); True if new."""
        if key in self._compactions or len(self._compactions) >= MAX_TRACKED_MESSAGE_IDS:
            return False
        self._compactions[key] = tokens
        for index, value in enumerate(tokens):
            self._compaction_sum[index] += value
        self._messages += 1
        return True

    @property
    def message_ids(self) -> tuple[str, ...]:
        """Ids of the assistant messages this run printed (the last MAX_TRACKED_MESSAGE_IDS)."""
        return tuple(self._by_message_id)

    def recover_from_transcript(
        self, transcript: Iterable[object], since: str | None, until: str | None = None
    ) -> bool:
        """Take the final per-message usage of a killed run from its transcript entries.

        Only messages this run printed, or written between ``since`` and ``until`` (the run's
        start and end, ISO), are taken; each keeps the larger of its stdout and transcript
        figures. Returns whether anything changed; a run that printed its result needs none
        of this and is left as it is.
        """
        if self._result_base is not None:
            return False
        found = transcript_messages(transcript, self.message_ids, since, until)
        return self.take_transcript_messages(found)

    def take_transcript_messages(self, found: list[TranscriptMessage]) -> bool:
        """Take a killed run's per-message usage as `transcript_messages` found it (read apart
        from the parser, in a worker thread); True if anything changed."""
        if self._result_base is not None:
            return False
        self._changes += 1
        try:
            return self._recover(found)
        finally:
            self._changes += 1

    def _recover(self, found: list[TranscriptMessage]) -> bool:
        """`take_transcript_messages` once it has begun."""
        changed = False
        for message_id, tokens, kind, chars in found:
            if kind == COMPACTION:
                changed = self._add_compaction(message_id, tokens) or changed
                continue
            previous = self._by_message_id.get(message_id)
            if previous is None:  # an answer stdout never printed: it finished after all
                previous = ZERO
                if kind != SUBAGENT:
                    self._messages += 1
                    self.awaiting_answer = False
            better = larger(tokens, previous)
            if better != previous:
                changed = True
            self._by_message_id[message_id] = better
            self._add_tokens(better, previous)
            if chars is None:  # its true figure
                changed = self._settle(message_id) or changed
            elif message_id not in self._estimates:  # only its start: estimated as stdout's is
                self._estimate(message_id, better[1], chars)
                changed = True
        return changed

    def _settle(self, message_id: str) -> bool:
        """The message's true figure arrived: drop its estimate. Returns whether one was kept."""
        estimate = self._estimates.get(message_id)
        if estimate is None:
            self._estimates[message_id] = Estimate(0, settled=True)
            return False
        had = estimate.extra > 0
        self._estimate_extra -= estimate.extra
        estimate.extra, estimate.settled = 0, True
        return had

    def _on_object(self, obj: dict[str, Any]) -> None:
        """Dispatch one stream-json line on its ``type``."""
        self._changes += 1
        kind = obj.get("type")
        if kind == "result":
            self._on_result(obj)
            return
        session_id = obj.get("session_id")
        if session_id is not None and (
            session_id != self.session_id or self.reported_session_id is None
        ):  # the id every line repeats is checked once: a resumed run's first line names it
            self._set_session_id(session_id)
        if kind == "assistant":
            self.awaiting_answer = False
            self._on_assistant(obj)
        elif kind == "user":  # a tool's result goes to the model: a request begins
            self.awaiting_answer = True
        elif kind == "system":
            if obj.get("subtype") == "api_retry":
                self.api_retries += 1
                self._on_retry(obj)
            elif obj.get("subtype") == "init":
                self.awaiting_answer = True  # the prompt goes to the model
                self._set_model(obj.get("model"))
            elif obj.get("subtype") == "compact_boundary":
                self._on_compaction(obj)
        elif kind == "rate_limit_event":
            self._on_rate_limit(obj)
        elif kind == "conversation_reset":
            self._set_session_id(obj.get("new_conversation_id"))

    def _on_compaction(self, obj: dict[str, Any]) -> None:
        """Count a compaction from its boundary line (estimated: it printed no usage)."""
        tokens = compaction_tokens(obj.get("compact_metadata"))
        uuid = obj.get("uuid")
        if tokens is not None:
            key = uuid if isinstance(uuid, str) and uuid else str(len(self._compactions))
            self._add_compaction(COMPACTION_KEY + key, tokens)

    def _on_assistant(self, obj: dict[str, Any]) -> None:
        """Count one assistant message's usage (deduplicated by id) and keep its text."""
        message = obj.get("message")
        if not isinstance(message, dict):
            return
        model = message.get("model")
        if model != self.model and model != "<synthetic>":  # an API-error placeholder
            self._set_model(model)
        content = message.get("content")
        chars = 0
        if isinstance(content, list):
            for block in content:
                if not isinstance(block, dict):
                    continue
                if block.get("type") == "text":  # most blocks: inline what the calls did
                    text = block.get("text")
                    if isinstance(text, str):
                        chars += len(text)
                        self.last_text = text if len(text) <= MAX_TEXT_CHARS else display_text(text)
                else:
                    chars += content_chars(block)
        usage = message.get("usage")
        tokens = claude_tokens(usage) if isinstance(usage, dict) else None
        message_id = message.get("id")
        main_thread = not obj.get("parent_tool_use_id")  # a subagent's message is no turn
        if isinstance(message_id, str) and message_id:
            previous = self._by_message_id.pop(message_id, None)
            if previous is None:
                self._messages += main_thread
                previous = ZERO
            # A copy printed after the transcript settled the message (stdout behind, under
            # load) still has its start figure: no copy lowers one (seen: 32 tokens short).
            tokens = previous if tokens is None else larger(tokens, previous)
            self._by_message_id[message_id] = tokens
            if len(self._by_message_id) > MAX_TRACKED_MESSAGE_IDS:
                oldest = self._forget_oldest()
                gone = self._estimates.pop(oldest, None)
                self._estimate_extra -= gone.extra if gone is not None else 0
            self._add_tokens(tokens, previous)
            self._estimate(message_id, tokens[1], chars)
        else:
            self._messages += main_thread
            if tokens is not None:
                self._add_tokens(tokens, ZERO)

    def _forget_oldest(self) -> str:
        """Forget the oldest message id (the bound is reached); return it.

        A dict's first key is found past every hole its deletions left: once the bound is
        reached, that search cost more than decoding the line. An OrderedDict forgets in O(1)
        but takes about 64 bytes more an id, so a run becomes one only when it fills up.
        """
        ids = self._by_message_id
        if not isinstance(ids, OrderedDict):
            ids = self._by_message_id = OrderedDict(ids)
        oldest, _ = ids.popitem(last=False)
        return oldest

    def _estimate(self, message_id: str, output: int, chars: int) -> None:
        """Estimate a message's output from its content while it shows only its start figure."""
        estimate = self._estimates.pop(message_id, None)
        if estimate is None:
            estimate = Estimate(start_output=output)
        self._estimates[message_id] = estimate  # same order as _by_message_id
        if estimate.settled:
            return
        if output > estimate.start_output:  # a later, true figure for this message
            self._settle(message_id)
            return
        estimate.chars += chars
        guess = math.ceil(estimate.chars / CHARS_PER_OUTPUT_TOKEN)
        extra = max(0, guess - output)
        self._estimate_extra += extra - estimate.extra
        estimate.extra = extra

    def _add_tokens(self, tokens: Tokens, replaced: Tokens) -> None:
        """Add tokens to the message sum in place of an earlier copy."""
        total = self._message_sum
        total[0] += tokens[0] - replaced[0]
        total[1] += tokens[1] - replaced[1]
        total[2] += tokens[2] - replaced[2]
        total[3] += tokens[3] - replaced[3]

    def _set_model(self, value: object) -> None:
        """Record the model id when it looks like one."""
        if value == self.model:
            return  # every message names it again; it was checked the first time
        if isinstance(value, str) and _MODEL_NAME.fullmatch(value):
            self.model = value

    def _on_retry(self, obj: dict[str, Any]) -> None:
        """A retry of a rate-limited request: the run waits on the limit until it goes on."""
        retry = limit_retry(obj)
        if retry is not None:
            self.limit_wait = limitwait.waiting(self.limit_earlier, *retry)

    def _on_rate_limit(self, obj: dict[str, Any]) -> None:
        """Track a usage-limit rejection and its reset time."""
        info = obj.get("rate_limit_info")
        if not isinstance(info, dict):
            info = obj
        status = info.get("status")
        if status == "rejected":
            self._rate_limited = True
            resets_at = outcomes.reset_time_iso(info.get("resetsAt"))
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

        totals, cost, turns = self._results.take(obj, self._messages)
        if cost is not None:
            if self._cost_usd is not None and cost < self._cost_usd:
                # A running total for the process: it cannot shrink; keep the larger.
                self.warn(f"claude cost went backwards ({self._cost_usd} -> {cost} USD): kept")
            else:
                self._cost_usd = cost
        if turns is not None:
            self._result_turns = turns
            self._messages_at_result = self._messages

        if totals is not None:
            self._result_base = larger(totals, self._message_sum)
            self._message_sum_at_result = as_tokens(self._message_sum)
        elif self._result_base is None:
            self._result_base = as_tokens(self._message_sum)
            self._message_sum_at_result = self._result_base
        self._unpriced_at_result = unpriced_tokens(totals, self._result_base, self._cost_usd)
        # The result's totals and cost cover the compactions before it (estimates no more).
        self._compaction_sum_at_result = as_tokens(self._compaction_sum)
        for message_id, estimate in self._estimates.items():  # the result covers them all
            if not estimate.settled:
                self._settle(message_id)

        self.outcome = result_outcome(
            obj, error_texts, result_text, self._rate_limited, self.rate_limit_resets_at
        )
        if result_text is not None:
            self.last_text = self.result_text = display_text(result_text)


TOOLS = "Bash,Read,Edit,Write,Glob,Grep"
"""What the preset allows without asking: edit files and run any shell command."""

_STREAM = ("--output-format", "stream-json", "--verbose", "--allowedTools", TOOLS)
"""After the prompt: --allowedTools takes several values."""

PROGRESS_FILE = "claude-progress.txt"
"""The progress notes of Anthropic's long-running-agent harness, which Claude users know."""

AGENT = Agent(
    name="claude",
    key_env=("ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN", "CLAUDE_CODE_OAUTH_TOKEN"),
    parser=ClaudeParser,
    order=1,
    interactive_resume=("--resume", "{session_id}"),
    preset=Preset(
        prompt_at=2,
        command=("claude", "-p", work_prompt(PROGRESS_FILE), *_STREAM),
        resume=("claude", "-p", MESSAGE, "--resume", "{session_id}", *_STREAM),
        progress=PROGRESS_FILE,
    ),
    price="claude-sonnet-4-5",
    reports_cost=True,
    ends_with_result=True,
)
