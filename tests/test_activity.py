"""One readable line per output line: JSON events summarised, terminals' tricks undone, inert."""

from __future__ import annotations

import json

from agentherd.sessions.adapters.summary import summarize


def line(obj: dict[str, object]) -> bytes:
    return json.dumps(obj).encode()


def test_claude_events_read_as_words() -> None:
    text = {
        "type": "assistant",
        "message": {"content": [{"type": "text", "text": "Fixed it.\nMore"}]},
    }
    assert summarize(line(text), 80) == "Fixed it."
    tool = {
        "type": "assistant",
        "message": {
            "content": [{"type": "tool_use", "name": "Edit", "input": {"file_path": "src/a.py"}}]
        },
    }
    assert summarize(line(tool), 80) == "Edit src/a.py"
    result = {"type": "result", "is_error": True, "result": "API Error: 529"}
    assert summarize(line(result), 80) == "error: API Error: 529"


def test_a_cut_json_line_still_says_something() -> None:
    cut = b'{"type":"assistant","message":{"content":[{"type":"text","text":"half of it'
    assert summarize(cut, 80) == "half of it"


def test_plain_lines_lose_escapes_and_progress_bars_and_are_cut() -> None:
    assert summarize(b"\x1b[32mok\x1b[0m 10%\r100%", 80) == "100%"
    assert summarize(b"x" * 500, 20).endswith("…") and len(summarize(b"x" * 500, 20)) == 20
    assert "\x1b" not in summarize(b'{"type":"result","result":"\\u001b[2J"}', 80)


def test_a_crash_cut_json_line_without_text_says_what_it_was() -> None:
    assert summarize(b'{"type": "assistant", "message": {"id": "msg_x", "con', 80) == (
        "(a cut-off assistant line)"
    )


def test_a_deeply_nested_json_line_is_summarised_without_raising() -> None:
    """Agent output is untrusted: nesting deeper than Python's recursion limit must not raise."""
    nested = b'{"a":' * 50_000
    assert summarize(nested, 80) == "(a cut-off JSON line)"
    closed = b'{"a":' * 5_000 + b"1" + b"}" * 5_000
    assert summarize(closed, 80) == "(a cut-off JSON line)"
