"""Reset times in words: what the agents' limit messages say, read into a time to wait for.

The fixtures are the pinned CLIs' own output (tests/fixtures/limits/README.md).
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path
from zoneinfo import ZoneInfo

import pytest

from agentherd.sessions.adapters import codex, gemini
from agentherd.sessions.adapters.outcomes import reset_time_in_text
from agentherd.sessions.times import parse_iso

FIXTURES = Path(__file__).parent / "fixtures" / "limits"
NOW = datetime(2026, 12, 3, 19, 52, 12, tzinfo=UTC)


@pytest.mark.parametrize(
    ("words", "wait_s"),
    [
        ("scripted Please retry in 20s.", 20),
        ("Suggested retry after 20s.", 20),
        ("Please retry in 1.5s.", 1.5),
        ("Please retry in 500ms.", 0.5),
        ("Rate limit reached ... Please try again in 120s.", 120),
        ("Please try again in 6m0s.", 360),
        ("Please try again in 1m30.5s.", 90.5),
        ("try again in 2 minutes", 120),
        ("Try again in 3 hours.", 3 * 3600),
        ("retry after 45 seconds", 45),
        ("Retry-After: 120", 120),
        ('{"retryDelay": "20s"}', 20),
    ],
)
def test_a_wait_in_words_is_read_as_a_reset_time(words: str, wait_s: float) -> None:
    found = reset_time_in_text(words, NOW)
    assert found is not None, words
    assert parse_iso(found) == NOW + timedelta(seconds=wait_s)


@pytest.mark.parametrize(
    "words",
    ["exceeded retry limit, last status: 429 Too Many Requests", "try again later", "in 20s"],
)
def test_words_without_a_wait_give_no_reset_time(words: str) -> None:
    assert reset_time_in_text(words, NOW) is None


def test_codex_clock_times_are_the_agents_local_time() -> None:
    lisbon = ZoneInfo("Europe/Lisbon")  # UTC+0 in December: 9:53 PM is 21:53Z
    today = "purchase more credits or try again at 9:53 PM."
    assert reset_time_in_text(today, NOW, lisbon) == "2026-12-03T21:53:00Z"
    tokyo = ZoneInfo("Asia/Tokyo")  # it is 04:52 on Dec 4th there: 9:53 PM is later that day
    assert reset_time_in_text(today, NOW, tokyo) == "2026-12-04T12:53:00Z"
    later = "or try again at Dec 6th, 2026 7:53 PM."
    assert reset_time_in_text(later, NOW, lisbon) == "2026-12-06T19:53:00Z"


def _fed(parser: object, name: str) -> object:
    for line in (FIXTURES / name).read_bytes().splitlines():
        parser.feed_line(line)  # type: ignore[attr-defined]
    return parser.outcome  # type: ignore[attr-defined]


def test_geminis_suggested_retry_is_its_outcomes_reset_time() -> None:
    before = datetime.now(UTC)
    outcome = _fed(gemini.GeminiParser(), "gemini-retryinfo-result.jsonl")
    assert outcome.kind == "rate-limit"  # type: ignore[attr-defined]
    resets = parse_iso(outcome.resets_at)  # type: ignore[attr-defined]
    assert resets is not None
    assert before + timedelta(seconds=19) <= resets <= datetime.now(UTC) + timedelta(seconds=21)


def test_codexs_try_again_in_is_its_outcomes_reset_time() -> None:
    before = datetime.now(UTC)
    outcome = _fed(codex.CodexParser(), "codex-try-again-in.jsonl")
    assert outcome.kind == "rate-limit"  # type: ignore[attr-defined]
    resets = parse_iso(outcome.resets_at)  # type: ignore[attr-defined]
    assert resets is not None
    assert before + timedelta(seconds=119) <= resets <= datetime.now(UTC) + timedelta(seconds=121)


def test_codexs_try_again_at_is_its_outcomes_reset_time() -> None:
    outcome = _fed(codex.CodexParser(), "codex-try-again-at.jsonl")
    assert outcome.kind == "rate-limit"  # type: ignore[attr-defined]
    assert outcome.resets_at is not None  # type: ignore[attr-defined]


def test_a_codex_limit_without_a_time_has_none() -> None:
    outcome = _fed(codex.CodexParser(), "codex-retry-limit.jsonl")
    assert outcome.kind == "rate-limit"  # type: ignore[attr-defined]
    assert outcome.resets_at is None  # type: ignore[attr-defined]


def test_gemini_retrying_a_limit_by_itself_is_waiting_on_it_until_it_prints_anything_else() -> None:
    parser = gemini.GeminiParser()
    lines = (FIXTURES / "gemini-retryinfo-result.jsonl").read_bytes().splitlines()
    for line in lines[:3]:  # init, the prompt, "Attempt 1 failed: ... Please retry in 20s."
        parser.feed_line(line)
    assert parser.limit_wait is None  # not yet: it has not said it retries
    before = datetime.now(UTC)
    parser.feed_line(lines[3])  # "Suggested retry after 20s.. Retrying after 21432ms..."
    wait = parser.limit_wait
    assert wait is not None and wait.attempt == 1
    retry_at = parse_iso(wait.retry_at)
    assert retry_at is not None
    assert before + timedelta(seconds=21) <= retry_at <= datetime.now(UTC) + timedelta(seconds=22)
    for line in lines[4:6]:  # attempt 2 failed, "Max attempts reached": still the same wait
        parser.feed_line(line)
    assert parser.limit_wait == wait
    parser.feed_line(lines[6])  # its result: no longer waiting
    assert parser.limit_wait is None


def test_gemini_retrying_a_server_error_is_not_waiting_on_a_limit() -> None:
    parser = gemini.GeminiParser()
    parser.feed_line(b"Attempt 1 failed with status 503. Retrying with backoff...")
    assert parser.limit_wait is None
    parser.feed_line(b"Attempt 2 failed with status 429. Retrying with backoff...")
    assert parser.limit_wait is not None and parser.limit_wait.retry_at is None


def test_claude_retrying_a_429_is_waiting_on_the_limit(monkeypatch: pytest.MonkeyPatch) -> None:
    from agentherd.sessions.adapters.claude import ClaudeParser

    parser = ClaudeParser()
    retry = '{"type":"system","subtype":"api_retry","attempt":%d,"max_retries":10,'
    retry += '"retry_delay_ms":%d,"error_status":%d,"error":"%s"}'
    parser.feed_line((retry % (1, 600, 529, "overloaded")).encode())
    assert parser.limit_wait is None
    parser.feed_line((retry % (2, 5000, 429, "rate_limit")).encode())
    first = parser.limit_wait
    assert first is not None and first.attempt == 2 and first.retry_at is not None
    later = datetime.now(UTC) + timedelta(seconds=5)  # `since` must stay the first retry's
    monkeypatch.setattr("agentherd.sessions.adapters.limitwait.utc_now", lambda: later)
    parser.feed_line((retry % (3, 9000, 429, "rate_limit")).encode())
    assert parser.limit_wait is not None and parser.limit_wait.since == first.since
    parser.feed_line(b'{"type":"assistant","message":{"id":"m1","content":[]}}')
    assert parser.limit_wait is None


def test_gemini_refusing_a_resume_of_a_conversation_without_answers_is_resume_refused() -> None:
    from agentherd.supervisor.process.runid import ExitInfo
    from agentherd.supervisor.session.liverun import outcome_name

    parser = gemini.GeminiParser("458ae397-f63e-4d59-b38d-c5f27a900f4b")
    _fed(parser, "gemini-resume-no-session.txt")
    # Not `exit 42` restarted into the same refusal until a crash loop: `command` runs next.
    assert outcome_name(parser.outcome, "gemini", ExitInfo(42, None)) == "resume-refused"


def test_codexs_rollout_gives_the_reset_of_the_window_it_used_up() -> None:
    from agentherd.sessions.adapters.codex_limits import read_limit_reset

    rollout = [FIXTURES / "codex-usage-limit-rollout.jsonl"]
    since = datetime(2026, 12, 3, 20, 14, 30, tzinfo=UTC)
    assert read_limit_reset(rollout, since) == "2026-12-03T20:16:34Z"  # 1796328994
    assert read_limit_reset(rollout, since + timedelta(minutes=1)) is None  # an earlier run's


def test_codex_takes_the_rollouts_reset_only_where_stdout_gave_none() -> None:
    later = b'{"type":"turn.failed","error":{"message":"You\xe2\x80\x99ve hit your usage limit. '
    later += b'Upgrade to Pro or try again later."}}'
    parser = codex.CodexParser()
    parser.feed_line(b'{"type":"thread.started","thread_id":"t-1"}')
    parser.feed_line(later)
    assert parser.outcome is not None and parser.outcome.resets_at is None
    assert parser.take_rollout_reset("2026-12-03T20:16:34Z")
    assert parser.outcome.resets_at == "2026-12-03T20:16:34Z"
    assert not parser.take_rollout_reset("2026-12-04T00:00:00Z")  # stdout's (or the first) stands
