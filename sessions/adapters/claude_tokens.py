"""Anthropic usage objects read into token tuples: stream lines, result totals, transcripts.

A tuple is (input, output, cache read, cache write), each a count never below 0. Untrusted
values are read with `as_count`; a field of the wrong type is left out, never raised.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from agentherd.sessions.adapters.usage import as_count
from agentherd.sessions.times import parse_iso

Tokens = tuple[int, int, int, int]
"""input, output, cache read, cache write."""

ZERO: Tokens = (0, 0, 0, 0)


@dataclass(slots=True)
class Estimate:
    """What one message printed so far, for estimating its output until its true count."""

    start_output: int
    """The output figure of its first copy (the start figure, until a copy shows more)."""
    chars: int = 0
    extra: int = 0
    """Estimated output tokens beyond the reported figure (0 once settled)."""
    settled: bool = False
    """A true figure arrived (a larger count, a result line or the transcript)."""


def larger(first: Tokens | list[int], second: Tokens | list[int]) -> Tokens:
    """Each figure the larger of the two (running totals that cannot shrink)."""
    return (
        max(first[0], second[0]),
        max(first[1], second[1]),
        max(first[2], second[2]),
        max(first[3], second[3]),
    )


def as_tokens(figures: list[int]) -> Tokens:
    """A running sum's figures as they stand now."""
    return (figures[0], figures[1], figures[2], figures[3])


def content_chars(block: object) -> int:
    """Characters of one content block the model wrote: text, thinking, tool name and input."""
    if not isinstance(block, dict):
        return 0
    kind = block.get("type")
    if kind == "text":
        value = block.get("text")
    elif kind == "thinking":
        value = block.get("thinking")
    elif kind in ("tool_use", "server_tool_use"):
        name = block.get("name")
        given = block.get("input")
        try:
            value = (name if isinstance(name, str) else "") + json.dumps(given)
        except (TypeError, ValueError):
            return 0
    else:
        return 0
    return len(value) if isinstance(value, str) else 0


def unpriced_tokens(totals: Tokens | None, counted: Tokens, cost_usd: float | None) -> Tokens:
    """Tokens a result's cost does not cover: what its totals lack, or all at a 0 USD cost."""
    if cost_usd == 0 and any(counted):
        return counted  # 0 USD for tokens the run counted: not believed
    if totals is None:
        return ZERO
    return (
        max(0, counted[0] - totals[0]),
        max(0, counted[1] - totals[1]),
        max(0, counted[2] - totals[2]),
        max(0, counted[3] - totals[3]),
    )


def claude_tokens(usage: dict[str, Any]) -> Tokens | None:
    """Read an Anthropic API usage object; None when it has no token field."""
    read, write = usage.get("cache_read_input_tokens"), usage.get("cache_creation_input_tokens")
    given, output = usage.get("input_tokens"), usage.get("output_tokens")
    # A plain non-negative int (every line Claude prints) is its own count: no call for it.
    given = given if type(given) is int and given >= 0 else as_count(given)
    output = output if type(output) is int and output >= 0 else as_count(output)
    read = read if type(read) is int and read >= 0 else as_count(read)
    write = write if type(write) is int and write >= 0 else as_count(write)
    if given is None and output is None and read is None and write is None:
        return None
    return (given or 0, output or 0, read or 0, write or 0)


def model_usage_tokens(model_usage: object) -> Tokens | None:
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


MAX_TRANSCRIPT_MESSAGES = 50_000
"""A run's messages taken from a transcript at most (a busy day's run has a few thousand): a
transcript of millions of short lines costs a bounded table, not one entry per line."""


SUBAGENT = "subagent"
"""A message a subagent wrote: billed, but not one of the main thread's turns."""

COMPACTION = "compaction"
"""A compaction request: no usage written, its input estimated from its ``preTokens``."""

COMPACTION_KEY = "compaction:"
"""Prefix of a compaction's key among message ids (its boundary entry's uuid follows)."""

TranscriptMessage = tuple[str, Tokens, str, int | None]
"""A message id (or COMPACTION_KEY + uuid), its tokens, "" | SUBAGENT | COMPACTION, and None
for a final copy, or the characters its content holds for a start copy (see `start_chars`)."""


def start_chars(message: dict[str, Any]) -> int | None:
    """None for a transcript copy of a complete message; for a copy written at its start, the
    characters of its content (to estimate its output from, as stdout's copy is).

    Claude Code (2.1.197) may write an assistant entry as soon as its content is complete, the
    usage still its start figure (``output_tokens: 1``, ``stop_reason: null``), and never again
    (a subagent's often; the true figure only goes to the result line): that copy is no true
    count. A copy without the field (older releases, hand-made ones) is taken as final.
    """
    if "stop_reason" not in message or message["stop_reason"] is not None:
        return None
    content = message.get("content")
    return sum(map(content_chars, content)) if isinstance(content, list) else 0


def compaction_tokens(metadata: object) -> Tokens | None:
    """A compaction's estimated tokens from its metadata: its ``preTokens`` (transcript) or
    ``pre_tokens`` (stdout) as input, the context it summarised; None when absent."""
    if not isinstance(metadata, dict):
        return None
    pre = as_count(metadata.get("preTokens", metadata.get("pre_tokens")))
    return (pre, 0, 0, 0) if pre else None


def _entry_message(entry: dict[str, Any]) -> TranscriptMessage | None:
    """The message an assistant or compact-boundary transcript entry stands for."""
    if entry.get("type") == "system":
        uuid = entry.get("uuid")
        if entry.get("subtype") != "compact_boundary" or not isinstance(uuid, str) or not uuid:
            return None
        tokens = compaction_tokens(entry.get("compactMetadata"))
        return None if tokens is None else (COMPACTION_KEY + uuid, tokens, COMPACTION, None)
    if entry.get("type") != "assistant":
        return None
    message = entry.get("message")
    if not isinstance(message, dict) or message.get("model") == "<synthetic>":
        return None
    message_id, usage = message.get("id"), message.get("usage")
    if not isinstance(message_id, str) or not message_id or not isinstance(usage, dict):
        return None
    tokens = claude_tokens(usage)
    if tokens is None:
        return None
    kind = SUBAGENT if entry.get("isSidechain") is True else ""
    return message_id, tokens, kind, start_chars(message)


def transcript_messages(
    entries: Iterable[object],
    message_ids: tuple[str, ...],
    since: str | None,
    until: str | None = None,
) -> list[TranscriptMessage]:
    """Per-message usage (the last copy of each id, a final copy before any start copy) of
    transcript entries that belong to a run, its subagents' messages and its compactions
    (estimated) among them.

    An entry belongs when its message id was printed by the run, or when it was written
    between ``since`` and ``until``: a resumed session's transcript holds every run's messages.
    Entries are taken one at a time (a running table, never a list of them); past
    MAX_TRANSCRIPT_MESSAGES ids, only those already taken are updated.
    """
    wanted = set(message_ids)
    start = parse_iso(since) if since else None
    end = parse_iso(until) if until else None
    found: dict[str, tuple[Tokens, str, int | None]] = {}
    for entry in entries:
        if not isinstance(entry, dict):
            continue
        taken = _entry_message(entry)
        if taken is None:
            continue
        key, tokens, kind, chars = taken
        if key not in wanted:
            stamp = entry.get("timestamp")
            moment = parse_iso(stamp) if isinstance(stamp, str) else None
            if start is None or moment is None or moment < start:
                continue
            if end is not None and moment > end:
                continue
        known = found.get(key)
        if known is not None and chars is not None and known[2] is None:
            continue  # a start copy after a final one (never seen): the final one stands
        if known is not None or len(found) < MAX_TRANSCRIPT_MESSAGES:
            found.pop(key, None)
            found[key] = (tokens, kind, chars)
    return [(key, tokens, kind, chars) for key, (tokens, kind, chars) in found.items()]
