"""Two facts of a worktree's index read from the file, without running git: whether any entry is
marked assume-unchanged, and the tree the index would write (its cached root tree).

A rescue needs both: an assumed-unchanged edit is refreshed first (one git process), and an
index holding more than HEAD is saved as a tree of its own (another). Most crashes need
neither, and a git process costs milliseconds of the relaunch on a busy machine. Anything
unusual (a split or sparse index, an unknown version, a big file, an unmerged entry) is
"don't know" (None), and the caller asks git.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from pathlib import Path

MAX_INDEX_BYTES = 1 << 20
"""A bigger index (some ten thousand entries) is left to git: reading it here costs more."""

_ASSUME_VALID = 0x8000
_EXTENDED = 0x4000
_STAGE = 0x3000
_NAME_MASK = 0x0FFF
_STAT_BYTES = 40
"""ctime, mtime (seconds and nanoseconds), dev, ino, mode, uid, gid, size: ten 32-bit fields."""
_UNSUPPORTED_EXTENSIONS = (b"link", b"sdir")
"""A split index keeps its entries elsewhere; a sparse one has folder entries."""


@dataclass(frozen=True)
class IndexFacts:
    """What the index file says, as far as a rescue asks."""

    assume_valid: bool
    """Some entry is marked assume-unchanged (`update-index --assume-unchanged`, ignoreStat)."""
    tree: str | None
    """The tree the index would write, when its cached root tree is valid; else None."""


def read(index: Path, hash_bytes: int) -> IndexFacts | None:
    """The facts of the index file at `index` of a repository whose object names have
    `hash_bytes` bytes (20, or 32 for sha256); None when git must be asked."""
    try:
        if index.stat().st_size > MAX_INDEX_BYTES:
            return None
        data = index.read_bytes()
    except OSError:
        return None
    try:
        return _parse(data, hash_bytes)
    except (struct.error, ValueError, IndexError):
        return None


def _parse(data: bytes, hash_bytes: int) -> IndexFacts | None:
    signature, version, count = struct.unpack_from(">4sII", data, 0)
    if signature != b"DIRC" or version not in (2, 3, 4):
        return None
    at = 12
    previous = b""
    assume_valid = False
    for _ in range(count):
        start = at
        (flags,) = struct.unpack_from(">H", data, at + _STAT_BYTES + hash_bytes)
        at += _STAT_BYTES + hash_bytes + 2
        if flags & _STAGE:
            return None  # unmerged: no tree to write; git says what to do
        assume_valid = assume_valid or bool(flags & _ASSUME_VALID)
        if flags & _EXTENDED:
            if version < 3:
                return None
            at += 2
        if version == 4:
            strip, at = _varint(data, at)
            end = data.index(b"\0", at)
            if strip > len(previous):
                return None
            previous = previous[: len(previous) - strip] + data[at:end]
            at = end + 1
        else:
            length = flags & _NAME_MASK
            end = data.index(b"\0", at) if length == _NAME_MASK else at + length
            if data[end] != 0:
                return None
            at = start + ((end - start + 8) & ~7)
    return IndexFacts(assume_valid, _root_tree(data, at, hash_bytes))


def _varint(data: bytes, at: int) -> tuple[int, int]:
    """git's offset varint (as in the v4 index): (value, the offset after it)."""
    byte = data[at]
    value = byte & 0x7F
    at += 1
    while byte & 0x80:
        byte = data[at]
        value = ((value + 1) << 7) | (byte & 0x7F)
        at += 1
    return value, at


def _root_tree(data: bytes, at: int, hash_bytes: int) -> str | None:
    """The root tree of the cache-tree extension, when it is there and valid."""
    end = len(data) - hash_bytes  # the index's own checksum closes the file
    found = None
    while at < end:
        signature = data[at : at + 4]
        (size,) = struct.unpack_from(">I", data, at + 4)
        body = data[at + 8 : at + 8 + size]
        if len(body) != size or signature in _UNSUPPORTED_EXTENSIONS:
            raise ValueError(f"index extension {signature!r}: git must read this index")
        if signature == b"TREE" and body.startswith(b"\0"):
            line_end = body.index(b"\n")
            entries = int(body[1:line_end].split(b" ")[0])
            if entries >= 0:
                found = body[line_end + 1 : line_end + 1 + hash_bytes].hex()
        at += 8 + size
    if at != end:
        raise ValueError("extensions do not end at the checksum")
    return found if found is not None and len(found) == 2 * hash_bytes else None
