"""herd.toml's `[notifications]` table: messages through Apprise, with the evidence.

Pure: the model and its checks. The URLs themselves never live in herd.toml (they carry
tokens); the table names the environment variables that hold them.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Annotated, Literal

from pydantic import BaseModel, BeforeValidator, ConfigDict, field_validator

from agentherd.sessions.durations import parse_duration

CAUSES: dict[str, str] = {
    "waiting-approval": "waits for a person to approve or reject a plan change",
    "waiting-input": "an interactive run's agent waits for a person at its terminal",
    "budget-stop": "a budget is spent: the task was stopped",
    "failed": "the task failed",
    "claims-done-but-fails": "the agent says it is done, but verify fails",
    "completed": "the task completed",
}
"""What a notification can be about (the keys of `on` and `priority`), with its reason."""

PRIORITIES = ("min", "low", "default", "high", "max")
"""ntfy's five priorities; other services get the nearest kind (info, warning, failure)."""

DEFAULT_PRIORITY = {
    "waiting-approval": "high",
    "waiting-input": "high",
    "budget-stop": "high",
    "failed": "high",
    "claims-done-but-fails": "default",
    "completed": "low",
}

ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
QUIET_HOURS = re.compile(r"([01]\d|2[0-3]):([0-5]\d)-([01]\d|2[0-3]):([0-5]\d)")

if TYPE_CHECKING:
    Cause = str
    Priority = str
else:
    Cause = Literal[tuple(CAUSES)]
    Priority = Literal[PRIORITIES]


class NotificationsConfig(BaseModel):
    """`[notifications]`: where messages go, about what, how urgent, and when not."""

    model_config = ConfigDict(extra="forbid", frozen=True, strict=True)

    urls_env: list[str]
    """Environment variables of the daemon, each holding one Apprise URL (ntfy://, slack://...)."""
    on: list[Cause] = list(CAUSES)
    priority: dict[Cause, Priority] = {}
    public_url: str | None = None
    """Where `herd web` is reached from the phone; messages link `public_url/session/NAME`."""
    cooldown: Annotated[float, BeforeValidator(parse_duration)] = 300.0
    """After a message about a session, the next ones about it wait this long (then a digest)."""
    quiet_hours: str | None = None
    """`"22:00-07:00"` local time: messages are held and sent as one digest when it ends."""

    @field_validator("urls_env")
    @classmethod
    def _env_names(cls, value: list[str]) -> list[str]:
        if not value:
            raise ValueError('name at least one environment variable, like ["HERD_NTFY_URL"]')
        for name in value:
            if "://" in name:
                raise ValueError(
                    "holds names of environment variables, never URLs (they carry tokens): "
                    'export HERD_NTFY_URL="ntfy://..." and write urls_env = ["HERD_NTFY_URL"]'
                )
            if not ENV_NAME.fullmatch(name):
                raise ValueError(f"{name!r} is not an environment variable's name")
        return value

    @field_validator("public_url")
    @classmethod
    def _public_url(cls, value: str | None) -> str | None:
        if value is not None and not re.fullmatch(r"https?://[^\s/?#]+(/[^\s?#]*)?", value):
            raise ValueError('must be herd web\'s address, like "http://laptop.tailnet:4373"')
        return value.rstrip("/") if value else value

    @field_validator("cooldown")
    @classmethod
    def _cooldown(cls, value: float) -> float:
        if not 0 <= value <= 86400:
            raise ValueError('must be from 0 to 24h, like "5m"')
        return value

    @field_validator("quiet_hours")
    @classmethod
    def _quiet(cls, value: str | None) -> str | None:
        if value is not None and not QUIET_HOURS.fullmatch(value):
            raise ValueError('must be "HH:MM-HH:MM" in local time, like "22:00-07:00"')
        if value is not None and value[:5] == value[6:]:
            raise ValueError("starts and ends at the same minute; remove it or widen it")
        return value

    def priority_of(self, cause: str) -> str:
        """The priority messages about `cause` carry."""
        return self.priority.get(cause, DEFAULT_PRIORITY[cause])

    def quiet_minutes(self) -> tuple[int, int] | None:
        """Quiet hours as (start, end) minutes of the day, or None."""
        if self.quiet_hours is None:
            return None
        start, end = self.quiet_hours.split("-")
        return _minutes(start), _minutes(end)


def _minutes(hhmm: str) -> int:
    hours, minutes = hhmm.split(":")
    return int(hours) * 60 + int(minutes)
