"""The dashboard actions `[keys]` in herd.toml may rebind: named here, where the config is
checked, and bound in the dashboard (tui/dashboard/keys.py)."""

from __future__ import annotations

import re

ACTION_IDS = (
    "open",
    "start-stop",
    "restart",
    "restart-from",
    "kill",
    "pause-resume",
    "approve",
    "reject",
    "ack",
    "logs",
    "editor",
    "shell",
    "filter",
    "sort",
    "help",
    "quit",
    "stop-all",
    "back",
    "runs",
    "diff",
    "new",
    "send",
    "take-input",
)
"""The names `[keys]` may rebind (underscores are accepted for hyphens)."""

TERMINAL_ACTION_IDS = ("detach",)
"""The `[keys]` of `herd attach`, not the dashboard's: `detach` leaves an attached terminal."""

DEFAULT_DETACH_KEY = "ctrl+q"
_CTRL = re.compile(r"ctrl\+([a-z@\[\\\]^_])")


def detach_byte(name: str) -> bytes | None:
    """The byte a control key sends (`ctrl+q` is 0x11), or None for a name that is not one."""
    match = _CTRL.fullmatch(name.strip().lower())
    if match is None:
        return None
    return bytes([ord(match.group(1).upper()) & 0x1F])
