"""What a wrong key or value in herd.toml means, in the file's words: the nearest right key
of the same table, the nearest allowed value, and the table a misplaced key belongs in."""

from __future__ import annotations

import difflib
import re
import types
import typing
from collections.abc import Sequence
from typing import Any

from pydantic import BaseModel

TOP_ONLY_KEYS = frozenset(
    {"notify", "notify_on", "notifications", "fleet", "keys", "cluster", "prices"}
)
"""Keys only the top of herd.toml has: written under a [[session]], TOML makes them its."""


def table_keys(model: type[BaseModel], path: Sequence[Any]) -> set[str] | None:
    """The keys of the table at `path` inside `model` (`("budget",)` -> Budget's keys), or
    None when `path` does not lead to a table of fixed keys."""
    for part in path:
        field = model.model_fields.get(str(part))
        if field is None:
            return None
        found = _model_of(field.annotation)
        if found is None:
            return None
        model = found
    return set(model.model_fields)


def _model_of(annotation: Any) -> type[BaseModel] | None:
    """The model a field holds (`Budget`, or `ClusterConfig | None`), else None."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    if typing.get_origin(annotation) in (typing.Union, types.UnionType):
        models = [m for m in map(_model_of, typing.get_args(annotation)) if m is not None]
        return models[0] if len(models) == 1 else None
    return None


def unknown_key(model: type[BaseModel], loc: Sequence[Any], session: bool) -> str:
    """Why a key is not allowed where it is, and the fix: a key of the top written under a
    [[session]], or the nearest key of its own table (then of the session)."""
    key = str(loc[-1])
    if session and len(loc) == 1 and key in TOP_ONLY_KEYS:
        return (
            "belongs at the top of herd.toml, above the first [[session]] (every key after "
            "[[session]] is that session's); move it up"
        )
    candidates = table_keys(model, loc[:-1]) or set()
    close = difflib.get_close_matches(key, sorted(candidates), n=1)
    if not close and len(loc) > 1:  # a key of the session written inside one of its tables
        close = [k for k in model.model_fields if k == key]
        if close:
            table = ".".join(str(p) for p in loc[:-1])
            return f"is not a key of {table}; write {key} = ... in the session itself"
    return f'unknown key; did you mean "{close[0]}"?' if close else "unknown key; remove it"


def literal(error: dict[str, Any], text: str) -> str:
    """A value (or a table's key, such as on_drift's) that is none of the allowed words: the
    nearest one first, then the list."""
    value = error.get("input")
    options = re.findall(r"'([^']*)'", str((error.get("ctx") or {}).get("expected", "")))
    close = (
        difflib.get_close_matches(value, options, n=1, cutoff=0.5) if isinstance(value, str) else []
    )
    words = text.replace("Input should be", "must be")
    return f'did you mean "{close[0]}"? ({words})' if close else words


def placeholder_problems(argv: Sequence[str], known: Sequence[str]) -> list[str]:
    """Each `{word}` in `argv` that is not a placeholder herd fills, with the nearest one."""
    problems = []
    for element in argv:
        for marker in re.findall(r"\{[A-Za-z_][A-Za-z0-9_]*\}", element):
            if marker in known:
                continue
            close = difflib.get_close_matches(marker, list(known), n=1)
            hint = f'did you mean "{close[0]}"?' if close else f"herd fills {', '.join(known)}"
            problems.append(f"{marker} is not a placeholder; {hint}")
    return problems
