"""herd.toml's schema: the pydantic models of the whole file, [defaults] already merged."""

from __future__ import annotations

import math
import re
import signal
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Literal

from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    field_validator,
    model_validator,
)

from agentherd.sessions.adapters import AGENTS
from agentherd.sessions.clusterconfig import ClusterConfig, check_host_value
from agentherd.sessions.configwords import placeholder_problems
from agentherd.sessions.drift import DRIFT_KIND_NAMES
from agentherd.sessions.durations import parse_duration
from agentherd.sessions.notify import PLACEHOLDERS
from agentherd.sessions.notifyconfig import NotificationsConfig
from agentherd.sessions.prices import Price
from agentherd.sessions.scope import in_scope

CONFIG_NAME = "herd.toml"
STATE_DIR_NAME = ".herd"

if TYPE_CHECKING:  # mypy cannot read a Literal built from a registry; pydantic checks the names
    AgentName = str
    DriftKindName = str
else:
    AgentName = Literal[tuple(AGENTS)]
    """Each agent an adapter module declares (sessions/adapters)."""
    DriftKindName = Literal[DRIFT_KIND_NAMES]
    """Each drift kind sessions/drift.py declares."""
RestartPolicy = Literal["never", "on-failure", "always", "until-done"]
DriftAction = Literal["warn", "notify", "pause", "restart", "stop"]
DEFAULT_NOTIFY_ON = (
    "failed",
    "budget-stop",
    "waiting-approval",
    "waiting-input",
    "plan-tampered",
)
DEFAULT_LOG_MAX_BYTES = 268_435_456

Duration = Annotated[float, BeforeValidator(parse_duration)]

MAX_COUNT = 2**63 - 1
"""The largest count or byte size herd accepts: SQLite's largest integer, where such values go."""
MAX_STOP_GRACE_S = 3600.0
"""`herd stop` and `herd down` wait up to stop_grace for a run to exit; longer looks like a hang."""

SESSION_NAME = re.compile(r"[A-Za-z0-9_-]{1,64}")
"""A session's name (and so each entry of an `after` list)."""

MANAGES_PATTERN = re.compile(r"[A-Za-z0-9_*?\[\]!-]{1,64}")
"""A `manages` entry: a session name, or a glob of names (fnmatch's * ? [...] [!...])."""


def _positive(value: float | None) -> float | None:
    if value is None:
        return value
    # nan compares false with everything, so `value <= 0` alone would let it through.
    if isinstance(value, float) and not math.isfinite(value):
        raise ValueError("must be a finite number, not nan or inf")
    if value <= 0:
        raise ValueError("must be a positive number")
    if value > MAX_COUNT:
        raise ValueError(f"must be at most {MAX_COUNT}")
    return value


class _Strict(BaseModel):
    """Base for config models: unknown keys are errors, values are immutable, types exact.

    Strict: `autostart = "yes"` or `max_crashes = true` is an error, never quietly coerced.
    """

    model_config = ConfigDict(extra="forbid", frozen=True, strict=True)


class Budget(_Strict):
    """Limits on one session's (or the fleet's) spend; `stall` is a drift threshold, not a spend."""

    wall_time: Duration | None = None
    tokens: int | None = None
    cost_usd: float | None = None
    turns: int | None = None
    restarts: int | None = None
    warn_at: float = 0.8
    stall: Duration | None = None
    covers: Literal["task", "life"] = "task"
    """What the limits count: the current task (since `herd start`) or the session's whole life."""

    @field_validator("wall_time", "tokens", "cost_usd", "turns", "restarts", "stall")
    @classmethod
    def _must_be_positive(cls, value: float | None) -> float | None:
        return _positive(value)

    @field_validator("warn_at")
    @classmethod
    def _fraction(cls, value: float) -> float:
        if not 0 < value <= 1:  # also refuses nan, which compares false
            raise ValueError("must be a fraction between 0 and 1, like 0.8")
        return value


class DriftThresholds(_Strict):
    """[[session]] drift: when the counting drift kinds fire."""

    repeated_failure: int = 3
    """The same failure this many times in a row (checkpoints, or crashes) raises it."""
    burn_without_progress: float = 0.25
    """This share of any budget dimension spent since an item last flipped to passing."""

    @field_validator("repeated_failure")
    @classmethod
    def _at_least_two(cls, value: int) -> int:
        if not 2 <= value <= 1000:
            raise ValueError("must be a whole number from 2 to 1000, like 3")
        return value

    @field_validator("burn_without_progress")
    @classmethod
    def _share(cls, value: float) -> float:
        if not 0 < value <= 1:  # also refuses nan
            raise ValueError("must be a fraction between 0 and 1, like 0.25")
        return value


class FleetConfig(_Strict):
    """[fleet]: limits across all sessions."""

    budget: Budget = Budget()


Argv = list[str]

ACCOUNT_NAME = re.compile(r"[A-Za-z0-9_.:@/-]{1,64}")
"""An `account` value: short and printable, as the dashboard shows it."""


def command_argv(value: Argv | str) -> list[str]:
    """The argv of a command value of herd.toml: a string runs through /bin/sh -c, a list is it."""
    return ["/bin/sh", "-c", value] if isinstance(value, str) else list(value)


class SessionConfig(_Strict):
    """One [[session]]: what to run, where, and how to keep it going."""

    name: str
    command: Argv | str
    cwd: Path = Path(".")
    env: dict[str, str] = {}
    autostart: bool = True
    agent: AgentName = "plain"
    resume: Argv | str | None = None
    restart: RestartPolicy = "on-failure"
    restart_from: str = "last"
    restart_delay: Duration = 1.0
    restart_delay_max: Duration = 300.0
    rate_limit_wait: Duration | None = None
    """None: herd's default (Timings.rate_limit_wait_s, 60s)."""
    rate_limit_wait_max: Duration | None = None
    """None: herd's default (Timings.rate_limit_wait_max_s, 1h)."""
    account: str | None = None
    """The provider account whose rate limit the session shares (None: the agent and where its
    API key comes from, e.g. `claude:ANTHROPIC_API_KEY` or `claude:login`; sessions/accounts.py)."""
    stable_after: Duration = 60.0
    max_crashes: int = 5
    crash_window: Duration = 600.0
    stop_signal: str = "SIGTERM"
    stop_grace: Duration = 10.0
    plan: str | None = None
    progress: str | None = None
    verify: Argv | str | None = None
    verify_setup: Argv | str | None = None
    verify_timeout: Duration = 600.0
    scope: list[str] = []
    log_max_bytes: int = DEFAULT_LOG_MAX_BYTES
    budget: Budget = Budget()
    on_drift: dict[DriftKindName, DriftAction] = {}
    drift: DriftThresholds = DriftThresholds()
    price: str | None = None
    """The price table entry for an estimated cost (default: the agent's usual model)."""
    host: Annotated[str | list[str] | None, AfterValidator(check_host_value)] = None
    """The cluster host (or hosts) this session may run on; none: any host ([cluster])."""
    interactive: bool = False
    """Run the command on a pseudo-terminal kept by a holder process: `herd attach` shows it."""
    manages: list[str] = []
    """Glob patterns of the session names an agent of this session may start, stop, read."""
    after: list[str] = []
    """Sessions whose tasks must complete (verified, where they verify) before this one starts."""
    archived: bool = False
    """Put away (`herd archive`): out of the fleet view and `herd ls`, never started, its
    history kept."""

    @field_validator("name")
    @classmethod
    def _name(cls, value: str) -> str:
        if not SESSION_NAME.fullmatch(value):
            raise ValueError("use 1-64 letters, digits, - and _")
        return value

    @field_validator("command")
    @classmethod
    def _command(cls, value: Argv | str) -> Argv | str:
        if (isinstance(value, str) and not value.strip()) or (
            isinstance(value, list) and not value
        ):
            raise ValueError('must not be empty; give an argv list like ["claude", "-p", "..."]')
        if isinstance(value, list) and not value[0]:
            raise ValueError("the program (first element) must not be empty")
        return value

    @field_validator("env")
    @classmethod
    def _env(cls, value: dict[str, str]) -> dict[str, str]:
        for key in value:
            if not key or "=" in key:
                raise ValueError(
                    f"{key!r} cannot be an environment variable name (empty, or holds '='); "
                    "use letters, digits and _"
                )
        return value

    @field_validator("resume", "verify", "verify_setup")
    @classmethod
    def _argv_program(cls, value: Argv | str | None) -> Argv | str | None:
        if isinstance(value, list) and not value:
            raise ValueError('must not be empty; give an argv list like ["prog", "arg"]')
        return value

    @field_validator("plan", "progress")
    @classmethod
    def _file_name(cls, value: str | None) -> str | None:
        if value is not None and not value.strip():
            raise ValueError("must name a file; remove the line or give a path")
        return value

    @field_validator("scope")
    @classmethod
    def _scope(cls, value: list[str]) -> list[str]:
        for pattern in value:
            try:
                in_scope("", [pattern])
            except re.error as exc:
                raise ValueError(f"{pattern!r} is not a valid pattern ({exc.msg})") from None
        return value

    @field_validator("manages")
    @classmethod
    def _manages(cls, value: list[str]) -> list[str]:
        for pattern in value:
            if not MANAGES_PATTERN.fullmatch(pattern):
                raise ValueError(
                    f"{pattern!r} is not a session name or a glob of names: use letters, "
                    'digits, - and _, with * ? and [...], like "worker-*"'
                )
        return value

    @field_validator("after")
    @classmethod
    def _after(cls, value: list[str]) -> list[str]:
        for name in value:
            if not SESSION_NAME.fullmatch(name):
                raise ValueError(f"{name!r} is not a session name; use the `name` of a session")
        return value

    @field_validator("restart_from")
    @classmethod
    def _restart_from(cls, value: str) -> str:
        if value not in ("last", "verified"):
            raise ValueError('must be "last" or "verified"')
        return value

    @field_validator("stop_signal")
    @classmethod
    def _signal(cls, value: str) -> str:
        name = value.upper()
        if not name.startswith("SIG"):
            name = "SIG" + name
        if not hasattr(signal.Signals, name) or name in ("SIGKILL", "SIGSTOP"):
            raise ValueError(
                f"{value!r} is not a signal herd can send first; use e.g. SIGTERM or SIGINT"
            )
        return name

    @field_validator("max_crashes", "log_max_bytes")
    @classmethod
    def _positive_int(cls, value: int) -> int:
        if value <= 0:
            raise ValueError("must be a positive number")
        if value > MAX_COUNT:
            raise ValueError(f"must be at most {MAX_COUNT}")
        return value

    @field_validator("stop_grace")
    @classmethod
    def _stop_grace(cls, value: float) -> float:
        if value > MAX_STOP_GRACE_S:
            raise ValueError(
                "must be at most 1h: `herd stop` and `herd down` wait this long for a run to exit"
            )
        return value

    @field_validator("restart_delay_max", "stable_after", "crash_window", "verify_timeout")
    @classmethod
    def _positive_duration(cls, value: float) -> float:
        if value <= 0:
            raise ValueError("must be a positive duration")
        return value

    @field_validator("account")
    @classmethod
    def _account(cls, value: str | None) -> str | None:
        if value is not None and not ACCOUNT_NAME.fullmatch(value):
            raise ValueError(
                'must be 1-64 letters, digits or `_.:@/-`, like "claude:team-key" '
                "(sessions with the same account share its rate limit)"
            )
        return value

    @field_validator("rate_limit_wait", "rate_limit_wait_max")
    @classmethod
    def _rate_limit_wait(cls, value: float | None) -> float | None:
        if value is not None and value <= 0:
            raise ValueError(
                'must be a positive duration (a zero wait retries at once); write it like "60s"'
            )
        return value

    @model_validator(mode="after")
    def _rate_limit_cap(self) -> SessionConfig:
        wait, cap = self.rate_limit_wait, self.rate_limit_wait_max
        if wait is not None and cap is not None and cap < wait:
            raise ValueError(
                "rate_limit_wait_max is shorter than rate_limit_wait; "
                "make it at least as long, or remove it"
            )
        return self

    @model_validator(mode="after")
    def _turns_seen(self) -> SessionConfig:
        if self.budget.turns is not None and not AGENTS[self.agent].counts_turns:
            raise ValueError(
                f"budget.turns: herd cannot count {self.agent}'s turns (it prints one per run, "
                "not one per model answer); limit tokens or cost_usd instead, or remove it"
            )
        return self

    @model_validator(mode="after")
    def _plan_for_until_done(self) -> SessionConfig:
        if self.restart == "until-done" and not self.plan:
            raise ValueError(
                'restart = "until-done" needs a plan file; add plan = "feature_list.json"'
            )
        return self

    @property
    def stop_signal_number(self) -> int:
        """The stop signal as a number for os.kill."""
        return int(getattr(signal.Signals, self.stop_signal))

    def argv(self, value: Argv | str) -> list[str]:
        """An argv list for a command value; a string runs through sh -c."""
        return command_argv(value)


class HerdConfig(_Strict):
    """The whole herd.toml, with [defaults] already merged into each session."""

    notify: list[str] | None = None
    notify_on: list[str] = list(DEFAULT_NOTIFY_ON)
    notifications: NotificationsConfig | None = None
    """Messages with the evidence through Apprise (sessions/notifyconfig.py)."""
    fleet: FleetConfig = FleetConfig()
    keys: dict[str, str] = {}
    cluster: ClusterConfig | None = None
    prices: dict[str, Price] = {}
    """Entries over herd's own price table (USD per million tokens), by model name."""
    sessions: list[SessionConfig] = []
    path: Path = Path(CONFIG_NAME)

    @field_validator("notify")
    @classmethod
    def _notify(cls, value: list[str] | None) -> list[str] | None:
        if value is not None and (not value or not value[0]):
            raise ValueError('must be an argv list with a program first, like ["notify-send", "x"]')
        wrong = placeholder_problems(value or [], PLACEHOLDERS)
        if wrong:
            raise ValueError(wrong[0])
        return value

    @field_validator("keys")
    @classmethod
    def _keys(cls, value: dict[str, str]) -> dict[str, str]:
        for action, key in value.items():
            if not key.strip():
                raise ValueError(f'{action} = "" binds no key; name one, like {action} = "r"')
        return value

    @property
    def state_dir(self) -> Path:
        """Where herd keeps its database, logs and runs: `.herd/` beside herd.toml."""
        return self.path.parent / STATE_DIR_NAME

    def session(self, name: str) -> SessionConfig | None:
        """The session called `name`, or None."""
        return next((s for s in self.sessions if s.name == name), None)
