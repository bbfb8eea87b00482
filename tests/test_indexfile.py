"""The index facts a rescue reads from the file agree with git's, or say "don't know"."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from conftest import git, make_repo

from agentherd.supervisor.git import indexfile


def facts(repo: Path) -> indexfile.IndexFacts | None:
    return indexfile.read(repo / ".git" / "index", 20)


def git_facts(repo: Path) -> tuple[bool, str]:
    """(some entry is assume-unchanged, the tree the index writes), by git."""
    tags = [line[:1] for line in git(repo, "ls-files", "-v").splitlines()]
    tree = git(repo, "write-tree").strip()  # also makes the cached tree valid
    return any(tag.islower() for tag in tags), tree


@pytest.mark.parametrize("version", ["2", "3", "4"])
def test_the_facts_agree_with_git(tmp_path: Path, version: str) -> None:
    names = {f"dir{i % 3}/file {i}.txt": f"{i}\n" for i in range(40)}
    repo = make_repo(tmp_path / "repo", names)
    # A name longer than the 12 bits of its length: in the index only (no file system has it).
    blob = git(repo, "hash-object", "-w", "dir0/file 0.txt").strip()
    long_name = "/".join(["d" * 200] * 22) + "/f.txt"
    git(repo, "update-index", "--add", "--cacheinfo", f"100644,{blob},{long_name}")
    git(repo, "update-index", f"--index-version={version}")
    assert facts(repo) == indexfile.IndexFacts(False, None), "the cached tree is stale"
    written = git_facts(repo)
    found = facts(repo)
    assert found is not None
    assert (found.assume_valid, found.tree) == written
    (repo / "dir1" / "file 1.txt").write_text("edited\n")
    git(repo, "add", "dir1/file 1.txt")  # the cached tree of dir1 and the root is stale now
    found = facts(repo)
    assert found is not None and found.tree is None and not found.assume_valid
    git(repo, "update-index", "--assume-unchanged", "dir2/file 2.txt")
    git(repo, "update-index", "--skip-worktree", "dir0/file 0.txt")  # an extended entry
    found = facts(repo)
    written = git_facts(repo)
    assert found is not None and found.assume_valid and written[0]
    found = facts(repo)
    assert found is not None and found.tree == written[1]


def test_an_unmerged_index_a_split_one_and_a_big_one_are_left_to_git(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo", {"a.txt": "a\n"})
    git(repo, "update-index", "--split-index")
    assert facts(repo) is None
    git(repo, "update-index", "--no-split-index")
    assert facts(repo) is not None
    git(repo, "checkout", "-q", "-b", "other")
    (repo / "a.txt").write_text("other\n")
    git(repo, "commit", "-qam", "other")
    git(repo, "checkout", "-q", "main")
    (repo / "a.txt").write_text("main\n")
    git(repo, "commit", "-qam", "main")
    subprocess.run(["git", "merge", "-q", "other"], cwd=repo, capture_output=True)
    assert "U" in git(repo, "status", "--porcelain")
    assert facts(repo) is None
    assert indexfile.read(tmp_path / "no-index", 20) is None
    (tmp_path / "garbage").write_bytes(b"DIRC\0\0\0\2\0\0\0\5short")
    assert indexfile.read(tmp_path / "garbage", 20) is None
