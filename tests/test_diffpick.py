"""Which two trees `herd diff` compares: pure choices over a session's checkpoints."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from agentherd.sessions.checkpoint import Checkpoint
from agentherd.sessions.diffpick import PickError, pick

AT = datetime(2026, 12, 4, tzinfo=UTC)


def _checkpoints(*verdicts: bool | None) -> list[Checkpoint]:
    return [
        Checkpoint(sha=f"{n:x}" * 40, at=AT, subject=f"c{n}", verified=v)
        for n, v in enumerate(verdicts, start=10)
    ]


def test_the_latest_against_the_one_before_and_the_first_against_its_parent() -> None:
    found = _checkpoints(True, None, False)
    latest = pick(found, None, "previous", work=False)
    assert (latest.head, latest.base) == (found[2].sha, found[1].sha)
    first = pick(found, found[0].sha[:6], "previous", work=False)
    assert (first.head, first.base, first.parent_of) == (found[0].sha, None, found[0].sha)


def test_against_verified_skips_failed_and_unknown_verdicts() -> None:
    found = _checkpoints(True, None, False, None)
    chosen = pick(found, None, "verified", work=False)
    assert chosen.base == found[0].sha
    assert chosen.label == f"verified checkpoint {found[0].short_sha}"
    none_yet = pick(_checkpoints(None, False), None, "verified", work=False)
    assert none_yet.base is None and "no checkpoint before it is verified" in none_yet.label
    work = pick(found, None, "verified", work=True)
    assert (work.head, work.base) == (None, found[0].sha)
    assert pick([], None, "previous", work=True).base == "HEAD"


def test_unknown_ambiguous_and_too_short_names_are_refused() -> None:
    found = [
        Checkpoint(sha="abcd1" + "0" * 35, at=AT, subject="a"),
        Checkpoint(sha="abcd2" + "0" * 35, at=AT, subject="b"),
    ]
    with pytest.raises(PickError, match="ambiguous"):
        pick(found, "abcd", "previous", work=False)
    with pytest.raises(PickError, match="no checkpoint 'abc' in this session"):
        pick(found, "abc", "previous", work=False)
    with pytest.raises(PickError, match="no checkpoints yet"):
        pick([], None, "previous", work=False)
