"""The drift rules without a process: warning records, thresholds, completion, notify argv."""

from __future__ import annotations

import sqlite3
import typing
from pathlib import Path

import pytest

from agentherd.sessions import completion, notify
from agentherd.sessions.config import ConfigError, SessionConfig, load_config
from agentherd.sessions.drift import (
    DRIFT_KIND_NAMES,
    DRIFT_KINDS,
    FailureStreak,
    burn_without_progress,
    failure_signature,
)
from agentherd.sessions.lifecycle import Action, ExitFacts, after_exit
from agentherd.sessions.open_warnings import CLOSED_BY, WarningBook, fold, shown, with_closings
from agentherd.sessions.records import EVENT_KINDS, WARNING_KINDS, Event
from agentherd.supervisor.files.store import Change, Store
from agentherd.supervisor.session.drifting import CLOSED_BY_PROGRESS


def event(event_kind: str, seq: int = 0, **data: object) -> Event:
    """An event of session `api`; `kind=` in data names a warning (as the contract does)."""
    return Event(
        seq=seq, at=f"t{seq}", session="api", kind=event_kind, message=event_kind, data=data
    )


# ----- warnings as conditions ------------------------------------------------------------------


def test_a_warning_opens_once_counts_repeats_and_closes_by_name() -> None:
    records: dict = {}
    fold(records, event("stalled", 1))
    fold(records, event("stalled", 2))
    assert records["stalled"].count == 2 and records["stalled"].opened_seq == 1
    assert records["stalled"].last_seq == 2
    fold(records, event("warning-closed", 3, kind="verify-failed"))
    assert "stalled" in records, "a closing names its kind; others stay open"
    changed = fold(records, event("warning-closed", 4, kind="stalled"))
    assert records == {} and changed[0].closed_seq == 4


def test_an_acknowledged_warning_stays_open_but_leaves_the_badge() -> None:
    records: dict = {}
    fold(records, event("out-of-scope", 1))
    fold(records, event("stalled", 2))
    fold(records, event("warning-acked", 3, kind="out-of-scope"))
    assert records["out-of-scope"].acked_seq == 3
    badge = shown(records.values(), plan_error=False, plan_tampered=None)
    assert [r.kind for r in badge] == ["stalled"]
    fold(records, event("out-of-scope", 4))
    assert records["out-of-scope"].acked_seq == 3, "a repeat of an acknowledged cause stays acked"
    assert records["out-of-scope"].count == 2


def test_every_closing_is_written_as_a_warning_closed_event() -> None:
    events = with_closings(
        [event("verify-passed"), event("stopped"), event("task-started")],
        {"verify-failed", "stalled", "out-of-scope"},
    )
    closed = [(e.kind, e.data.get("kind"), e.data.get("by")) for e in events]
    assert closed == [
        ("verify-passed", None, None),
        ("warning-closed", "verify-failed", "verify-passed"),
        ("stopped", None, None),
        ("warning-closed", "stalled", "stopped"),  # a stop closes stalled only
        ("task-started", None, None),
        ("warning-closed", "out-of-scope", "task-started"),
    ]


def test_acknowledgements_survive_a_new_store_and_an_older_schema_is_upgraded(
    tmp_path: Path,
) -> None:
    path = tmp_path / "state.db"
    store = Store(path)
    for item in (event("stalled"), event("warning-acked", kind="stalled")):
        store.commit(Change(events=(item.model_copy(update={"seq": 0}),)))
    store.close()
    again = Store(path)
    [record] = again.open_warnings("api")
    assert record.kind == "stalled" and record.acked_seq is not None
    assert WarningBook(again.open_warnings("api")).get("stalled") is not None
    again.close()
    # A schema 2 database (no acked columns) is upgraded in place.
    db = sqlite3.connect(path)
    db.execute(
        "CREATE TABLE w2 AS SELECT session, kind, opened_seq, opened_at, last_seq, "
        "last_at, message, count, closed_seq, closed_at FROM warnings"
    )
    db.execute("DROP TABLE warnings")
    db.execute("ALTER TABLE w2 RENAME TO warnings")
    db.execute("UPDATE meta SET value='2' WHERE key='schema_version'")
    db.commit()
    db.close()
    upgraded = Store(path)
    [record] = upgraded.open_warnings("api")
    assert record.kind == "stalled" and record.acked_seq is None
    upgraded.close()


# ----- thresholds ----------------------------------------------------------------------------


def test_the_same_failure_is_known_by_its_tests_or_its_last_lines_numbers_aside() -> None:
    first = "....F\nFAILED tests/test_a.py::test_x - assert 1 == 2\n1 failed in 0.31s"
    second = "F....\nFAILED tests/test_a.py::test_x - assert 3 == 2\n1 failed in 2.70s"
    assert failure_signature(first) == failure_signature(second)
    assert failure_signature(first) != failure_signature("FAILED tests/test_b.py::test_y")
    assert failure_signature("error at 0x12 after 31s") == failure_signature(
        "error at 0x99 after 4s"
    )
    streak = FailureStreak()
    assert [streak.failed("a"), streak.failed("a"), streak.failed("b"), streak.failed("b")] == [
        1,
        2,
        1,
        2,
    ]
    streak.passed()
    assert streak.failed("b") == 1


def test_burn_without_progress_judges_only_limited_dimensions_since_the_last_flip() -> None:
    limits = {"cost_usd": 10.0, "tokens": None, "wall_time": 3600.0}
    spent = {"cost_usd": 4.0, "tokens": 9e9, "wall_time": 100.0}
    assert burn_without_progress(spent, {"cost_usd": 2.0}, limits, 0.25) is None
    assert burn_without_progress(spent, {"cost_usd": 1.0}, limits, 0.25) == ("cost_usd", 0.3)
    assert burn_without_progress(spent, {}, {"tokens": None}, 0.25) is None


def test_the_drift_table_has_its_defaults_and_refuses_nonsense(tmp_path: Path) -> None:
    path = tmp_path / "herd.toml"
    path.write_text('[[session]]\nname = "a"\ncommand = ["true"]\n')
    drift = load_config(path).sessions[0].drift
    assert (drift.repeated_failure, drift.burn_without_progress) == (3, 0.25)
    path.write_text(
        '[defaults]\ndrift = { repeated_failure = 5 }\n[[session]]\nname = "a"\n'
        'command = ["true"]\ndrift = { burn_without_progress = 0.5 }\n'
        'on_drift = { stalled = "restart", early-exit = "stop" }\n'
    )
    session = load_config(path).sessions[0]
    assert (session.drift.repeated_failure, session.drift.burn_without_progress) == (5, 0.5)
    assert session.on_drift == {"stalled": "restart", "early-exit": "stop"}
    path.write_text(
        '[[session]]\nname = "a"\ncommand = ["true"]\ndrift = { repeated_failure = 1 }\n'
    )
    with pytest.raises(ConfigError) as problem:
        load_config(path)
    assert "repeated_failure" in str(problem.value.problems[0])


# ----- completion ------------------------------------------------------------------------------


def test_completion_is_refused_for_a_removed_item_failing_items_or_no_passing_verdict() -> None:
    refusal = completion.refusal
    facts = completion.CompletionFacts
    assert refusal(facts(verify=False)) is None
    assert refusal(facts(verify=True, verified=True)) is None
    assert refusal(facts(verify=True, verified=False)) == "unverified"
    assert refusal(facts(verify=True, verified=None)) == "unverified"
    whole = facts(verify=False, plan_total=4, plan_passing=4)
    assert refusal(whole) is None
    removed = facts(verify=False, plan_total=4, plan_passing=4, plan_changes=("removed",))
    assert refusal(removed) == "plan-tampered"
    assert refusal(facts(verify=False, plan_total=4, plan_passing=3)) == "plan-incomplete"
    assert "3 of 4" in completion.describe("plan-incomplete", facts(False, None, 4, 3))


def test_a_clean_exit_with_failing_items_is_an_early_exit_and_no_completion() -> None:
    facts = ExitFacts(
        run=1,
        outcome="success",
        policy="on-failure",
        ran_s=5,
        stable_after_s=60,
        backoff_step=0,
        now_s=0,
        passing_now=1,
        plan_total=3,
        refusal="plan-incomplete",
        refusal_message="not completed: 1 of 3 plan items pass",
    )
    decision = after_exit(facts)
    assert decision.action is Action.FAIL and decision.reason == "plan-incomplete"
    assert decision.early_exit is not None and "1 of 3" in decision.early_exit
    done = after_exit(
        ExitFacts(1, "success", "on-failure", 5, 60, 0, 0, passing_now=3, plan_total=3)
    )
    assert done.action is Action.COMPLETE and done.early_exit is None
    looping = after_exit(
        ExitFacts(
            1,
            "success",
            "until-done",
            5,
            60,
            0,
            0,
            plan_all_passing=True,
            passing_now=3,
            passing_at_run_start=2,
            plan_total=3,
            refusal="unverified",
        )
    )
    assert looping.action is Action.RESTART, "until-done goes on instead of completing"


# ----- notify ----------------------------------------------------------------------------------


def test_a_malicious_message_fills_exactly_one_argv_element_literally() -> None:
    message = 'it\'s "done"; $(touch /tmp/pwned) `id` {session}\nrm -rf / #\0'
    argv = notify.fill(
        ["notify-send", "herd: {session}", "{kind}: {message}", "{handle}", "{other}"],
        notify.values("api", "stalled", message, "api/3"),
    )
    assert argv == [
        "notify-send",
        "herd: api",
        "stalled: " + message.replace("\0", " "),
        "api/3",
        "{other}",
    ]


def test_notify_runs_for_the_kinds_asked_once_per_opening() -> None:
    on = ["failed", "plan-tampered"]
    assert notify.wanted("failed", on, None, opening=True)
    assert notify.wanted("plan-tampered", on, "warn", opening=True)
    assert not notify.wanted("plan-tampered", on, "warn", opening=False), "a repeat only counts"
    assert notify.wanted("stalled", on, "notify", opening=True)
    assert not notify.wanted("stalled", on, "warn", opening=True)
    assert not notify.wanted("notify-failed", ["notify-failed"], None, opening=True)


# ----- the registry: one declaration of the drift kinds ---------------------------------------


def test_every_list_of_drift_kinds_comes_from_the_registry() -> None:
    on_drift = SessionConfig.model_fields["on_drift"].annotation
    assert typing.get_args(typing.get_args(on_drift)[0]) == DRIFT_KIND_NAMES
    for kind in DRIFT_KINDS:
        assert (kind.name in WARNING_KINDS) is kind.warning, kind.name
        assert (EVENT_KINDS.get(kind.name) == kind.meaning) is kind.warning, kind.name
        assert CLOSED_BY.get(kind.name, frozenset()) == kind.closed_by, kind.name
        assert (kind.name in CLOSED_BY_PROGRESS) is kind.closed_by_progress, kind.name
    assert len(set(DRIFT_KIND_NAMES)) == len(DRIFT_KINDS) == 8
