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
MAX_MESSAGE_CHARS = 65_536
"""The longest `herd send` text: a prompt, not a file (it travels in the agent's argv)."""


class _Args(BaseModel):
    """Exact types (no "5" for 5), no unknown fields."""

    # Built at a request's first use of it: a daemon's start needs few of them (~6 ms of CPU).
    model_config = ConfigDict(
        extra="forbid", strict=True, frozen=True, populate_by_name=True, defer_build=True
    )


class NoArgs(_Args):
    """down, shutdown, reload, info."""


class NameArgs(_Args):
    """start, pause, resume, approve, reject, report."""

    name: Text


class StartArgs(_Args):
    name: Text
    now: bool = False
    """Start at once, not queued behind the session's `after` sessions."""


class SubscribeArgs(_Args):
    changes: bool = False
    """A full snapshot, then only the sessions that changed (supervisor/api/statusfeed.py)."""
    patches: bool = False
    """With `changes`: of a session already sent, only the fields that changed."""


class ListArgs(_Args):
    """ls; `status` without a target."""

    printed: bool = False
    """The statuses as one text, indented as `--json` prints them (tui/cli/fastpath.py)."""
    archived: bool = True
    """With `printed`: archived sessions too (`ls` leaves them out)."""


class StatusArgs(ListArgs):
    target: Text | None = None


class UpArgs(_Args):
    names: list[Text] | None = None


class StopArgs(_Args):
    name: Text
    kill: bool = False
    no_wait: bool = False
    reason: Literal["user", "fenced", "host-lost"] = "user"
    """`fenced`: the host's lease is running out; `host-lost`: the host is shutting down
    (SIGTERM) and its tasks move on (supervisor/cluster/fencing.py)."""


class RestartArgs(_Args):
    name: Text
    from_rev: Text | None = Field(default=None, alias="from")


class WaitArgs(_Args):
    target: Text
    timeout_s: Seconds | None = None
    until: Annotated[list[Text], Field(min_length=1, max_length=32)] | None = None
    """Wait for the session to be in one of these states instead of for the task's end."""


class SendArgs(_Args):
    name: Text
    text: Annotated[str, Field(min_length=1, max_length=MAX_MESSAGE_CHARS)]
    wait: bool = False
    """Answer once the run that took the message (or an interactive agent's turn) ended."""
    timeout_s: Seconds | None = None
    """With `wait`: answer (run_outcome `timeout`) after this long at most."""


class EventsArgs(_Args):
    since: Count = 0
    session: Text | None = None
    follow: bool = False
    limit: Annotated[int, Field(ge=1, le=MAX_EVENTS_PAGE)] = 1000
    kinds: Annotated[list[Text], Field(max_length=64)] | None = None
    """Only events of these kinds (the run picker asks for the runs' starts and ends only)."""


class AnswerArgs(_Args):
    """approve, reject: the session, and who answered from where (herd web says)."""

    name: Text
    by: Text | None = None
    origin: Text | None = None
    link: Text | None = None
    """A notification's approval link: the answer is refused unless it is good, and spends it."""


class LinkOkArgs(_Args):
    name: Text
    token: Text


class AckArgs(_Args):
    name: Text
    kind: Text | None = None


Argument = str | int | float | bool | list[str] | None
"""One argument of a recorded MCP call, as its client sent it (after its schema's check)."""


class McpCallArgs(_Args):
    """A tool call of `herd mcp`, recorded in the event log before it is made."""

    tool: Annotated[str, Field(min_length=1, max_length=64)]
    about: Text | None = None
    """The session the call names: the event is that session's when the caller may see it."""
    arguments: Annotated[dict[str, Argument], Field(max_length=16)] = Field(default_factory=dict)


class LogInfoArgs(_Args):
    name: Text
    run: Number | None = None


class DiffArgs(_Args):
    """What a checkpoint (or the uncommitted work) changed; a file's text, or every text."""

    name: Text
    checkpoint: Text | None = None
    against: Literal["previous", "verified"] = "previous"
    work: bool = False
    file: Text | None = None
    texts: bool = False


class TerminalWriterArgs(_Args):
    """An attach began typing into a run's terminal: who, for the event log."""

    name: Text
    run: Number
    pid: Number | None = None
    tty: Text | None = None


ARGS: dict[str, type[_Args]] = {
    "ls": ListArgs,
    "status": StatusArgs,
    "start": StartArgs,
    "up": UpArgs,
    "stop": StopArgs,
    "restart": RestartArgs,
    "pause": NameArgs,
    "resume": NameArgs,
    "wait": WaitArgs,
    "send": SendArgs,
    "events": EventsArgs,
    "subscribe": SubscribeArgs,
    "log_info": LogInfoArgs,
    "approve": AnswerArgs,
    "reject": AnswerArgs,
    "link_ok": LinkOkArgs,
    "ack": AckArgs,
    "report": NameArgs,
    "spend": NameArgs,
    "diff": DiffArgs,
    "down": NoArgs,
    "shutdown": NoArgs,
    "reload": NoArgs,
    "info": NoArgs,
    "terminal_writer": TerminalWriterArgs,
    "mcp_call": McpCallArgs,
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
