"""The `notify` command: which events run it and the argv it gets (never through a shell).

Pure: the supervisor runs the argv (with a timeout) and records `notify-failed` when it fails.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

PLACEHOLDERS = ("{session}", "{kind}", "{message}", "{handle}")
"""What `notify` elements may hold; each is replaced by text, inside that one argv element."""

MESSAGE_CHARS = 1000
"""A notification carries at most this much of the event's message."""


def fill(argv: Iterable[str], values: Mapping[str, str]) -> list[str]:
    """`argv` with each placeholder replaced literally, element by element.

    Not `str.format`: a brace in herd.toml or in a value is text, never a field lookup, and a
    value can never split into two elements or reach a shell. NUL (which argv cannot carry)
    becomes a space.
    """
    out = []
    for element in argv:
        for name in ("session", "kind", "handle", "message"):
            marker = "{" + name + "}"
            if marker in element:
                element = element.replace(marker, values.get(name, "").replace("\0", " "))
        out.append(element)
    return out


def values(session: str, kind: str, message: str, handle: str | None) -> dict[str, str]:
    """The placeholder values for one event."""
    return {
        "session": session,
        "kind": kind,
        "message": message[:MESSAGE_CHARS],
        "handle": handle or "",
    }


def wanted(kind: str, notify_on: Iterable[str], drift_action: str | None, opening: bool) -> bool:
    """True when an event of `kind` runs `notify`.

    A warning notifies at most once per opening (its repeats only count); other kinds
    (failed, waiting-approval, budget-stop) every time they happen.
    """
    if kind == "notify-failed":
        return False  # a failing notifier must not call itself
    asked = kind in set(notify_on) or drift_action == "notify"
    return asked and opening
