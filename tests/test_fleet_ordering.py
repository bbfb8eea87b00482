"""How the fleet view orders and filters sessions (pure functions; no daemon needed)."""

from __future__ import annotations

from snapshot_fleet import statuses

from agentherd.tui.dashboard.ordering import matches, shown, sort_statuses
from agentherd.tui.dashboard.rows import uptime_cell


def names(found: list) -> list[str]:
    return [s.session for s in found]


def test_needs_a_person_puts_failed_then_warnings_first() -> None:
    ordered = names(sort_statuses(statuses(), "attention"))
    assert ordered[0] == "billing-export"  # failed
    assert set(ordered[1:3]) == {"mobile-sync", "search-index"}  # open warnings
    assert ordered[3:] == sorted(ordered[3:]), "the rest by name"


def test_filter_words_match_name_state_and_warning_kind_and_bang_needs_a_person() -> None:
    fleet = statuses()
    assert names(shown(fleet, "session", "stall")) == ["search-index"]
    assert names(shown(fleet, "session", "completed")) == ["docs-site"]
    assert names(shown(fleet, "session", "running sync")) == ["mobile-sync"]
    assert names(shown(fleet, "session", "!")) == [
        "billing-export",
        "mobile-sync",
        "search-index",
    ]
    assert not [s for s in fleet if matches(s, "no-such-word")]


def test_uptime_cell_changes_at_most_once_a_minute_after_the_first() -> None:
    from datetime import UTC, datetime, timedelta

    def at(seconds: float) -> str:
        moment = datetime.now(UTC) - timedelta(seconds=seconds)
        return moment.strftime("%Y-%m-%dT%H:%M:%S.%fZ")

    base = statuses()[0]
    shown_as = [uptime_cell(base.model_copy(update={"started_at": at(s)})) for s in (30, 125, 7300)]
    assert shown_as == ["30s", "2m", "2h01m"]
    assert uptime_cell(base.model_copy(update={"pid": None})) == "-"


def test_an_agent_waiting_for_input_needs_a_person_right_after_failures() -> None:
    fleet = statuses()
    idle = next(s for s in fleet if s.state == "running" and not s.warnings)
    waiting = idle.model_copy(update={"state": "waiting-input"})
    fleet = [waiting if s is idle else s for s in fleet]
    ordered = names(sort_statuses(fleet, "attention"))
    assert ordered[:2] == ["billing-export", waiting.session]
    assert waiting.session in names(shown(fleet, "session", "!"))
