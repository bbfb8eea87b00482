"""herd.toml edited in place for `herd new` and `herd archive`: its comments and layout kept.

Pure text in, text out (tomlkit keeps what a person wrote); the caller validates the result
with the same loader as `herd check` before anything is written.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import tomlkit
from tomlkit.items import AoT, Table

from agentherd.sessions.configschema import SESSION_NAME

FALLBACK_NAME = "agent"
"""The session's name when its folder's name has no letter or digit to keep."""


def name_from_folder(folder: Path) -> str:
    """A session name from a folder's name: what herd allows kept, the rest turned to `-`."""
    kept = re.sub(r"[^A-Za-z0-9_-]+", "-", folder.name).strip("-")[:64]
    return kept if kept and SESSION_NAME.fullmatch(kept) else FALLBACK_NAME


def _sessions(document: tomlkit.TOMLDocument) -> list[Table]:
    """The document's [[session]] tables (none when it has no such array)."""
    sessions = document.get("session")
    if isinstance(sessions, AoT):
        return list(sessions)
    if isinstance(sessions, list):
        return [s for s in sessions if isinstance(s, Table)]
    return []


def session_names(text: str) -> list[str]:
    """The names of the [[session]] tables of herd.toml's text."""
    return [str(s.get("name")) for s in _sessions(tomlkit.parse(text))]


def with_session(text: str, entry: Mapping[str, Any]) -> str:
    """herd.toml's text with one more [[session]] at its end, after a blank line; every byte
    before it is left as it was (a `[[session]]` header at the end is valid TOML wherever the
    file's last table ends; a file where it is not, the loader's check refuses)."""
    table = tomlkit.table()
    for key, value in entry.items():
        if isinstance(value, Mapping):
            inline = tomlkit.inline_table()
            inline.update(value)
            table.add(key, inline)
        else:
            table.add(key, value)
    block = tomlkit.document()
    array = tomlkit.aot()
    array.append(table)
    block.append("session", array)
    head = text.rstrip("\n")
    return (head + "\n\n" if head else "") + tomlkit.dumps(block)


def with_archived(text: str, name: str, archived: bool) -> str:
    """herd.toml's text with `archived = true` set on session `name` (or the key taken out).

    Raises KeyError when no [[session]] has that name.
    """
    document = tomlkit.parse(text)
    for session in _sessions(document):
        if session.get("name") != name:
            continue
        if archived:
            session["archived"] = True
        elif "archived" in session:
            del session["archived"]
        return tomlkit.dumps(document)
    raise KeyError(name)
