"""Tests of inert display text and of the line splitter."""

from __future__ import annotations

import time

import pytest

from agentherd.sessions.lines import LineSplitter, TruncatedLine
from agentherd.sessions.sanitize import display_line, inert, inert_line


def test_escape_sequences_become_visible() -> None:
    assert inert("\x1b[2J") == "^[[2J"
    assert inert("a\rb") == "a^Mb"
    assert inert("\x00\x07\x08\x7f") == "^@^G^H^?"
    assert inert("\x9b31m") == "\\x9b31m"


def test_tab_newline_and_text_are_kept() -> None:
    text = "tab\there\nnext line — ünïcødé ✓"
    assert inert(text) == text


def test_no_control_character_survives() -> None:
    every = "".join(chr(code) for code in range(0x00, 0xA0))
    shown = inert(every)
    assert not any(
        (ord(char) < 0x20 and char not in "\t\n") or 0x7F <= ord(char) < 0xA0 for char in shown
    )


def test_inert_is_idempotent() -> None:
    once = inert("\x1b]0;title\x07 \x1b[31mred")
    assert inert(once) == once


def test_inert_line_decodes_leniently() -> None:
    assert inert_line(b"ok \xff\xfe \x1b[1m", 100) == "ok \ufffd\ufffd ^[[1m"


def test_inert_line_drops_crlf_ending_only() -> None:
    assert inert_line(b"windows\r", 100) == "windows"
    assert inert_line(b"a\rb", 100) == "a^Mb"


def test_inert_line_truncates_with_marker() -> None:
    shown = inert_line(b"x" * 1000, 10)
    assert shown == "x" * 9 + "…"
    assert inert_line(b"short", 10) == "short"
    assert inert_line(b"exactly10!", 10) == "exactly10!"


def test_inert_line_cuts_multibyte_text_by_characters() -> None:
    shown = inert_line("é".encode() * 50, 5)
    assert shown == "éééé…"


def test_inert_line_is_fast_on_huge_lines() -> None:
    data = b"\x1b" * (8 * 1024 * 1024)
    started = time.thread_time()  # CPU seconds: a loaded machine stretches wall time
    shown = inert_line(data, 200)
    assert time.thread_time() - started < 0.5
    assert len(shown) < 450


def test_splitter_joins_chunks_and_keeps_partial_line() -> None:
    splitter = LineSplitter()
    assert splitter.feed(b"one\ntw") == [b"one"]
    assert splitter.feed(b"o\n\nthr") == [b"two", b""]
    assert splitter.pending_bytes == 3
    assert splitter.flush() == b"thr"
    assert splitter.flush() is None


def test_splitter_flush_without_partial_is_none() -> None:
    splitter = LineSplitter()
    splitter.feed(b"done\n")
    assert splitter.flush() is None
    assert splitter.feed(b"") == []


def test_splitter_caps_long_lines() -> None:
    splitter = LineSplitter(max_line_bytes=8)
    lines = splitter.feed(b"0123456789abcdef\nshort\n")
    assert lines == [b"01234567", b"short"]
    assert isinstance(lines[0], TruncatedLine)
    assert not isinstance(lines[1], TruncatedLine)
    assert splitter.truncated_lines == 1


def test_splitter_caps_a_line_split_over_chunks() -> None:
    splitter = LineSplitter(max_line_bytes=5)
    assert splitter.feed(b"abc") == []
    assert splitter.feed(b"defgh") == []
    assert splitter.feed(b"ij\nk") == [b"abcde"]
    tail = splitter.flush()
    assert tail == b"k"
    assert splitter.truncated_lines == 1


def test_splitter_truncated_tail_at_eof() -> None:
    splitter = LineSplitter(max_line_bytes=4)
    splitter.feed(b"123456")
    tail = splitter.flush()
    assert tail == b"1234"
    assert isinstance(tail, TruncatedLine)
    assert splitter.truncated_lines == 1


def test_splitter_rejects_a_zero_cap() -> None:
    with pytest.raises(ValueError):
        LineSplitter(max_line_bytes=0)


def test_splitter_is_linear_on_a_huge_line() -> None:
    splitter = LineSplitter()
    chunk = b"y" * 4096
    started = time.thread_time()  # CPU seconds: a loaded machine stretches wall time
    for _ in range(256 * 16):  # 16 MiB in 4 KiB chunks, beyond the 4 MiB cap
        assert splitter.feed(chunk) == []
    lines = splitter.feed(b"\n")
    elapsed = time.thread_time() - started
    assert len(lines[0]) == 4 * 1024 * 1024
    assert splitter.truncated_lines == 1
    assert elapsed < 2.0


def test_splitter_one_megabyte_line_in_small_chunks_is_fast() -> None:
    splitter = LineSplitter()
    data = b"z" * (1024 * 1024) + b"\n"
    started = time.thread_time()  # CPU seconds: a loaded machine stretches wall time
    lines: list[bytes] = []
    for offset in range(0, len(data), 4096):
        lines.extend(splitter.feed(data[offset : offset + 4096]))
    assert time.thread_time() - started < 0.5
    assert lines == [data[:-1]]


def test_splitter_many_short_lines() -> None:
    splitter = LineSplitter()
    data = b"".join(b"line %d\n" % number for number in range(10_000))
    lines = splitter.feed(data[:12_345]) + splitter.feed(data[12_345:])
    assert len(lines) == 10_000
    assert lines[-1] == b"line 9999"


def test_display_line_keeps_what_a_terminal_would_show() -> None:

    assert display_line(b"building 1%\rbuilding 50%\rbuilding done", 80) == "building done"
    assert display_line(b"\x1b[31mred\x1b[0m text", 80) == "red text"
    assert display_line(b"\x1b]0;title\x07after", 80) == "after"
    assert display_line(b"bell\x07 and \x1b", 80) == "bell^G and ^["
    assert display_line(b"line\r", 80) == "line"


def test_coloured_line_keeps_sgr_and_nothing_else() -> None:
    """Colours pass; OSC 52, a title, CSI 2J and a cursor move never reach a terminal raw."""
    from agentherd.sessions.sanitize import coloured_line

    line = (
        b"\x1b[31mred\x1b[0m \x1b]52;c;ZXZpbA==\x07\x1b]0;t\x07\x1b[2J\x1b[3;4Hx\x1b[1;32mok\x1b[m"
    )
    shown = coloured_line(line, 200, as_terminal=True)
    assert shown == "\x1b[31mred\x1b[0m x\x1b[1;32mok\x1b[m"
    raw = coloured_line(line, 200, as_terminal=False)
    assert raw == "\x1b[31mred\x1b[0m ^[]52;c;ZXZpbA==^G^[]0;t^G^[[2J^[[3;4Hx\x1b[1;32mok\x1b[m"
    assert (
        coloured_line(b"\x1b[31m" + b"y" * 50, 10, as_terminal=False) == "\x1b[31m" + "y" * 9 + "…"
    )
    assert coloured_line(b"50%\r100%", 20, as_terminal=True) == "100%"


def test_a_full_screen_interfaces_line_reads_with_its_spaces() -> None:
    """Claude Code places words by moving the cursor, not by spaces: a one-line view shows a
    space there (what a terminal shows), and nothing for a move at the line's start."""
    drawn = b"\x1b[2m?\x1b[1Cfor\x1b[1Cshortcuts\x1b[22m \xc2\xb7\x1b[6GClaude\x1b[13GCode"
    assert display_line(drawn, 80) == "? for shortcuts · Claude Code"
    assert display_line(b"\x1b[6GClaude\x1b[13GCode", 80) == "Claude Code"
    assert display_line(b"\x1b[31mred\x1b[0m text\x1b[K", 80) == "red text"
