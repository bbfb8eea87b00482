"""Property tests for every parser of outside input: herd.toml, plan files, progress files,
every agent adapter, control-socket messages.

Never an unhandled exception on any input, the right totals on valid input, the parser's own
error type (with a message) on invalid input. Short here; the `slow` variant runs each
property with many more examples.
"""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agentherd.sessions.adapters import PARSERS, make_parser
from agentherd.sessions.config import ConfigError, parse_config
from agentherd.sessions.plan import PlanError, parse_plan
from agentherd.sessions.progress import read_progress_tail
from agentherd.supervisor.api.protocol import ApiError, decode, encode

SHORT_EXAMPLES = 60
LONG_EXAMPLES = int(os.environ.get("HERD_FUZZ_EXAMPLES", "3000"))
"""The `slow` variant's examples per property; HERD_FUZZ_EXAMPLES=100000 for a night's run."""

FOLDER = Path(tempfile.mkdtemp(prefix="herd-fuzz-"))
"""A real folder for the sessions' cwd (herd.toml checks that it exists)."""

json_scalars = st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=20)
json_values = st.recursive(
    json_scalars,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner),
    max_leaves=12,
)
lines = st.binary(max_size=200).map(lambda b: b.replace(b"\n", b"")) | json_values.map(
    lambda v: json.dumps(v).encode()
)
"""Output lines as the splitter hands them over: without their newline."""


def run(strategy: st.SearchStrategy[Any], check: Callable[[Any], None], examples: int) -> None:
    """Check `check` on `examples` values of `strategy`."""

    @settings(
        max_examples=examples,
        deadline=None,
        database=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    )
    @given(strategy)
    def prop(value: Any) -> None:
        check(value)

    prop()


# ----- plan files ------------------------------------------------------------------------


def plan_any_bytes(data: bytes) -> None:
    try:
        plan = parse_plan(data)
    except PlanError as exc:
        assert str(exc)
        return
    assert all(isinstance(item.passes, bool) for item in plan.items)


features = st.lists(
    st.fixed_dictionaries(
        {
            "category": st.sampled_from(["functional", "ui"]),
            "description": st.text(min_size=1, max_size=30).filter(str.strip),
            "steps": st.lists(st.text(max_size=10), max_size=3),
            "passes": st.booleans(),
        }
    ),
    min_size=1,
    max_size=30,
    unique_by=lambda f: f["description"],
)


def plan_valid(items: list[dict[str, Any]]) -> None:
    plan = parse_plan(json.dumps(items).encode())
    assert len(plan.items) == len(items)
    assert sum(item.passes for item in plan.items) == sum(f["passes"] for f in items)


# ----- progress files --------------------------------------------------------------------


def progress_any_bytes(data: bytes) -> None:
    read = read_progress_tail(data, max_entries=5)
    assert len(read.entries) <= 5


sessions_notes = st.lists(
    st.lists(
        st.text(alphabet=st.characters(categories=["L", "N"]), min_size=1, max_size=20),
        min_size=1,
        max_size=3,
    ),
    min_size=1,
    max_size=12,
)


def progress_valid(sessions: list[list[str]]) -> None:
    text = "".join(
        f"## Session {i + 1}\n" + "".join(f"- {note}\n" for note in notes)
        for i, notes in enumerate(sessions)
    )
    read = read_progress_tail(text.encode(), max_entries=100)
    assert not read.binary
    assert len(read.entries) == len(sessions)


# ----- herd.toml ------------------------------------------------------------------------


def config_any_text(text: str) -> None:
    try:
        parse_config(text, FOLDER / "herd.toml")
    except ConfigError as exc:
        assert exc.problems and all(str(p) for p in exc.problems)


toml_values = (
    st.integers(-5, 10**6).map(str)
    | st.text(max_size=12).map(json.dumps)
    | st.lists(st.text(max_size=6), max_size=3).map(json.dumps)
    | st.sampled_from(["true", '"1h"', '"-3s"', '"never"', '"on-failure"', "{ tokens = 5 }"])
)
toml_keys = st.sampled_from(
    ["name", "cwd", "command", "agent", "restart", "stop_grace", "budget", "plan", "bogus"]
)
session_tables = st.lists(st.dictionaries(toml_keys, toml_values, max_size=6), max_size=4)


def config_any_sessions(tables: list[dict[str, str]]) -> None:
    text = "\n".join(
        "[[session]]\n" + "".join(f"{key} = {value}\n" for key, value in table.items())
        for table in tables
    )
    config_any_text(text)


def config_valid(names: list[str]) -> None:
    text = "\n".join(
        f'[[session]]\nname = "{name}"\ncwd = "{FOLDER}"\ncommand = ["true"]\n' for name in names
    )
    config = parse_config(text, FOLDER / "herd.toml")
    assert [s.name for s in config.sessions] == names


session_names = st.lists(
    st.from_regex(r"[a-z][a-z0-9-]{0,15}", fullmatch=True), min_size=1, max_size=8, unique=True
)

# ----- agent adapters -------------------------------------------------------------------


def adapters_any_lines(batch: list[bytes]) -> None:
    for agent in PARSERS:
        parser = make_parser(agent)
        shown = parser.feed_lines(batch, 400)
        assert len(shown) <= 400
        assert all(ord(c) >= 32 or c == "\t" for c in shown), "control characters shown raw"
        usage = parser.usage
        assert min(usage.input_tokens, usage.output_tokens, usage.turns) >= 0


messages = st.lists(
    st.tuples(st.integers(0, 10**6), st.integers(0, 10**6)), min_size=1, max_size=20
)


def claude_valid(tokens: list[tuple[int, int]], agent: str = "claude") -> None:
    lines = [
        json.dumps(
            {
                "type": "assistant",
                "message": {
                    "id": f"msg_{i}",
                    "content": [{"type": "text", "text": "hi"}],
                    "usage": {"input_tokens": inp, "output_tokens": out},
                },
                "session_id": "3f6b2c1e-8a4d-4e2b-9c7f-1d2e3a4b5c6d",
            }
        ).encode()
        for i, (inp, out) in enumerate(tokens)
    ]
    parser = make_parser(agent)
    parser.feed_lines(lines, 400)
    assert parser.usage.input_tokens == sum(t[0] for t in tokens)
    # Without a result line a message's output is also estimated from its text; what the
    # agent reported is the rest.
    reported = parser.usage.output_tokens - parser.usage.output_estimate_tokens
    assert reported == sum(t[1] for t in tokens)
    assert parser.usage.turns == len(tokens)


def amp_valid(tokens: list[tuple[int, int]]) -> None:
    """Amp prints Claude-compatible lines: the same totals."""
    claude_valid(tokens, "amp")


def codex_valid(steps: list[tuple[int, int]]) -> None:
    """Each turn.completed carries the thread's running total: the last one is the run's."""
    running, lines = (0, 0), []
    for add_in, add_out in steps:
        running = (running[0] + add_in, running[1] + add_out)
        usage = {"input_tokens": running[0], "cached_input_tokens": 0, "output_tokens": running[1]}
        lines.append(json.dumps({"type": "turn.completed", "usage": usage}).encode())
    parser = make_parser("codex")
    parser.feed_lines(lines, 400)
    assert (parser.usage.input_tokens, parser.usage.output_tokens) == running
    assert parser.usage.turns == len(steps)


def gemini_valid(results: list[tuple[int, int]]) -> None:
    """Each result's stats are the process's totals so far: the last one replaces the rest."""
    lines = [
        json.dumps(
            {
                "type": "result",
                "status": "success",
                "stats": {
                    "input_tokens": given,
                    "cached": given // 3,
                    "output_tokens": out,
                    "total_tokens": given + out,
                },
            }
        ).encode()
        for given, out in results
    ]
    parser = make_parser("gemini")
    parser.feed_lines(lines, 400)
    given, out = results[-1]
    usage = parser.usage
    assert (usage.input_tokens, usage.cache_read_tokens) == (given - given // 3, given // 3)
    assert usage.output_tokens == out


def opencode_valid(steps: list[tuple[int, int]]) -> None:
    """Each step_finish adds its step's tokens."""
    lines = [
        json.dumps(
            {
                "type": "step_finish",
                "sessionID": "ses_1",
                "part": {"reason": "tool-calls", "tokens": {"input": a, "output": b}},
            }
        ).encode()
        for a, b in steps
    ]
    parser = make_parser("opencode")
    parser.feed_lines(lines, 400)
    assert (parser.usage.input_tokens, parser.usage.output_tokens) == (
        sum(a for a, _ in steps),
        sum(b for _, b in steps),
    )
    assert parser.usage.turns == len(steps)


def aider_valid(replies: list[tuple[int, int]]) -> None:
    """Each reply's `Tokens: N sent, M received.` line adds to the totals."""
    lines = [f"Tokens: {a} sent, {b} received.".encode() for a, b in replies]
    parser = make_parser("aider")
    parser.feed_lines(lines, 400)
    assert (parser.usage.input_tokens, parser.usage.output_tokens) == (
        sum(a for a, _ in replies),
        sum(b for _, b in replies),
    )
    assert parser.usage.turns == len(replies)


def plain_valid(totals: list[tuple[int, int]]) -> None:
    parser = make_parser("plain")
    parser.feed_lines(
        [
            json.dumps({"usage": {"input_tokens": a, "output_tokens": b}}).encode()
            for a, b in totals
        ],
        400,
    )
    # Running totals: the last figure wins, but a total never goes down (a lower one is a
    # warning and the higher figure is kept: agent-formats.md, "a cost that goes backwards").
    highest = (max(a for a, _ in totals), max(b for _, b in totals))
    assert (parser.usage.input_tokens, parser.usage.output_tokens) == highest


# ----- socket messages ------------------------------------------------------------------


def socket_any_line(line: bytes) -> None:
    try:
        message = decode(line)
    except ApiError as exc:
        assert exc.code == "bad-request" and exc.message
        return
    assert isinstance(message, dict)


def socket_round_trip(message: dict[str, Any]) -> None:
    wire = encode(message)
    assert wire.endswith(b"\n") and wire.count(b"\n") == 1
    assert decode(wire) == json.loads(json.dumps(message))


socket_messages = st.dictionaries(
    st.text(max_size=8),
    st.recursive(
        st.none() | st.booleans() | st.integers() | st.text(max_size=20),
        lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner),
        max_leaves=8,
    ),
)

PROPERTIES: dict[str, tuple[st.SearchStrategy[Any], Callable[[Any], None]]] = {
    "plan: any bytes": (
        st.binary(max_size=500) | json_values.map(lambda v: json.dumps(v).encode()),
        plan_any_bytes,
    ),
    "plan: valid totals": (features, plan_valid),
    "progress: any bytes": (
        st.binary(max_size=500) | st.text(max_size=300).map(str.encode),
        progress_any_bytes,
    ),
    "progress: valid entries": (sessions_notes, progress_valid),
    "herd.toml: any text": (st.text(max_size=300), config_any_text),
    "herd.toml: any session tables": (session_tables, config_any_sessions),
    "herd.toml: valid sessions": (session_names, config_valid),
    "adapters: any lines": (st.lists(lines, max_size=10), adapters_any_lines),
    "claude: valid totals": (messages, claude_valid),
    "amp: valid totals": (messages, amp_valid),
    "codex: valid totals": (messages, codex_valid),
    "gemini: valid totals": (messages, gemini_valid),
    "opencode: valid totals": (messages, opencode_valid),
    "aider: valid totals": (messages, aider_valid),
    "plain: valid totals": (messages, plain_valid),
    "socket: any line": (lines, socket_any_line),
    "socket: round trip": (socket_messages, socket_round_trip),
}


@pytest.mark.parametrize("name", list(PROPERTIES))
def test_parser_property_holds(name: str) -> None:
    """Every parser of outside input, on random input: no crash, right totals, clear errors."""
    strategy, check = PROPERTIES[name]
    run(strategy, check, SHORT_EXAMPLES)


@pytest.mark.slow
@pytest.mark.parametrize("name", list(PROPERTIES))
def test_parser_property_holds_long(name: str) -> None:
    """The same properties with many more examples (`-m slow`; HERD_FUZZ_EXAMPLES sets how
    many)."""
    strategy, check = PROPERTIES[name]
    run(strategy, check, LONG_EXAMPLES)
