"""Codex, Gemini CLI and OpenCode output reads as words, as Claude Code's does.

Tried by hand, `herd ls` showed a Codex run's last output as
`{"type":"turn.completed","usage":...}` and an OpenCode run's as a raw `step_finish` line;
`herd logs` printed every Codex, Gemini CLI and OpenCode line as raw JSON.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from agentherd.sessions.adapters import make_parser
from agentherd.sessions.adapters.summary import summarize

REAL = Path(__file__).parent / "fixtures" / "agents" / "real"
CHARS = 200


def lines_of(name: str) -> list[bytes]:
    return (REAL / name).read_bytes().splitlines()


@pytest.mark.parametrize(
    ("agent", "fixture", "last"),
    [
        ("codex", "codex-exec.jsonl", "Done: wrote hello.txt and committed it."),
        ("opencode", "opencode-run.jsonl", "Done: hello.txt committed."),
        ("gemini", "gemini-stream.jsonl", "result: success"),
        (
            "codex",
            "codex-turn-failed.jsonl",
            "error: stream disconnected before completion: mock: the model is at capacity",
        ),
    ],
)
def test_a_runs_last_line_is_what_the_agent_last_did_or_said(
    agent: str, fixture: str, last: str
) -> None:
    assert make_parser(agent).feed_lines(lines_of(fixture), CHARS) == last


@pytest.mark.parametrize(
    "fixture", ["codex-exec.jsonl", "opencode-run.jsonl", "gemini-stream.jsonl"]
)
def test_no_line_of_a_real_run_is_shown_as_raw_json(fixture: str) -> None:
    shown = [summarize(line, CHARS) for line in lines_of(fixture) if line.startswith(b"{")]
    assert shown and not [text for text in shown if text.startswith("{")], shown


def test_each_kind_of_event_reads_as_what_happened() -> None:
    codex = lines_of("codex-exec.jsonl")
    words = [summarize(line, CHARS) for line in codex]
    assert "thread started" in words
    assert (
        "$ /bin/bash -lc \"git add -A && git commit -q -m 'mock: add hello.txt'\" → exit 0" in words
    )
    assert words[-1] == "turn completed (300 input, 90 output tokens)"
    opencode = [summarize(line, CHARS) for line in lines_of("opencode-run.jsonl")]
    assert opencode[-1] == "step finished (stop)"
    assert any(text.startswith("bash ") and "git commit" in text for text in opencode)
    gemini = [summarize(line, CHARS) for line in lines_of("gemini-stream.jsonl")]
    assert any(text.startswith("init: agent session started") for text in gemini)
    assert any(text.startswith("run_shell_command ") for text in gemini)
    assert any(text.startswith("> ") for text in gemini)  # the prompt it echoes


def test_untrusted_event_fields_of_any_type_never_raise() -> None:
    odd = [
        b'{"type":"item.completed","item":{"type":"command_execution","command":5,"exit_code":"x"}}',
        b'{"type":"item.completed","item":{"type":"file_change","changes":"nope"}}',
        b'{"type":"item.started","item":[1]}',
        b'{"type":"tool_use","part":{"tool":null,"state":7}}',
        b'{"type":"tool_use","tool_name":["x"],"parameters":"y"}',
        b'{"type":"tool_result","tool_id":"t","error":{"data":3}}',
        b'{"type":"turn.completed","usage":{"input_tokens":"many"}}',
        b'{"type":"error","error":{"name":"APIError","data":{"message":"\\u001b[2Jboom"}}}',
        b'{"type":"text","part":{"text":{"a":1}}}',
    ]
    shown = [summarize(line, CHARS) for line in odd]
    assert all(isinstance(text, str) and "\x1b" not in text for text in shown)
    assert shown[-2] == "error: boom"
