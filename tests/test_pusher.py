"""The checkpoint pusher of a cluster host (supervisor/cluster/pusher.py) on real repositories:
the owner of a session pushes over a late push of the host that lost it, and a push that
failed, or that nobody could say was allowed, is tried again (a run's last checkpoint has no
next one to carry it)."""

from __future__ import annotations

import logging
import queue
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from conftest import git, wait_until

from agentherd.supervisor.cluster import worksync
from agentherd.supervisor.cluster.pusher import GIVE_UP_AFTER, CheckpointPusher

LAST = worksync.session_ref("job", "last")


def commit(repo: Path, name: str) -> str:
    (repo / name).write_text(name)
    git(repo, "add", name)
    git(repo, "commit", "-q", "-m", name)
    return git(repo, "rev-parse", "HEAD").strip()


def remote_sha(bare: Path, ref: str) -> str | None:
    found = subprocess.run(
        ["git", "rev-parse", "-q", "--verify", ref], cwd=bare, capture_output=True, text=True
    )
    return found.stdout.strip() or None


class Feed:
    """The daemon's event stream, fed by the test: `checkpoint(sha)` is one more event."""

    def __init__(self) -> None:
        self.items: queue.Queue[dict[str, Any] | None] = queue.Queue()
        self.seq = 0

    def checkpoint(self, sha: str) -> None:
        self.seq += 1
        self.items.put(
            {"seq": self.seq, "session": "job", "kind": "checkpoint", "data": {"sha": sha}}
        )

    def events(self, _since: int) -> Iterator[dict[str, Any]]:
        return iter(self.items.get, None)


@pytest.fixture
def feed() -> Iterator[Feed]:
    made = Feed()
    yield made
    made.items.put(None)


def pusher_for(
    repo: Path, remote: Path, feed: Feed, may_push: Callable[[str], bool] | None = None
) -> CheckpointPusher:
    return CheckpointPusher(
        str(remote), "h2", lambda _s: repo, feed.events, lambda _since: [], may_push, retry_s=0.05
    )


@pytest.fixture
def hosts(tmp_path: Path) -> tuple[Path, Path, Path]:
    """A bare remote, h1 that ran the session, and h2 that holds it now: both at its `last`."""
    bare, first, owner = tmp_path / "remote.git", tmp_path / "h1", tmp_path / "h2"
    git(tmp_path, "init", "-q", "--bare", str(bare))
    first.mkdir()
    git(first, "init", "-q")
    worksync.push(first, str(bare), commit(first, "a"), LAST, None, 30)
    owner.mkdir()
    assert worksync.sync_worktree(owner, str(bare), "job", "last") is not None
    return bare, first, owner


def test_a_late_push_of_the_host_that_lost_the_session_does_not_block_its_owner(
    hosts: tuple[Path, Path, Path], feed: Feed
) -> None:
    bare, first, owner = hosts
    before = remote_sha(bare, LAST)
    assert before is not None
    pusher = pusher_for(owner, bare, feed)
    pusher.saw(LAST, before)  # as a move does: the owner synced from `before`
    late = commit(first, "b")  # h1 frozen in its push: it lands once h2 has the session
    worksync.push(first, str(bare), late, LAST, before, 30)
    pusher.start()
    try:
        for step in ("c", "d"):
            sha = commit(owner, step)
            feed.checkpoint(sha)
            wait_until(lambda sha=sha: remote_sha(bare, LAST) == sha, 30, f"step {step} pushed")
        wait_until(lambda: pusher.pushed == 2, 30, "the pushes to end")  # git exited
    finally:
        pusher.stop()
    assert (pusher.displaced, pusher.failed) == (1, 0)
    assert remote_sha(bare, f"refs/herd/job/hosts/h2/displaced/{late[:12]}") == late


def test_a_push_nobody_could_allow_or_that_failed_is_tried_again(
    tmp_path: Path, hosts: tuple[Path, Path, Path], feed: Feed
) -> None:
    bare, _, owner = hosts
    answers = [OSError("the database is away"), True]

    def may_push(_session: str) -> bool:
        answer = answers.pop(0) if len(answers) > 1 else answers[0]
        if isinstance(answer, Exception):
            raise answer
        return answer

    pusher = pusher_for(owner, bare, feed, may_push)
    pusher.start()
    try:
        last = commit(owner, "b")  # the run's last checkpoint: no next one carries it
        feed.checkpoint(last)
        wait_until(lambda: pusher.pushed == 1, 30, "the push asked again")
        assert answers == [True] and remote_sha(bare, LAST) == last
        moved = tmp_path / "moved.git"
        bare.rename(moved)  # the remote is away when the next push comes
        after = commit(owner, "c")
        feed.checkpoint(after)
        wait_until(lambda: pusher.failed >= 1, 30, "a failed push")
        moved.rename(bare)
        wait_until(lambda: remote_sha(bare, LAST) == after, 30, "the failed push tried again")
        wait_until(lambda: pusher.pushed == 2, 30, "the push to end")  # git exited
    finally:
        pusher.stop()


def test_a_push_git_keeps_refusing_is_given_up(
    hosts: tuple[Path, Path, Path], feed: Feed, caplog: pytest.LogCaptureFixture
) -> None:
    bare, first, owner = hosts
    pusher = pusher_for(owner, bare, feed)
    ahead = commit(first, "b")
    worksync.push(first, str(bare), ahead, LAST, None, 30)
    caplog.set_level(logging.WARNING)
    pusher.start()
    try:
        feed.checkpoint(
            git(owner, "rev-parse", "HEAD").strip()
        )  # behind the remote, no lease known
        wait_until(lambda: "given up" in caplog.text, 30, "the push given up")
    finally:
        pusher.stop()
    assert pusher.failed == GIVE_UP_AFTER and remote_sha(bare, LAST) == ahead


def test_a_newer_checkpoint_is_pushed_at_once_not_after_the_failed_ones_wait(
    tmp_path: Path, hosts: tuple[Path, Path, Path], feed: Feed
) -> None:
    bare, _, owner = hosts
    pusher = CheckpointPusher(
        str(bare), "h2", lambda _s: owner, feed.events, lambda _since: [], None, retry_s=3600
    )
    moved = tmp_path / "moved.git"
    bare.rename(moved)
    pusher.start()
    try:
        feed.checkpoint(commit(owner, "b"))
        wait_until(lambda: pusher.failed == 1, 30, "a failed push (then an hour's wait)")
        moved.rename(bare)
        newer = commit(owner, "c")
        feed.checkpoint(newer)
        wait_until(lambda: pusher.pushed == 1, 30, "the newer checkpoint's push")
    finally:
        pusher.stop()
    assert remote_sha(bare, LAST) == newer
