"""The arguments each control API operation takes, checked before the operation runs.

A request is a person's or a script's input: a wrong type, a negative page size or a path where
a number belongs is a `bad-request` naming the field, never an `internal` failure inside an op.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from agentherd.supervisor.api.protocol import ApiError

MAX_INT = 2**63 - 1
"""SQLite's largest integer: sequence and run numbers are compared there."""
MAX_EVENTS_PAGE = 100_000
"""The most events one `events` reply carries; a client pages with `since` for more."""

Count = Annotated[int, Field(ge=0, le=MAX_INT)]
Number = Annotated[int, Field(ge=1, le=MAX_INT)]
Seconds = Annotated[float, Field(ge=0, allow_inf_nan=False)]
Text = Annotated[str, Field(min_length=1, max_length=4096)]


class _Args(BaseModel):
    """Exact types (no "5" for 5), no unknown fields."""

    model_config = ConfigDict(extra="forbid", strict=True, frozen=True, populate_by_name=True)


class NoArgs(_Args):
    """ls, down, shutdown, reload, info."""


class NameArgs(_Args):
    """start, pause, resume, approve, reject, report."""

    name: Text


class SubscribeArgs(_Args):
    changes: bool = False
    """A full snapshot, then only the sessions that changed (supervisor/api/statusfeed.py)."""
    patches: bool = False
    """With `changes`: of a session already sent, only the fields that changed."""


class StatusArgs(_Args):
    target: Text | None = None


class UpArgs(_Args):
    names: list[Text] | None = None


class StopArgs(_Args):
    name: Text
    kill: bool = False
    no_wait: bool = False
    reason: Literal["user", "fenced"] = "user"
    """`fenced`: the host's lease is running out (supervisor/cluster/fencing.py)."""


class RestartArgs(_Args):
    name: Text
    from_rev: Text | None = Field(default=None, alias="from")


class WaitArgs(_Args):
    target: Text
    timeout_s: Seconds | None = None


class EventsArgs(_Args):
    since: Count = 0
    session: Text | None = None
    follow: bool = False
    limit: Annotated[int, Field(ge=1, le=MAX_EVENTS_PAGE)] = 1000
    kinds: Annotated[list[Text], Field(max_length=64)] | None = None
    """Only events of these kinds (the run picker asks for the runs' starts and ends only)."""


class AckArgs(_Args):
    name: Text
    kind: Text | None = None


class LogInfoArgs(_Args):
    name: Text
    run: Number | None = None


ARGS: dict[str, type[_Args]] = {
    "ls": NoArgs,
    "status": StatusArgs,
    "start": NameArgs,
    "up": UpArgs,
    "stop": StopArgs,
    "restart": RestartArgs,
    "pause": NameArgs,
    "resume": NameArgs,
    "wait": WaitArgs,
    "events": EventsArgs,
    "subscribe": SubscribeArgs,
    "log_info": LogInfoArgs,
    "approve": NameArgs,
    "reject": NameArgs,
    "ack": AckArgs,
    "report": NameArgs,
    "spend": NameArgs,
    "down": NoArgs,
    "shutdown": NoArgs,
    "reload": NoArgs,
    "info": NoArgs,
}
"""Every operation the daemon answers after `hello`, with the model of its arguments."""

_ENVELOPE = ("id", "op")


def checked(request: dict[str, Any]) -> dict[str, Any]:
    """`request` with its arguments validated and defaults filled; ApiError bad-request if not."""
    op = request.get("op")
    model = ARGS.get(op.replace("-", "_")) if isinstance(op, str) else None
    if model is None:
        raise ApiError("bad-request", f"unknown operation {op!r}; known: {', '.join(ARGS)}")
    args = {k: v for k, v in request.items() if k not in _ENVELOPE}
    try:
        parsed = model.model_validate(args)
    except ValidationError as exc:
        raise ApiError("bad-request", f"{op}: {_describe(exc)}") from None
    return {"id": request.get("id"), "op": op, **parsed.model_dump(by_alias=True)}


def _describe(exc: ValidationError) -> str:
    """Every wrong field as `field: what is wrong (got value)`, joined in one line."""
    parts = []
    for error in exc.errors():
        field = ".".join(str(p) for p in error["loc"]) or "request"
        if error["type"] == "extra_forbidden":
            parts.append(f"{field}: unknown field")
            continue
        got = repr(error.get("input"))
        got = got if len(got) <= 60 else got[:57] + "..."
        text = str(error["msg"]).replace("Input should be", "must be")
        parts.append(f"{field}: {text} (got {got})")
    return "; ".join(parts)
