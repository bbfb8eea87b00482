"""`[cluster]` in herd.toml: one fleet across hosts on PostgreSQL (docs/cluster.md).

The Postgres URL holds a password, so the file names only the environment variable that holds
it; `configchecks.cluster_problems` says in one line what is missing on this machine.
"""

from __future__ import annotations

import os
import re
from typing import Annotated

from pydantic import BaseModel, BeforeValidator, ConfigDict, field_validator

from agentherd.sessions.durations import parse_duration

Duration = Annotated[float, BeforeValidator(parse_duration)]
HOST_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,62}$")
"""A host's name: what `herd daemon --host NAME` and a session's `host` say."""
ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
POSTGRES_SCHEMES = ("postgresql://", "postgres://", "postgresql+psycopg://")
MIN_LEASE_S = 3.0
"""Shorter leases than this would be renewed more often than a loaded database answers."""


class ClusterConfig(BaseModel):
    """The `[cluster]` table: where the fleet's shared state lives and the fleet's limits."""

    model_config = ConfigDict(extra="forbid", frozen=True, strict=True)

    database_url_env: str
    """The NAME of the environment variable holding the PostgreSQL URL (never the URL)."""
    lease: Duration = 30.0
    """A host that has not renewed its lease for this long is dead; its sessions may move."""
    grace: Duration | None = None
    """After its lease, how long a silent host keeps its agents (a short database outage
    stops nothing) and no other host may take its work; none: as long as `lease`."""
    max_sessions: int | None = None
    """Sessions running at once across every host (the whole fleet)."""
    max_sessions_per_host: int | None = None
    """Sessions running at once on this host (each host's own herd.toml says its own)."""
    checkpoint_remote: str | None = None
    """A git remote (name or URL) each checkpoint and rescue ref is pushed to; none: no push."""

    @field_validator("database_url_env")
    @classmethod
    def _env_name(cls, value: str) -> str:
        if "://" in value:
            raise ValueError(
                "name the environment variable that holds the URL, never the URL itself, "
                'like database_url_env = "HERD_DATABASE_URL"'
            )
        if not ENV_NAME.match(value):
            raise ValueError('must be an environment variable name, like "HERD_DATABASE_URL"')
        return value

    @field_validator("lease")
    @classmethod
    def _lease(cls, value: float) -> float:
        if value < MIN_LEASE_S:
            raise ValueError(f"must be at least {MIN_LEASE_S:g}s")
        return value

    @field_validator("grace")
    @classmethod
    def _grace(cls, value: float | None) -> float | None:
        if value is not None and value < 0:
            raise ValueError('must be a duration, like "30s" (0: a silent host is dead at once)')
        return value

    @property
    def grace_s(self) -> float:
        """The grace after the lease, in seconds (`lease` when herd.toml names none)."""
        return self.lease if self.grace is None else self.grace

    @field_validator("max_sessions", "max_sessions_per_host")
    @classmethod
    def _limit(cls, value: int | None) -> int | None:
        if value is not None and value < 1:
            raise ValueError("must be at least 1 (leave it out for no limit)")
        return value

    @field_validator("checkpoint_remote")
    @classmethod
    def _remote(cls, value: str | None) -> str | None:
        if value is None:
            return None
        if not value or value.startswith("-") or any(c.isspace() or ord(c) < 32 for c in value):
            raise ValueError(
                'must be a git remote name or URL, like "herd" or "ssh://git.example/work.git"'
            )
        return value

    def database_url(self) -> str | None:
        """The URL from the environment, or None when the variable is unset or empty."""
        return os.environ.get(self.database_url_env) or None


def host_names(value: str | list[str] | None) -> list[str] | None:
    """A session's `host` as a list (None: any host)."""
    if value is None:
        return None
    return [value] if isinstance(value, str) else list(value)


def check_host_value(value: str | list[str] | None) -> str | list[str] | None:
    """A session's `host`: a host name or a non-empty list of them."""
    names = host_names(value)
    if names is not None and not names:
        raise ValueError("name at least one host, or leave host out to run on any host")
    for name in names or []:
        if not HOST_NAME.match(name):
            raise ValueError(f"{name!r} is not a host name (letters, digits, . - _)")
    return value
