"""An agent's own JSONL records (transcripts, rollouts, chat files), read bounded, line by line."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path


def json_lines(
    paths: Iterable[Path], max_bytes: int, max_entry_bytes: int, wanted: Callable[[bytes], bool]
) -> Iterator[object]:
    """The JSON value of each line `wanted` picks, from each file's first `max_bytes`.

    A line over `max_entry_bytes`, a line that is not JSON and a file that cannot be read are
    skipped: what an agent keeps for itself is evidence herd reads, never a reason to fail.
    """
    for path in paths:
        read_bytes = 0
        try:
            with path.open("rb") as stream:
                for raw in stream:
                    read_bytes += len(raw)
                    if read_bytes > max_bytes:
                        break
                    if len(raw) > max_entry_bytes or not wanted(raw):
                        continue
                    try:
                        value = json.loads(raw.decode("utf-8", errors="replace"))
                    except (ValueError, RecursionError):
                        continue
                    yield value
        except OSError:
            continue
