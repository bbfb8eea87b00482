"""Warnings as records with an opening and a closing, folded from the event log.

A warning event opens a record of its kind (or counts again on the open one); a later event
that settles it (a passing verification after a failing one, a new task) closes it. The store
keeps the records, so a new daemon shows the same open warnings its predecessor did.
"""

from __future__ import annotations

from collections.abc import Iterable

from pydantic import BaseModel

from agentherd.sessions.records import WARNING_KINDS, Event

CLOSED_BY: dict[str, frozenset[str]] = {
    "verify-failed": frozenset({"verify-passed"}),
    "claims-done-but-fails": frozenset({"verify-passed"}),
    "repeated-failure": frozenset({"verify-passed"}),
    "stalled": frozenset({"checkpoint", "run-started"}),
    "rate-limited": frozenset({"run-started"}),
    "plan-tampered": frozenset({"plan-approved", "plan-rejected"}),
}
"""A warning closes when a later event of one of these kinds arrives (the report's rule too)."""

CLOSES_ALL = frozenset({"task-started"})
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


def closes(event_kind: str, open_kinds: Iterable[str]) -> list[str]:
    """The open warning kinds that an event of `event_kind` closes."""
    if event_kind in CLOSES_ALL:
        return list(open_kinds)
    closed = _CLOSES.get(event_kind, frozenset())
    return [kind for kind in open_kinds if kind in closed]


def concerns(event_kind: str) -> bool:
    """True when an event of this kind opens, counts or closes a warning."""
    return event_kind in WARNING_KINDS or event_kind in _CLOSES or event_kind in CLOSES_ALL


def fold(open_records: dict[str, WarningRecord], event: Event) -> list[WarningRecord]:
    """Apply one event to a session's open records (by kind), in place; return what changed."""
    if event.session is None or not concerns(event.kind):
        return []
    changed = []
    for kind in closes(event.kind, list(open_records)):
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

    def __len__(self) -> int:
        return len(self._open)


def shown(
    records: Iterable[WarningRecord], plan_error: bool, plan_tampered: bool | None
) -> list[WarningRecord]:
    """The open warnings a person is shown: a plan warning only while the plan is still wrong.

    `plan_tampered` is None when no plan is known to compare (the warning then stays).
    """
    kept = []
    for record in records:
        if record.kind == "plan-invalid" and not plan_error:
            continue
        if record.kind == "plan-tampered" and plan_tampered is False:
            continue
        kept.append(record)
    return kept
