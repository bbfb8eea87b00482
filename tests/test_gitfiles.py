"""Git facts read from `.git` agree with git's own answers, and the rescue runs few processes."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import git, make_repo

from agentherd.supervisor.git import gitfiles, gitops
from agentherd.supervisor.git.gitproc import subcommand


def rev(repo: Path, name: str) -> str:
    return git(repo, "rev-parse", name).strip()


def test_paths_agree_with_git_in_a_repo_its_subfolder_and_a_linked_worktree(
    tmp_path: Path,
) -> None:
    repo = make_repo(tmp_path / "repo")
    (repo / "sub" / "deeper").mkdir(parents=True)
    linked = tmp_path / "linked"
    git(repo, "worktree", "add", "-q", "-b", "side", str(linked))
    for where in (repo, repo / "sub" / "deeper", linked):
        assert gitfiles.find_paths(where) == gitops.git_paths(where)


def test_paths_are_left_to_git_for_a_bare_repo_and_a_folder_outside(tmp_path: Path) -> None:
    bare = tmp_path / "bare.git"
    subprocess.run(["git", "init", "-q", "--bare", str(bare)], check=True)
    assert gitfiles.find_paths(bare) is None
    assert gitfiles.find_paths(tmp_path / "nowhere") is None
    assert not gitops.is_git_repo(bare)
    assert not gitops.is_git_repo(tmp_path)


def test_head_read_from_loose_refs_packed_refs_and_detached(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo")
    paths = gitops.git_paths(repo)
    assert gitfiles.head_sha(paths) == rev(repo, "HEAD")
    git(repo, "pack-refs", "--all")
    assert not (repo / ".git" / "refs" / "heads" / "main").exists()
    assert gitfiles.head_sha(paths) == rev(repo, "HEAD")
    git(repo, "commit", "-q", "--allow-empty", "-m", "two")
    git(repo, "checkout", "-q", "--detach", "HEAD~1")
    assert gitfiles.head_sha(paths) == rev(repo, "HEAD")
    assert gitops.head_sha(repo) == rev(repo, "HEAD")


def test_head_before_the_first_commit_is_none(tmp_path: Path) -> None:
    repo = tmp_path / "empty"
    repo.mkdir()
    git(repo, "init", "-q", "-b", "main")
    assert gitfiles.head_sha(gitops.git_paths(repo)) is None
    assert gitops.head_sha(repo) is None


def test_the_logged_head_follows_commits_resets_and_checkouts(tmp_path: Path) -> None:
    """The last entry of `logs/HEAD` names HEAD after each move; a line longer than what is
    read, or no log, says nothing."""
    repo = make_repo(tmp_path / "repo")
    paths = gitfiles.find_paths(repo)
    assert paths is not None
    assert gitfiles.logged_head(paths) == rev(repo, "HEAD")
    first = rev(repo, "HEAD")
    git(repo, "commit", "-q", "--allow-empty", "-m", "x" * (2 * gitfiles.LOG_TAIL_BYTES))
    assert gitfiles.logged_head(paths) is None  # its message outgrew the tail read
    git(repo, "commit", "-q", "--allow-empty", "-m", "second")
    assert gitfiles.logged_head(paths) == rev(repo, "HEAD")
    git(repo, "reset", "-q", "--hard", first)
    assert gitfiles.logged_head(paths) == first
    git(repo, "checkout", "-q", "--detach", "HEAD")
    assert gitfiles.logged_head(paths) == first
    paths.head_log.unlink()
    assert gitfiles.logged_head(paths) is None


def test_commit_tree_from_a_loose_object_and_unknown_once_packed(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo")
    paths = gitops.git_paths(repo)
    head = rev(repo, "HEAD")
    assert gitfiles.commit_tree(paths, head) == rev(repo, "HEAD^{tree}")
    assert gitfiles.commit_tree(paths, rev(repo, "HEAD^{tree}")) == gitfiles.UNKNOWN  # a tree
    git(repo, "gc", "-q")
    assert gitfiles.commit_tree(paths, head) == gitfiles.UNKNOWN
    (repo / "new.txt").write_text("work\n")  # the rescue then asks git for the tree
    saved = gitops.save_rescue(repo, "refs/herd/a/rescue/1", "rescue")
    assert saved is not None and rev(repo, f"{saved.sha}^") == head


def test_existing_rescue_refs_are_seen_loose_and_packed(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo")
    paths = gitops.git_paths(repo)
    ref = "refs/herd/a/rescue/1"
    assert gitfiles.no_ref_like(paths, ref)
    git(repo, "update-ref", f"{ref}.2", "HEAD")
    assert not gitfiles.no_ref_like(paths, ref)
    git(repo, "pack-refs", "--all")
    assert not gitfiles.no_ref_like(paths, ref)
    assert gitfiles.no_ref_like(paths, "refs/herd/a/rescue/2")
    (repo / "new.txt").write_text("work\n")
    saved = gitops.save_rescue(repo, ref, "rescue")
    assert saved is not None and saved.ref == ref and saved.earlier == (f"{ref}.2",)


@pytest.mark.parametrize(
    "name",
    ["refs/herd/api/rescue/3", "refs/herd/a.b/rescue/1", "refs/herd/x/.hidden", "refs/a.lock/b"],
)
def test_ref_names_accepted_without_git_are_ones_git_accepts(tmp_path: Path, name: str) -> None:
    repo = make_repo(tmp_path / "repo")
    git_says = subprocess.run(["git", "check-ref-format", name], cwd=repo).returncode == 0
    assert not gitfiles.valid_ref_name(name) or git_says


def test_a_dirty_crash_rescue_and_reset_run_seven_git_processes(tmp_path: Path) -> None:
    """Rescue, keep and reset of a dirty tree at its last checkpoint, as a crash's restart does:
    fifteen git processes before the reads from .git, six with them (add, write-tree,
    commit-tree, update-ref, reset, clean). The commit is git's own: writing it by hand saved
    a process but not 20 % of crash -> relaunch p95 (bench/rescue_commit.py). One more since
    the rescue holds all the reset removes (issue 22): the list of what the target lacks (the
    clean removes only that: `ls-files` lists what `clean` removed). The index's own tree and
    a refresh for assumed-unchanged edits are read from the index file when it is plain."""
    repo = make_repo(tmp_path / "repo")
    shim, log = tmp_path / "bin", tmp_path / "git.log"
    shim.mkdir()
    real_git = subprocess.run(["which", "git"], capture_output=True, text=True).stdout.strip()
    (shim / "git").write_text(f'#!/bin/sh\necho "$@" >> {log}\nexec {real_git} "$@"\n')
    (shim / "git").chmod(0o755)
    (repo / "README.md").write_text("changed\n")
    (repo / "untracked.txt").write_text("new\n")
    head = rev(repo, "HEAD")
    code = (
        "import sys; from pathlib import Path; from agentherd.supervisor.git import gitops\n"
        "repo = Path(sys.argv[1])\n"
        "assert gitops.is_git_repo(repo)\n"
        "rescued = gitops.rescue(repo, 'refs/herd/a/rescue/1', 'rescue')\n"
        "target = gitops.head_sha(repo)\n"
        "assert gitops.keep_head(repo, 'refs/herd/a/before-reset/1', target) is None\n"
        "gitops.reset_worktree(repo, target, rescued=rescued)\n"
        "print(rescued.saved.sha)\n"
    )
    env = {**os.environ, "PATH": f"{shim}{os.pathsep}{os.environ['PATH']}"}
    # No config of this machine's user: the test sees git's defaults.
    env |= {"HOME": str(tmp_path), "XDG_CONFIG_HOME": str(tmp_path), "GIT_CONFIG_NOSYSTEM": "1"}
    out = subprocess.run(
        [sys.executable, "-c", code, str(repo)], env=env, check=True, capture_output=True, text=True
    )
    rescued = out.stdout.strip()
    assert git(repo, "show", f"{rescued}:untracked.txt") == "new\n"
    assert (repo / "README.md").read_text() == "hello\n"
    assert not (repo / "untracked.txt").exists()
    assert rev(repo, "HEAD") == head
    commands = [subcommand(["git", *line.split()]) for line in log.read_text().splitlines()]
    assert commands == [
        "add",
        "diff-index",
        "write-tree",
        "commit-tree",
        "update-ref",
        "reset",
        "ls-files",
    ]
    assert rev(repo, "refs/herd/a/rescue/1") == rescued


def test_new_commits_agree_with_commits_between(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo")
    paths = gitops.git_paths(repo)
    base = rev(repo, "HEAD")
    assert gitfiles.commit_parents(paths, base) == ()
    (repo / "a.txt").write_text("a\n")
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "one on top")
    one = rev(repo, "HEAD")
    assert gitfiles.commit_parents(paths, one) == (base,)
    fast = gitops.new_commits(repo, base, one, 50, paths)
    assert fast == gitops.commits_between(repo, base, one)
    assert [c.files for c in fast] == [("a.txt",)]
    git(repo, "commit", "-q", "--allow-empty", "-m", "two")
    two = rev(repo, "HEAD")
    assert gitops.new_commits(repo, base, two, 50, paths) == gitops.commits_between(repo, base, two)
    git(repo, "checkout", "-q", "-b", "side", base)
    git(repo, "commit", "-q", "--allow-empty", "-m", "side")
    git(repo, "merge", "-q", "--no-edit", "main")
    merge = rev(repo, "HEAD")
    assert len(gitfiles.commit_parents(paths, merge) or ()) == 2
    assert gitops.new_commits(repo, two, merge, 50, paths) == gitops.commits_between(
        repo, two, merge
    )
