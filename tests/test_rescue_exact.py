"""A rescue holds what its reset removes, and the reset removes nothing else (issue 22, items
1-4, by the git API a crash's restart uses)."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest
from conftest import git, make_repo

from agentherd.supervisor.git import gitops

REF = "refs/herd/api/rescue/1"


def show(repo: Path, spec: str) -> str | None:
    """`git show spec`, or None when there is no such object."""
    done = subprocess.run(["git", "show", spec], cwd=repo, capture_output=True, text=True)
    return done.stdout if done.returncode == 0 else None


def head(repo: Path) -> str:
    return git(repo, "rev-parse", "HEAD").strip()


def test_a_file_the_rescue_does_not_hold_is_not_cleaned(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo")
    (repo / "work.txt").write_text("the agent's\n")
    rescued = gitops.rescue(repo, REF, "m")
    assert rescued.saved is not None and rescued.removable == {"work.txt"}
    (repo / "late.txt").write_text("written after the rescue\n")
    gitops.reset_worktree(repo, head(repo), rescued=rescued)
    assert not (repo / "work.txt").exists()
    assert (repo / "late.txt").read_text() == "written after the rescue\n"


def test_an_untracked_file_the_target_tracks_is_rescued_before_the_reset_writes_it(
    tmp_path: Path,
) -> None:
    repo = make_repo(tmp_path / "repo", {"data.csv": "committed\n", ".gitignore": ""})
    git(repo, "rm", "--cached", "-q", "data.csv")
    (repo / ".git" / "info" / "exclude").write_text("data.csv\n")  # ignored, untracked
    (repo / "data.csv").write_text("the agent's data\n")
    rescued = gitops.rescue(repo, REF, "m")
    assert rescued.saved is not None
    assert show(repo, f"{REF}:data.csv") == "the agent's data\n"
    gitops.reset_worktree(repo, head(repo), rescued=rescued)
    assert (repo / "data.csv").read_text() == "committed\n"


def test_rules_the_agent_added_deep_down_are_read_as_the_clean_reads_them(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo", {"README.md": "x\n", ".gitignore": "node_modules/\n"})
    (repo / ".gitignore").write_text("node_modules/\nout/\n")
    (repo / "out" / "cache").mkdir(parents=True)
    (repo / "out" / ".gitignore").write_text("*.tmp\n")  # read once out/ is not ignored
    (repo / "out" / "result.txt").write_text("work\n")
    (repo / "out" / "scratch.tmp").write_text("not work\n")
    (repo / "node_modules" / "pkg").mkdir(parents=True)
    (repo / "node_modules" / "pkg" / "index.js").write_text("ignored either way\n")
    rescued = gitops.rescue(repo, REF, "m")
    assert show(repo, f"{REF}:out/result.txt") == "work\n"
    assert show(repo, f"{REF}:out/.gitignore") == "*.tmp\n"
    assert show(repo, f"{REF}:out/scratch.tmp") is None
    assert show(repo, f"{REF}:node_modules/pkg/index.js") is None
    gitops.reset_worktree(repo, head(repo), rescued=rescued)
    assert not (repo / "out" / "result.txt").exists()
    assert (repo / "out" / "scratch.tmp").exists(), "ignored after the reset: left, as clean does"
    assert (repo / "node_modules" / "pkg" / "index.js").exists()


def test_a_nested_repository_git_cannot_add_stays_and_the_rest_is_rescued(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo")
    nested = repo / "sub"
    nested.mkdir()
    git(nested, "init", "-q")  # no commit: `add` fails for it (exit 1)
    (nested / "work.txt").write_text("in a nested repository\n")
    (repo / "README.md").write_text("the agent's edit\n")
    rescued = gitops.rescue(repo, REF, "m")
    assert show(repo, f"{REF}:README.md") == "the agent's edit\n"
    gitops.reset_worktree(repo, head(repo), rescued=rescued)
    assert (nested / "work.txt").read_text() == "in a nested repository\n"
    assert (repo / "README.md").read_text() == "hello\n"


def test_the_same_tree_and_index_rescued_again_reuse_the_first_copy(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo")
    (repo / "staged.txt").write_text("staged\n")
    git(repo, "add", "staged.txt")
    (repo / "staged.txt").unlink()
    first = gitops.rescue(repo, REF, "m").saved
    again = gitops.rescue(repo, REF, "m").saved
    assert first is not None and again == first
    assert show(repo, f"{REF}^2:staged.txt") == "staged\n"


def test_below_the_top_a_reset_to_an_older_commit_keeps_a_persons_edits(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo", {"README.md": "hello\n", "pkg/x.txt": "x1\n"})
    older = head(repo)
    (repo / "pkg" / "x.txt").write_text("x2\n")
    git(repo, "commit", "-qam", "the agent's checkpoint")
    (repo / "README.md").write_text("a person's edit\n")
    (repo / "pkg" / "x.txt").write_text("the agent's uncommitted edit\n")
    rescued = gitops.rescue(repo / "pkg", REF, "m", target=older)
    assert rescued.scope == "pkg"
    assert show(repo, f"{REF}:pkg/x.txt") == "the agent's uncommitted edit\n"
    assert show(repo, f"{REF}:README.md") == "hello\n"
    gitops.reset_worktree(repo / "pkg", older, rescued=rescued)
    assert head(repo) == older
    assert (repo / "pkg" / "x.txt").read_text() == "x1\n"
    assert (repo / "README.md").read_text() == "a person's edit\n"


def test_below_the_top_a_reset_that_would_overwrite_a_persons_edit_is_refused(
    tmp_path: Path,
) -> None:
    repo = make_repo(tmp_path / "repo", {"README.md": "hello\n", "pkg/x.txt": "x\n"})
    older = head(repo)
    (repo / "README.md").write_text("the agent's committed change elsewhere\n")
    git(repo, "commit", "-qam", "checkpoint")
    newer = head(repo)
    (repo / "README.md").write_text("a person's edit on top\n")
    rescued = gitops.rescue(repo / "pkg", REF, "m", target=older)
    with pytest.raises(gitops.GitError, match="reset"):
        gitops.reset_worktree(repo / "pkg", older, rescued=rescued)
    assert head(repo) == newer
    assert (repo / "README.md").read_text() == "a person's edit on top\n"


def test_a_changed_file_git_cannot_store_stops_the_reset(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo", {"a.txt": "a\n", "b.txt": "b\n"})
    (repo / "a.txt").unlink()
    os.mkfifo(repo / "a.txt")  # `add` stores no FIFO (exit 1, the rest is added)
    (repo / "b.txt").write_text("the agent's b\n")
    rescued = gitops.rescue(repo, REF, "m")
    assert rescued.unsaved == ("a.txt",)
    assert show(repo, f"{REF}:b.txt") == "the agent's b\n"
    with pytest.raises(gitops.GitError, match=r"1 changed files could not be saved \(a.txt\)"):
        gitops.reset_worktree(repo, head(repo), rescued=rescued)
    assert (repo / "b.txt").read_text() == "the agent's b\n", "nothing was reset"
