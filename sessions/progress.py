"""The progress file: its latest entries, a binary check, and an "N/M tests passing" hint.

The file has no fixed grammar. Entries are markdown sections (``#`` to ``###`` headings) or,
without headings, blank-line separated paragraphs. A heading with no text under it (such as a
file title followed directly by section headings) is not an entry. Entries are made inert
(sanitize.inert), since the agent writes this file.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from agentherd.sessions.sanitize import ELLIPSIS, inert

MAX_ENTRY_CHARS = 300
"""An entry is condensed to its heading and first lines, within this many characters."""

DEFAULT_MAX_ENTRIES = 5
"""How many of the newest entries to show."""

DEFAULT_TAIL_BYTES = 256 * 1024
"""Only the end of the file is read: the newest entries are there, and files grow for hours."""

BINARY_UNDECODABLE_FRACTION = 0.3
"""More than this share of undecodable characters means the file is not text."""

_HEADING = re.compile(r" {0,3}#{1,3}[ \t]+\S")
_STATUS = re.compile(
    r"(?<![\d/])(\d{1,9})\s*(?:/|\bof\b)\s*(\d{1,9})\s+"
    r"(?:(?:tests?|features?|items?|specs?|checks?)\s+)?"
    r"(?:are\s+)?(?:passing|passed|pass|done|complete(?:d)?)\b",
    re.IGNORECASE,
)


@dataclass(frozen=True, slots=True)
class ProgressRead:
    """What was read from the end of a progress file."""

    entries: tuple[str, ...]
    binary: bool = False
    status_hint: tuple[int, int] | None = None
    truncated: bool = False


def _sections(lines: list[str]) -> list[list[str]]:
    """Split lines into sections by headings, or by blank lines when there are none."""
    sections: list[list[str]] = []
    if any(_HEADING.match(line) for line in lines):
        current: list[str] = []
        for line in lines:
            if _HEADING.match(line) and current:
                sections.append(current)
                current = []
            current.append(line)
        sections.append(current)
        return [
            section
            for section in sections
            if any(
                line.strip() for line in (section[1:] if _HEADING.match(section[0]) else section)
            )
        ]
    paragraph: list[str] = []
    for line in lines:
        if line.strip():
            paragraph.append(line)
        elif paragraph:
            sections.append(paragraph)
            paragraph = []
    if paragraph:
        sections.append(paragraph)
    return sections


def _condense(section: list[str]) -> str:
    """Join a section's non-blank lines and cut them to MAX_ENTRY_CHARS (at a line if possible)."""
    text = "\n".join(line.strip() for line in section if line.strip())
    if len(text) <= MAX_ENTRY_CHARS:
        return inert(text)
    cut = text[: MAX_ENTRY_CHARS - 1]
    newline = cut.rfind("\n")
    if newline >= MAX_ENTRY_CHARS // 2:
        cut = cut[:newline]
    return inert(cut + ELLIPSIS)


def parse_progress(text: str, max_entries: int = DEFAULT_MAX_ENTRIES) -> tuple[str, ...]:
    """Return the newest entries (newest last), each condensed to about 300 characters."""
    if max_entries <= 0:
        return ()
    lines = [line.rstrip("\r") for line in text.split("\n")]
    sections = _sections(lines)
    return tuple(_condense(section) for section in sections[-max_entries:])


def status_hint(text: str) -> tuple[int, int] | None:
    """Return (passing, total) from the last "N/M tests passing"-style line: a hint only."""
    last: tuple[int, int] | None = None
    for match in _STATUS.finditer(text):
        passing, total = int(match.group(1)), int(match.group(2))
        if total > 0 and passing <= total:
            last = (passing, total)
    return last


def looks_binary(data: bytes) -> bool:
    """Return True for NUL bytes or mostly undecodable bytes."""
    if b"\x00" in data:
        return True
    if not data:
        return False
    text = data.decode("utf-8", errors="replace")
    bad = text.count("\ufffd")
    return bad > BINARY_UNDECODABLE_FRACTION * len(text)


def read_progress_tail(
    data: bytes,
    max_entries: int = DEFAULT_MAX_ENTRIES,
    tail_bytes: int = DEFAULT_TAIL_BYTES,
) -> ProgressRead:
    """Read the newest entries from a progress file's bytes (only its last tail_bytes)."""
    truncated = len(data) > tail_bytes
    if truncated:
        data = data[-tail_bytes:]
        newline = data.find(b"\n")
        data = data[newline + 1 :] if newline >= 0 else data
    if looks_binary(data):
        return ProgressRead(entries=(), binary=True, truncated=truncated)
    text = data.decode("utf-8", errors="replace")
    return ProgressRead(
        entries=parse_progress(text, max_entries),
        binary=False,
        status_hint=status_hint(text),
        truncated=truncated,
    )
