"""Anthropic usage objects read into token tuples: stream lines, result totals, transcripts.

A tuple is (input, output, cache read, cache write), each a count never below 0. Untrusted
values are read with `as_count`; a field of the wrong type is left out, never raised.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

from agentherd.sessions.adapters.usage import as_count
from agentherd.sessions.times import parse_iso

Tokens = tuple[int, int, int, int]
"""input, output, cache read, cache write."""

ZERO: Tokens = (0, 0, 0, 0)


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


def transcript_messages(
    entries: Iterable[object],
    message_ids: tuple[str, ...],
    since: str | None,
    until: str | None = None,
) -> list[tuple[str, Tokens]]:
    """Per-message usage (the last copy of each id) of transcript entries that belong to a run.

    An entry belongs when its message id was printed by the run, or when it was written
    between ``since`` and ``until``: a resumed session's transcript holds every run's messages.
    Entries are taken one at a time (a running table, never a list of them); past
    MAX_TRANSCRIPT_MESSAGES ids, only those already taken are updated.
    """
    wanted = set(message_ids)
    start = parse_iso(since) if since else None
    end = parse_iso(until) if until else None
    found: dict[str, Tokens] = {}
    for entry in entries:
        if not isinstance(entry, dict) or entry.get("type") != "assistant":
            continue
        message = entry.get("message")
        if not isinstance(message, dict) or message.get("model") == "<synthetic>":
            continue
        message_id = message.get("id")
        usage = message.get("usage")
        if not isinstance(message_id, str) or not message_id or not isinstance(usage, dict):
            continue
        if message_id not in wanted:
            stamp = entry.get("timestamp")
            moment = parse_iso(stamp) if isinstance(stamp, str) else None
            if start is None or moment is None or moment < start:
                continue
            if end is not None and moment > end:
                continue
        tokens = claude_tokens(usage)
        if tokens is not None and (message_id in found or len(found) < MAX_TRANSCRIPT_MESSAGES):
            found.pop(message_id, None)
            found[message_id] = tokens
    return list(found.items())
