"""What a run is launched with: its argv (placeholders filled) and its environment. Pure."""

from __future__ import annotations

import shlex
from collections.abc import Mapping

from agentherd.sessions.adapters import AGENTS
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
    """The session's `resume` has a `{message}` for `herd send` to fill (an interactive
    session's messages are typed into its interface instead)."""
    if config.interactive:
        return False
    return config.resume is not None and MESSAGE in " ".join(config.argv(config.resume))


def with_flags(argv: list[str], flags: list[str]) -> list[str]:
    """`argv` given `flags` too: a command of one string (`/bin/sh -c SCRIPT`) gets them at
    the end of its script, where the agent's own arguments are."""
    if not flags:
        return argv
    if len(argv) == 3 and argv[:2] == ["/bin/sh", "-c"]:
        return [*argv[:2], f"{argv[2]} {shlex.join(flags)}"]
    return [*argv, *flags]


def resume_argv(config: SessionConfig) -> list[str] | None:
    """How the session resumes its agent's conversation (placeholders unfilled), or None.

    A headless session by its `resume`; an interactive one by its own `command` given the
    agent's arguments that open its interface on a stored conversation (`resume` in herd.toml
    is print mode, one answer and out; the command keeps the person's flags)."""
    if not config.interactive:
        return config.argv(config.resume) if config.resume is not None else None
    agent = AGENTS.get(config.agent or "")
    if agent is None or not agent.interactive_resume:
        return None
    return with_flags(config.argv(config.command), list(agent.interactive_resume))


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
    resume = resume_argv(config) if mode == "resume" and agent_session_id else None
    if resume is not None:
        return fill(resume, values), "resume"
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
