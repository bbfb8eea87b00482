"""An agent's own JSONL records (transcripts, rollouts, chat files), read bounded, line by line.

A file is read in chunks of READ_CHUNK_BYTES, never a line at a time: a line of gigabytes
(an agent can write one) costs a chunk of memory and is skipped, not gathered.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path

READ_CHUNK_BYTES = 1 << 20
"""A file is read this much at a time; `stop` is asked between chunks."""

Stop = Callable[[], bool]
"""Asked between chunks: True ends the read there (a stop of the session, or a time bound)."""


def never() -> bool:
    """A read nobody stops (tests, one-off tools)."""
    return False


def json_lines(
    paths: Iterable[Path],
    max_bytes: int,
    max_entry_bytes: int,
    wanted: Callable[[bytes], bool],
    stop: Stop = never,
) -> Iterator[object]:
    """The JSON value of each line `wanted` picks, from each file's first `max_bytes`.

    A line over `max_entry_bytes`, a line that is not JSON and a file that cannot be read are
    skipped: what an agent keeps for itself is evidence herd reads, never a reason to fail.
    """
    for path in paths:
        if stop():
            return
        try:
            for raw in file_lines(path, max_bytes, max_entry_bytes, stop):
                if not wanted(raw):
                    continue
                try:
                    value = json.loads(raw.decode("utf-8", errors="replace"))
                except (ValueError, RecursionError):
                    continue
                yield value
        except OSError:
            continue


def file_lines(path: Path, max_bytes: int, max_line_bytes: int, stop: Stop) -> Iterator[bytes]:
    """Each line (with its newline) in the file's first `max_bytes`, longer ones left out.

    A line over `max_line_bytes` is dropped as soon as it is that long: memory stays within a
    chunk plus `max_line_bytes` whatever the file holds. A line the bound cuts is left out.
    """
    with path.open("rb", buffering=0) as stream:
        parts: list[bytes] = []
        """The start of a line whose end is not read yet."""
        held = 0
        skipping = False
        """The current line is already over the limit: its bytes are passed over."""
        left = max_bytes
        while left > 0:
            if stop():
                return
            chunk = stream.read(min(READ_CHUNK_BYTES, left))
            if not chunk:
                break
            left -= len(chunk)
            start = 0
            while (end := chunk.find(b"\n", start)) >= 0:
                piece = chunk[start : end + 1]
                if not skipping and held + len(piece) <= max_line_bytes:
                    yield b"".join((*parts, piece)) if parts else piece
                parts, held, skipping = [], 0, False
                start = end + 1
            rest = len(chunk) - start
            if skipping or not rest:
                continue
            if held + rest > max_line_bytes:
                parts, held, skipping = [], 0, True
            else:
                parts.append(chunk[start:])
                held += rest
        if parts and (left > 0 or not stream.read(1)):
            yield b"".join(parts)  # the file's last line, unended
