"""The control API's error codes that tell a person what to do: the protocol's, and the
command line's fast path's (tui/cli/fastverbs.py, which must not import the protocol: it
reads the package's metadata, tens of ms of a verb)."""

from __future__ import annotations

FORBIDDEN = "forbidden"
"""The error code of a request its asker may not make: from inside a session, what needs a
person or another session (supervisor/api/trust.py). The command line exits 77 for it."""

PERSON_CODES = frozenset(
    {
        "unknown-session",
        "unknown-handle",
        "unknown-checkpoint",
        "bad-request",
        "bad-state",
        "no-daemon",
        "version-mismatch",
        "bad-config",
        "permission",
        "busy",  # at the connection cap: the person closes clients (the message says which)
    }
)
"""Errors a person can fix (the command line exits 2); any other code is herd's own (70)."""
