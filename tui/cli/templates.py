"""The commented herd.toml that `herd init` writes, with a session block per agent preset."""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path

from agentherd.sessions.adapters import AGENTS
from agentherd.sessions.configedit import name_from_folder


def _toml(value: tuple[str, ...] | Mapping[str, str]) -> str:
    """An argv list or a table of text as TOML on one line (JSON's strings are TOML's)."""
    if isinstance(value, tuple):
        return json.dumps(list(value), ensure_ascii=False)
    pairs = ", ".join(
        f"{key} = {json.dumps(text, ensure_ascii=False)}" for key, text in value.items()
    )
    return "{ " + pairs + " }"


def session_block(agent: str, folder: Path | None = None) -> str:
    """A [[session]] block for `agent`, commented, ready to paste; named after `folder` (the
    current one by default), so two projects' sessions are not all `main`."""
    name = name_from_folder(folder or Path.cwd())
    if agent not in AGENTS:
        raise KeyError(f"unknown agent {agent!r}; choose one of {', '.join(AGENTS)}")
    preset = AGENTS[agent].preset
    env_line = f"env      = {_toml(preset.env)}\n" if preset.env else ""
    resume_line = (
        f"resume   = {_toml(preset.resume)}\n"
        if preset.resume
        else (
            "# resume = [...]                  # how to continue after a crash; {session_id} etc.\n"
        )
    )
    return (
        "[[session]]\n"
        f'name     = "{name}"{" " * max(1, 21 - len(name))}# letters, digits, - and _\n'
        'cwd      = "."                    # the git worktree the agent works in\n'
        f'agent    = "{agent}"\n'
        f"command  = {_toml(preset.command)}\n"
        f"{resume_line}"
        f"{env_line}"
        'plan     = "feature_list.json"    # JSON feature list; items may only flip to passing\n'
        f'progress = "{preset.progress}"{" " * max(1, 21 - len(preset.progress))}'
        "# the agent's progress notes\n"
        '# verify = "pytest -q"            # run by herd against each new checkpoint\n'
        '# scope  = ["src/**", "tests/**"] # commits outside these paths raise a warning\n'
        "autostart = true                  # started by `herd up`\n"
        '# budget = { tokens = 8_000_000, cost_usd = 25, stall = "20m" }\n'
        "# what a drift does: warn (default) | notify | pause | restart | stop\n"
        '# on_drift = { plan-tampered = "pause", stalled = "notify" }\n'
    )


def init_text(agent: str, folder: Path | None = None) -> str:
    """The whole commented herd.toml."""
    return (
        "# herd.toml: the agents herd supervises. Check it with `herd check`.\n"
        "# Durations: 90s, 20m, 6h, 1h30m or seconds. Paths are relative to this file.\n\n"
        "# A command run (without a shell) when a session fails, waits for you, or drifts:\n"
        '# notify = ["notify-send", "herd: {session}", "{kind}: {message}"]\n\n'
        "[defaults]                          # applies to every session below\n"
        'restart = "on-failure"              # never | on-failure | always | until-done\n'
        'restart_from = "last"               # last | verified checkpoint after a crash\n'
        'restart_delay = "1s"                # first backoff; doubles up to restart_delay_max\n'
        'rate_limit_wait = "60s"             # after a rate limit with no reset time; doubles\n'
        "max_crashes = 5                     # this many within crash_window -> failed\n"
        'crash_window = "10m"\n'
        'stop_grace = "10s"                  # after the stop signal, then SIGKILL\n'
        'budget = { wall_time = "6h", warn_at = 0.8 }\n\n' + session_block(agent, folder)
    )
