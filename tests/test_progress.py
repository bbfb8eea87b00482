"""Tests of the progress file reader."""

from __future__ import annotations

from pathlib import Path

import pytest

from agentherd.sessions.progress import (
    MAX_ENTRY_CHARS,
    looks_binary,
    parse_progress,
    read_progress_tail,
    status_hint,
)

FIXTURE_DIRS = (
    Path(__file__).parent / "fixtures" / "agents",
    Path("/work/shared/fixtures/agents"),
)


def fixture(name: str) -> bytes:
    """Return a fixture file's bytes, or skip when the fixtures are not on this machine."""
    for folder in FIXTURE_DIRS:
        if (folder / name).is_file():
            return (folder / name).read_bytes()
    pytest.skip(f"fixture {name} not found")


def test_fixture_has_four_sessions_newest_last() -> None:
    text = fixture("claude-progress-example.txt").decode()
    entries = parse_progress(text, max_entries=10)
    assert len(entries) == 4
    assert [entry.splitlines()[0] for entry in entries] == [
        "## Session 1 (initializer) — 2026-09-12",
        "## Session 2 (coding) — 2026-09-13",
        "## Session 3 (coding) — 2026-09-13",
        "## Session 4 (coding) — 2026-09-14",
    ]
    assert "Session 4" in entries[-1]
    assert all(len(entry) <= MAX_ENTRY_CHARS for entry in entries)
    assert entries[-1].endswith("…")


def test_fixture_tail_read() -> None:
    read = read_progress_tail(fixture("claude-progress-example.txt"), max_entries=2)
    assert not read.binary and not read.truncated
    assert len(read.entries) == 2
    assert read.entries[-1].startswith("## Session 4")
    assert read.status_hint == (3, 7)


def test_max_entries_keeps_the_newest() -> None:
    text = "\n".join(f"# Entry {number}\nbody {number}\n" for number in range(10))
    entries = parse_progress(text, max_entries=3)
    assert entries == ("# Entry 7\nbody 7", "# Entry 8\nbody 8", "# Entry 9\nbody 9")
    assert parse_progress(text, max_entries=0) == ()


def test_default_is_five_entries() -> None:
    text = "\n".join(f"## Day {number}\n- did things" for number in range(9))
    assert len(parse_progress(text)) == 5


def test_no_headings_splits_on_blank_lines() -> None:
    text = "Did the first thing.\nStill first.\n\n\nSecond thing done.\r\n\r\nThird: 2/5 passing\n"
    assert parse_progress(text) == (
        "Did the first thing.\nStill first.",
        "Second thing done.",
        "Third: 2/5 passing",
    )


def test_text_before_the_first_heading_is_an_entry() -> None:
    text = "notes from setup\n\n## Session 1\n- done\n"
    assert parse_progress(text) == ("notes from setup", "## Session 1\n- done")


def test_deeper_headings_and_hash_words_stay_in_the_body() -> None:
    text = "## Session 1\n#### detail\n#hashtag\n- x\n"
    assert parse_progress(text) == ("## Session 1\n#### detail\n#hashtag\n- x",)


def test_long_entry_is_condensed() -> None:
    text = "## Session 9\n" + "\n".join(f"- line {number} " + "x" * 40 for number in range(50))
    (entry,) = parse_progress(text)
    assert len(entry) <= MAX_ENTRY_CHARS
    assert entry.startswith("## Session 9\n- line 0 ")
    assert entry.endswith("…")
    one_line = parse_progress("y" * 1000)[0]
    assert one_line == "y" * (MAX_ENTRY_CHARS - 1) + "…"


def test_entries_are_inert() -> None:
    (entry,) = parse_progress("## Hi \x1b[2J\n- \x07bell")
    assert entry == "## Hi ^[[2J\n- ^Gbell"


@pytest.mark.parametrize("text", ["", "\n\n  \n", "# Title only\n\n## Also empty\n"])
def test_empty_files(text: str) -> None:
    assert parse_progress(text) == ()
    read = read_progress_tail(text.encode())
    assert read.entries == () and not read.binary and read.status_hint is None


def test_binary_files() -> None:
    read = read_progress_tail(b"## Session 1\n\x00\x01\x02 binary\n")
    assert read.binary and read.entries == ()
    assert looks_binary(bytes(range(128, 256)) * 10)
    assert not looks_binary("naïve café ✓\n".encode() * 10)
    assert not looks_binary(b"")


def test_a_few_bad_bytes_are_still_text() -> None:
    read = read_progress_tail(b"## Session 1\n- fixed \xff the bug\n")
    assert not read.binary
    assert read.entries == ("## Session 1\n- fixed \ufffd the bug",)


def test_tail_only_reads_the_end() -> None:
    head = "".join(f"## Old {number}\n- old\n" for number in range(20_000)).encode()
    data = head + "## Newest\n- ü done, 5/9 tests passing\n".encode()
    read = read_progress_tail(data, tail_bytes=4096)
    assert read.truncated
    assert read.entries[-1] == "## Newest\n- ü done, 5/9 tests passing"
    assert read.status_hint == (5, 9)
    assert all(entry.startswith("## ") for entry in read.entries)


@pytest.mark.parametrize(
    ("text", "hint"),
    [
        ("Status: 3/7 tests passing", (3, 7)),
        ("45/200 tests passing\nlater: 46 / 200 tests passing", (46, 200)),
        ("12 of 40 features done", (12, 40)),
        ("2/5 passing", (2, 5)),
        ("Status: 3/7 TESTS PASSING.", (3, 7)),
        ("no numbers here", None),
        ("date 2026/09/14 passing", None),
        ("9/7 tests passing", None),
        ("0/0 tests passing", None),
        ("3/7 tests failing", None),
        ("", None),
    ],
)
def test_status_hint(text: str, hint: tuple[int, int] | None) -> None:
    assert status_hint(text) == hint
