"""What a run is launched with: its argv (placeholders filled) and its environment. Pure."""

from __future__ import annotations

from collections.abc import Mapping

from agentherd.sessions.adapters.agent import CONTINUE_PROMPT, MESSAGE
from agentherd.sessions.config import SessionConfig

NOT_DONE = "none"
"""`{checkpoint}` and `{rescue_ref}` when the tree was not reset or nothing was saved (a restart
after a rate limit or a clean exit): a prompt built from them still reads as a sentence."""


def fill(argv: list[str], values: Mapping[str, str]) -> list[str]:
    """Placeholders filled per argv element (never through a shell)."""
    filled = []
    for element in argv:
        for key, value in values.items():
            element = element.replace("{" + key + "}", value)
        filled.append(element)
    return filled


def takes_messages(config: SessionConfig) -> bool:
    """The session's `resume` has a `{message}` for `herd send` to fill."""
    return config.resume is not None and MESSAGE in " ".join(config.argv(config.resume))


def run_argv(
    config: SessionConfig,
    mode: str,
    number: int,
    agent_session_id: str | None,
    env_extra: Mapping[str, str],
    message: str | None = None,
) -> tuple[list[str], str]:
    """Run `number`'s argv and mode: `resume` when asked and possible, else `command`.

    `{message}` is the text `herd send` gave, else herd's own continue prompt; it is filled
    last, so the words of a message are never taken for placeholders.
    """
    values = {
        "session_id": agent_session_id or "",
        "checkpoint": env_extra.get("HERD_CHECKPOINT") or NOT_DONE,
        "run": str(number),
        "progress": config.progress or "",
        "plan": config.plan or "",
        "rescue_ref": env_extra.get("HERD_RESCUE_REF") or NOT_DONE,
    }
    values["message"] = message if message is not None else fill([CONTINUE_PROMPT], values)[0]
    if mode == "resume" and config.resume is not None and agent_session_id:
        return fill(config.argv(config.resume), values), "resume"
    return fill(config.argv(config.command), values), "command"


def run_environment(
    base: Mapping[str, str],
    config: SessionConfig,
    number: int,
    restarts: int,
    env_extra: Mapping[str, str],
) -> dict[str, str]:
    """The run's environment: the daemon's, the session's `env`, then herd's own variables."""
    return {
        **base,
        **config.env,
        "HERD_SESSION": config.name,
        "HERD_RUN": str(number),
        "HERD_RESTART_COUNT": str(restarts),
        "HERD_CHECKPOINT": "",
        "HERD_LAST_EXIT": "",
        "HERD_RESCUE_REF": "",
        **env_extra,
    }
