"""Find and read the chat files Gemini CLI keeps of a session: a run's spend, live or killed.

Gemini CLI (0.61) records each session in
``<home>/.gemini/tmp/<project>/chats/session-<start, minutes>-<first 8 characters of id>.jsonl``
where ``<home>`` is ``$GEMINI_CLI_HOME`` or ``$HOME`` and ``<project>`` is the short name
``projects.json`` gives the working folder (older releases used a hash: any folder is
searched). The file's first line holds ``sessionId``; each model answer is a line of type
``gemini`` with ``tokens`` (``input`` with ``cached`` in it, ``output``, ``thoughts``, ``tool``,
``total``), written when the answer is complete and written again, same id, with its tool
calls. ``$set`` lines rewrite the whole message list (a resume replays the earlier runs'
messages, old timestamps and all). A resume appends to the first file and also starts a new
one with the same id prefix: every file whose first line names the session is read.

What the chat lacks: the routing request Gemini CLI makes before each prompt when its model is
``auto`` (a small classifier call the stream's ``result`` stats count). A killed run recovered
from its chat misses those; with a model set (``-m``, ``GEMINI_MODEL``) there are none.
Reading files is all this does; the supervisor calls it off its event loop.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from agentherd.sessions.adapters.base import valid_session_id
from agentherd.sessions.adapters.jsonlines import Stop, json_lines, never

MAX_CHAT_BYTES = 256 * 1024 * 1024
"""A chat file is read up to this size (its tail beyond is not read)."""

MAX_ENTRY_BYTES = 16 * 1024 * 1024
"""A chat line longer than this is skipped unread (a huge tool result or message list)."""

MAX_CHAT_FILES = 64
"""At most this many candidate files are opened for one session."""


def gemini_dir(env: Mapping[str, str]) -> Path | None:
    """Gemini CLI's global folder for a run's environment, or None when it has no home."""
    home = env.get("GEMINI_CLI_HOME", "").strip() or env.get("HOME", "").strip()
    return Path(home) / ".gemini" if home else None


def chat_paths(folder: Path, session_id: str) -> list[Path]:
    """The chat files of a session (any project folder), oldest name first; [] when none.

    An unsafe session id is never made into a path.
    """
    if not valid_session_id(session_id) or len(session_id) < 8 or "." in session_id[:8]:
        return []
    try:
        candidates = sorted((folder / "tmp").glob(f"*/chats/session-*-{session_id[:8]}.json*"))
    except OSError:
        return []
    return [
        path
        for path in candidates[:MAX_CHAT_FILES]
        if path.is_file() and _names_session(path, session_id)
    ]


def _names_session(path: Path, session_id: str) -> bool:
    """Whether a chat file's first line names this session."""
    try:
        with path.open("rb") as stream:
            head = stream.readline(MAX_ENTRY_BYTES)
    except OSError:
        return False
    try:
        value = json.loads(head.decode("utf-8", errors="replace"))
    except (ValueError, RecursionError):
        return False
    return isinstance(value, dict) and value.get("sessionId") == session_id


def read_chat_answers(
    paths: list[Path], max_bytes: int = MAX_CHAT_BYTES, stop: Stop = never
) -> Iterator[dict[str, Any]]:
    """The model answers (type ``gemini``, with ``tokens``) in chat files, one at a time, as
    read; bad lines are skipped, and `stop` ends the read between chunks."""
    for value in json_lines(
        paths, max_bytes, MAX_ENTRY_BYTES, lambda raw: b'"tokens"' in raw, stop
    ):
        yield from answers_in(value)


def answers_in(value: object) -> Iterator[dict[str, Any]]:
    """The answers one line holds: itself, or a ``$set`` (or whole-file) message list."""
    if not isinstance(value, dict):
        return
    if value.get("type") == "gemini" and isinstance(value.get("tokens"), dict):
        yield value
        return
    holder = value.get("$set") if isinstance(value.get("$set"), dict) else value
    messages = holder.get("messages") if isinstance(holder, dict) else None
    if isinstance(messages, list):
        for message in messages:
            if (
                isinstance(message, dict)
                and message.get("type") == "gemini"
                and isinstance(message.get("tokens"), dict)
            ):
                yield message
