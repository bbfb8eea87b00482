"""Issue 22, items 1-5: a crash's rescue holds everything its reset and clean remove, the reset
stays inside the session's folder, and it never rescues or resets into another repository."""

from __future__ import annotations

import subprocess
import textwrap
from pathlib import Path

import pytest
from conftest import Herd, git, make_repo, script

CRASH_ONCE = """
    import os, pathlib, signal, subprocess, sys
    ran = pathlib.Path({ran!r})
    if ran.exists():
        sys.exit(0)  # the restarted run: done
    ran.write_text("x")
    def git(*args):
        subprocess.run(["git", *args], check=True, capture_output=True)
{work}
    {end}
"""
"""An agent that does `work` in its first run, then crashes (exit 3, or a SIGKILL of its own)."""


def crash_once(
    herd: Herd, repo: Path, work: str, cwd: Path | None = None, kill: bool = False
) -> None:
    """Run one session in `cwd` (default `repo`) whose agent does `work` and crashes once."""
    end = "os.kill(os.getpid(), signal.SIGKILL)" if kill else "sys.exit(3)"
    body = "\n".join("    " + line for line in textwrap.dedent(work).strip().splitlines())
    code = CRASH_ONCE.format(ran=str(herd.root / "ran"), work=body, end=end)
    herd.write(f"""
        [[session]]
        name = "api"
        cwd = "{cwd or repo}"
        command = {script(code)}
        restart_delay = 0
    """)
    herd.start().call("start", name="api")
    ended = herd.wait_state("api", "completed", "failed", "stopped", timeout_s=60)
    assert ended["state"] == "completed", [(e["kind"], e["message"]) for e in herd.events()]


def rescue_ref(herd: Herd) -> str:
    saved = herd.events("api", "rescue-saved")
    assert saved, [e["kind"] for e in herd.events("api")]
    return str(saved[0]["data"]["ref"])


def show(repo: Path, spec: str) -> str | None:
    """`git show spec`, or None when there is no such object."""
    done = subprocess.run(["git", "show", spec], cwd=repo, capture_output=True, text=True)
    return done.stdout if done.returncode == 0 else None


@pytest.mark.pidns
@pytest.mark.timeout(120)
def test_work_in_a_folder_the_agent_ignored_is_rescued_before_the_clean(herd: Herd) -> None:
    repo = make_repo(herd.root / "repo", {"README.md": "hello\n", ".gitignore": "*.log\n"})
    crash_once(
        herd,
        repo,
        """
        pathlib.Path(".gitignore").write_text("*.log\\nnewwork/\\n")
        pathlib.Path("newwork/deep").mkdir(parents=True)
        pathlib.Path("newwork/result.txt").write_text("hours of work\\n")
        pathlib.Path("newwork/deep/more.txt").write_text("more work\\n")
        pathlib.Path("newwork/run.log").write_text("a log both ignore\\n")
        pathlib.Path("build.log").write_text("a log HEAD ignores too\\n")
        """,
        kill=True,
    )
    ref = rescue_ref(herd)
    assert show(repo, f"{ref}:newwork/result.txt") == "hours of work\n"
    assert show(repo, f"{ref}:newwork/deep/more.txt") == "more work\n"
    assert show(repo, f"{ref}:.gitignore") == "*.log\nnewwork/\n"
    # Ignored by HEAD's rules as well: the clean never touches it, so it is not rescued.
    assert show(repo, f"{ref}:build.log") is None
    assert (repo / "build.log").read_text() == "a log HEAD ignores too\n"
    assert (repo / "newwork" / "run.log").exists(), "an ignored file the clean leaves stays"
    assert not (repo / "newwork" / "result.txt").exists(), "rescued, then reset to the checkpoint"
    assert git(repo, "status", "--porcelain") == ""


@pytest.mark.timeout(120)
def test_assume_unchanged_and_ignore_stat_edits_are_rescued(herd: Herd) -> None:
    repo = herd.root / "repo"
    repo.mkdir()
    git(repo, "init", "-q", "-b", "main")
    git(repo, "config", "core.ignoreStat", "true")  # every entry git writes is assumed unchanged
    for name in ("README.md", "other.txt", "marked.txt"):
        (repo / name).write_text(f"{name} as committed\n")
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "base")
    crash_once(
        herd,
        repo,
        """
        git("config", "core.ignoreStat", "false")
        git("update-index", "--assume-unchanged", "marked.txt")
        git("config", "core.ignoreStat", "true")
        pathlib.Path("other.txt").write_text("the agent's other\\n")
        pathlib.Path("marked.txt").write_text("the agent's marked\\n")
        """,
    )
    ref = rescue_ref(herd)
    assert show(repo, f"{ref}:other.txt") == "the agent's other\n"
    assert show(repo, f"{ref}:marked.txt") == "the agent's marked\n"


@pytest.mark.timeout(120)
def test_staged_only_content_is_rescued(herd: Herd) -> None:
    repo = make_repo(herd.root / "repo")
    crash_once(
        herd,
        repo,
        """
        pathlib.Path("staged.txt").write_text("only in the index\\n")
        pathlib.Path("README.md").write_text("staged edit\\n")
        git("add", "staged.txt", "README.md")
        pathlib.Path("staged.txt").unlink()
        pathlib.Path("README.md").write_text("worktree edit\\n")
        """,
    )
    ref = rescue_ref(herd)
    assert show(repo, f"{ref}:README.md") == "worktree edit\n"
    assert show(repo, f"{ref}:staged.txt") is None, "deleted in the worktree"
    # The index the reset drops is the rescue's second parent, as `git stash` keeps it.
    assert show(repo, f"{ref}^2:staged.txt") == "only in the index\n"
    assert show(repo, f"{ref}^2:README.md") == "staged edit\n"
    assert git(repo, "rev-parse", f"{ref}^1") == git(repo, "rev-parse", "HEAD")
    assert git(repo, "status", "--porcelain") == ""


@pytest.mark.timeout(120)
def test_a_cwd_below_the_top_resets_and_cleans_only_its_own_folder(herd: Herd) -> None:
    repo = make_repo(
        herd.root / "repo",
        {"README.md": "hello\n", "pkg/x.txt": "x\n", "pkg/y.txt": "y\n", "other/o.txt": "o\n"},
    )
    # A person works elsewhere in the same repository meanwhile.
    (repo / "README.md").write_text("a person's uncommitted edit\n")
    (repo / "notes.txt").write_text("a person's untracked notes\n")
    (repo / "other" / "staged.txt").write_text("a person's staged file\n")
    git(repo, "add", "other/staged.txt")
    crash_once(
        herd,
        repo,
        """
        pathlib.Path("x.txt").write_text("the agent's x\\n")
        pathlib.Path("y.txt").unlink()
        pathlib.Path("new.txt").write_text("the agent's new file\\n")
        """,
        cwd=repo / "pkg",
    )
    assert (repo / "README.md").read_text() == "a person's uncommitted edit\n"
    assert (repo / "notes.txt").read_text() == "a person's untracked notes\n"
    assert git(repo, "diff", "--cached", "--name-only") == "other/staged.txt\n"
    # The session's own folder is reset and cleaned, its work rescued.
    assert (repo / "pkg" / "x.txt").read_text() == "x\n"
    assert (repo / "pkg" / "y.txt").read_text() == "y\n"
    assert not (repo / "pkg" / "new.txt").exists()
    ref = rescue_ref(herd)
    assert show(repo, f"{ref}:pkg/x.txt") == "the agent's x\n"
    assert show(repo, f"{ref}:pkg/new.txt") == "the agent's new file\n"
    # Only the session's work is in its rescue: the person's edits are theirs.
    assert show(repo, f"{ref}:README.md") == "hello\n"
    assert show(repo, f"{ref}:notes.txt") is None


@pytest.mark.timeout(120)
def test_a_swapped_gitdir_is_neither_rescued_into_nor_cleaned(herd: Herd) -> None:
    repo = make_repo(herd.root / "repo")
    other = make_repo(herd.root / "other")
    crash_once(
        herd,
        repo,
        f"""
        pathlib.Path("README.md").write_text("the agent's edit\\n")
        pathlib.Path("new.txt").write_text("the agent's new file\\n")
        os.rename(".git", ".git.aside")
        pathlib.Path(".git").write_text("gitdir: {other / ".git"}\\n")
        """,
    )
    failed = herd.events("api", "rescue-failed")
    assert failed and "repository" in failed[0]["message"], failed
    assert herd.events("api", "rescue-saved") == []
    assert git(other, "for-each-ref", "refs/herd") == "", "nothing rescued into another repo"
    assert (repo / ".git.aside" / "HEAD").exists(), "the moved-aside repository is not cleaned"
    assert (repo / "README.md").read_text() == "the agent's edit\n", "nor is the tree reset"
    assert (repo / "new.txt").read_text() == "the agent's new file\n"
    assert git(other, "status", "--porcelain") == ""
