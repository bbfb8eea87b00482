"""Which provider account a session's runs spend: sessions of one account share its limits.

A session's `account` is what herd.toml says, else the agent and where its API key comes
from: the first of the agent's key variables set in the session's `env` or herd's own
environment (`claude:ANTHROPIC_API_KEY`), else the agent's own login (`claude:login`).
"""

from __future__ import annotations

from collections.abc import Mapping

from agentherd.sessions.adapters import AGENTS
from agentherd.sessions.config import SessionConfig

LOGIN = "login"
"""The account's second half when no key variable is set: the agent's own login."""


def account_of(config: SessionConfig, environ: Mapping[str, str]) -> str:
    """The session's account: its `account` key, else `<agent>:<key variable or login>`."""
    if config.account:
        return config.account
    agent = AGENTS.get(config.agent)
    for name in agent.key_env if agent is not None else ():
        if config.env.get(name) or environ.get(name):
            return f"{config.agent}:{name}"
    return f"{config.agent}:{LOGIN}"
