"""herd.toml: the pydantic model of the whole schema, [defaults] merging, lookup and problems."""

from __future__ import annotations

import difflib
import math
import os
import re
import shutil
import signal
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    ValidationError,
    field_validator,
    model_validator,
)

from agentherd.sessions.clusterconfig import ClusterConfig, check_host_value, cluster_problems
from agentherd.sessions.durations import parse_duration
from agentherd.sessions.prices import (
    AGENTS_REPORTING_COST,
    Price,
    lookup,
    price_for,
    price_table,
)
from agentherd.sessions.scope import in_scope

CONFIG_NAME = "herd.toml"
STATE_DIR_NAME = ".herd"

AgentName = Literal["claude", "codex", "gemini", "amp", "opencode", "aider", "plain"]
RestartPolicy = Literal["never", "on-failure", "always", "until-done"]
DriftAction = Literal["warn", "notify", "pause", "restart", "stop"]
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

MAX_COUNT = 2**63 - 1
"""The largest count or byte size herd accepts: SQLite's largest integer, where such values go."""
MAX_STOP_GRACE_S = 3600.0
"""`herd stop` and `herd down` wait up to stop_grace for a run to exit; longer looks like a hang."""


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
    drift: DriftThresholds = DriftThresholds()
    price: str | None = None
    """The price table entry for an estimated cost (default: the agent's usual model)."""
    host: Annotated[str | list[str] | None, AfterValidator(check_host_value)] = None
    """The cluster host (or hosts) this session may run on; none: any host ([cluster])."""

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
    """Session keys override defaults; budget, on_drift and drift merge key by key."""
    merged = dict(defaults)
    for key, value in session.items():
        if (
            key in ("budget", "on_drift", "drift")
            and isinstance(value, dict)
            and isinstance(merged.get(key), dict)
        ):
            merged[key] = {**merged[key], **value}
        else:
            merged[key] = value
    return merged


_TYPE_MESSAGES = {
    "bool_type": "must be true or false, without quotes",
    "int_type": "must be a whole number, without quotes",
    "float_type": "must be a number, without quotes",
    "string_type": "must be text in quotes",
    "list_type": 'must be a list, like ["a", "b"]',
    "dict_type": "must be a table, like { key = value }",
    "model_type": "must be a table, like { key = value }",
    "is_instance_of": "must be a path in quotes",
}
"""What a wrong type means in herd.toml's words (pydantic speaks of Python's types)."""
_ARGV_FIELDS = ("command", "resume", "verify", "verify_setup")


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
    if kind == "list_type" and len(loc) == 2 and loc[0] in _ARGV_FIELDS:
        return 'must be an argv list like ["prog", "arg"], or a string run by sh -c'
    if kind in _TYPE_MESSAGES:
        return _TYPE_MESSAGES[kind]
    text = str(error["msg"])
    for prefix in ("Value error, ", "Assertion failed, "):
        text = text.removeprefix(prefix)
    if kind == "literal_error":
        return text.replace("Input should be", "must be")
    return text[0].lower() + text[1:] if text else kind


def _validation_problems(
    exc: ValidationError, file: str, session: str | None, known: set[str], prefix: str = ""
) -> list[Problem]:
    problems: dict[tuple[str, str], Problem] = {}
    errors = exc.errors()
    fields = []
    for error in errors:
        # A value that fails every member of a union reports once per member; keep the first,
        # and the deepest: `command = [1]` is about command.0, not about command being text.
        loc = tuple(
            p for p in error["loc"] if not (isinstance(p, str) and ("[" in p or p == "str"))
        )
        fields.append(prefix + ".".join(str(p) for p in loc))
    for error, field in zip(errors, fields, strict=True):
        if len(error["loc"]) > 1 and any(other.startswith(field + ".") for other in fields):
            continue
        key = (field, error["type"] if error["type"] == "extra_forbidden" else "")
        problems.setdefault(key, Problem(file, _message(error, known), session, field or None))
    return list(problems.values())


def _defaults_problems(
    defaults: dict[str, Any], file: str, folder: Path
) -> tuple[list[Problem], dict[str, Any]]:
    """[defaults] checked on its own (it may apply to no session), and what is left to merge."""
    if not defaults:
        return [], defaults
    # A stand-in session shows which defaults are wrong; keys it needs are not the defaults' own.
    trial = {"name": "defaults", "command": ["true"], **defaults}
    problems: list[Problem] = []
    bad: set[str] = set()
    try:
        trial["cwd"] = _session_cwd(trial.get("cwd", "."), folder)
    except ValueError as exc:
        problems.append(Problem(file, str(exc), field="defaults.cwd"))
        bad.add("cwd")
        trial["cwd"] = folder
    try:
        SessionConfig.model_validate(trial)
    except ValidationError as exc:
        problems.extend(
            p
            for p in _validation_problems(exc, file, None, _SESSION_KEYS, prefix="defaults.")
            if p.field != "defaults."  # whole-session rules (until-done) are judged per session
        )
        bad |= {str(e["loc"][0]) for e in exc.errors() if e["loc"]}
    return problems, {k: v for k, v in defaults.items() if k not in bad}


def _nul_problems(raw: dict[str, Any], file: str) -> list[Problem]:
    """Every key or text holding a NUL: no program argument, variable or path can carry one."""
    problems: list[Problem] = []
    # Iterative, not recursive: tomllib accepts nesting deeper than a walk could recurse.
    stack: list[tuple[str | None, str, Any]] = [(None, "", raw)]
    while stack:
        session, field, item = stack.pop()
        if isinstance(item, str):
            if "\x00" in item:
                problems.append(Problem(file, _NUL_MESSAGE, session, field or None))
            continue
        if isinstance(item, dict):
            children: list[tuple[Any, Any]] = list(item.items())
        elif isinstance(item, list):
            children = list(enumerate(item))
        else:
            continue
        for key, child in reversed(children):  # reversed onto the stack: file order out
            if "\x00" in str(key):
                problems.append(Problem(file, "a key " + _NUL_MESSAGE, session, field or None))
            elif session is None and field == "" and key == "session" and isinstance(child, list):
                for index, entry in reversed(list(enumerate(child))):
                    stack.append((_session_label(entry, index), "", entry))
            else:
                stack.append((session, f"{field}.{key}" if field else str(key), child))
    return problems


def _session_label(entry: Any, index: int) -> str:
    """How a problem names a [[session]]: its name, else its position."""
    name = entry.get("name") if isinstance(entry, dict) else None
    return name.replace("\x00", "\\u0000") if isinstance(name, str) else f"#{index + 1}"


_NUL_MESSAGE = (
    "contains a NUL character (\\u0000), which no program argument, environment variable or "
    "path can hold; remove it"
)


def _session_cwd(value: Any, folder: Path) -> Path | Any:
    """An absolute cwd for a text value (relative to herd.toml's folder, ~ expanded)."""
    if not isinstance(value, str):
        return value  # validation names the wrong type
    try:
        return (folder / Path(value).expanduser()).resolve()
    except RuntimeError:  # expanduser: no such user, or no home to expand ~ to
        user = value[1:].partition("/")[0]
        who = f"no user {user!r}" if user else "no home folder"
        raise ValueError(f"{value!r}: {who} to expand ~ for; write the full path") from None
    except OSError as exc:
        raise ValueError(f"{value!r}: {exc.strerror or exc}; fix the path") from None


def parse_config(text: str, path: Path) -> HerdConfig:
    """Validate herd.toml text; raise ConfigError listing every problem, one line each."""
    file = path.name
    try:
        raw = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError([Problem(file, f"not valid TOML: {exc}")]) from None
    except RecursionError:
        raise ConfigError(
            [Problem(file, "not valid TOML for herd: arrays or tables nested too deep")]
        ) from None
    nul_problems = _nul_problems(raw, file)
    if nul_problems:
        raise ConfigError(nul_problems)
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
    defaults_problems, defaults = _defaults_problems(defaults, file, path.parent)
    problems.extend(defaults_problems)
    raw_sessions = raw.get("session", [])
    if not isinstance(raw_sessions, list):
        problems.append(Problem(file, "write each session as [[session]]", field="session"))
        raw_sessions = []
    sessions: list[SessionConfig] = []
    seen: set[str] = set()
    for index, raw_session in enumerate(raw_sessions):
        if not isinstance(raw_session, dict):
            problems.append(
                Problem(
                    file,
                    f"entry {index + 1} is not a table; write each session as [[session]]",
                    field="session",
                )
            )
            continue
        label = str(raw_session.get("name", f"#{index + 1}"))
        merged = _merge(defaults, raw_session)
        try:
            merged["cwd"] = _session_cwd(merged.get("cwd", "."), path.parent)
        except ValueError as exc:
            problems.append(Problem(file, str(exc), label, "cwd"))
            continue
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
    if config is not None:
        table = price_table(config.prices)
        for session in config.sessions:
            if session.price is not None and lookup(session.price, table) is None:
                message = f"{session.price!r} is not in the price table; name a model such as "
                message += f'"claude-sonnet-4-5" or "gpt-5-codex", or add [prices.{session.price}]'
                problems.append(Problem(file, message, session.name, "price"))
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


def _folder_problem(folder: Path) -> str | None:
    """Why `folder` cannot be a session's cwd, or None when it can."""
    try:
        if folder.is_dir():
            return None
    except OSError as exc:  # a name too long, a permission denied on the way
        return f"{folder}: {exc.strerror or exc}; fix the path"
    return f"{folder} does not exist; create it or fix the path"


def _is_file(path: Path) -> bool:
    try:
        return path.is_file()
    except OSError:
        return False


def environment_problems(config: HerdConfig) -> list[Problem]:
    """Problems only the machine can show: missing folders, programs not on PATH, shared trees."""
    file = config.path.name
    problems: list[Problem] = []
    roots: dict[Path, str] = {}
    for session in config.sessions:
        cwd_problem = _folder_problem(session.cwd)
        if cwd_problem:
            problems.append(Problem(file, cwd_problem, session.name, "cwd"))
            continue
        if isinstance(session.command, list):
            program = session.command[0]
            search_path = session.env.get("PATH", os.environ.get("PATH"))
            if "/" in program:
                candidate = session.cwd / program
                found = _is_file(candidate) and os.access(candidate, os.X_OK)
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
    return problems + cost_budget_problems(config) + cluster_problems(config)


def cost_budget_problems(config: HerdConfig) -> list[Problem]:
    """Warnings for a cost budget herd cannot enforce: the agent reports no cost, has no price."""
    file = config.path.name
    table = price_table(config.prices)
    blind = [
        s
        for s in config.sessions
        if s.agent not in AGENTS_REPORTING_COST and price_for(s.agent, s.price, table) is None
    ]
    problems = [
        Problem(
            file,
            f"agent {s.agent!r} may report no cost and has no price, so this limit may never "
            "act; "
            'name one with price = "MODEL" (see [prices]) or use tokens',
            s.name,
            "budget.cost_usd",
            warning=True,
        )
        for s in blind
        if s.budget.cost_usd is not None
    ]
    if config.fleet.budget.cost_usd is not None and blind:
        names = ", ".join(s.name for s in blind)
        problems.append(
            Problem(
                file,
                f"the fleet's cost leaves out {names} (no cost reported, no price); "
                'give them price = "MODEL"',
                None,
                "fleet.budget.cost_usd",
                warning=True,
            )
        )
    return problems
