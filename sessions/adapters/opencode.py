"""OpenCode ``opencode run --format json`` (JSONL; ``sessionID`` on every line).

Each ``step_finish`` carries the tokens and cost of that step (``part.tokens{input, output,
reasoning, cache{read, write}}``, ``part.cost``): they are added, one step each. Reasoning is
billed as output. A model OpenCode has no price for (a custom provider) gets ``cost: 0``
with its tokens: that is no cost reported (None, so herd may estimate), not a free run. The
title request OpenCode makes before the first answer prints no step: its tokens are not seen.
A step that ends for any reason but ``tool-calls`` ends the answer; an
``error`` line ends the run in error; ``done`` (newer builds) ends it, its ``rejected`` list
naming permissions the run refused (``--auto`` not given). A tool the config denies
(``"permission": {"bash": "deny"}``) is taken from the model; OpenCode 1.18 prints its call as
a call of the tool ``invalid`` naming the ``unavailable tool``: a denial when it is one of
OpenCode's own tools, a mistake of the model (which it may mend) when it names none.
"""

from __future__ import annotations

import re
from typing import Any, ClassVar

from agentherd.sessions.adapters import outcomes
from agentherd.sessions.adapters.agent import MESSAGE, Agent, Preset, work_prompt
from agentherd.sessions.adapters.base import OutputParser, display_text
from agentherd.sessions.adapters.usage import Usage, as_amount, as_count

BUILTIN_TOOLS = frozenset(
    {"bash", "edit", "write", "read", "grep", "glob", "list", "lsp", "patch", "multiedit"}
    | {"apply_patch", "skill", "task", "todowrite", "todoread", "webfetch", "websearch"}
    | {"codesearch", "question"}
)
"""OpenCode's own tools (its docs' Tools page): a permission or tools setting may take them."""

_UNAVAILABLE = re.compile(r"unavailable tool '([^']{1,64})'")
"""OpenCode's words for a call of a tool the model was not given."""


def unavailable_builtin(part: dict[str, Any]) -> str | None:
    """The OpenCode tool a call of ``invalid`` asked for when the config took it away, else None."""
    state = part.get("state")
    state = state if isinstance(state, dict) else {}
    given = state.get("input")
    given = given if isinstance(given, dict) else {}
    found = _UNAVAILABLE.search(f"{given.get('error')} {state.get('output')}")
    name = outcomes.tool_name(found.group(1) if found else None)
    return name if name in BUILTIN_TOOLS else None


class OpenCodeParser(OutputParser):
    """OpenCode's JSON event lines: summed step usage and cost, outcome from its end events."""

    agent: ClassVar[str] = "opencode"

    def __init__(self, session_id: str | None = None) -> None:
        """Start empty; session_id is the id this process resumes, if any."""
        super().__init__(session_id)
        self._tokens = [0, 0, 0, 0]
        self._cost_usd: float | None = None
        self._steps = 0
        self._denials: list[str] = []

    @property
    def usage(self) -> Usage:
        """The sum of every step's tokens and cost (None when no step gave a cost)."""
        return Usage(
            input_tokens=self._tokens[0],
            output_tokens=self._tokens[1],
            cache_read_tokens=self._tokens[2],
            cache_write_tokens=self._tokens[3],
            cost_usd=self._cost_usd,
            turns=self._steps,
        )

    def _on_object(self, obj: dict[str, Any]) -> None:
        """Dispatch one event on its ``type``."""
        self._set_session_id(obj.get("sessionID"))
        kind = obj.get("type")
        part = obj.get("part")
        part = part if isinstance(part, dict) else {}
        if kind == "text":
            text = display_text(part.get("text"))
            if text is not None:
                self.last_text = text
        elif kind == "tool_use":
            state = part.get("state")
            error = state.get("error") if isinstance(state, dict) else None
            if isinstance(error, str) and "permission" in error.lower():
                outcomes.add_denial(self._denials, outcomes.tool_name(part.get("tool")))
            elif part.get("tool") == "invalid":
                outcomes.add_denial(self._denials, unavailable_builtin(part))
        elif kind == "step_finish":
            self._on_step(part)
        elif kind == "error":
            self._on_error(obj.get("error"))
        elif kind == "done":
            rejected = obj.get("rejected")
            for item in rejected if isinstance(rejected, list) else []:
                name = item.get("permission", item.get("tool")) if isinstance(item, dict) else item
                outcomes.add_denial(self._denials, outcomes.tool_name(name) or "(unnamed)")
            if self.outcome is None or not self.outcome.is_error:
                self._succeed()

    def _on_step(self, part: dict[str, Any]) -> None:
        """Add one step's tokens and cost; a final step ends the answer."""
        self._steps += 1
        tokens = part.get("tokens")
        if isinstance(tokens, dict):
            cache = tokens.get("cache")
            cache = cache if isinstance(cache, dict) else {}
            figures = (
                as_count(tokens.get("input")) or 0,
                (as_count(tokens.get("output")) or 0) + (as_count(tokens.get("reasoning")) or 0),
                as_count(cache.get("read")) or 0,
                as_count(cache.get("write")) or 0,
            )
            for index, value in enumerate(figures):
                self._tokens[index] += value
        cost = as_amount(part.get("cost"))
        billed = isinstance(tokens, dict) and any(
            as_count(tokens.get(key)) for key in ("input", "output", "total")
        )
        if cost is not None and (cost > 0 or not billed):
            self._cost_usd = (self._cost_usd or 0.0) + cost
        if part.get("reason") not in ("tool-calls", None):
            self.result_text = self.last_text
            self._succeed()

    def _succeed(self) -> None:
        """The run ended normally (denials make it permission-denied)."""
        self.outcome = outcomes.ended(
            is_error=False, subtype="stop", message=self.result_text, denials=self._denials
        )

    def _on_error(self, error: object) -> None:
        """The run ended in error: its name and message, a rate limit when they say so (with
        the reset its words give: OpenCode prints no reset time of its own)."""
        name = error.get("name") if isinstance(error, dict) else None
        data = error.get("data") if isinstance(error, dict) else None
        text = data.get("message") if isinstance(data, dict) else error
        message = display_text(text if isinstance(text, str) else name) or "error"
        status = data.get("statusCode") if isinstance(data, dict) else None
        self.outcome = outcomes.ended(
            is_error=True,
            subtype=name if isinstance(name, str) else "error",
            message=message,
            rate_limited=status == 429
            or outcomes.RATE_LIMIT_TEXT.search(f"{name} {message}") is not None,
            denials=self._denials,
            resets_at=outcomes.reset_time_in_text(message),
        )


AGENT = Agent(
    name="opencode",
    parser=OpenCodeParser,
    order=5,
    preset=Preset(
        prompt_at=-1,
        command=("opencode", "run", "--format", "json", work_prompt()),
        resume=(
            "opencode",
            "run",
            "--format",
            "json",
            "--session",
            "{session_id}",
            MESSAGE,
        ),
    ),
    reports_cost=True,
)
