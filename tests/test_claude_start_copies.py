"""A Claude Code transcript copy written at its message's start is no true count.

Claude Code (2.1.197) may write an assistant entry as soon as its content is complete, while
its usage is still the start figure (``output_tokens: 1``, ``stop_reason: null``), and never
write the message again: a subagent's answers often, under load any. A killed run's spend then
keeps the output estimate herd made from the content, instead of taking that 1 as settled.
"""

from __future__ import annotations

import json
from typing import Any

from agentherd.sessions.adapters import ClaudeParser
from agentherd.sessions.adapters.claude_tokens import transcript_messages

STARTED = "2026-12-01T05:48:00Z"
STAMP = "2026-12-01T05:48:01Z"
START = {"input_tokens": 3000, "output_tokens": 1, "cache_read_input_tokens": 20}
FINAL = {**START, "output_tokens": 33}
TEXT = "x" * 400
"""About 100 output tokens, by herd's estimate."""


def entry(message_id: str, usage: dict[str, int], stop: str | None, **more: Any) -> dict[str, Any]:
    """A transcript's assistant entry (as Claude Code writes it, `stop_reason` included)."""
    content = [{"type": "text", "text": TEXT}]
    message = {"id": message_id, "content": content, "usage": usage, "stop_reason": stop}
    return {"type": "assistant", "timestamp": STAMP, "message": message, **more}


def printed(parser: ClaudeParser, message_id: str) -> ClaudeParser:
    """Stdout's copy of a message at its start (output 1), its content estimated."""
    message = {"id": message_id, "content": [{"type": "text", "text": TEXT}], "usage": START}
    parser.feed_line(json.dumps({"type": "assistant", "message": message}).encode())
    return parser


def test_a_start_copy_keeps_the_estimate_stdout_made() -> None:
    parser = printed(ClaudeParser(), "m1")
    assert (parser.usage.output_tokens, parser.usage.output_estimate_tokens) == (100, 99)
    parser.recover_from_transcript([entry("m1", START, None)], STARTED)
    usage = parser.usage
    assert (usage.input_tokens, usage.output_tokens) == (3000, 100)
    assert usage.output_estimate_tokens == 99
    # Its final copy, written later, settles it at the true figure.
    assert parser.recover_from_transcript([entry("m1", FINAL, "tool_use")], STARTED)
    assert (parser.usage.output_tokens, parser.usage.output_estimate_tokens) == (33, 0)


def test_a_start_copy_stdout_never_printed_is_counted_with_an_estimate() -> None:
    # A subagent's last answer is only in its own transcript: its start copy still counts.
    parser = printed(ClaudeParser(), "m1")
    found = [entry("m1", FINAL, "tool_use"), entry("sub", START, None, isSidechain=True)]
    assert parser.recover_from_transcript(found, STARTED)
    usage = parser.usage
    assert (usage.input_tokens, usage.cache_read_tokens) == (6000, 40)
    assert (usage.output_tokens, usage.output_estimate_tokens) == (33 + 100, 99)
    assert usage.turns == 1  # a subagent's answer is no turn of the main thread
    # A later look that finds the same start copy again estimates it once.
    assert not parser.take_transcript_messages(
        transcript_messages([entry("sub", START, None, isSidechain=True)], (), STARTED)
    )
    assert parser.usage.output_tokens == 133


def test_a_final_copy_stands_before_a_later_start_copy() -> None:
    entries = [entry("m1", FINAL, "end_turn"), entry("m1", START, None)]
    ((key, tokens, kind, chars),) = transcript_messages(entries, ("m1",), None)
    assert (key, tokens[1], kind, chars) == ("m1", 33, "", None)
    entries.reverse()  # the usual order: the start copy, then the final one
    ((_, tokens, _, chars),) = transcript_messages(entries, ("m1",), None)
    assert (tokens[1], chars) == (33, None)
    # A copy without the field (older releases) is final; a start copy carries its content.
    older = entry("m2", START, None)
    del older["message"]["stop_reason"]
    found = transcript_messages([older, entry("m3", START, None)], ("m2", "m3"), None)
    assert [chars for _, _, _, chars in found] == [None, len(TEXT)]


def test_a_copy_printed_after_the_transcript_settled_it_lowers_nothing() -> None:
    # Under load stdout runs behind: the transcript's final copy is read first, and the start
    # copy printed later took the message back to its 1 (the killed run 32 tokens short).
    parser = ClaudeParser()
    parser.recover_from_transcript([entry("m1", FINAL, "tool_use")], STARTED)
    assert parser.usage.output_tokens == 33
    printed(parser, "m1")
    assert (parser.usage.output_tokens, parser.usage.output_estimate_tokens) == (33, 0)
