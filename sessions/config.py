"""herd.toml: the one import for its schema, its reading and its problems.

Each job is a module of its own: `configschema` (the models), `configparse` (find, parse,
merge [defaults], one line per problem), `configchecks` (what only this machine can show) and
`problems` (a problem and the error listing them).
"""

from __future__ import annotations

from agentherd.sessions.configchecks import (
    cluster_problems,
    cost_budget_problems,
    environment_problems,
)
from agentherd.sessions.configparse import (
    SESSION_KEYS,
    TOP_KEYS,
    find_config,
    load_config,
    parse_config,
)
from agentherd.sessions.configschema import (
    CONFIG_NAME,
    DEFAULT_LOG_MAX_BYTES,
    DEFAULT_NOTIFY_ON,
    MAX_COUNT,
    MAX_STOP_GRACE_S,
    STATE_DIR_NAME,
    AgentName,
    Argv,
    Budget,
    DriftAction,
    DriftKindName,
    DriftThresholds,
    Duration,
    FleetConfig,
    HerdConfig,
    RestartPolicy,
    SessionConfig,
    command_argv,
)
from agentherd.sessions.problems import ConfigError, Problem

__all__ = [
    "CONFIG_NAME",
    "DEFAULT_LOG_MAX_BYTES",
    "DEFAULT_NOTIFY_ON",
    "MAX_COUNT",
    "MAX_STOP_GRACE_S",
    "SESSION_KEYS",
    "STATE_DIR_NAME",
    "TOP_KEYS",
    "AgentName",
    "Argv",
    "Budget",
    "ConfigError",
    "DriftAction",
    "DriftKindName",
    "DriftThresholds",
    "Duration",
    "FleetConfig",
    "HerdConfig",
    "Problem",
    "RestartPolicy",
    "SessionConfig",
    "cluster_problems",
    "command_argv",
    "cost_budget_problems",
    "environment_problems",
    "find_config",
    "load_config",
    "parse_config",
]
