"""The git side of moving work (supervisor/cluster/worksync.py), on real repositories: a bare
remote, the host that ran the session, and the host that takes it over."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from agentherd.supervisor.cluster import worksync
from agentherd.supervisor.git.gitproc import GitError

IDENTITY = ["-c", "user.name=agent", "-c", "user.email=agent@example.com"]


def git(cwd: Path, *args: str) -> str:
    return subprocess.run(
        ["git", *IDENTITY, *args], cwd=cwd, check=True, capture_output=True, text=True
    ).stdout.strip()


def commit(repo: Path, name: str) -> str:
    (repo / name).write_text(name)
    git(repo, "add", name)
    git(repo, "commit", "-q", "-m", name)
    return git(repo, "rev-parse", "HEAD")


@pytest.fixture
def remote(tmp_path: Path) -> Path:
    bare = tmp_path / "remote.git"
    git(tmp_path, "init", "-q", "--bare", str(bare))
    return bare


@pytest.fixture
def first(tmp_path: Path) -> Path:
    repo = tmp_path / "h1"
    repo.mkdir()
    git(repo, "init", "-q")
    commit(repo, "a")
    return repo


def owned() -> bool:
    return True


def push(repo: Path, remote: Path, sha: str, kind: str, lease: str | None = None) -> None:
    worksync.push(repo, str(remote), sha, worksync.session_ref("job", kind), lease, 30)


def test_a_push_with_a_stale_lease_never_moves_the_sessions_last_back(
    first: Path, remote: Path
) -> None:
    one = commit(first, "b")
    push(first, remote, one, "last")
    two = commit(first, "c")
    push(first, remote, two, "last", lease=one)  # the host's own next checkpoint
    with pytest.raises(GitError, match="push"):
        push(first, remote, one, "last", lease=one)  # a late push from a fenced host
    assert git(remote, "rev-parse", "refs/herd/job/last") == two
    git(first, "reset", "-q", "--hard", one)  # a reset to an earlier checkpoint, by its owner
    push(first, remote, one, "last", lease=two)
    assert git(remote, "rev-parse", "refs/herd/job/last") == one


def test_an_empty_folder_is_made_a_repository_at_the_last_checkpoint(
    tmp_path: Path, first: Path, remote: Path
) -> None:
    last = commit(first, "b")
    push(first, remote, last, "last")
    moved = tmp_path / "h2"
    moved.mkdir()
    synced = worksync.sync_worktree(moved, str(remote), "job", "last")
    assert synced is not None and (synced.sha, synced.created) == (last, True)
    assert git(moved, "rev-parse", "HEAD") == last
    assert (moved / "b").read_text() == "b"
    assert worksync.sync_worktree(moved, str(remote), "job", "last") is None  # holds it now
    assert worksync.sync_worktree(first, str(remote), "job", "last") is None  # never left it


def test_a_stale_worktree_is_rescued_then_reset_to_the_last_verified_checkpoint(
    tmp_path: Path, first: Path, remote: Path
) -> None:
    stale = tmp_path / "h2"
    git(tmp_path, "clone", "-q", str(first), str(stale))
    verified = commit(first, "b")
    last = commit(first, "c")
    push(first, remote, verified, "verified")
    push(first, remote, last, "last")
    (stale / "notes.txt").write_text("h2's own edit")
    synced = worksync.sync_worktree(stale, str(remote), "job", "verified")
    assert synced is not None and (synced.sha, synced.last) == (verified, last)
    assert git(stale, "rev-parse", "HEAD") == verified
    assert not (stale / "notes.txt").exists()
    assert synced.rescued == "refs/herd/job/rescue/before-move"
    assert git(stale, "show", f"{synced.rescued}:notes.txt") == "h2's own edit"
    assert git(stale, "rev-parse", "refs/herd/job/remote/last") == last  # fetched, kept


def test_nothing_is_fetched_for_a_session_never_pushed(tmp_path: Path, remote: Path) -> None:
    empty = tmp_path / "h2"
    empty.mkdir()
    assert worksync.sync_worktree(empty, str(remote), "job", "last") is None
    assert list(empty.iterdir()) == []


def test_a_folder_with_files_but_no_repository_is_left_alone(
    tmp_path: Path, first: Path, remote: Path
) -> None:
    push(first, remote, git(first, "rev-parse", "HEAD"), "last")
    folder = tmp_path / "h2"
    folder.mkdir()
    (folder / "mine.txt").write_text("a person's file")
    with pytest.raises(GitError, match="not a git repository and not empty"):
        worksync.sync_worktree(folder, str(remote), "job", "last")
    assert [p.name for p in folder.iterdir()] == ["mine.txt"]


def test_the_owner_pushes_over_a_late_push_of_the_host_that_lost_the_session_and_keeps_it(
    tmp_path: Path, first: Path, remote: Path
) -> None:
    before = commit(first, "b")
    push(first, remote, before, "last")
    owner = tmp_path / "h2"
    owner.mkdir()
    synced = worksync.sync_worktree(owner, str(remote), "job", "last")
    assert synced is not None and synced.last == before
    late = commit(first, "c")  # h1 was frozen in its push: it lands after h2 took the session
    push(first, remote, late, "last", lease=before)
    mine = commit(owner, "d")
    last = worksync.session_ref("job", "last")
    assert git(remote, "rev-parse", "refs/herd/job/last") == late
    with pytest.raises(GitError, match="push"):  # no longer the owner when asked again
        worksync.push_over(owner, str(remote), "h2", mine, last, before, lambda: False, 30)
    assert git(remote, "rev-parse", "refs/herd/job/last") == late
    displaced = worksync.push_over(owner, str(remote), "h2", mine, last, before, lambda: True, 30)
    assert displaced == late
    assert git(remote, "rev-parse", "refs/herd/job/last") == mine
    assert git(remote, "rev-parse", f"refs/herd/job/hosts/h2/displaced/{late[:12]}") == late
    after = commit(owner, "e")  # and its next push names what it pushed: no takeover
    assert worksync.push_over(owner, str(remote), "h2", after, last, mine, owned, 30) is None
    assert git(remote, "rev-parse", "refs/herd/job/last") == after


def test_a_push_over_that_fails_for_another_reason_than_a_moved_ref_raises(
    tmp_path: Path, first: Path, remote: Path
) -> None:
    sha = git(first, "rev-parse", "HEAD")
    push(first, remote, sha, "last")
    last = worksync.session_ref("job", "last")
    with pytest.raises(GitError, match="push"):  # the remote holds the lease: not moved
        worksync.push_over(first, str(remote), "h1", "1" * 40, last, sha, owned, 30)
    with pytest.raises(GitError, match="fetch|push"):
        worksync.push_over(first, str(tmp_path / "gone.git"), "h1", sha, last, sha, owned, 30)
    assert git(remote, "rev-parse", "refs/herd/job/last") == sha
