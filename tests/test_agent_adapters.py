"""Each agent's adapter against the captured outputs (exact totals) and against its traps."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from agentherd.sessions.adapters import (
    AGENTS,
    OUTCOME_KINDS,
    PARSERS,
    AiderParser,
    ClaudeParser,
    CodexParser,
    GeminiParser,
    OpenCodeParser,
    OutputParser,
    Usage,
    make_parser,
    price_for,
)
from agentherd.sessions.adapters.claude_transcript import (
    claude_config_dir,
    read_transcript,
    transcript_path,
)
from agentherd.sessions.prices import estimate_cost_usd, lookup, price_table

PACKAGE = "agentherd.sessions.adapters"

FIXTURES = Path(__file__).parent / "fixtures" / "agents"
CLAUDE_HOME = FIXTURES / "claude-home"
KILLED_SESSION = "3c6dc9ee-9626-4943-9a2a-b53c4c69233a"
KILLED_CWD = "/home/dev/hc/crash"
KILLED_RUN_STARTED = "2026-12-01T05:48:01.900Z"
KILLED_RUN_ENDED = "2026-12-01T05:48:12Z"


def run(agent: str, name: str, **options: Any) -> OutputParser:
    """Feed a fixture's lines, as herd splits them, to a fresh adapter."""
    parser = make_parser(agent, **options)
    for raw in (FIXTURES / name).read_bytes().splitlines():
        parser.feed_line(raw)
    return parser


def feed(parser: OutputParser, *items: Any) -> OutputParser:
    """Feed objects (as JSON lines) or raw bytes."""
    for item in items:
        parser.feed_line(item if isinstance(item, bytes) else json.dumps(item).encode())
    return parser


def figures(usage: Usage) -> tuple[int, int, int, int, int]:
    """input, output, cache read, cache write, total."""
    return (
        usage.input_tokens,
        usage.output_tokens,
        usage.cache_read_tokens,
        usage.cache_write_tokens,
        usage.total_tokens,
    )


# ----- exact totals over every captured stream ------------------------------------------------

# agent, fixture, (input, output, cache read, cache write, total), cost, estimated, kind, session
TOTALS: list[tuple[str, str, tuple[int, ...], float | None, bool, str | None, str | None]] = [
    (
        "claude",
        "claude-stream-success.jsonl",
        (16, 556, 55_792, 10_780, 67_144),
        0.0655506,
        False,
        "success",
        "3f6b2c1e-8a4d-4e2b-9c7f-1d2e3a4b5c6d",
    ),
    (
        "claude",
        "real/claude-stream.jsonl",
        (300, 90, 60, 30, 480),
        0.0039675,
        False,
        "success",
        "94b3ff90-06cf-49e1-9584-a62116b4bf92",
    ),
    (
        "claude",
        "real/claude-resume-stream.jsonl",
        (400, 120, 80, 40, 640),
        0.00529,
        False,
        "success",
        "94b3ff90-06cf-49e1-9584-a62116b4bf92",
    ),
    (
        "claude",
        "real/claude-resumed-under-herd.log",
        (400, 120, 80, 40, 640),
        0.00529,
        False,
        "success",
        KILLED_SESSION,
    ),
    (
        # Killed: stdout holds each message's start only (output_tokens 1); the output is
        # estimated from the tool calls printed (about 4 characters a token; true: 90).
        "claude",
        "real/claude-killed-midrun.log",
        (300, 60, 60, 30, 450),
        0.0032175,
        True,
        None,
        KILLED_SESSION,
    ),
    (
        "claude",
        "real/claude-limit.jsonl",
        (0, 0, 0, 0, 0),
        0.0,
        False,
        "rate-limit",
        "511ba2e2-b1ab-4344-86a8-807b28f059b1",
    ),
    (
        "claude",
        "real/claude-error401.jsonl",
        (0, 0, 0, 0, 0),
        0.0,
        False,
        "error",
        "72863106-f525-4923-8c0e-6f1592c1c688",
    ),
    (
        "claude",
        "real/claude-no-permission-flag.jsonl",
        (300, 90, 60, 30, 480),
        0.0039675,
        False,
        "permission-denied",
        "26a017e0-c3fa-49c7-aedc-35a34f9a668a",
    ),
    (
        "claude",
        "real/claude-overload-once.jsonl",
        (100, 30, 20, 10, 160),
        0.0013225,
        False,
        "success",
        "d490fd38-7a04-4db8-8c70-016b244f8df2",
    ),
    (
        "claude",
        "real/claude-json.json",
        (100, 30, 20, 10, 160),
        0.0013225,
        False,
        "success",
        "2c864962-b4c9-4f5d-9699-bbd54dc68dcc",
    ),
    (
        "claude",
        "real/claude-json-verbose.json",
        (100, 30, 20, 10, 160),
        0.0013225,
        False,
        "success",
        "2593bbb5-93b1-462a-96b4-4e3156fa3db8",
    ),
    (
        "codex",
        "codex-exec-success.jsonl",
        (7_251, 1_893, 40_960, 0, 50_104),
        None,
        False,
        "success",
        "019a7c3e-5b21-7d40-a9c2-3f5e8d1b2c4a",
    ),
    (
        "codex",
        "real/codex-exec.jsonl",
        (240, 90, 60, 0, 390),
        None,
        False,
        "success",
        "01a23029-d43a-7861-a949-34100228ab71",
    ),
    (
        # Read without the thread's earlier totals: the cumulative figure of the thread.
        "codex",
        "real/codex-resume.jsonl",
        (400, 150, 100, 0, 650),
        None,
        False,
        "success",
        "01a23029-d43a-7861-a949-34100228ab71",
    ),
    (
        "codex",
        "real/codex-turn-failed.jsonl",
        (0, 0, 0, 0, 0),
        None,
        False,
        "error",
        "01a2302a-844c-7e30-9852-1751fc2d5fb1",
    ),
    (
        "codex",
        "real/codex-killed-midrun.log",
        (0, 0, 0, 0, 0),
        None,
        False,
        None,
        "01a2302a-22b5-7192-bdc4-d43573e90cd6",
    ),
    (
        "gemini",
        "gemini-stream-success.jsonl",
        (8_650, 734, 12_800, 0, 22_184),
        None,
        False,
        "success",
        "5a8c1f3e-2b7d-4e90-a6c4-8d1f0b3e5a72",
    ),
    (
        # total_tokens 540 counts 20 thinking tokens: billed as output (120 + 20).
        "gemini",
        "real/gemini-stream.jsonl",
        (320, 140, 80, 0, 540),
        None,
        False,
        "success",
        "8724d1be-d21b-4dc3-9525-71b9f8fd3825",
    ),
    (
        "gemini",
        "real/gemini-resume-stream.jsonl",
        (240, 105, 60, 0, 405),
        None,
        False,
        "success",
        "8724d1be-d21b-4dc3-9525-71b9f8fd3825",
    ),
    (
        "gemini",
        "real/gemini-resumed-under-herd.log",
        (240, 105, 60, 0, 405),
        None,
        False,
        "success",
        "1d2bd2ef-21a8-419b-9f4c-012280d9e27e",
    ),
    (
        "gemini",
        "real/gemini-killed-midrun.log",
        (0, 0, 0, 0, 0),
        None,
        False,
        None,
        "1d2bd2ef-21a8-419b-9f4c-012280d9e27e",
    ),
    (
        # One pretty-printed document over 91 lines; two models of 100 prompt (20 cached),
        # 30 candidates and 5 thoughts each.
        "gemini",
        "real/gemini-json.json",
        (160, 70, 40, 0, 270),
        None,
        False,
        "success",
        "dd2f9107-b68f-4d67-aa92-2f665b745af0",
    ),
]


@pytest.mark.parametrize(
    ("agent", "name", "expected", "cost", "estimated", "kind", "session"),
    TOTALS,
    ids=[row[1] for row in TOTALS],
)
def test_exact_totals_of_each_captured_stream(
    agent: str,
    name: str,
    expected: tuple[int, ...],
    cost: float | None,
    estimated: bool,
    kind: str | None,
    session: str,
) -> None:
    parser = run(agent, name)
    assert figures(parser.usage) == expected
    if cost is None:
        assert parser.usage.cost_usd is None
    else:
        assert parser.usage.cost_usd == pytest.approx(cost, abs=1e-12)
    assert parser.usage.cost_estimated is estimated
    assert parser.session_id == session
    if kind is None:
        assert parser.outcome is None
    else:
        assert parser.outcome is not None and parser.outcome.kind == kind
        assert parser.outcome.kind in OUTCOME_KINDS
    assert parser.refused_session_ids == 0


def test_the_killed_runs_in_real_match_what_their_readme_gives() -> None:
    readme = (FIXTURES / "README.md").read_text()
    assert "input 400, output 120, cache read 80, cache write 40" in readme
    assert "input 300, output 90, cached 60, total 405" in readme
    resumed = run("claude", "real/claude-resumed-under-herd.log").usage
    assert figures(resumed)[:4] == (400, 120, 80, 40)
    gemini = run("gemini", "real/gemini-resumed-under-herd.log").usage
    with_cache = gemini.input_tokens + gemini.cache_read_tokens
    assert (with_cache, gemini.cache_read_tokens, gemini.total_tokens) == (300, 60, 405)
    assert gemini.output_tokens == 90 + 15  # 15 thinking tokens: 405 - 300 - 90
    for name in ("real/codex-killed-midrun.log", "real/gemini-killed-midrun.log"):
        parser = run(name.split("/")[1].split("-")[0], name)
        assert parser.usage.total_tokens == 0 and parser.outcome is None


def test_result_texts() -> None:
    assert run("claude", "real/claude-stream.jsonl").result_text == (
        "Done: wrote hello.txt and committed it."
    )
    assert run("codex", "real/codex-exec.jsonl").result_text == (
        "Done: wrote hello.txt and committed it."
    )
    assert run("gemini", "real/gemini-stream.jsonl").result_text == (
        "Done: wrote hello.txt and committed it."
    )
    assert run("gemini", "real/gemini-json.json").result_text == "Hello from the mock."
    assert run("codex", "real/codex-killed-midrun.log").result_text is None


def test_turns() -> None:
    assert run("claude", "real/claude-resume-stream.jsonl").usage.turns == 4
    assert run("claude", "real/claude-killed-midrun.log").usage.turns == 3
    assert run("codex", "real/codex-exec.jsonl").usage.turns == 1
    gemini = run("gemini", "real/gemini-stream.jsonl")
    assert isinstance(gemini, GeminiParser) and gemini.tool_calls == 2


# ----- Claude Code traps --------------------------------------------------------------------


def test_claude_429_reported_as_success_is_a_rate_limit() -> None:
    parser = run("claude", "real/claude-limit.jsonl")
    outcome = parser.outcome
    assert outcome is not None
    assert outcome.subtype == "success" and outcome.is_error
    assert outcome.kind == "rate-limit" and outcome.rate_limited


def test_claude_rate_limit_event_gives_the_reset_time() -> None:
    parser = feed(
        ClaudeParser(),
        {
            "type": "rate_limit_event",
            "rate_limit_info": {"status": "rejected", "resetsAt": 1_790_000_000},
        },
        {
            "type": "result",
            "subtype": "success",
            "is_error": True,
            "result": "You've hit your limit",
        },
    )
    assert parser.outcome is not None and parser.outcome.kind == "rate-limit"
    assert parser.outcome.resets_at == "2026-09-21T14:13:20Z"


def test_claude_permission_denials_on_a_success_are_permission_denied() -> None:
    parser = run("claude", "real/claude-no-permission-flag.jsonl")
    outcome = parser.outcome
    assert outcome is not None
    assert outcome.subtype == "success" and not outcome.is_error
    assert outcome.kind == "permission-denied"
    assert outcome.permission_denials == ("Write", "Bash")


def test_claude_2_1_332_resumed_run_counts_what_it_spent_since_the_last_result() -> None:
    # 2.1.332's modelUsage and total_cost_usd cover the whole conversation, the killed run's
    # answer included; `model_usage_since_last_result` is this process's share since its last.
    def entry(tokens: int, cost: float) -> dict[str, object]:
        return {
            "inputTokens": tokens,
            "outputTokens": 30,
            "cacheReadInputTokens": 20,
            "cacheCreationInputTokens": 10,
            "costUSD": cost,
        }

    def result(whole: int, since: int, cost: float) -> dict[str, object]:
        return {
            "type": "result",
            "subtype": "success",
            "num_turns": 1,
            "total_cost_usd": 0.05 + cost,
            "modelUsage": {"m": entry(whole, 0.05 + cost)},
            "model_usage_since_last_result": {"m": entry(since, cost)},
        }

    parser = feed(ClaudeParser("s1"), {"type": "system", "subtype": "init", "session_id": "s1"})
    feed(parser, result(202, 102, 0.01))
    assert figures(parser.usage) == (102, 30, 20, 10, 162)
    assert parser.usage.cost_usd == pytest.approx(0.01)
    # A second result of the same process adds what it spent since the first, and its turns.
    feed(parser, result(305, 103, 0.02))
    assert parser.usage.input_tokens == 205 and parser.usage.cost_usd == pytest.approx(0.03)
    assert parser.usage.turns == 2


def test_claude_2_1_332_a_result_after_the_next_turns_answers_takes_no_turn_back() -> None:
    # A background subagent's report starts a main turn whose answer 2.1.332 prints before the
    # first result line (num_turns 2); the second result gives that turn (num_turns 1).
    def answer(number: int) -> dict[str, object]:
        usage = {"input_tokens": 100, "output_tokens": 1}
        message = {"id": f"m{number}", "content": [], "usage": usage}
        return {"type": "assistant", "message": message}

    def result(turns: int, since: dict[str, object]) -> dict[str, object]:
        return {
            "type": "result",
            "subtype": "success",
            "num_turns": turns,
            "model_usage_since_last_result": since,
        }

    parser = feed(ClaudeParser(), answer(1), answer(2), answer(3))
    assert parser.usage.turns == 3
    feed(parser, result(2, {"m": {"inputTokens": 300, "outputTokens": 3}}))
    assert parser.usage.turns == 3 and parser.usage.input_tokens == 300
    feed(parser, result(1, {}))
    assert parser.usage.turns == 3 and parser.usage.input_tokens == 300


def test_claude_max_turns() -> None:
    parser = feed(
        ClaudeParser(),
        {"type": "result", "subtype": "error_max_turns", "is_error": True, "num_turns": 60},
    )
    assert parser.outcome is not None and parser.outcome.kind == "max-turns"


def test_claude_output_tokens_1_until_the_result_line() -> None:
    parser = ClaudeParser()
    lines = (FIXTURES / "real/claude-stream.jsonl").read_bytes().splitlines()
    for raw in lines[:-1]:
        parser.feed_line(raw)
    # stdout says 1 a message before the result; herd estimates from the printed content.
    before = parser.usage
    assert 45 <= before.output_tokens <= 135 and before.output_tokens > 3
    assert before.output_estimate_tokens == before.output_tokens - 3
    assert before.cost_estimated
    parser.feed_line(lines[-1])
    after = parser.usage
    assert after.output_tokens == 90  # the result's figure replaces it, not added
    assert after.output_estimate_tokens == 0 and not after.cost_estimated


def test_claude_output_estimate_is_replaced_by_a_later_figure_for_the_same_message() -> None:
    parser = ClaudeParser()
    start = {"input_tokens": 10, "output_tokens": 1}

    def line(usage: dict[str, int], text: str) -> bytes:
        message = {"id": "m1", "content": [{"type": "text", "text": text}], "usage": usage}
        return json.dumps({"type": "assistant", "message": message}).encode()

    parser.feed_line(line(start, "x" * 400))  # about 100 tokens
    assert parser.usage.output_tokens == 100 and parser.usage.output_estimate_tokens == 99
    parser.feed_line(line(start, "y" * 400))  # a second block of the same message: added
    assert parser.usage.output_tokens == 200 and parser.usage.turns == 1
    parser.feed_line(line({"input_tokens": 10, "output_tokens": 150}, ""))  # its true count
    usage = parser.usage
    assert (usage.output_tokens, usage.output_estimate_tokens, usage.input_tokens) == (150, 0, 10)
    parser.feed_line(line(start, "z" * 4000))  # a settled message is not estimated again
    assert parser.usage.output_estimate_tokens == 0


def test_claude_killed_run_recovered_from_its_transcript() -> None:
    parser = run("claude", "real/claude-killed-midrun.log")
    assert isinstance(parser, ClaudeParser)
    config = claude_config_dir({"HOME": str(CLAUDE_HOME)})
    assert config == CLAUDE_HOME / ".claude"
    path = transcript_path(config, KILLED_CWD, KILLED_SESSION)
    assert path is not None and path.parent.name == "-home-dev-hc-crash"
    entries = read_transcript(path)
    assert parser.recover_from_transcript(entries, KILLED_RUN_STARTED, KILLED_RUN_ENDED)
    usage = parser.usage
    # The transcript also holds the later resumed run's messages: they are not taken.
    assert figures(usage) == (300, 90, 60, 30, 480)
    assert usage.turns == 3
    assert usage.cost_estimated and usage.cost_usd == pytest.approx(0.0039675)
    # With its resume (result line: 400/120/80/40, 0.00529 USD) the two runs total 210 output.
    resumed = run("claude", "real/claude-resumed-under-herd.log").usage
    both = usage + resumed
    assert figures(both) == (700, 210, 140, 70, 1120)
    assert both.cost_usd == pytest.approx(0.0092575) and both.cost_estimated


def test_claude_transcript_entries_after_the_run_start_count_when_stdout_lost_them() -> None:
    parser = run("claude", "real/claude-killed-midrun.log")
    assert isinstance(parser, ClaudeParser)
    stamp = "2026-12-01T05:48:02.500Z"
    lost = {
        "type": "assistant",
        "timestamp": stamp,
        "message": {"id": "msg_cut_off", "usage": {"input_tokens": 100, "output_tokens": 30}},
    }
    before = {
        **lost,
        "timestamp": "2026-12-01T05:40:00Z",
        "message": {"id": "old", "usage": {"input_tokens": 5}},
    }
    after = {
        **lost,
        "timestamp": "2026-12-01T05:49:00Z",
        "message": {"id": "new", "usage": {"input_tokens": 7}},
    }
    assert parser.recover_from_transcript(
        [before, lost, after], KILLED_RUN_STARTED, KILLED_RUN_ENDED
    )
    # The lost message's 30, and the printed three's estimate (not in this transcript list).
    assert parser.usage.input_tokens == 400 and parser.usage.output_tokens == 30 + 60


def test_claude_transcript_is_not_used_after_a_result() -> None:
    parser = run("claude", "real/claude-resumed-under-herd.log")
    assert isinstance(parser, ClaudeParser)
    path = transcript_path(CLAUDE_HOME / ".claude", KILLED_CWD, KILLED_SESSION)
    assert path is not None
    assert not parser.recover_from_transcript(read_transcript(path), since=None)
    assert figures(parser.usage) == (400, 120, 80, 40, 640)


def test_claude_transcript_path_refuses_unsafe_ids_and_finds_other_folders(tmp_path: Path) -> None:
    for unsafe in ("../../etc/passwd", "a/b", "..", "$(id)", "-rf"):
        assert transcript_path(CLAUDE_HOME / ".claude", KILLED_CWD, unsafe) is None
    assert transcript_path(tmp_path, "/x", KILLED_SESSION) is None
    other = tmp_path / "projects" / "-some-other-name"
    other.mkdir(parents=True)
    (other / f"{KILLED_SESSION}.jsonl").write_text("")
    assert transcript_path(tmp_path, "/home/dev/hc/crash", KILLED_SESSION) == (
        other / f"{KILLED_SESSION}.jsonl"
    )
    assert claude_config_dir({"CLAUDE_CONFIG_DIR": "/c", "HOME": "/h"}) == Path("/c")
    assert claude_config_dir({}) is None
    assert list(read_transcript(tmp_path / "missing.jsonl")) == []


def test_claude_no_conversation_found_is_an_error_keeping_the_resumed_id() -> None:
    resumed = "94b3ff90-06cf-49e1-9584-a62116b4bf92"
    parser = run("claude", "real/claude-resume-wrongcwd.jsonl", session_id=resumed)
    assert parser.session_id == resumed
    assert parser.outcome is not None and parser.outcome.kind == "error"
    assert parser.outcome.message is not None
    assert "No conversation found" in parser.outcome.message


def test_claude_cost_going_backwards_is_warned_and_not_taken() -> None:
    base = {"type": "result", "subtype": "success", "is_error": False, "num_turns": 1}
    parser = feed(ClaudeParser(), {**base, "total_cost_usd": 0.5}, {**base, "total_cost_usd": 0.2})
    assert parser.usage.cost_usd == pytest.approx(0.5)
    assert any("backwards" in text for text in parser.warnings)


def test_amp_never_estimates_a_cost() -> None:
    message = {"model": "claude-sonnet-4-5", "usage": {"input_tokens": 10, "output_tokens": 3}}
    parser = feed(make_parser("amp"), {"type": "assistant", "message": message})
    assert parser.usage.total_tokens == 13 and parser.usage.cost_usd is None


# ----- Codex traps --------------------------------------------------------------------------


def test_codex_resume_usage_becomes_per_run_given_the_threads_earlier_totals() -> None:
    first = run("codex", "real/codex-exec.jsonl").usage
    resumed = run("codex", "real/codex-resume.jsonl", thread_usage=first)
    assert isinstance(resumed, CodexParser)
    assert figures(resumed.usage) == (160, 60, 40, 0, 260)
    assert figures(first + resumed.usage) == figures(resumed.cumulative)
    assert resumed.warnings == []


def test_codex_killed_run_spend_lands_in_the_resume_once() -> None:
    # Nothing was printed for the killed run; the resume's difference carries its spend.
    killed = run("codex", "real/codex-killed-midrun.log").usage
    first = run("codex", "real/codex-exec.jsonl").usage
    resumed = run("codex", "real/codex-resume.jsonl", thread_usage=first + killed).usage
    assert (first + killed + resumed).total_tokens == 650


def test_codex_figures_below_the_thread_total_are_this_runs_own() -> None:
    big = Usage(input_tokens=10_000, output_tokens=10_000, cache_read_tokens=10_000)
    parser = run("codex", "real/codex-exec.jsonl", thread_usage=big)
    assert figures(parser.usage) == (240, 90, 60, 0, 390)
    assert any("below the thread" in text for text in parser.warnings)


def test_codex_cumulative_going_backwards_in_one_process_keeps_the_larger() -> None:
    usage = {"input_tokens": 300, "cached_input_tokens": 60, "output_tokens": 90}
    parser = feed(
        CodexParser(),
        {"type": "turn.completed", "usage": usage},
        {"type": "turn.completed", "usage": {**usage, "output_tokens": 10}},
    )
    assert figures(parser.usage) == (240, 90, 60, 0, 390)
    assert parser.warnings


def test_codex_turn_failed_is_an_error_with_its_message() -> None:
    parser = run("codex", "real/codex-turn-failed.jsonl")
    assert parser.outcome is not None and parser.outcome.is_error
    assert parser.outcome.message is not None and "capacity" in parser.outcome.message


def test_codex_usage_limit_is_a_rate_limit() -> None:
    message = "You've hit your usage limit. Try again at 2026-12-01T18:00:00Z."
    parser = feed(CodexParser(), {"type": "turn.failed", "error": {"message": message}})
    assert parser.outcome is not None and parser.outcome.kind == "rate-limit"
    assert parser.outcome.resets_at == "2026-12-01T18:00:00Z"


def test_codex_read_only_git_is_permission_denied() -> None:
    item = {
        "id": "item_2",
        "type": "command_execution",
        "command": "/bin/bash -lc \"git add -A && git commit -q -m 'x'\"",
        "aggregated_output": "fatal: Unable to create '.git/index.lock': Read-only file system",
        "exit_code": 128,
        "status": "failed",
    }
    parser = feed(
        CodexParser(),
        {"type": "item.completed", "item": item},
        {"type": "turn.completed", "usage": {"input_tokens": 1, "output_tokens": 1}},
    )
    assert parser.outcome is not None and parser.outcome.kind == "permission-denied"
    assert parser.outcome.permission_denials == ("git",)


# ----- Gemini traps -------------------------------------------------------------------------


def test_gemini_json_document_with_noise_between_its_lines() -> None:
    lines = (FIXTURES / "real/gemini-json.json").read_bytes().splitlines()
    noisy = [
        b"YOLO mode is enabled.",
        *lines[:10],
        b"[STARTUP] Phase 'x' never ended.",
        *lines[10:],
    ]
    parser = feed(GeminiParser(), *noisy)
    assert figures(parser.usage) == (160, 70, 40, 0, 270)
    assert parser.outcome is not None and parser.outcome.kind == "success"


def test_gemini_json_document_with_an_error() -> None:
    document = {
        "session_id": "s-1",
        "error": {"type": "ApiError", "message": "429 quota", "code": 429},
    }
    text = json.dumps(document, indent=2).encode()
    parser = feed(GeminiParser(), *text.splitlines())
    assert parser.outcome is not None and parser.outcome.kind == "rate-limit"


def test_gemini_tools_refused_without_yolo_are_permission_denied() -> None:
    parser = feed(
        GeminiParser(),
        {"type": "init", "session_id": "g-1"},
        {"type": "tool_use", "tool_name": "write_file", "tool_id": "w1", "parameters": {}},
        {
            "type": "tool_result",
            "tool_id": "w1",
            "status": "error",
            "error": {"type": "tool_not_registered", "message": 'Tool "write_file" not found'},
        },
        {"type": "tool_use", "tool_name": "read_file", "tool_id": "r1", "parameters": {}},
        {
            "type": "tool_result",
            "tool_id": "r1",
            "status": "error",
            "error": {"type": "file_not_found", "message": "File not found: a.txt"},
        },
        {"type": "result", "status": "success", "stats": {"total_tokens": 5, "input_tokens": 5}},
    )
    assert parser.outcome is not None and parser.outcome.kind == "permission-denied"
    assert parser.outcome.permission_denials == ("write_file",)


def test_gemini_turns_are_the_model_speaking_after_the_prompt_or_the_tools() -> None:
    """Each answer prints its text and every tool call before any result: two parallel calls
    are one turn, the text after the results another (Gemini's turns were always 0)."""

    def use(tool_id: str) -> dict[str, Any]:
        return {"type": "tool_use", "tool_name": "run_shell_command", "tool_id": tool_id}

    def result(tool_id: str) -> dict[str, Any]:
        return {"type": "tool_result", "tool_id": tool_id, "status": "success", "output": ""}

    def said(words: str) -> dict[str, Any]:
        return {"type": "message", "role": "assistant", "content": words, "delta": True}

    parser = feed(
        GeminiParser(),
        {"type": "init", "session_id": "g-1"},
        {"type": "message", "role": "user", "content": "work"},
        said("Let me look."),
        use("a"),
        use("b"),
        result("a"),
        result("b"),
        use("c"),
        result("c"),
        said("Done"),
        said(", all of it."),
    )
    assert parser.usage.turns == 3
    feed(parser, {"type": "result", "status": "success", "stats": {"total_tokens": 5}})
    assert parser.usage.turns == 3


def test_gemini_max_turns_and_rate_limit() -> None:
    error = {"type": "MaxSessionTurnsError", "message": "Maximum session turns exceeded"}
    parser = feed(GeminiParser(), {"type": "result", "status": "error", "error": error})
    assert parser.outcome is not None and parser.outcome.kind == "max-turns"
    limited = {"type": "ApiError", "message": "RESOURCE_EXHAUSTED: Quota exceeded"}
    parser = feed(GeminiParser(), {"type": "result", "status": "error", "error": limited})
    assert parser.outcome is not None and parser.outcome.kind == "rate-limit"


def test_gemini_known_model_gets_an_estimated_cost() -> None:
    stats = {
        "total_tokens": 2_000_000,
        "input_tokens": 1_000_000,
        "output_tokens": 1_000_000,
        "cached": 0,
        "models": {
            "gemini-2.5-pro": {
                "total_tokens": 2_000_000,
                "input_tokens": 1_000_000,
                "output_tokens": 1_000_000,
                "cached": 0,
            }
        },
    }
    parser = feed(GeminiParser(), {"type": "result", "status": "success", "stats": stats})
    assert parser.usage.cost_estimated and parser.usage.cost_usd == pytest.approx(11.25)


# ----- OpenCode and Aider ------------------------------------------------------------------


def test_opencode_steps_are_added() -> None:
    step = {
        "type": "step_finish",
        "sessionID": "ses_0ae4",
        "part": {
            "reason": "tool-calls",
            "tokens": {
                "total": 8100,
                "input": 8087,
                "output": 2,
                "reasoning": 11,
                "cache": {"write": 0, "read": 0},
            },
            "cost": 0.01,
        },
    }
    final = {**step, "part": {**step["part"], "reason": "stop", "cost": 0.02}}
    parser = feed(
        OpenCodeParser(),
        {"type": "text", "sessionID": "ses_0ae4", "part": {"text": "All done."}},
        step,
        final,
    )
    assert parser.session_id == "ses_0ae4"
    assert figures(parser.usage) == (16_174, 26, 0, 0, 16_200)
    assert parser.usage.cost_usd == pytest.approx(0.03) and parser.usage.turns == 2
    assert parser.outcome is not None and parser.outcome.kind == "success"
    assert parser.result_text == "All done."


def test_opencode_error_and_rejected_permissions() -> None:
    error = {"name": "APIError", "data": {"message": "Rate limit exceeded", "statusCode": 429}}
    parser = feed(OpenCodeParser(), {"type": "error", "sessionID": "s", "error": error})
    assert parser.outcome is not None and parser.outcome.kind == "rate-limit"
    assert parser.outcome.resets_at is None  # no time said: herd's wait, marked a guess
    said = {
        "name": "APIError",
        "data": {"message": "Rate limit. Please retry in 1800s.", "statusCode": 429},
    }
    parser = feed(OpenCodeParser(), {"type": "error", "sessionID": "s", "error": said})
    assert parser.outcome is not None and parser.outcome.resets_at is not None
    parser = feed(
        OpenCodeParser(), {"type": "done", "reason": "idle", "rejected": ["edit", "bash"]}
    )
    assert parser.outcome is not None and parser.outcome.kind == "permission-denied"
    assert parser.outcome.permission_denials == ("edit", "bash")


def invalid_call(tool: str) -> dict[str, object]:
    """OpenCode 1.18's line for a call of a tool the model was not given."""
    error = f"Model tried to call unavailable tool '{tool}'. Available tools: edit, read, write."
    state = {"status": "completed", "input": {"tool": tool, "error": error}, "output": error}
    return {"type": "tool_use", "part": {"type": "tool", "tool": "invalid", "state": state}}


def test_opencode_a_tool_the_config_took_away_is_denied_a_made_up_one_is_not() -> None:
    stop = {"type": "step_finish", "part": {"reason": "stop", "tokens": {"input": 1}}}
    parser = feed(OpenCodeParser(), invalid_call("bash"), stop)
    assert parser.outcome is not None and parser.outcome.kind == "permission-denied"
    assert parser.outcome.permission_denials == ("bash",)
    # A tool OpenCode never had is the model's mistake, told to it, not a refusal.
    parser = feed(OpenCodeParser(), invalid_call("run_shell"), stop)
    assert parser.outcome is not None and parser.outcome.kind == "success"


def test_aider_token_and_cost_lines() -> None:
    parser = feed(
        AiderParser(),
        b"Aider v0.86.0",
        b"Tokens: 12k sent, 1.2k cache write, 3.4k cache hit, 512 received.",
        b"Cost: $0.01 message, $0.23 session.",
        b"Tokens: 2.5k sent, 100 received. Cost: $0.02 message, $0.25 session.",
        b"Applied edit to todo.py",
    )
    assert figures(parser.usage) == (9_900, 612, 3_400, 1_200, 15_112)
    assert parser.usage.cost_usd == pytest.approx(0.25) and parser.usage.turns == 2
    assert parser.outcome is None  # no result line: the exit code decides
    assert parser.last_text == "Applied edit to todo.py"
    assert parser.session_id is None


# ----- bad input, every adapter ---------------------------------------------------------------

ALL_AGENTS = sorted(PARSERS)


@pytest.mark.parametrize("agent", ALL_AGENTS)
@pytest.mark.parametrize(
    "bad_id", ["$(rm -rf ~)", "a;b", "../../etc", "a/b", "-x", "`id`", "x" * 200, 7, ["a"]]
)
def test_unsafe_session_ids_are_refused_and_counted(agent: str, bad_id: object) -> None:
    parser = make_parser(agent)
    feed(
        parser,
        {"type": "system", "subtype": "init", "session_id": bad_id},
        {"type": "thread.started", "thread_id": bad_id},
        {"type": "init", "session_id": bad_id},
        {"type": "text", "sessionID": bad_id, "part": {"text": "x"}},
    )
    assert parser.session_id is None
    if agent != "aider":  # Aider prints no session id at all
        assert parser.refused_session_ids >= 1
        assert parser.warnings and "refused" in parser.warnings[0]
    assert (
        make_parser(agent, session_id=bad_id if isinstance(bad_id, str) else None).session_id
        is None
    )


WRONG_TYPES: list[Any] = [
    {"type": "assistant", "message": "text"},
    {
        "type": "assistant",
        "message": {"id": 5, "usage": {"input_tokens": "100", "output_tokens": -5}},
    },
    {
        "type": "result",
        "usage": [],
        "modelUsage": {"m": 7},
        "total_cost_usd": "0.5",
        "num_turns": 1.5,
    },
    {"type": "result", "permission_denials": "Write", "is_error": "yes"},
    {"type": "turn.completed", "usage": {"input_tokens": None, "cached_input_tokens": "x"}},
    {"type": "turn.failed", "error": 42},
    {"type": "item.completed", "item": ["x"]},
    {"type": "result", "stats": {"models": [1, 2]}, "error": []},
    {"type": "tool_result", "tool_id": {}, "status": "error", "error": "boom"},
    {"type": "step_finish", "part": {"tokens": {"cache": 5, "input": 1e400}, "cost": float("inf")}},
    {"type": "done", "rejected": {"a": 1}},
    {"type": "error", "error": {"data": "x"}},
    {"usage": "lots", "cost_usd": True, "herd": ["done"]},
    [1, "two", None],
    "just a string",
    12,
    None,
]


@pytest.mark.parametrize("agent", ALL_AGENTS)
def test_unexpected_json_types_never_raise_nor_count(agent: str) -> None:
    parser = make_parser(agent)
    for value in WRONG_TYPES:
        parser.feed_line(json.dumps(value, allow_nan=True).encode())
    usage = parser.usage
    assert usage.input_tokens >= 0 and usage.output_tokens >= 0
    assert usage.total_tokens <= 2  # at most the one valid "input_tokens": 1 step, once
    assert usage.cost_usd in (None, 0.0)


@pytest.mark.parametrize(
    ("agent", "name", "total"),
    [
        ("claude", "real/claude-stream.jsonl", 480),
        ("codex", "real/codex-exec.jsonl", 390),
        ("gemini", "real/gemini-stream.jsonl", 540),
    ],
)
def test_a_2mb_line_and_a_format_switch_midway_keep_the_total(
    agent: str, name: str, total: int
) -> None:
    lines = (FIXTURES / name).read_bytes().splitlines()
    huge_json = json.dumps({"type": "user", "message": {"content": "x" * 2_000_000}}).encode()
    huge_text = b"y" * 2_000_000
    middle = len(lines) // 2
    switched = [
        *lines[:middle],
        huge_json,
        huge_text,
        b"Plain text now, as if another format began",
        b"{",
        b'  "not": "closed"',
        b"Tokens: 999k sent, 1 received.",
        *lines[middle:],
    ]
    parser = feed(make_parser(agent), *switched)
    assert parser.usage.total_tokens == total
    assert parser.outcome is not None and parser.outcome.kind == "success"


def test_gemini_stream_then_json_document_is_not_counted_twice() -> None:
    stream = (FIXTURES / "real/gemini-stream.jsonl").read_bytes().splitlines()
    document = (FIXTURES / "real/gemini-json.json").read_bytes().splitlines()
    parser = feed(GeminiParser(), *stream, *document)
    assert parser.usage.total_tokens == 270  # the last process total, not 540 + 270


def test_price_table_matches_the_reported_costs() -> None:
    # Claude Code's own figures: opus 4.5+ and sonnet 4.x list prices.
    assert estimate_cost_usd("claude-opus-4-8[1m]", 100, 30, 20, 10) == pytest.approx(0.0013225)
    assert estimate_cost_usd("claude-sonnet-4-5-20250929", 16, 556, 55_792, 10_780) == (
        pytest.approx(0.0655506)
    )
    assert estimate_cost_usd("claude-opus-4-20250514", 1_000_000, 0, 0, 0) == pytest.approx(15.0)
    assert estimate_cost_usd("some-new-model", 1, 1, 1, 1) is None
    assert estimate_cost_usd(None, 1, 1, 1, 1) is None


@pytest.mark.parametrize("agent", ALL_AGENTS)
def test_a_2mb_line_of_any_shape_is_a_line_like_any_other(agent: str) -> None:
    parser = make_parser(agent)
    before = parser.usage
    for huge in (
        b"z" * 2_000_000,
        json.dumps({"type": "message", "content": "q" * 2_000_000}).encode(),
        b'{"type": "assistant", "message": {"content": "' + b"w" * 2_000_000,  # cut, no end
        b"  " + b"v" * 2_000_000,
    ):
        parser.feed_line(huge)
    assert parser.usage == before
    assert parser.outcome is None


def test_plain_and_aider_totals_going_backwards_keep_the_larger() -> None:
    plain = feed(
        make_parser("plain"),
        {"usage": {"input_tokens": 50}, "cost_usd": 0.5},
        {"usage": {"input_tokens": 20}, "cost_usd": 0.1},
    )
    assert plain.usage.input_tokens == 50 and plain.usage.cost_usd == pytest.approx(0.5)
    assert len(plain.warnings) == 2
    aider = feed(
        AiderParser(),
        b"Tokens: 10 sent, 1 received. Cost: $0.01 message, $0.30 session.",
        b"Tokens: 10 sent, 1 received. Cost: $0.01 message, $0.05 session.",
    )
    assert aider.usage.cost_usd == pytest.approx(0.30) and aider.warnings


def test_plain_done_line_names_its_kind() -> None:
    line = {"herd": "error", "kind": "rate-limit", "resets_at": "2026-12-01T18:00:00+01:00"}
    parser = feed(make_parser("plain"), line)
    assert parser.outcome is not None and parser.outcome.kind == "rate-limit"
    assert parser.outcome.resets_at == "2026-12-01T17:00:00Z"
    parser = feed(make_parser("plain"), {"herd": "done", "kind": "rate-limit"})
    assert parser.outcome is not None and parser.outcome.kind == "success"


def test_claude_limit_text_gives_the_reset_time() -> None:
    from datetime import UTC, datetime
    from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

    from agentherd.sessions.adapters.outcomes import reset_time_in_text

    try:
        ZoneInfo("Europe/Lisbon")
    except ZoneInfoNotFoundError:
        pytest.skip("no time zone data on this machine")
    now = datetime(2026, 12, 1, 11, 30, tzinfo=UTC)  # Lisbon is on UTC in winter
    text = "You've hit your limit · resets 1pm (Europe/Lisbon)"
    assert reset_time_in_text(text, now) == "2026-12-01T13:00:00Z"
    assert reset_time_in_text(text, datetime(2026, 12, 1, 14, 0, tzinfo=UTC)) == (
        "2026-12-02T13:00:00Z"
    )
    assert reset_time_in_text("Claude AI usage limit reached|1790000000") == "2026-09-21T14:13:20Z"
    assert reset_time_in_text("resets 1pm (Nowhere/../../etc)") is None
    assert reset_time_in_text("resets 13pm (Europe/Lisbon)") is None
    parser = feed(
        ClaudeParser(),
        {"type": "result", "subtype": "success", "is_error": True, "result": text},
    )
    assert parser.outcome is not None and parser.outcome.kind == "rate-limit"
    assert parser.outcome.resets_at is not None


def _served_then_429(model: str) -> list[dict[str, Any]]:
    """A served message (final usage printed) and a 429 result that says 0 USD and no usage."""
    usage = {"input_tokens": 100, "output_tokens": 30, "cache_read_input_tokens": 20}
    message = {"id": "msg_1", "model": model, "usage": usage}
    result = {
        "type": "result",
        "subtype": "success",
        "is_error": True,
        "api_error_status": 429,
        "total_cost_usd": 0,
        "usage": {"input_tokens": 0, "output_tokens": 0},
        "modelUsage": {},
    }
    return [{"type": "assistant", "message": message}, result]


def test_claude_zero_cost_after_a_served_message_is_not_taken_as_spend() -> None:
    parser = feed(ClaudeParser(), *_served_then_429("claude-sonnet-4-5"))
    usage = parser.usage
    assert figures(usage) == (100, 30, 20, 0, 150)
    assert usage.cost_usd == pytest.approx(estimate_cost_usd("claude-sonnet-4-5", 100, 30, 20, 0))
    assert usage.cost_usd > 0 and usage.cost_estimated is True
    assert parser.outcome is not None and parser.outcome.kind == "rate-limit"
    # An unknown model cannot be priced: unknown (None), never an invented 0.
    unknown = feed(ClaudeParser(), *_served_then_429("house-model")).usage
    assert (unknown.cost_usd, unknown.cost_estimated) == (None, False)


def test_claude_zero_cost_with_nothing_served_stays_zero() -> None:
    parser = run("claude", "real/claude-limit.jsonl")
    assert (parser.usage.cost_usd, parser.usage.cost_estimated) == (0, False)


# ----- the registry: what each adapter module declares ----------------------------------------


def _parser_classes(base: type[OutputParser]) -> list[type[OutputParser]]:
    """Every adapter class defined under `base`, however deep."""
    found = []
    for sub in base.__subclasses__():
        found += [sub, *_parser_classes(sub)]
    return found


def test_every_adapter_class_is_registered_under_its_own_agent_name() -> None:
    adapters = [c for c in _parser_classes(OutputParser) if c.__module__.startswith(PACKAGE)]
    assert adapters, "the adapters were found"
    for parser_class in adapters:
        assert AGENTS[parser_class.agent].parser is parser_class, parser_class
    assert list(PARSERS) == list(AGENTS)
    assert [agent.name for agent in AGENTS.values()] == list(AGENTS)


@pytest.mark.parametrize("agent", ALL_AGENTS)
def test_an_agents_usual_price_is_in_the_prices_module(agent: str) -> None:
    declared = AGENTS[agent]
    if declared.price is not None:
        assert lookup(declared.price, price_table({})) is not None, declared.price
        assert price_for(agent, None, price_table({})) == lookup(declared.price, price_table({}))


def test_the_registry_says_which_agents_report_a_cost_and_price_them_by_default() -> None:
    # The figures herd shipped before the registry: a new agent adds its own, never changes these.
    reporting = {name for name, agent in AGENTS.items() if agent.reports_cost}
    assert reporting >= {"claude", "amp", "gemini", "opencode", "plain"}
    assert not reporting & {"codex", "aider"}
    usual = {name: agent.price for name, agent in AGENTS.items() if agent.price}
    assert (
        usual.items()
        >= {
            "claude": "claude-sonnet-4-5",
            "amp": "claude-sonnet-4-5",
            "codex": "gpt-5-codex",
            "gemini": "gemini-2.5-pro",
        }.items()
    )
    assert {n for n, a in AGENTS.items() if a.ends_with_result} >= {"claude", "amp"}
