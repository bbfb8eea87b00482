"""Reading herd.toml: find it, parse it, merge [defaults], and say every problem in one line."""

from __future__ import annotations

import difflib
import os
import tomllib
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ValidationError

from agentherd.sessions import configwords
from agentherd.sessions.chain import after_problems
from agentherd.sessions.configschema import CONFIG_NAME, HerdConfig, SessionConfig
from agentherd.sessions.keynames import ACTION_IDS, TERMINAL_ACTION_IDS
from agentherd.sessions.prices import lookup, price_table, table_header
from agentherd.sessions.problems import ConfigError, Problem

TOP_KEYS = set(HerdConfig.model_fields) - {"sessions", "path"} | {"session", "defaults"}
SESSION_KEYS = set(SessionConfig.model_fields)


def find_config(explicit: str | os.PathLike[str] | None = None, start: Path | None = None) -> Path:
    """Locate herd.toml: the explicit path, else $HERD_CONFIG, else the nearest one upward."""
    chosen = explicit or os.environ.get("HERD_CONFIG")
    if chosen:
        try:
            path = Path(chosen).expanduser()
        except RuntimeError:  # no HOME and no passwd entry: `~` names no folder
            raise ConfigError(
                [Problem(str(chosen), "cannot expand ~: HOME is not set; give the full path")]
            ) from None
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


def _message(error: Any, model: type[BaseModel], session: bool) -> str:
    kind = error["type"]
    loc = error["loc"]
    if kind == "extra_forbidden":
        return configwords.unknown_key(model, loc, session)
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
        return configwords.literal(error, text)
    return text[0].lower() + text[1:] if text else kind


def _validation_problems(
    exc: ValidationError,
    file: str,
    session: str | None,
    model: type[BaseModel],
    prefix: str = "",
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
        message = _message(error, model, model is SessionConfig)
        problems.setdefault(key, Problem(file, message, session, field or None))
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
            for p in _validation_problems(exc, file, None, SessionConfig, prefix="defaults.")
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
        if key in SESSION_KEYS:  # written above every [[session]]: it is a session's key
            message = "is a session's key: write it under a [[session]], or in [defaults]"
            problems.append(Problem(file, message, field=key))
        elif key not in TOP_KEYS:
            close = difflib.get_close_matches(key, sorted(TOP_KEYS), n=1)
            hint = f'; did you mean "{close[0]}"?' if close else "; remove it"
            problems.append(Problem(file, f"unknown key{hint}", field=key))
    defaults = raw.get("defaults", {})
    if not isinstance(defaults, dict):
        problems.append(Problem(file, "must be a table: [defaults]", field="defaults"))
        defaults = {}
    for per_session in ("name", "after", "archived"):
        if per_session in defaults:
            message = f"{per_session} is per session; remove it"
            problems.append(Problem(file, message, field=f"defaults.{per_session}"))
            defaults = {k: v for k, v in defaults.items() if k != per_session}
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
            problems.extend(_validation_problems(exc, file, label, SessionConfig))
            continue
        if session.name in seen:
            problems.append(Problem(file, "another session has this name", label, "name"))
        seen.add(session.name)
        sessions.append(session)
    labels = [_session_label(entry, index) for index, entry in enumerate(raw_sessions)]
    problems.extend(after_problems(sessions, file, labels))
    top = {k: v for k, v in raw.items() if k not in ("session", "defaults")}
    try:
        config = HerdConfig.model_validate({**top, "sessions": sessions, "path": path})
    except ValidationError as exc:
        problems.extend(_validation_problems(exc, file, None, HerdConfig))
        config = None
    if config is not None:
        for action in config.keys:
            if action.replace("_", "-") not in (*ACTION_IDS, *TERMINAL_ACTION_IDS):
                close = difflib.get_close_matches(action.replace("_", "-"), ACTION_IDS, n=1)
                hint = f'did you mean "{close[0]}"?' if close else f"known: {', '.join(ACTION_IDS)}"
                problems.append(Problem(file, f"no such action; {hint}", field=f"keys.{action}"))
        table = price_table(config.prices)
        for session in config.sessions:
            if session.price is not None and lookup(session.price, table) is None:
                message = f"{session.price!r} is not in the price table; name a model such as "
                message += (
                    f'"claude-sonnet-4-5" or "gpt-5-codex", or add {table_header(session.price)}'
                )
                problems.append(Problem(file, message, session.name, "price"))
    if problems or config is None:
        raise ConfigError(problems, partial=config)
    return config


def load_config(path: Path) -> HerdConfig:
    """Read and validate herd.toml at `path`."""
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError([Problem(str(path), f"cannot read: {exc}")]) from None
    return parse_config(text, path.resolve())
