"""A simulated agent's Claude stream-json: its turns, tool calls, results and running totals."""

from __future__ import annotations

import argparse
import json
import random
import sys
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

MODEL = "claude-sonnet-4-5"
"""The model the simulated agent names: a real one, so herd prices its spend as it would a
Claude Code run's (a name herd has no price for shows unpriced)."""
TOOLS = ["Bash", "Edit", "Glob", "Grep", "Read", "Write"]
SLEEP_STEP = 0.05  # seconds per sleep slice: short enough that signals feel immediate

FLOOD_SAMPLES = [
    "\x1b[31mred\x1b[0m noise line {k} of feature {n}",
    "building {k}%\rbuilding done (feature {n})",
    "\x1b[1;32mok\x1b[0m step {k} \x1b]0;simagent title\x07(feature {n})",
]


@dataclass
class Action:
    """One tool call the agent makes: the tool name, its input and the code that does it."""

    name: str
    input: dict[str, Any]
    run: Callable[[], str]


def pause(seconds: float) -> None:
    """Sleep for ``seconds`` in small slices so that signals are handled promptly."""
    end = time.monotonic() + seconds
    while (left := end - time.monotonic()) > 0:
        time.sleep(min(SLEEP_STEP, left))


def usage_for(n: int, turn: int) -> dict[str, int]:
    """Return deterministic small token counts for turn ``turn`` of feature ``n``."""
    return {
        "input_tokens": 4 + n % 7 + turn,
        "cache_creation_input_tokens": 200 + 37 * n + 11 * turn,
        "cache_read_input_tokens": 12000 + 900 * n + 150 * turn,
        "output_tokens": 60 + 13 * n + 25 * turn,
    }


@dataclass
class Agent:
    """One simagent process: its options, session id and running totals."""

    args: argparse.Namespace
    session_id: str
    started: float = field(default_factory=time.monotonic)
    turns: int = 0
    cost: float = 0.0
    usage: dict[str, int] = field(default_factory=lambda: dict.fromkeys(usage_for(0, 0), 0))
    notes: list[str] = field(default_factory=list)

    @property
    def plan_path(self) -> Path:
        """The feature list file."""
        return Path(self.args.plan)

    @property
    def progress_path(self) -> Path:
        """The progress file."""
        return Path(self.args.progress)

    def emit(self, obj: dict[str, Any]) -> None:
        """Print one JSON line and flush it."""
        self.emit_raw(json.dumps(obj, separators=(",", ":")) + "\n")

    def emit_raw(self, text: str) -> None:
        """Print raw text and flush it."""
        sys.stdout.write(text)
        sys.stdout.flush()

    def envelope(self, kind: str, message: dict[str, Any]) -> dict[str, Any]:
        """Wrap a message in an ``assistant`` or ``user`` line."""
        return {
            "type": kind,
            "message": message,
            "parent_tool_use_id": None,
            "session_id": self.session_id,
            "uuid": str(uuid.uuid4()),
        }

    def assistant(
        self, n: int, blocks: list[dict[str, Any]], *, turn: int = 0, model: str = MODEL
    ) -> None:
        """Print an assistant message with usage derived from feature ``n`` and its turn."""
        usage = usage_for(n, turn) if model == MODEL else dict.fromkeys(self.usage, 0)
        self.turns += 1
        for key, value in usage.items():
            self.usage[key] += value
        message = {
            "id": f"msg_sim{uuid.uuid4().hex[:24]}",
            "type": "message",
            "role": "assistant",
            "model": model,
            "content": blocks,
            "stop_reason": "tool_use" if blocks[-1]["type"] == "tool_use" else "end_turn",
            "stop_sequence": None,
            "usage": usage,
        }
        self.emit(self.envelope("assistant", message))

    def step(self, n: int, text: str | None, actions: Sequence[Action], turn: int = 0) -> None:
        """Print one assistant turn calling ``actions``, run them and print their results."""
        blocks: list[dict[str, Any]] = [{"type": "text", "text": text}] if text else []
        ids = [f"toolu_sim{uuid.uuid4().hex[:20]}" for _ in actions]
        for tool_id, action in zip(ids, actions, strict=True):
            blocks.append(
                {"type": "tool_use", "id": tool_id, "name": action.name, "input": action.input}
            )
        self.assistant(n, blocks, turn=turn)
        if not actions:
            return
        results = [
            {"type": "tool_result", "tool_use_id": tool_id, "content": action.run()}
            for tool_id, action in zip(ids, actions, strict=True)
        ]
        self.emit(self.envelope("user", {"role": "user", "content": results}))

    def work(self, n: int, text: str, actions: Sequence[Action]) -> None:
        """Spread ``actions`` over 1-3 turns (by feature index) with the configured delay."""
        count = min(1 + (n - 1) % 3, len(actions))
        delay = max(0.0, self.args.delay * (1 + random.uniform(-1, 1) * self.args.jitter))
        size, extra = divmod(len(actions), count)
        start = 0
        for i in range(count):
            end = start + size + (1 if i < extra else 0)
            pause(delay / count)
            self.step(n, text if i == 0 else None, actions[start:end], turn=i)
            start = end

    def result(self, text: str, *, is_error: bool = False, **extra: Any) -> None:
        """Print the final ``result`` line with this process's running totals."""
        duration_ms = int((time.monotonic() - self.started) * 1000)
        cost = round(self.cost, 6)
        model_usage = {
            "inputTokens": self.usage["input_tokens"],
            "outputTokens": self.usage["output_tokens"],
            "cacheReadInputTokens": self.usage["cache_read_input_tokens"],
            "cacheCreationInputTokens": self.usage["cache_creation_input_tokens"],
            "costUSD": cost,
        }
        line = {
            "type": "result",
            "subtype": "success",
            "is_error": is_error,
            "num_turns": self.turns,
            "duration_ms": duration_ms,
            "duration_api_ms": duration_ms * 4 // 5,
            "result": text,
            "session_id": self.session_id,
            "total_cost_usd": cost,
            "usage": dict(self.usage),
            "modelUsage": {MODEL: model_usage},
            "terminal_reason": "completed",
            "uuid": str(uuid.uuid4()),
        }
        self.emit(line | extra)

    def flood(self, n: int) -> None:
        """Print ``--flood`` lines of plain-text noise with escape sequences."""
        for k in range(self.args.flood):
            self.emit_raw(FLOOD_SAMPLES[k % len(FLOOD_SAMPLES)].format(k=k, n=n) + "\n")
