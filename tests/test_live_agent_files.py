"""Reading an agent's growing files while its run lives: each byte once, bounded, nothing twice.

The real CLIs are driven in tests/test_real_live_spend.py; here the files are written by hand,
to pin what a look reads (only what was added) and what a replaced or hostile file does.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from agentherd.sessions.adapters import ClaudeParser, CodexParser, GeminiParser
from agentherd.supervisor.files.growingfile import GrowingFile
from agentherd.supervisor.session.livefiles import LiveFiles

THREAD = "01a23d75-1372-70d3-9ef0-2b89eff882db"
SINCE = "2026-12-03T19:50:00.000Z"


def _record(thread_tokens: int) -> bytes:
    """A Codex `token_usage_record` line: the thread's total as an answer completes."""
    usage = {"input_tokens": thread_tokens, "cached_input_tokens": 0, "output_tokens": 10}
    line = {
        "timestamp": "2026-12-03T19:50:13.000Z",
        "type": "token_usage_record",
        "payload": {"thread_id": THREAD, "usage": usage, "thread_token_usage": usage},
    }
    return json.dumps(line).encode() + b"\n"


def test_a_growing_file_gives_each_line_once_and_a_cut_line_when_it_ends(tmp_path: Path) -> None:
    path = tmp_path / "f.jsonl"
    path.write_bytes(b"one\ntw")
    growing = GrowingFile(path, max_line_bytes=100)
    assert growing.read_new(1000) == [b"one\n"]
    with path.open("ab") as out:
        out.write(b"o\nthree\n")
    assert growing.read_new(1000) == [b"two\n", b"three\n"]
    assert growing.read_new(1000) == []
    with path.open("ab") as out:
        out.write(b"four\nfive\n")
    assert growing.read_new(5) == [b"four\n"]  # at most 5 bytes a look: the rest waits
    assert growing.read_new(1000) == [b"five\n"]


def test_a_long_line_is_passed_over_and_a_replaced_file_read_from_its_start(
    tmp_path: Path,
) -> None:
    path = tmp_path / "f.jsonl"
    path.write_bytes(b"x" * 50)
    growing = GrowingFile(path, max_line_bytes=20)
    assert growing.read_new(1000) == []
    with path.open("ab") as out:
        out.write(b"x" * 50 + b"\nshort\n")
    assert growing.read_new(1000) == [b"short\n"]
    replaced = tmp_path / "new.jsonl"
    replaced.write_bytes(b"again\n")
    os.replace(replaced, path)
    assert growing.read_new(1000) == [b"again\n"]
    path.write_bytes(b"")  # cut shorter: read from the start
    assert growing.read_new(1000) == []
    path.write_bytes(b"fresh\n")
    assert growing.read_new(1000) == [b"fresh\n"]


def test_a_fifo_is_never_opened(tmp_path: Path) -> None:
    path = tmp_path / "f.jsonl"
    os.mkfifo(path)
    assert GrowingFile(path, max_line_bytes=20).read_new(1000) == []


def test_a_codex_look_reads_only_what_the_rollout_gained(tmp_path: Path) -> None:
    home = tmp_path / "codex"
    folder = home / "sessions" / "2026" / "12" / "03"
    folder.mkdir(parents=True)
    rollout = folder / f"rollout-2026-12-03T19-50-12-{THREAD}.jsonl"
    rollout.write_bytes(_record(100))
    parser = CodexParser(THREAD)
    files = LiveFiles(parser, SINCE, {"CODEX_HOME": str(home)})
    assert files.take(files.look(THREAD)) is True
    assert (parser.usage.input_tokens, parser.usage.output_tokens) == (100, 10)
    # The first line rewritten in place with a larger total, then one line appended: a look
    # reads only the appended bytes, so the rewrite is never seen.
    first = _record(999)
    assert len(first) == len(_record(100))
    with rollout.open("r+b") as out:
        out.write(first)
    with rollout.open("ab") as out:
        out.write(_record(250))
    assert files.take(files.look(THREAD)) is True
    assert parser.usage.input_tokens == 250
    assert files.take(files.look(THREAD)) is False  # nothing new


def test_a_gemini_look_counts_each_answer_once(tmp_path: Path) -> None:
    session = "c27968c1-062f-42b7-b63a-06384dd63864"
    chats = tmp_path / ".gemini" / "tmp" / "repo" / "chats"
    chats.mkdir(parents=True)
    chat = chats / f"session-2026-12-03T19-49-{session[:8]}.jsonl"

    def answer(answer_id: str, tokens: int, stamp: str = "2026-12-03T19:50:22.057Z") -> str:
        body = {"input": tokens, "output": 5, "cached": 0, "thoughts": 0, "tool": 0}
        line = {"id": answer_id, "timestamp": stamp, "type": "gemini", "tokens": body}
        return json.dumps({**line, "model": "gemini-2.5-flash"}) + "\n"

    chat.write_text(
        json.dumps({"sessionId": session})
        + "\n"
        + answer("old", 7, "2026-12-03T19:00:00.000Z")  # an earlier run's, replayed
        + answer("a", 100)
    )
    parser = GeminiParser(session)
    files = LiveFiles(parser, SINCE, {"HOME": str(tmp_path)})
    assert files.take(files.look(session)) is True
    assert (parser.usage.input_tokens, parser.usage.output_tokens) == (100, 5)
    with chat.open("a") as out:
        out.write(answer("a", 100) + answer("b", 200))  # `a` again, with its tool calls
    assert files.take(files.look(session)) is True
    assert parser.usage.input_tokens == 300
    assert parser.usage.cost_estimated is True and parser.usage.cost_usd


def test_a_claude_look_takes_each_messages_last_figure_once_and_finds_its_subagents(
    tmp_path: Path,
) -> None:
    """An interactive Claude run prints no usage: its transcript is read as it grows (only
    the run's own messages, each at its last figure), then a subagent's beside it."""
    session = "620e224a-9622-4b5f-b9c2-45e3aec492b7"
    cwd = "/work/repo"
    folder = tmp_path / ".claude" / "projects" / "-work-repo"
    folder.mkdir(parents=True)
    transcript = folder / f"{session}.jsonl"

    def message(message_id: str, output: int, stamp: str = "2026-12-03T19:50:22.057Z") -> str:
        usage = {"input_tokens": 100, "output_tokens": output, "cache_read_input_tokens": 0}
        body = {"id": message_id, "model": "claude-sonnet-4-5", "usage": usage}
        return json.dumps({"type": "assistant", "timestamp": stamp, "message": body}) + "\n"

    earlier = message("msg_old", 9, "2026-12-03T19:00:00.000Z")  # a run before this one
    transcript.write_text(earlier + message("msg_a", 3))
    parser = ClaudeParser(session)
    files = LiveFiles(parser, SINCE, {"HOME": str(tmp_path)}, cwd)
    assert files.take(files.look(session)) is True
    assert (parser.usage.input_tokens, parser.usage.output_tokens) == (100, 3)
    with transcript.open("a") as out:
        out.write(message("msg_a", 30) + message("msg_b", 5))  # `a` complete, then `b`
    assert files.take(files.look(session)) is True
    assert (parser.usage.input_tokens, parser.usage.output_tokens) == (200, 35)
    assert files.take(files.look(session)) is False  # nothing new
    subagents = folder / session / "subagents"
    subagents.mkdir(parents=True)
    (subagents / "agent-1.jsonl").write_text(message("msg_sub", 7))
    for _ in range(10):  # looked for again every SEARCH_EVERY_LOOKS looks
        files.take(files.look(session))
    assert parser.usage.output_tokens == 42
