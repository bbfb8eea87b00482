"""A killed Gemini or Codex run's spend, read from the files the real CLI keeps under its home;
and real OpenCode and Aider runs read exactly.

The fixtures are what Gemini CLI 0.61.0 and codex-cli 0.171.0 wrote, run offline against the
scripted servers of tests/model_servers.py (each answer: 100 prompt tokens, 20 of them cached,
30 output), killed with SIGKILL while their second request hung, then resumed.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from agentherd.sessions.adapters import CodexParser, GeminiParser, Usage, make_parser
from agentherd.sessions.adapters.codex_rollout import codex_home, read_thread_total, rollout_paths
from agentherd.sessions.adapters.gemini_chats import chat_paths, gemini_dir, read_chat_answers

FIXTURES = Path(__file__).parent / "fixtures" / "agents"
GEMINI_HOME = FIXTURES / "gemini-home"
GEMINI_SESSION = "129ce259-9a9a-42b4-9058-df516c24ce28"
GEMINI_KILLED = ("2026-12-01T16:36:09Z", "2026-12-01T16:36:20Z")
"""When the killed Gemini run started and ended (its resume began at 16:36:36)."""
CODEX_HOME = FIXTURES / "codex-home"
CODEX_THREAD = "01a23273-0948-7512-a239-d30abd4b8cf8"


def fed(parser: object, name: str) -> object:
    """The parser after the lines of a captured stdout."""
    assert isinstance(parser, GeminiParser | CodexParser)
    for raw in (FIXTURES / "real" / name).read_bytes().splitlines():
        parser.feed_line(raw)
    return parser


def four(usage: Usage) -> tuple[int, int, int, int]:
    return (
        usage.input_tokens,
        usage.output_tokens,
        usage.cache_read_tokens,
        usage.cache_write_tokens,
    )


def test_a_killed_gemini_run_counts_its_answer_once_from_the_chat_file() -> None:
    parser = fed(GeminiParser(), "gemini-killed-with-chat.jsonl")
    assert isinstance(parser, GeminiParser)
    assert parser.outcome is None and four(parser.usage) == (0, 0, 0, 0)
    folder = gemini_dir({"HOME": str(GEMINI_HOME)})
    assert folder is not None
    paths = chat_paths(folder, GEMINI_SESSION)
    assert [path.name for path in paths] == ["session-2026-12-01T16-36-129ce259.jsonl"]
    # The file holds the answer twice (again with its tool call), and the resume's $set
    # replays it: one answer, 100 prompt tokens of which 20 cached, 30 output.
    assert parser.recover_from_chat(read_chat_answers(paths), *GEMINI_KILLED)
    assert four(parser.usage) == (80, 30, 20, 0)
    assert parser.usage.cost_estimated is False  # "gemini-3.8-flash" is not in the table
    assert not parser.recover_from_chat(read_chat_answers(paths), *GEMINI_KILLED)


def test_a_gemini_chat_gives_nothing_to_a_run_with_a_result_or_outside_its_time() -> None:
    folder = GEMINI_HOME / ".gemini"
    answers = list(read_chat_answers(chat_paths(folder, GEMINI_SESSION)))
    resumed = fed(GeminiParser(GEMINI_SESSION), "gemini-resumed-with-chat.jsonl")
    assert isinstance(resumed, GeminiParser)
    assert not resumed.recover_from_chat(answers, "2026-12-01T16:36:30Z")
    assert four(resumed.usage) == (160, 60, 40, 0)  # its own result: routing call and answer
    later = GeminiParser(GEMINI_SESSION)
    assert not later.recover_from_chat(answers, "2026-12-01T16:40:00Z")
    assert not GeminiParser(GEMINI_SESSION).recover_from_chat(answers, None)


def test_gemini_chat_paths_refuse_unsafe_ids_and_other_sessions(tmp_path: Path) -> None:
    folder = GEMINI_HOME / ".gemini"
    for unsafe in ("../../etc/passwd", "a/b", "..", "$(id)", "-rf", "129ce25"):
        assert chat_paths(folder, unsafe) == []
    # Same 8-character prefix, another session: its file is not read.
    other = "129ce259-0000-0000-0000-000000000000"
    assert chat_paths(folder, other) == []
    assert gemini_dir({"GEMINI_CLI_HOME": "/g", "HOME": "/h"}) == Path("/g/.gemini")
    assert gemini_dir({}) is None
    # A cut or garbled line is skipped, the rest read.
    copy = tmp_path / ".gemini"
    shutil.copytree(folder, copy)
    (chat,) = copy.glob("tmp/*/chats/*.jsonl")
    with chat.open("ab") as stream:
        stream.write(b'{"id": "x", "type": "gemini", "tokens": {"input": \n\x00\xff\n[1, 2]\n')
    assert len(list(read_chat_answers([chat]))) == len(
        list(read_chat_answers(chat_paths(folder, GEMINI_SESSION)))
    )


def test_a_gemini_chat_answer_counts_thoughts_as_output_and_keeps_its_last_copy() -> None:
    answer = {
        "id": "a",
        "timestamp": "2026-12-01T10:00:01Z",
        "type": "gemini",
        "model": "gemini-2.5-flash",
        "tokens": {"input": 1000, "output": 50, "cached": 400, "thoughts": 20, "total": 1070},
    }
    first = {**answer, "tokens": {"input": 1000, "output": 1}}
    parser = GeminiParser("s")
    assert parser.recover_from_chat([first, answer], "2026-12-01T10:00:00Z")
    assert four(parser.usage) == (600, 70, 400, 0)
    # A model in the price table: the cost is herd's estimate, marked so.
    assert parser.usage.cost_estimated and parser.usage.cost_usd is not None
    assert parser.usage.cost_usd > 0


def test_a_killed_codex_run_takes_the_threads_total_from_its_rollout() -> None:
    parser = fed(make_parser("codex"), "codex-killed-with-rollout.jsonl")
    assert isinstance(parser, CodexParser)
    assert parser.session_id == CODEX_THREAD and parser.outcome is None
    home = codex_home({"CODEX_HOME": str(CODEX_HOME), "HOME": "/nowhere"})
    assert home is not None
    paths = rollout_paths(home, CODEX_THREAD)
    assert len(paths) == 1
    total = read_thread_total(paths)
    assert parser.recover_from_rollout(total)
    assert four(parser.usage) == (80, 30, 20, 0)
    assert not parser.recover_from_rollout(total)  # the same figure again changes nothing


def test_a_codex_resume_after_a_recovered_kill_counts_only_its_own_answer() -> None:
    killed = Usage(80, 30, 20, 0)
    resumed = fed(
        CodexParser(CODEX_THREAD, thread_usage=killed), "codex-resumed-with-rollout.jsonl"
    )
    assert isinstance(resumed, CodexParser)
    # stdout's thread total is 200 input (40 cached) and 60 output: the resume's own is half.
    assert four(resumed.usage) == (80, 30, 20, 0)
    assert not resumed.recover_from_rollout({"input_tokens": 999, "output_tokens": 999})


def test_codex_rollout_never_lowers_what_stdout_showed_and_refuses_unsafe_ids(
    tmp_path: Path,
) -> None:
    parser = CodexParser(CODEX_THREAD)
    parser.feed_line(json.dumps({"type": "thread.started", "thread_id": CODEX_THREAD}).encode())
    assert parser.recover_from_rollout({"input_tokens": 500, "output_tokens": 50})
    assert not parser.recover_from_rollout({"input_tokens": 100, "output_tokens": 30})
    assert four(parser.usage) == (500, 50, 0, 0)
    assert not parser.recover_from_rollout({})
    for unsafe in ("../x", "a/b", "..", "$(id)"):
        assert rollout_paths(CODEX_HOME, unsafe) == []
    assert codex_home({"HOME": "/h"}) == Path("/h/.codex")
    assert codex_home({}) is None
    assert read_thread_total([tmp_path / "missing.jsonl"]) == {}
    garbled = tmp_path / "rollout.jsonl"
    garbled.write_bytes(b'{"total_token_usage": [\n\xff"total_token_usage"\n')
    assert read_thread_total([garbled]) == {}


def test_a_real_opencode_run_is_read_exactly() -> None:
    """opencode-ai 1.18.33 against the scripted chat server: write, commit (bash), answer."""
    parser = make_parser("opencode")
    for raw in (FIXTURES / "real" / "opencode-run.jsonl").read_bytes().splitlines():
        parser.feed_line(raw)
    assert parser.session_id == "ses_dcd818221ffeUwsIQjkwWHvmQM"
    # Three steps of 100 prompt tokens (20 cached, printed apart) and 30 output.
    assert four(parser.usage) == (240, 90, 60, 0) and parser.usage.turns == 3
    # `cost: 0` for a model OpenCode has no price for is no cost, not a free run.
    assert parser.usage.cost_usd is None
    assert parser.outcome is not None and parser.outcome.kind == "success"
    assert parser.result_text == "Done: hello.txt committed."
    assert parser.skipped_lines == 0 and not parser.warnings


def test_a_real_aider_run_is_read_as_aider_counted_it() -> None:
    """aider-chat 0.86.2 against the scripted chat server: a whole-file edit, two commits."""
    parser = make_parser("aider")
    for raw in (FIXTURES / "real" / "aider-run.log").read_bytes().splitlines():
        parser.feed_line(raw)
    # Aider counts a streamed answer's tokens itself (the server said 100 in, 30 out), and
    # prints nothing for its commit-message requests: its one line is what there is to read.
    assert four(parser.usage) == (649, 9, 0, 0) and parser.usage.turns == 1
    assert parser.usage.cost_usd is None  # no price for the model: no `Cost:` line
    assert parser.session_id is None and parser.outcome is None  # the exit code decides
    assert not parser.warnings
