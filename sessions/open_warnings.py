"""Warnings as records with an opening and a closing, folded from the event log.

A warning event opens a record of its kind (or counts again on the open one); a later event
that settles it (a passing verification after a failing one, a new task) closes it. The store
keeps the records, so a new daemon shows the same open warnings its predecessor did.
"""

from __future__ import annotations

from collections.abc import Iterable

from pydantic import BaseModel

from agentherd.sessions.drift import DRIFT_WARNINGS
from agentherd.sessions.records import WARNING_KINDS, Event

CLOSED_BY: dict[str, frozenset[str]] = {
    "verify-failed": frozenset({"verify-passed"}),
    "rate-limited": frozenset({"run-started"}),
    "usage-backwards": frozenset({"run-started"}),
    "resume-mismatch": frozenset({"resume-checked", "task-started"}),
    **{kind.name: kind.closed_by for kind in DRIFT_WARNINGS.values() if kind.closed_by},
}
"""A warning closes when a later event of one of these kinds arrives (the report's rule too)."""

CLOSED_BY_RESUME = "resume-refused"
"""Closes at a `run-started` whose `mode` is `resume`: herd resumes the agent's session again."""

CLOSES_WHEN: dict[str, str] = {
    "verify-failed": "`verify` passes on a later checkpoint",
    "rate-limited": "the next run starts",
    "usage-backwards": "the next run starts (it counts its own figures)",
    "cost-unpriced": "the next task starts (a `[prices.MODEL]` entry and `herd up` price the "
    "model from then on)",
    "resume-refused": "a later run resumes the agent's session again (a new session id)",
    "resume-mismatch": "a later resumed run continues its stored conversation, or a new task "
    "starts",
    "plan-invalid": "the plan file reads again",
    "progress-invalid": "the progress file reads again",
    "not-a-git-repo": "git reads the session's folder (it became a repository)",
    "git-unavailable": "git reads the session's folder again (its first commit, say)",
    "notify-failed": "a later `notify` for the session runs and exits 0",
    "rescue-failed": "a later restart saves and resets the worktree",
    "budget-warning": "every dimension it warned of is under `warn_at` again (a limit raised "
    "or removed in herd.toml, then `herd up`)",
    "log-capped": "the next task starts: the dropped output is gone for good (`herd ack` it)",
    "plan-tampered": "`herd approve` or `herd reject`, or the plan matches its baseline again",
    "claims-done-but-fails": "`verify` passes on a later checkpoint",
    "stalled": "the agent writes output, a progress entry or a commit; or a run starts or the "
    "task is stopped",
    "repeated-failure": "`verify` passes on a later checkpoint, or a run ends cleanly",
    "out-of-scope": "the next task starts: the commits stay in history",
    "burn-without-progress": "a plan item flips to passing",
    "early-exit": "a plan item flips to passing",
}
"""What settles each warning kind, for people (docs/reference.md); every kind also closes when
the next task starts."""

CLOSES_ALL = frozenset({"task-started"})

CLOSED_EVENT = "warning-closed"
"""Names (in data.kind) a warning whose cause is gone; every closing writes one."""

ACKED_EVENT = "warning-acked"
"""Names (in data.kind) a warning a person acknowledged: it stays open but leaves the badge."""
"""Event kinds that close every open warning: a new task starts with a clean slate."""

_CLOSES: dict[str, frozenset[str]] = {}
for _warning, _closers in CLOSED_BY.items():
    for _closer in _closers:
        _CLOSES[_closer] = _CLOSES.get(_closer, frozenset()) | {_warning}


class WarningRecord(BaseModel):
    """One warning of a session from its first event to the event that settled it."""

    session: str
    kind: str
    opened_seq: int
    opened_at: str
    last_seq: int
    last_at: str
    message: str
    """The latest event's message: what is wrong now."""
    count: int = 1
    closed_seq: int | None = None
    closed_at: str | None = None
    acked_seq: int | None = None
    acked_at: str | None = None


def closes(
    event_kind: str, open_kinds: Iterable[str], data: dict[str, object] | None = None
) -> list[str]:
    """The open warning kinds that an event of `event_kind` (with its `data`) closes."""
    if event_kind in CLOSES_ALL:
        return list(open_kinds)
    if event_kind == CLOSED_EVENT:
        named = (data or {}).get("kind")
        return [kind for kind in open_kinds if kind == named]
    closed = _CLOSES.get(event_kind, frozenset())
    if event_kind == "run-started" and (data or {}).get("mode") == "resume":
        closed |= {CLOSED_BY_RESUME}
    return [kind for kind in open_kinds if kind in closed]


def concerns(event_kind: str) -> bool:
    """True when an event of this kind opens, counts, acknowledges or closes a warning."""
    return (
        event_kind in WARNING_KINDS
        or event_kind in _CLOSES
        or event_kind in CLOSES_ALL
        or event_kind in (CLOSED_EVENT, ACKED_EVENT)
    )


def closings(event: Event, open_kinds: Iterable[str]) -> list[str]:
    """The open warnings an event settles by the rules above (each gets a `warning-closed`)."""
    if event.kind == CLOSED_EVENT:
        return []
    return closes(event.kind, open_kinds, event.data)


def closed_event(kind: str, cause: Event, why: str | None = None) -> Event:
    """The `warning-closed` event for `kind`, settled by `cause` (or by `why`, a condition)."""
    text = why if why is not None else f"{cause.kind}: {cause.message}"
    return Event(
        at=cause.at,
        session=cause.session,
        run=cause.run,
        kind=CLOSED_EVENT,
        message=f"{kind} closed ({text[:200]})",
        data={"kind": kind, "by": cause.kind},
    )


def with_closings(events: Iterable[Event], open_kinds: Iterable[str]) -> list[Event]:
    """`events` with a `warning-closed` after each one that settles an open warning."""
    open_now = set(open_kinds)
    out: list[Event] = []
    for event in events:
        out.append(event)
        if event.kind == CLOSED_EVENT:
            open_now.discard(str(event.data.get("kind")))
            continue
        for kind in sorted(closings(event, open_now)):
            open_now.discard(kind)
            out.append(closed_event(kind, event))
        if event.kind in WARNING_KINDS:
            open_now.add(event.kind)
    return out


def fold(open_records: dict[str, WarningRecord], event: Event) -> list[WarningRecord]:
    """Apply one event to a session's open records (by kind), in place; return what changed."""
    if event.session is None or not concerns(event.kind):
        return []
    changed = []
    if event.kind == ACKED_EVENT:
        named = open_records.get(str(event.data.get("kind")))
        if named is not None and named.acked_seq is None:
            named = named.model_copy(update={"acked_seq": event.seq, "acked_at": event.at})
            open_records[named.kind] = named
            changed.append(named)
        return changed
    for kind in closes(event.kind, list(open_records), event.data):
        record = open_records.pop(kind)
        record = record.model_copy(update={"closed_seq": event.seq, "closed_at": event.at})
        changed.append(record)
    if event.kind in WARNING_KINDS:
        current = open_records.get(event.kind)
        if current is None:
            current = WarningRecord(
                session=event.session,
                kind=event.kind,
                opened_seq=event.seq,
                opened_at=event.at,
                last_seq=event.seq,
                last_at=event.at,
                message=event.message,
            )
        else:
            current = current.model_copy(
                update={
                    "last_seq": event.seq,
                    "last_at": event.at,
                    "message": event.message,
                    "count": current.count + 1,
                }
            )
        open_records[event.kind] = current
        changed.append(current)
    return changed


class WarningBook:
    """A session's open warnings, kept by its supervisor from the events it commits."""

    def __init__(self, records: Iterable[WarningRecord] = ()) -> None:
        self._open: dict[str, WarningRecord] = {r.kind: r for r in records if r.closed_seq is None}

    def take(self, event: Event) -> None:
        """Open, count or close warnings after an event was written."""
        fold(self._open, event)

    def clear(self) -> None:
        """Forget every open warning (a new task: its `task-started` event closes them)."""
        self._open.clear()

    def open(self) -> list[WarningRecord]:
        """The open warnings, oldest latest-occurrence first."""
        return sorted(self._open.values(), key=lambda r: (r.last_at, r.last_seq))

    def get(self, kind: str) -> WarningRecord | None:
        """The open warning of `kind`, or None."""
        return self._open.get(kind)

    def kinds(self) -> set[str]:
        """The kinds of the open warnings (acknowledged or not)."""
        return set(self._open)

    def is_open(self, kind: str) -> bool:
        """True while a warning of `kind` is open."""
        return kind in self._open

    def __len__(self) -> int:
        return len(self._open)


def shown(
    records: Iterable[WarningRecord], plan_error: bool, plan_tampered: bool | None
) -> list[WarningRecord]:
    """The open warnings on a person's badge: not acknowledged, a plan one only while still wrong.

    `plan_tampered` is None when no plan is known to compare (the warning then stays).
    """
    kept = []
    for record in records:
        if record.acked_seq is not None:
            continue  # acknowledged: in the event log and the report, not on the badge
        if record.kind == "plan-invalid" and not plan_error:
            continue
        if record.kind == "plan-tampered" and plan_tampered is False:
            continue
        kept.append(record)
    return kept
