"""herd.toml: the pydantic model of the whole schema, [defaults] merging, lookup and problems."""

from __future__ import annotations

import difflib
import os
import re
import shutil
import signal
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    ValidationError,
    field_validator,
    model_validator,
)

from agentherd.sessions.durations import parse_duration

CONFIG_NAME = "herd.toml"
STATE_DIR_NAME = ".herd"

AgentName = Literal["claude", "codex", "gemini", "amp", "opencode", "aider", "plain"]
RestartPolicy = Literal["never", "on-failure", "always", "until-done"]
DriftAction = Literal["warn", "notify", "pause"]
DriftKind = Literal[
    "plan-tampered",
    "claims-done-but-fails",
    "stalled",
    "crash-loop",
    "repeated-failure",
    "out-of-scope",
    "burn-without-progress",
    "early-exit",
]
DEFAULT_NOTIFY_ON = ("failed", "budget-stop", "waiting-approval", "plan-tampered")
DEFAULT_LOG_MAX_BYTES = 268_435_456

Duration = Annotated[float, BeforeValidator(parse_duration)]


def _positive(value: float | None) -> float | None:
    if value is not None and value <= 0:
        raise ValueError("must be a positive number")
    return value


class _Strict(BaseModel):
    """Base for config models: unknown keys are errors, values are immutable."""

    model_config = ConfigDict(extra="forbid", frozen=True)


class Budget(_Strict):
    """Limits on one session's (or the fleet's) spend; `stall` is a drift threshold, not a spend."""

    wall_time: Duration | None = None
    tokens: int | None = None
    cost_usd: float | None = None
    turns: int | None = None
    restarts: int | None = None
    warn_at: float = 0.8
    stall: Duration | None = None

    @field_validator("wall_time", "tokens", "cost_usd", "turns", "restarts", "stall")
    @classmethod
    def _must_be_positive(cls, value: float | None) -> float | None:
        return _positive(value)

    @field_validator("warn_at")
    @classmethod
    def _fraction(cls, value: float) -> float:
        if not 0 < value <= 1:
            raise ValueError("must be a fraction between 0 and 1, like 0.8")
        return value


class FleetConfig(_Strict):
    """[fleet]: limits across all sessions."""

    budget: Budget = Budget()


Argv = list[str]


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
    on_drift: dict[DriftKind, DriftAction] = {}

    @field_validator("name")
    @classmethod
    def _name(cls, value: str) -> str:
        if not re.fullmatch(r"[A-Za-z0-9_-]{1,64}", value):
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
        return value

    @field_validator("restart_delay_max", "stable_after", "crash_window", "verify_timeout")
    @classmethod
    def _positive_duration(cls, value: float) -> float:
        if value <= 0:
            raise ValueError("must be a positive duration")
        return value

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
        return ["/bin/sh", "-c", value] if isinstance(value, str) else list(value)


class HerdConfig(_Strict):
    """The whole herd.toml, with [defaults] already merged into each session."""

    notify: list[str] | None = None
    notify_on: list[str] = list(DEFAULT_NOTIFY_ON)
    fleet: FleetConfig = FleetConfig()
    keys: dict[str, str] = {}
    sessions: list[SessionConfig] = []
    path: Path = Path(CONFIG_NAME)

    @property
    def state_dir(self) -> Path:
        """Where herd keeps its database, logs and runs: `.herd/` beside herd.toml."""
        return self.path.parent / STATE_DIR_NAME

    def session(self, name: str) -> SessionConfig | None:
        """The session called `name`, or None."""
        return next((s for s in self.sessions if s.name == name), None)


@dataclass(frozen=True)
class Problem:
    """One thing wrong (or worth a warning) in herd.toml, as one line a person can act on."""

    file: str
    message: str
    session: str | None = None
    field: str | None = None
    warning: bool = False

    def __str__(self) -> str:
        parts = [self.file]
        if self.session is not None:
            parts.append(f'session "{self.session}"')
        if self.field:
            parts.append(self.field)
        line = ": ".join(parts) + ": " + self.message
        return ("warning: " + line) if self.warning else line


class ConfigError(Exception):
    """herd.toml cannot be used; `problems` says why, one line each."""

    def __init__(self, problems: list[Problem]) -> None:
        super().__init__("\n".join(str(p) for p in problems))
        self.problems = problems


_TOP_KEYS = set(HerdConfig.model_fields) - {"sessions", "path"} | {"session", "defaults"}
_SESSION_KEYS = set(SessionConfig.model_fields)


def find_config(explicit: str | os.PathLike[str] | None = None, start: Path | None = None) -> Path:
    """Locate herd.toml: the explicit path, else $HERD_CONFIG, else the nearest one upward."""
    chosen = explicit or os.environ.get("HERD_CONFIG")
    if chosen:
        path = Path(chosen).expanduser()
        if not path.is_file():
            raise ConfigError(
                [Problem(str(path), "no such file; check -c/--config or $HERD_CONFIG")]
            )
        return path.resolve()
    here = (start or Path.cwd()).resolve()
    for folder in (here, *here.parents):
        candidate = folder / CONFIG_NAME
        if candidate.is_file():
            return candidate
    raise ConfigError(
        [Problem(CONFIG_NAME, f"not found in {here} or any parent; run `herd init` to write one")]
    )


def _merge(defaults: dict[str, Any], session: dict[str, Any]) -> dict[str, Any]:
    """Session keys override defaults; budget and on_drift merge key by key."""
    merged = dict(defaults)
    for key, value in session.items():
        if (
            key in ("budget", "on_drift")
            and isinstance(value, dict)
            and isinstance(merged.get(key), dict)
        ):
            merged[key] = {**merged[key], **value}
        else:
            merged[key] = value
    return merged


def _message(error: Any, known: set[str]) -> str:
    kind = error["type"]
    loc = error["loc"]
    if kind == "extra_forbidden":
        key = str(loc[-1])
        close = difflib.get_close_matches(key, sorted(known), n=1)
        hint = f'; did you mean "{close[0]}"?' if close else "; remove it"
        return f"unknown key{hint}"
    if kind == "missing":
        return "required; add it"
    text = str(error["msg"])
    for prefix in ("Value error, ", "Assertion failed, "):
        text = text.removeprefix(prefix)
    if kind == "literal_error":
        return text.replace("Input should be", "must be")
    return text[0].lower() + text[1:] if text else kind


def _validation_problems(
    exc: ValidationError, file: str, session: str | None, known: set[str]
) -> list[Problem]:
    problems: dict[tuple[str, str], Problem] = {}
    for error in exc.errors():
        loc = tuple(error["loc"])
        # A value that fails every member of a union reports once per member; keep the first.
        loc = tuple(p for p in loc if not (isinstance(p, str) and ("[" in p or p == "str")))
        field = ".".join(str(p) for p in loc)
        key = (field, error["type"] if error["type"] == "extra_forbidden" else "")
        problems.setdefault(key, Problem(file, _message(error, known), session, field or None))
    return list(problems.values())


def parse_config(text: str, path: Path) -> HerdConfig:
    """Validate herd.toml text; raise ConfigError listing every problem, one line each."""
    file = path.name
    try:
        raw = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError([Problem(file, f"not valid TOML: {exc}")]) from None
    problems: list[Problem] = []
    for key in raw:
        if key not in _TOP_KEYS:
            close = difflib.get_close_matches(key, sorted(_TOP_KEYS), n=1)
            hint = f'; did you mean "{close[0]}"?' if close else "; remove it"
            problems.append(Problem(file, f"unknown key{hint}", field=key))
    defaults = raw.get("defaults", {})
    if not isinstance(defaults, dict):
        problems.append(Problem(file, "must be a table: [defaults]", field="defaults"))
        defaults = {}
    if "name" in defaults:
        problems.append(Problem(file, "name is per session; remove it", field="defaults.name"))
        defaults = {k: v for k, v in defaults.items() if k != "name"}
    raw_sessions = raw.get("session", [])
    if not isinstance(raw_sessions, list):
        problems.append(Problem(file, "write each session as [[session]]", field="session"))
        raw_sessions = []
    sessions: list[SessionConfig] = []
    seen: set[str] = set()
    for index, raw_session in enumerate(raw_sessions):
        label = str(raw_session.get("name", f"#{index + 1}"))
        merged = _merge(defaults, raw_session)
        if "cwd" in merged and isinstance(merged["cwd"], str):
            merged["cwd"] = (path.parent / Path(merged["cwd"]).expanduser()).resolve()
        else:
            merged.setdefault("cwd", path.parent.resolve())
        try:
            session = SessionConfig.model_validate(merged)
        except ValidationError as exc:
            problems.extend(_validation_problems(exc, file, label, _SESSION_KEYS))
            continue
        if session.name in seen:
            problems.append(Problem(file, "another session has this name", label, "name"))
        seen.add(session.name)
        sessions.append(session)
    top = {k: v for k, v in raw.items() if k not in ("session", "defaults")}
    try:
        config = HerdConfig.model_validate({**top, "sessions": sessions, "path": path})
    except ValidationError as exc:
        problems.extend(_validation_problems(exc, file, None, _TOP_KEYS))
        config = None
    if problems or config is None:
        raise ConfigError(problems)
    return config


def load_config(path: Path) -> HerdConfig:
    """Read and validate herd.toml at `path`."""
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError([Problem(str(path), f"cannot read: {exc}")]) from None
    return parse_config(text, path.resolve())


def _worktree_root(folder: Path) -> Path | None:
    """The git worktree folder containing `folder` (where `.git` is), found without running git."""
    for candidate in (folder, *folder.parents):
        if (candidate / ".git").exists():
            return candidate
    return None


def environment_problems(config: HerdConfig) -> list[Problem]:
    """Problems only the machine can show: missing folders, programs not on PATH, shared trees."""
    file = config.path.name
    problems: list[Problem] = []
    roots: dict[Path, str] = {}
    for session in config.sessions:
        if not session.cwd.is_dir():
            problems.append(
                Problem(
                    file,
                    f"{session.cwd} does not exist; create it or fix the path",
                    session.name,
                    "cwd",
                )
            )
            continue
        if isinstance(session.command, list):
            program = session.command[0]
            search_path = session.env.get("PATH", os.environ.get("PATH"))
            if "/" in program:
                candidate = session.cwd / program
                found = candidate.is_file() and os.access(candidate, os.X_OK)
            else:
                found = shutil.which(program, path=search_path) is not None
            if not found:
                problems.append(
                    Problem(
                        file,
                        f"{program!r} is not on PATH; install it or give its full path",
                        session.name,
                        "command",
                    )
                )
        root = _worktree_root(session.cwd)
        if root is not None:
            if root in roots:
                problems.append(
                    Problem(
                        file,
                        f'shares the git worktree {root} with session "{roots[root]}"; a crash '
                        "restart of one resets the tree under the other (use `git worktree add`)",
                        session.name,
                        "cwd",
                        warning=True,
                    )
                )
            else:
                roots[root] = session.name
    return problems
