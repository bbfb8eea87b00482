"""A rescue commit is git's own (`commit-tree`): herd's identity on HEAD, every line of the dirty
tree, what config git honours honoured, and git reads it back."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from agentherd.supervisor.git.gitops import reset_worktree, save_rescue

IDENTITY = ["-c", "user.name=t", "-c", "user.email=t@t"]
REF = "refs/herd/api/rescue/3"


def git(cwd: Path, *args: str, env: dict[str, str] | None = None) -> str:
    """Run git in `cwd`; its stdout."""
    return subprocess.run(
        ["git", *IDENTITY, *args],
        cwd=cwd,
        check=True,
        capture_output=True,
        text=True,
        env={**os.environ, **(env or {})},
    ).stdout


@pytest.fixture(autouse=True)
def no_user_config(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Only the repository's own config counts (this machine's user's may `include` others)."""
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(home / ".config"))
    monkeypatch.setenv("GIT_CONFIG_NOSYSTEM", "1")


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    """A repository with one commit: a tracked file, a file in a folder, a .gitignore."""
    path = tmp_path / "repo"
    path.mkdir()
    git(path, "init", "-q", "-b", "main")
    (path / "a.txt").write_text("a\n")
    (path / "gone.txt").write_text("to be deleted\n")
    (path / "sub").mkdir()
    (path / "sub" / "s.txt").write_text("s\n")
    (path / ".gitignore").write_text("*.log\n")
    git(path, "add", "-A")
    git(path, "commit", "-q", "-m", "base")
    return path


def make_dirty(repo: Path) -> None:
    """A modified file, a deleted one, an untracked one, one in a new folder, an ignored one."""
    (repo / "a.txt").write_text("changed\n")
    (repo / "gone.txt").unlink()
    (repo / "untracked.txt").write_text("new\n")
    (repo / "newdir" / "deep").mkdir(parents=True)
    (repo / "newdir" / "deep" / "n.txt").write_text("deep\n")
    (repo / "build.log").write_text("ignored\n")


@pytest.mark.parametrize("parent", [True, False])
def test_the_rescue_commit_is_herds_on_head_with_the_dirty_tree(
    repo: Path, tmp_path: Path, parent: bool
) -> None:
    if parent:
        make_dirty(repo)
    else:  # before the first commit: a root commit of the whole tree
        repo = tmp_path / "empty"
        (repo / "sub").mkdir(parents=True)
        git(repo, "init", "-q", "-b", "main")
        (repo / "first.txt").write_text("first\n")
        (repo / "sub" / "s.txt").write_text("s\n")
    saved = save_rescue(repo, REF, "herd: rescue of run 3")
    assert saved is not None
    git(repo, "add", "-A")  # the tree a person's `add -A` would commit
    tree = git(repo, "write-tree").strip()
    header = git(repo, "cat-file", "-p", saved.sha).split("\n\n")[0].splitlines()
    assert header[0] == f"tree {tree}"
    parents = [line for line in header if line.startswith("parent ")]
    assert parents == ([f"parent {git(repo, 'rev-parse', 'HEAD').strip()}"] if parent else [])
    for role in ("author", "committer"):
        line = next(line for line in header if line.startswith(role + " "))
        assert line.startswith(f"{role} herd <herd@localhost> ")
    assert "gpgsig" not in " ".join(header)
    assert "error" not in git(repo, "fsck", "--no-dangling")


def test_a_rescue_keeps_every_line_and_git_reads_it(repo: Path) -> None:
    head = git(repo, "rev-parse", "HEAD").strip()
    make_dirty(repo)
    saved = save_rescue(repo, REF, "herd: rescue of run 3")
    assert saved is not None and saved.ref == REF
    assert (repo / ".git" / REF).read_text() == saved.sha + "\n"  # a loose ref, as git writes
    assert git(repo, "rev-parse", REF).strip() == saved.sha
    assert git(repo, "rev-parse", f"{REF}^").strip() == head
    assert sorted(git(repo, "ls-tree", "-r", "--name-only", REF).split()) == [
        ".gitignore",
        "a.txt",
        "newdir/deep/n.txt",
        "sub/s.txt",
        "untracked.txt",
    ]
    assert git(repo, "show", f"{REF}:a.txt") == "changed\n"
    assert git(repo, "log", "-1", "--format=%an <%ae>|%s", REF).strip() == (
        "herd <herd@localhost>|herd: rescue of run 3"
    )
    assert "error" not in git(repo, "fsck")
    reset_worktree(repo, head)
    assert git(repo, "status", "--porcelain", "--ignored") == "!! build.log\n"


def test_a_second_rescue_of_the_same_run_takes_the_next_name(repo: Path) -> None:
    make_dirty(repo)
    first = save_rescue(repo, REF, "first")
    (repo / "untracked.txt").write_text("more\n")
    second = save_rescue(repo, REF, "second")
    assert first is not None and second is not None
    assert (first.ref, second.ref, second.earlier) == (REF, f"{REF}.2", (REF,))
    assert git(repo, "rev-parse", REF).strip() == first.sha  # never moved


def test_a_commit_encoding_in_config_is_honoured_as_git_honours_it(repo: Path) -> None:
    git(repo, "config", "i18n.commitEncoding", "ISO-8859-1")
    make_dirty(repo)
    saved = save_rescue(repo, REF, "herd: rescue of run 3")
    assert saved is not None
    assert "encoding ISO-8859-1" in git(repo, "cat-file", "-p", saved.sha)  # git wrote it


def test_an_included_config_file_is_honoured_as_git_honours_it(repo: Path, tmp_path: Path) -> None:
    (tmp_path / "more.config").write_text("[i18n]\n\tcommitEncoding = ISO-8859-1\n")
    git(repo, "config", "include.path", str(tmp_path / "more.config"))
    make_dirty(repo)
    saved = save_rescue(repo, REF, "herd: rescue of run 3")
    assert saved is not None
    assert "encoding ISO-8859-1" in git(repo, "cat-file", "-p", saved.sha)
