"""The control API's wire format: JSON objects, one per line, over a private Unix socket."""

from __future__ import annotations

import json
from importlib.metadata import PackageNotFoundError, version
from typing import Any

from agentherd.supervisor.api.errorcodes import FORBIDDEN, PERSON_CODES

PROTOCOL = 1
"""Bumped when a request or reply changes shape; a client and daemon must agree on it."""

MAX_MESSAGE_BYTES = 16 << 20
"""A reply carrying a report or a long event page stays far below this."""

try:
    HERD_VERSION = version("agentherd")
except PackageNotFoundError:  # running from a source tree without an install
    HERD_VERSION = "0.0.0"


class ApiError(Exception):
    """An error reply: `code` tells scripts what happened, `message` tells people."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message

    @property
    def person_error(self) -> bool:
        """True when a person can fix it (exit 2); otherwise it is herd's own failure (70)."""
        return self.code in PERSON_CODES

    @property
    def forbidden(self) -> bool:
        """True when the asker may not ask this (an agent asking for a person): exit 77."""
        return self.code == FORBIDDEN

    def to_json(self) -> dict[str, Any]:
        """The `error` object of a reply."""
        return {"code": self.code, "message": self.message}


class RawJSON(str):
    """A value of a message that is JSON text already (made by pydantic's serializer): sent
    as it is, not encoded again."""


def encode(message: dict[str, Any]) -> bytes:
    """One message as a JSON line (a RawJSON value written in as it is)."""
    raw = {key: value for key, value in message.items() if isinstance(value, RawJSON)}
    if not raw:
        return json.dumps(message, separators=(",", ":"), default=str).encode() + b"\n"
    plain = {key: value for key, value in message.items() if key not in raw}
    head = json.dumps(plain, separators=(",", ":"), default=str)[:-1]
    tail = "".join(f",{json.dumps(key)}:{value}" for key, value in raw.items())
    return f"{head}{tail}}}\n".encode()


def decode(line: bytes) -> dict[str, Any]:
    """Parse one line; raise ApiError for anything that is not a JSON object."""
    try:
        value = json.loads(line)
    except ValueError as exc:
        raise ApiError("bad-request", f"not JSON: {exc}") from None
    except RecursionError:  # a short line can nest deeper than the parser recurses
        raise ApiError("bad-request", "JSON nested too deeply for a request") from None
    if not isinstance(value, dict):
        raise ApiError("bad-request", "expected a JSON object")
    return value
